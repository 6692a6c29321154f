"""`kcore acls`: Kafka's kafka-acls.sh (Kafka 3.5's AclCommand with --bootstrap-server), over
kcore's Admin (CreateAcls / DescribeAcls / DeleteAcls).

    kcore acls --bootstrap-server HOST:PORT --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders
    kcore acls --bootstrap-server HOST:PORT --add --allow-principal User:bob --producer \\
        --topic orders --resource-pattern-type prefixed
    kcore acls --bootstrap-server HOST:PORT --add --allow-principal User:carol --consumer \\
        --topic orders --group billing
    kcore acls --bootstrap-server HOST:PORT --list [--topic orders] [--principal User:alice]
    kcore acls --bootstrap-server HOST:PORT --remove --force --topic orders

It prints what Kafka 3.5 prints: `Adding ACLs for resource `ResourcePattern(...)`:` and
`Current ACLs for resource `ResourcePattern(...)`:`, each followed by its entries as
`(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`, one per line. Kafka
prints sets in hash order; kcore sorts them (resources by type, name and pattern type,
entries by principal, host, operation and permission).

`--remove` asks, as Kafka does, before removing each resource's ACLs (`... (y/n)`), reading
the answer from standard input; `--force` does not ask. With nothing to read (standard input
at its end: a script, a pipe from /dev/null) Kafka fails with a NullPointerException; kcore
stops there, removing nothing more, and says to use --force.

kcore has no transactions, delegation tokens or user-principal resources: --transactional-id,
--delegation-token and --user-principal are refused. The pure functions (`resource_filters`,
`filter_to_acls`, `adding_text`, `current_text`, ...) build what is sent and printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping

import trio

from kcore.client import Admin
from kcore.security.acl import (
    CLUSTER_NAME,
    OPERATION_NAMES,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_principal,
)
from kcore.security.acl import AclOperation as Op
from kcore.tools._tool import (
    Tool,
    ToolError,
    UsageError,
    add_bootstrap_server,
    add_command_config,
    admin_config,
)

CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
PRODUCER_TOPIC_OPERATIONS = (Op.WRITE, Op.DESCRIBE, Op.CREATE)
CONSUMER_TOPIC_OPERATIONS = (Op.READ, Op.DESCRIBE)
CONSUMER_GROUP_OPERATIONS = (Op.READ,)
_WITHOUT_RESOURCE = {
    "transactional_id": "--transactional-id: kcore has no transactions (no transactional ids)",
    "delegation_token": "--delegation-token: kcore has no delegation tokens",
    "user_principal": "--user-principal: kcore has no delegation tokens to grant on users",
}
# SecurityUtils.operation: the Pascal-case name or its upper case (`Read`, `READ`).
_OPERATIONS_BY_NAME = {
    spelling: op for op, name in OPERATION_NAMES.items() for spelling in (name, name.upper())
}


def operation_named(text: str) -> Op:
    operation = _OPERATIONS_BY_NAME.get(text.strip()) or _OPERATIONS_BY_NAME.get(
        text.strip().upper()
    )
    if operation is None:
        valid = ", ".join(OPERATION_NAMES.values())
        raise argparse.ArgumentTypeError(f"unknown operation {text!r} (valid: {valid})")
    return operation


def pattern_type_named(text: str) -> PatternType:
    """PatternTypeConverter: any case of ANY, MATCH, LITERAL, PREFIXED."""
    try:
        pattern_type = PatternType[text.strip().upper()]
    except KeyError:
        pattern_type = PatternType.UNKNOWN
    if pattern_type == PatternType.UNKNOWN:
        raise argparse.ArgumentTypeError(f"Unknown resource-pattern-type: {text}")
    return pattern_type


def principal_named(text: str) -> str:
    try:
        return parse_principal(text.strip())
    except AclError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    add_command_config(parser)
    parser.add_argument("--add", action="store_true", help="add ACLs")
    parser.add_argument("--remove", action="store_true", help="remove ACLs")
    parser.add_argument("--list", action="store_true", help="list ACLs (of the given resources)")
    repeated = {"action": "append", "default": []}
    parser.add_argument("--topic", **repeated, help="a topic ('*': every topic)")
    parser.add_argument("--group", **repeated, help="a consumer group ('*': every group)")
    parser.add_argument("--cluster", action="store_true", help="the cluster's ACLs")
    parser.add_argument(
        "--resource-pattern-type",
        type=pattern_type_named,
        default=PatternType.LITERAL,
        metavar="ANY|MATCH|LITERAL|PREFIXED",
        help="literal (the default) or prefixed; any or match to list or remove",
    )
    parser.add_argument(
        "--operation",
        type=operation_named,
        action="append",
        default=[],
        help="an operation to allow or deny (repeatable; All when none): "
        + ", ".join(OPERATION_NAMES.values()),
    )
    parser.add_argument("--allow-principal", type=principal_named, **repeated)
    parser.add_argument("--deny-principal", type=principal_named, **repeated)
    parser.add_argument(
        "--principal", type=principal_named, **repeated, help="with --list: this principal's"
    )
    parser.add_argument("--allow-host", **repeated, help="'*' when not given")
    parser.add_argument("--deny-host", **repeated, help="'*' when not given")
    parser.add_argument(
        "--producer", action="store_true", help="Write, Describe and Create on the topics"
    )
    parser.add_argument(
        "--consumer",
        action="store_true",
        help="Read and Describe on the topics, Read on the groups",
    )
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster"
    )
    parser.add_argument("--force", action="store_true", help="remove without asking")
    for flag in ("--transactional-id", "--delegation-token", "--user-principal"):
        parser.add_argument(flag, **repeated, help=argparse.SUPPRESS)


def _invalid_with(args: argparse.Namespace, option: str, others: Iterable[str]) -> None:
    """CommandLineUtils.checkInvalidArgs."""
    if not _given(args, option):
        return
    for other in others:
        if _given(args, other):
            raise UsageError(f'Option "[{_flag(option)}]" can\'t be used with option '
                             f'"[{_flag(other)}]"')  # fmt: skip


def _flag(option: str) -> str:
    return option.replace("_", "-")


def _given(args: argparse.Namespace, option: str) -> bool:
    value = getattr(args, option)
    return bool(value)


def check(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs, with Kafka's messages."""
    if sum((args.add, args.remove, args.list)) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    _invalid_with(
        args,
        "list",
        ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"),
    )
    for role in ("producer", "consumer"):
        _invalid_with(args, role, ("operation", "deny_principal", "deny_host"))
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        not args.topic
        or not args.group
        or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise UsageError(
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )
    if args.add and args.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{args.resource_pattern_type.name}' is not "
            "valid when adding acls."
        )
    if args.add:
        resource_to_acls(args)
    elif args.remove:
        filter_to_acls(args)


# -- what is sent ------------------------------------------------------------------------


def resource_filters(args: argparse.Namespace, *, required: bool) -> list[ResourcePatternFilter]:
    """getResourceFilter: the resources named, with --resource-pattern-type (the cluster
    only with a literal one, as in Kafka)."""
    pattern_type = args.resource_pattern_type
    filters = [
        ResourcePatternFilter(ResourceType.TOPIC, t.strip(), pattern_type) for t in args.topic
    ]
    if pattern_type == PatternType.LITERAL and (args.cluster or args.idempotent):
        filters.append(CLUSTER_FILTER)
    filters += [
        ResourcePatternFilter(ResourceType.GROUP, g.strip(), pattern_type) for g in args.group
    ]
    if not filters and required:
        raise UsageError(
            "You must provide at least one resource: --topic <topic> or --cluster or --group "
            "<group> or --delegation-token <Delegation Token ID>"
        )
    return list(dict.fromkeys(filters))


def entries(args: argparse.Namespace, operations: Iterable[Op]) -> frozenset[AccessControlEntry]:
    """getAcl: every allowed principal x operation x allowed host (`*` by default), and the
    same for the denied ones."""
    operations = tuple(operations)
    made = set()
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        hosts = [h.strip() for h in hosts] or ([WILDCARD_HOST] if principals else [])
        made.update(
            AccessControlEntry(principal, host, operation, permission)
            for principal in principals
            for operation in operations
            for host in hosts
        )
    return frozenset(made)


def filter_to_acls(
    args: argparse.Namespace,
) -> dict[ResourcePatternFilter, frozenset[AccessControlEntry]]:
    """getResourceFilterToAcls: the entries of each resource, from --operation or from the
    --producer / --consumer roles; an operation the resource type does not have is a usage
    error (validateOperation)."""
    plan: dict[ResourcePatternFilter, frozenset[AccessControlEntry]] = {}
    filters = resource_filters(args, required=True)
    if not args.producer and not args.consumer:
        acls = entries(args, args.operation or [Op.ALL])
        plan.update((f, acls) for f in filters)
    if args.producer:
        topic_acls = entries(args, PRODUCER_TOPIC_OPERATIONS)
        plan.update((f, topic_acls) for f in filters if f.resource_type == ResourceType.TOPIC)
        if args.idempotent:
            plan[CLUSTER_FILTER] = entries(args, [Op.IDEMPOTENT_WRITE])
    if args.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                plan[f] = entries(args, CONSUMER_TOPIC_OPERATIONS) | plan.get(f, frozenset())
            elif f.resource_type == ResourceType.GROUP:
                plan[f] = entries(args, CONSUMER_GROUP_OPERATIONS) | plan.get(f, frozenset())
    for f, acls in plan.items():
        valid = (*SUPPORTED_OPERATIONS[f.resource_type], Op.ALL)
        if any(acl.operation not in valid for acl in acls):
            raise UsageError(
                f"ResourceType {f.resource_type.name} only supports operations "
                + ",".join(op.name for op in sorted(valid))
            )
    return plan


def resource_to_acls(
    args: argparse.Namespace,
) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    """getResourceToAcls: the ACLs --add creates, by resource."""
    plan = filter_to_acls(args)
    if any(not acls for acls in plan.values()):
        raise UsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    return {
        ResourcePattern(f.resource_type, f.name, f.pattern_type): acls for f, acls in plan.items()
    }


def deletion_filters(
    pattern_filter: ResourcePatternFilter, acls: Iterable[AccessControlEntry]
) -> list[AclBindingFilter]:
    """What --remove deletes for one resource filter: every ACL when no entry was named,
    else exactly the entries named."""
    acls = sorted(acls)
    if not acls:
        return [AclBindingFilter(pattern_filter)]
    return [
        AclBindingFilter(
            pattern_filter,
            AccessControlEntryFilter(acl.principal, acl.host, acl.operation, acl.permission_type),
        )
        for acl in acls
    ]


def by_resource(
    bindings: Iterable[AclBinding],
) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, set()).add(binding.entry)
    return {pattern: frozenset(acls) for pattern, acls in sorted(grouped.items())}


# -- what is printed ---------------------------------------------------------------------


def entry_text(entry: AccessControlEntry) -> str:
    """Kafka's AccessControlEntry.toString."""
    return (
        f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
        f"permissionType={entry.permission_type.name})"
    )


def filter_text(pattern_filter: ResourcePatternFilter) -> str:
    """Kafka 3.5's ResourcePatternFilter.toString (which says ResourcePattern)."""
    name = "<any>" if pattern_filter.name is None else pattern_filter.name
    return (
        f"ResourcePattern(resourceType={pattern_filter.resource_type.name}, name={name}, "
        f"patternType={pattern_filter.pattern_type.name})"
    )


def _entries_text(acls: Iterable[AccessControlEntry]) -> str:
    return "\n".join("\t" + entry_text(acl) for acl in sorted(acls))


def adding_text(pattern: ResourcePattern, acls: Iterable[AccessControlEntry]) -> str:
    return f"Adding ACLs for resource `{pattern}`: \n {_entries_text(acls)} \n\n"


def current_text(resource_acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> str:
    """printResourceAcls."""
    return "".join(
        f"Current ACLs for resource `{pattern}`: \n {_entries_text(acls)} \n\n"
        for pattern, acls in sorted(resource_acls.items())
    )


def listing_text(
    resource_acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]],
    principals: Iterable[str],
) -> str:
    """listAcls: every resource's ACLs, or, with --principal, each principal's."""
    principals = list(dict.fromkeys(principals))
    if not principals:
        return current_text(resource_acls)
    parts = []
    for principal in principals:
        parts.append(f"ACLs for principal `{principal}`\n")
        theirs = {
            p: {a for a in acls if a.principal == principal} for p, acls in resource_acls.items()
        }
        parts.append(current_text({p: acls for p, acls in theirs.items() if acls}))
    return "".join(parts)


def removal_question(
    pattern_filter: ResourcePatternFilter, acls: Iterable[AccessControlEntry]
) -> str:
    acls = list(acls)
    if not acls:
        return (
            f"Are you sure you want to delete all ACLs for resource filter "
            f"`{filter_text(pattern_filter)}`? (y/n)"
        )
    return (
        f"Are you sure you want to remove ACLs: \n {_entries_text(acls)} \n from resource "
        f"filter `{filter_text(pattern_filter)}`? (y/n)"
    )


# -- the shell ---------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> int:
    for option, why in _WITHOUT_RESOURCE.items():
        if getattr(args, option):
            raise ToolError(why)
    async with Admin(args.bootstrap_server, **await admin_config(args, "kcore-acls")) as admin:
        if args.add:
            for pattern, acls in resource_to_acls(args).items():
                print(adding_text(pattern, acls), end="", flush=True)
                await admin.create_acls(AclBinding(pattern, acl) for acl in sorted(acls))
        elif args.remove:
            for pattern_filter, acls in filter_to_acls(args).items():
                if args.force or await _confirmed(removal_question(pattern_filter, acls)):
                    await admin.delete_acls(deletion_filters(pattern_filter, acls))
        await _list(admin, args)
    return 0


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    filters = resource_filters(args, required=False)
    if filters:
        bindings = []
        for pattern_filter in filters:
            bindings += await admin.describe_acls(AclBindingFilter(pattern_filter))
    else:
        bindings = await admin.describe_acls()
    print(listing_text(by_resource(bindings), args.principal), end="", flush=True)


async def _confirmed(question: str) -> bool:
    """confirmAction: the question on standard output, the answer a line of standard input
    (`y` in any case: yes)."""
    print(question, flush=True)
    answer = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    if isinstance(answer, bytes):  # standard input opened in binary
        answer = answer.decode(errors="replace")
    if not answer:
        raise ToolError(
            "no answer on standard input to the question above: nothing more removed "
            "(--force removes without asking)"
        )
    return answer.strip().lower() == "y"


TOOL = Tool(
    "acls",
    "Add, remove and list ACLs (Kafka's kafka-acls.sh).",
    add_arguments,
    run,
    check,
)
