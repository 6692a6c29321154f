"""`kcore configs`: Kafka's kafka-configs.sh (Kafka 3.5's ConfigCommand) for topics, brokers
and users' SCRAM credentials, over kcore's Admin.

    kcore configs --bootstrap-server HOST:PORT --entity-type topics --entity-name T --describe
    kcore configs --bootstrap-server HOST:PORT --entity-type topics --entity-name T --alter \\
        --add-config min.insync.replicas=2,retention.ms=3600000 --delete-config segment.ms
    kcore configs --bootstrap-server HOST:PORT --entity-type brokers --entity-name 1 \\
        --describe --all
    kcore configs --bootstrap-server HOST:PORT --entity-type brokers --entity-default \\
        --alter --add-config log.retention.ms=3600000
    kcore configs --bootstrap-server HOST:PORT --entity-type users --entity-name alice --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    kcore configs --bootstrap-server HOST:PORT --entity-type users --describe
    kcore configs --bootstrap-server HOST:PORT --entity-type users --entity-name alice --alter \\
        --delete-config SCRAM-SHA-256

It prints what Kafka 3.5 prints (`Dynamic configs for topic T are:`, then one
`  name=value sensitive=false synonyms={SOURCE:name=value}` line per config;
`SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192`;
`Completed updating config for topic T.`, `Completed updating config for broker 1.`,
`Completed updating config for user alice.`, `Completed updating default config for brokers
in the cluster.`). A broker's dynamic configs are its own (`--entity-name ID`) and the
cluster-wide defaults (`--entity-default`); `--all` shows every setting of a broker.
Synonyms name the value's own source only: kcore's Admin does not carry the synonyms
DescribeConfigs lists.

A user's SCRAM credential is added as `MECHANISM=[iterations=N,password=P]` (4096
iterations when not given) and removed by its mechanism's name: the password is salted and
hashed here, and only the salt and salted password reach the brokers (AlterUserScram
Credentials), which store Kafka's form in /config/users/<user>. Describing a user lists its
mechanisms and iterations; a user without credentials prints nothing, as in Kafka. Users'
quota configs (`producer_byte_rate`, ...) are refused: kcore does not enforce quotas, and
so neither are there user defaults (`--entity-default`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence

from kcore import errors
from kcore.client import Admin
from kcore.client.admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kcore.config import ConfigEntry, ConfigSourceCode
from kcore.security.scram import DEFAULT_ITERATIONS, MECHANISMS, MIN_ITERATIONS
from kcore.tools._tool import (
    Tool,
    ToolError,
    UsageError,
    add_bootstrap_server,
    add_command_config,
    admin_config,
)

# Kafka's ConfigCommand splits --add-config on commas outside square brackets, so a list
# value is written `k=[a,b]`.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_DYNAMIC_SOURCES = {
    "topics": ConfigSourceCode.DYNAMIC_TOPIC_CONFIG,
    "brokers": ConfigSourceCode.DYNAMIC_BROKER_CONFIG,
}
ENTITY_TYPES = ("brokers", "topics", "users")
# Kafka's QuotaConfigs for users and clients: kcore enforces no quotas.
USER_QUOTA_CONFIGS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
# Kafka's ConfigCommand: a SCRAM credential to add, `[iterations=N,]password=P`.
_SCRAM_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    add_command_config(parser)
    parser.add_argument("--entity-type", required=True, choices=ENTITY_TYPES)
    entity = parser.add_mutually_exclusive_group()
    entity.add_argument(
        "--entity-name",
        help="the topic's name, the broker's id or the user's name (all of them when absent)",
    )
    entity.add_argument(
        "--entity-default",
        action="store_true",
        help="the cluster-wide default of the brokers' dynamic configs",
    )
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list the entity's configs")
    actions.add_argument("--alter", action="store_true", help="alter the entity's configs")
    parser.add_argument(
        "--add-config",
        metavar="K=V,K=[V1,V2]",
        help="configs to set, with --alter (users: 'SCRAM-SHA-256=[iterations=N,password=P]')",
    )
    parser.add_argument("--delete-config", metavar="K,K", help="configs to remove, with --alter")
    parser.add_argument(
        "--all", action="store_true", help="with --describe: every config, not only dynamic ones"
    )


def check(args: argparse.Namespace) -> None:
    if not args.alter and (args.add_config is not None or args.delete_config is not None):
        raise UsageError("--add-config and --delete-config go with --alter")
    if args.all and not args.describe:
        raise UsageError("--all goes with --describe")
    if args.all and args.entity_type == "users":
        raise UsageError("--all applies to topics and brokers")
    if args.entity_default and args.entity_type == "topics":
        raise UsageError("--entity-default applies to brokers")
    if args.alter and args.entity_name is None and not args.entity_default:
        if args.entity_type in ("brokers", "users"):
            raise UsageError(
                "an entity-name or default entity must be specified with --alter of users, "
                "clients, brokers or ips"
            )
        raise UsageError(f"an entity name must be specified with --alter of {args.entity_type}")
    if args.alter and args.add_config is None and args.delete_config is None:
        raise UsageError("at least one of --add-config or --delete-config must be specified")
    if args.entity_type == "brokers" and args.entity_name is not None:
        if not args.entity_name.strip().isdigit():
            raise UsageError(
                "The entity name for brokers must be a valid integer broker id, found: "
                f"{args.entity_name}"
            )


async def run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, **await admin_config(args, "kcore-configs")) as admin:
        if args.entity_type == "users":
            await _users(admin, args)
        elif args.alter:
            await _alter(admin, args)
        elif args.entity_type == "topics":
            names = [args.entity_name] if args.entity_name else await admin.list_topics()
            for name in names:
                entries = await admin.describe_configs(name)
                print("\n".join(describe_lines("topics", name, entries, args.all)))
        else:
            if args.entity_default:
                brokers = [""]
            elif args.entity_name is not None:
                brokers = [str(int(args.entity_name))]
            else:
                # Kafka's: every broker, then the cluster-wide defaults.
                cluster = await admin.describe_cluster()
                brokers = [*(str(b.node_id) for b in cluster.brokers), ""]
            for broker in brokers:
                entries = await admin.describe_configs(broker=broker)
                print("\n".join(describe_lines("brokers", broker, entries, args.all)))
    return 0


async def _alter(admin: Admin, args: argparse.Namespace) -> None:
    """Kafka's alterConfig for topics and brokers: a config to delete must be one of the
    entity's dynamic configs."""
    to_set = parse_add_config(args.add_config) if args.add_config else {}
    to_delete = parse_delete_config(args.delete_config) if args.delete_config else []
    topic: str | None = None
    broker: int | str | None = None
    if args.entity_type == "topics":
        topic, dynamic_source = args.entity_name, _DYNAMIC_SOURCES["topics"]
    elif args.entity_default:
        broker, dynamic_source = "", ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG
    else:
        broker, dynamic_source = int(args.entity_name), _DYNAMIC_SOURCES["brokers"]
    current = await admin.describe_configs(topic, broker=broker)
    dynamic = {name for name, entry in current.items() if entry.source == dynamic_source}
    invalid = [name for name in to_delete if name not in dynamic]
    if invalid:
        raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    await admin.alter_configs(topic, broker=broker, set=to_set, delete=to_delete)
    if args.entity_default:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {args.entity_type[:-1]} {args.entity_name}.")


async def _users(admin: Admin, args: argparse.Namespace) -> None:
    """Kafka's ConfigCommand for users over --bootstrap-server, SCRAM credentials only."""
    if args.entity_default:
        if args.alter:
            raise ToolError(
                "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                "Credentials using --bootstrap-server."
            )
        raise ToolError(
            "--entity-default with users describes the default user quotas: kcore has no "
            "quotas (it does not enforce them)"
        )
    if not args.alter:
        named = None if args.entity_name is None else [args.entity_name]
        try:
            described = await admin.describe_user_scram_credentials(named)
        except errors.ResourceNotFoundError:
            if named is None:
                raise
            described = {}  # Kafka lists the users found only
        for user, infos in described.items():
            print(scram_credentials_line(user, infos))
        return
    alterations = user_alterations(
        args.entity_name,
        args.add_config if args.add_config is not None else "",
        args.delete_config if args.delete_config is not None else "",
    )
    await admin.alter_user_scram_credentials(alterations)
    print(f"Completed updating config for user {args.entity_name}.")


# -- pure: what Kafka's ConfigCommand prints and parses -----------------------------------


def scram_credentials_line(user: str, infos: Sequence[ScramCredentialInfo]) -> str:
    listed = ", ".join(f"{info.mechanism}=iterations={info.iterations}" for info in infos)
    return f"SCRAM credential configs for user-principal '{user}' are {listed}"


def user_alterations(
    user: str, add_config: str, delete_config: str
) -> list[UserScramCredentialDeletion | UserScramCredentialUpsertion]:
    """A user's `--add-config` and `--delete-config` as SCRAM credential alterations
    (Kafka's alterUserScramCredentialConfigs), deletions first. Names that are neither a
    SCRAM mechanism nor a quota are refused with Kafka's message, quotas with kcore's."""
    to_set = parse_add_config(add_config) if add_config else {}
    to_delete = parse_delete_config(delete_config) if delete_config else []
    for verb, names in (("added", list(to_set)), ("deleted", to_delete)):
        unknown = [n for n in names if n not in MECHANISMS and n not in USER_QUOTA_CONFIGS]
        if unknown:
            raise ToolError(
                f"Only quota and SCRAM credential configs can be {verb} for 'users' using "
                f"--bootstrap-server. Unexpected config names: {', '.join(unknown)}"
            )
    quotas = [n for n in (*to_set, *to_delete) if n in USER_QUOTA_CONFIGS]
    if quotas:
        raise ToolError(
            f"Quota configs are not supported by kcore (it does not enforce quotas): "
            f"{', '.join(quotas)}; users take SCRAM credential configs "
            f"({', '.join(MECHANISMS)})"
        )
    alterations: list[UserScramCredentialDeletion | UserScramCredentialUpsertion] = [
        UserScramCredentialDeletion(user, mechanism) for mechanism in to_delete
    ]
    for mechanism, text in to_set.items():
        iterations, password = _iterations_and_password(mechanism, text)
        alterations.append(UserScramCredentialUpsertion(user, mechanism, iterations, password))
    return alterations


def _iterations_and_password(mechanism: str, text: str) -> tuple[int, str]:
    """`[iterations=N,]password=P` (N of -1 or none: 4096). Unlike Kafka's message, the
    refusal of a malformed one does not repeat it: it holds the password."""
    match = _SCRAM_CREDENTIAL.fullmatch(text)
    if match is None or match.group(1) == "":
        raise ToolError(
            f"Invalid credential property {mechanism}: expected "
            f"{mechanism}=[iterations=N,password=P] or {mechanism}=[password=P]"
        )
    given, password = match.groups()
    iterations = DEFAULT_ITERATIONS if given in (None, "-1") else int(given)
    if iterations < MIN_ITERATIONS:
        raise ToolError(
            f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for "
            f"{mechanism}"
        )
    return iterations, password


def describe_lines(
    entity_type: str, name: str, entries: Mapping[str, ConfigEntry], describe_all: bool
) -> list[str]:
    """The header (`Dynamic configs for topic T are:`, `All configs for broker 1 are:`,
    `Default configs for brokers in the cluster are:` for the broker named ""), then a line
    per config shown, by name."""
    shown = sorted(entries.values(), key=lambda entry: entry.name)
    if entity_type == "brokers" and name == "":
        shown = [e for e in shown if e.source == ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG]
        header = "Default configs for brokers in the cluster are:"
    else:
        if not describe_all:
            shown = [e for e in shown if e.source == _DYNAMIC_SOURCES[entity_type]]
        kind = "All" if describe_all else "Dynamic"
        # Kafka names the entity by its type without the plural's 's'.
        header = f"{kind} configs for {entity_type[:-1]} {name} are:"
    return [header, *(config_line(entry) for entry in shown)]


def config_line(entry: ConfigEntry) -> str:
    """`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` (`null` for a value
    not shown, as Java prints it). An entry that carries no synonyms (kcore's Admin does not
    pass them on) shows its own source."""
    value = "null" if entry.value is None else entry.value
    synonyms = ""
    if entry.synonyms:
        synonyms = ", ".join(
            f"{s.source.name}:{s.name}={'null' if s.value is None else s.value}"
            for s in entry.synonyms
        )
    elif entry.source != ConfigSourceCode.UNKNOWN:
        synonyms = f"{entry.source.name}:{entry.name}={value}"
    sensitive = "true" if entry.is_sensitive else "false"
    return f"  {entry.name}={value} sensitive={sensitive} synonyms={{{synonyms}}}"


def parse_add_config(text: str) -> dict[str, str]:
    """`k1=v1,k2=[v1,v2]` as Kafka's parseConfigsToBeAdded reads it: commas inside
    square brackets belong to the value, and the brackets are dropped."""
    pairs = re.split("," + _OUTSIDE_BRACKETS, text)
    while pairs and not pairs[-1]:
        pairs.pop()  # Java's String.split drops trailing empty strings
    configs = {}
    for pair in pairs:
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, pair)
        if len(parts) != 2:
            raise ToolError(
                'Invalid entity config: all configs to be added must be in the format "key=val".'
            )
        configs[parts[0].strip()] = re.sub(r"[\[\]]", "", parts[1]).strip()
    return configs


def parse_delete_config(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    while names and not names[-1]:
        names.pop()
    return names


TOOL = Tool(
    "configs",
    "Describe and alter topic and broker configs and users' SCRAM credentials (Kafka's "
    "kafka-configs.sh).",
    add_arguments,
    run,
    check,
)
