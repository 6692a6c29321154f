"""`kcore acls` without a cluster: Kafka 3.5's AclCommand flags read into the ACLs sent
(--operation, the --producer / --consumer roles, hosts, pattern types), its usage errors, and
its text (`Adding ACLs for resource ...`, `Current ACLs for resource ...`, the removal
question)."""

from __future__ import annotations

import pytest

from kcore.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kcore.security.acl import AclOperation as Op
from kcore.tools import acls

SERVER = ["--bootstrap-server", "127.0.0.1:1"]


def _args(*argv):
    parser = acls.TOOL.build_parser()
    args = parser.parse_args([*SERVER, *argv])
    acls.check(args)
    return args


def _allow(principal, operation, host="*"):
    return AccessControlEntry(principal, host, operation, AclPermissionType.ALLOW)


def _topic(name, pattern_type=PatternType.LITERAL):
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def test_operations_principals_and_hosts_make_every_combination():
    args = _args(
        "--add", "--topic", "orders", "--allow-principal", "User:alice", "--operation", "Read",
        "--operation", "DESCRIBE", "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2",
        "--deny-principal", "User:mallory", "--operation", "write",
    )  # fmt: skip
    made = acls.resource_to_acls(args)
    deny = AclPermissionType.DENY
    assert made == {
        _topic("orders"): frozenset(
            [_allow("User:alice", op, host) for op in (Op.READ, Op.DESCRIBE, Op.WRITE)
             for host in ("10.0.0.1", "10.0.0.2")]
            + [AccessControlEntry("User:mallory", "*", op, deny)
               for op in (Op.READ, Op.DESCRIBE, Op.WRITE)]
        )
    }  # fmt: skip
    # No --operation: All; a prefixed pattern type; the cluster and a group.
    args = _args("--add", "--allow-principal", "User:bob", "--topic", "ord",
                 "--resource-pattern-type", "PREFIXED", "--group", "g")  # fmt: skip
    assert acls.resource_to_acls(args) == {
        _topic("ord", PatternType.PREFIXED): frozenset([_allow("User:bob", Op.ALL)]),
        ResourcePattern(ResourceType.GROUP, "g", PatternType.PREFIXED): frozenset(
            [_allow("User:bob", Op.ALL)]
        ),
    }


def test_producer_and_consumer_roles_give_kafkas_operations():
    args = _args("--add", "--allow-principal", "User:p", "--producer", "--idempotent",
                 "--consumer", "--topic", "t", "--group", "g")  # fmt: skip
    made = acls.resource_to_acls(args)
    assert made == {
        _topic("t"): frozenset(
            _allow("User:p", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ)
        ),
        ResourcePattern(ResourceType.GROUP, "g"): frozenset([_allow("User:p", Op.READ)]),
        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"): frozenset(
            [_allow("User:p", Op.IDEMPOTENT_WRITE)]
        ),
    }


def test_remove_deletes_the_entries_named_or_every_entry_of_the_resource():
    every = acls.filter_to_acls(_args("--remove", "--topic", "t", "--resource-pattern-type", "any"))
    ((pattern_filter, entries),) = every.items()
    assert pattern_filter == ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.ANY)
    assert acls.deletion_filters(pattern_filter, entries) == [AclBindingFilter(pattern_filter)]
    named = acls.filter_to_acls(
        _args("--remove", "--topic", "t", "--allow-principal", "User:a", "--operation", "Read")
    )
    ((pattern_filter, entries),) = named.items()
    assert acls.deletion_filters(pattern_filter, entries) == [
        AclBindingFilter(
            pattern_filter,
            AccessControlEntryFilter("User:a", "*", Op.READ, AclPermissionType.ALLOW),
        )
    ]


def test_text_is_kafkas():
    entries = [_allow("User:bob", Op.WRITE), _allow("User:alice", Op.READ)]
    assert acls.adding_text(_topic("orders"), entries) == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW) \n\n"
    )
    listed = {_topic("orders"): frozenset(entries), _topic("audit"): frozenset(entries[:1])}
    assert acls.listing_text(listed, ["User:alice"]) == (
        "ACLs for principal `User:alice`\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n"
    )
    any_t = ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.ANY)
    assert acls.removal_question(any_t, []) == (
        "Are you sure you want to delete all ACLs for resource filter "
        "`ResourcePattern(resourceType=TOPIC, name=t, patternType=ANY)`? (y/n)"
    )
    assert acls.removal_question(any_t, entries[1:]) == (
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n"
        " from resource filter `ResourcePattern(resourceType=TOPIC, name=t, patternType=ANY)`? "
        "(y/n)"
    )


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--list", "--add"], "Command must include exactly one action: --list, --add, --remove. "),
        (["--list", "--producer", "--topic", "t"],
         "Option \"[list]\" can't be used with option \"[producer]\""),
        (["--add", "--producer", "--topic", "t", "--operation", "Read"],
         "Option \"[producer]\" can't be used with option \"[operation]\""),
        (["--add", "--allow-principal", "User:a", "--producer"],
         "With --producer you must specify a --topic"),
        (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"],
         "With --consumer you must specify a --topic and a --group and no --cluster or "
         "--transactional-id option should be specified."),
        (["--add", "--allow-principal", "User:a", "--topic", "t", "--idempotent"],
         "The --idempotent option is only available if --producer is set"),
        (["--add", "--topic", "t", "--principal", "User:a"],
         "The --principal option is only available if --list is set"),
        (["--add", "--allow-principal", "User:a", "--topic", "t",
          "--resource-pattern-type", "match"],
         "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
        (["--add", "--allow-principal", "User:a"],
         "You must provide at least one resource: --topic <topic> or --cluster or --group "
         "<group> or --delegation-token <Delegation Token ID>"),
        (["--add", "--topic", "t"],
         "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."),
        (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
         "ResourceType GROUP only supports operations ALL,READ,DELETE,DESCRIBE"),
    ],
)  # fmt: skip
def test_usage_errors_are_kafkas(argv, complaint, capsys):
    with pytest.raises(SystemExit) as exited:
        parser = acls.TOOL.build_parser()
        acls.TOOL.check_or_exit(parser, parser.parse_args([*SERVER, *argv]))
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"kcore acls: error: {complaint}\n")


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--operation", "Fly"], "unknown operation 'Fly'"),
        (["--resource-pattern-type", "fuzzy"], "Unknown resource-pattern-type: fuzzy"),
        (["--allow-principal", "alice"],
         "expected a string in format principalType:principalName but got alice"),
    ],
)  # fmt: skip
def test_bad_values_are_refused_by_the_parser(argv, complaint, capsys):
    with pytest.raises(SystemExit):
        acls.TOOL.build_parser().parse_args([*SERVER, "--list", *argv])
    assert complaint in capsys.readouterr().err


async def test_what_kcore_has_not_is_refused_before_asking_a_broker(capsys):
    argv = [*SERVER, "--add", "--allow-principal", "User:a", "--transactional-id", "tx",
            "--topic", "t"]  # fmt: skip
    assert await acls.TOOL.main(argv) == 1
    assert capsys.readouterr().err == (
        "kcore acls: --transactional-id: kcore has no transactions (no transactional ids)\n"
    )
