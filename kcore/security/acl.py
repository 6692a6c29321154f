"""ACLs and the authorizer's decision (Kafka 3.5's AclAuthorizer, ZooKeeper mode), sans-IO.

An ACL binds a resource pattern (a topic, group, the cluster, ... by LITERAL name, `*` for
every one, or by PREFIXED name) to an access control entry (principal, host, operation,
ALLOW / DENY). The numbers are Kafka's public enums (they travel in CreateAcls & co); the
names are the ones Kafka writes in ZooKeeper (`Topic`, `Read`, `Allow`).

Kafka's rules (`AclAuthorizer.authorizeAction`):

- a super user (`super.users`) may do anything;
- the ACLs that apply to a resource are those of its literal name, of the literal `*`, and
  of every prefix of its name; when there are none, `allow.everyone.if.no.acl.found`
  decides;
- a DENY that matches (the principal or `User:*`, the host or `*`, the operation or ALL)
  wins over any ALLOW;
- an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one of ALTER_CONFIGS
  also allows DESCRIBE_CONFIGS.

`AclAuthorizer` keeps the ACLs by resource pattern (the broker's cache of ZooKeeper, kept
current by the change notifications) and answers `authorize`; `acls(filter)` is what
DescribeAcls lists. The ZooKeeper layout (paths, JSON, change notifications) is at the end.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping

import attrs

from kcore import config, zkdata
from kcore.config import PrincipalError

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka's SecurityUtils names (what /kafka-acl paths and JSON hold).
RESOURCE_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
OPERATION_NAMES = {
    AclOperation.ALL: "All",
    AclOperation.READ: "Read",
    AclOperation.WRITE: "Write",
    AclOperation.CREATE: "Create",
    AclOperation.DELETE: "Delete",
    AclOperation.ALTER: "Alter",
    AclOperation.DESCRIBE: "Describe",
    AclOperation.CLUSTER_ACTION: "ClusterAction",
    AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs",
    AclOperation.ALTER_CONFIGS: "AlterConfigs",
    AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite",
    AclOperation.CREATE_TOKENS: "CreateTokens",
    AclOperation.DESCRIBE_TOKENS: "DescribeTokens",
}
PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}
# Kafka's AclEntry.supportedOperations: the operations each resource type has (an ACL may
# also name ALL), and so the bits of the authorized-operations fields (Metadata,
# DescribeGroups, DescribeCluster).
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}  # fmt: skip

# What an ALLOW of each operation allows besides itself (AclOperation's inheritance).
_IMPLIED_BY = {
    AclOperation.DESCRIBE: (
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    ),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
}


class AclError(PrincipalError):
    """A principal, ACL or stored ACL znode kcore cannot read (the message says why)."""


def parse_principal(text: str) -> str:
    """Kafka's SecurityUtils.parseKafkaPrincipal (kcore.config's rule, that settings use
    too): `Type:name` (`User:alice`), kept as that string. AclError for one without a type
    or a name."""
    try:
        return config.parse_principal(text)
    except PrincipalError as error:
        raise AclError(str(error)) from None


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by `;` (AclError for one that is not)."""
    try:
        return config.parse_super_users(text)
    except PrincipalError as error:
        raise AclError(str(error)) from None


@attrs.frozen(order=True)
class ResourcePattern:
    resource_type: ResourceType = attrs.field(converter=ResourceType)
    name: str
    pattern_type: PatternType = attrs.field(converter=PatternType, default=PatternType.LITERAL)

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, " \
            f"patternType={self.pattern_type.name})"  # fmt: skip


@attrs.frozen(order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation = attrs.field(converter=AclOperation)
    permission_type: AclPermissionType = attrs.field(converter=AclPermissionType)


@attrs.frozen(order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def unknown_element(self) -> str | None:
        """What Kafka's AclBinding.isUnknown flags (and ANY / MATCH, which only filters
        may use): the element an ACL cannot be made of, or None."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"resource type {p.resource_type.name}"
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"pattern type {p.pattern_type.name}"
        if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return f"operation {e.operation.name}"
        if e.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
            return f"permission type {e.permission_type.name}"
        return None


@attrs.frozen
class ResourcePatternFilter:
    """Kafka's ResourcePatternFilter: ANY type, a null name (any), pattern ANY (any
    pattern, names compared as they are), MATCH (the patterns that would apply to the
    named resource: its literal, the literal `*`, its prefixes), or one pattern type."""

    resource_type: ResourceType = attrs.field(converter=ResourceType, default=ResourceType.ANY)
    name: str | None = None
    pattern_type: PatternType = attrs.field(converter=PatternType, default=PatternType.ANY)

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)  # PREFIXED

    def matches_at_most_one(self) -> bool:
        return (
            self.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
            and self.name is not None
            and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
        )

    def unknown_element(self) -> str | None:
        if self.resource_type == ResourceType.UNKNOWN:
            return "resource type UNKNOWN"
        if self.pattern_type == PatternType.UNKNOWN:
            return "pattern type UNKNOWN"
        return None


@attrs.frozen
class AccessControlEntryFilter:
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = attrs.field(converter=AclOperation, default=AclOperation.ANY)
    permission_type: AclPermissionType = attrs.field(
        converter=AclPermissionType, default=AclPermissionType.ANY
    )

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def unknown_element(self) -> str | None:
        if self.operation == AclOperation.UNKNOWN:
            return "operation UNKNOWN"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "permission type UNKNOWN"
        return None


@attrs.frozen
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter = attrs.Factory(ResourcePatternFilter)
    entry_filter: AccessControlEntryFilter = attrs.Factory(AccessControlEntryFilter)

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry
        )

    def unknown_element(self) -> str | None:
        return self.pattern_filter.unknown_element() or self.entry_filter.unknown_element()


ANY_ACL = AclBindingFilter()


def authorized_operations(
    authorizer: AclAuthorizer | None,
    principal: str | None,
    host: str,
    resource_type: ResourceType,
    name: str,
) -> int:
    """Kafka's AuthHelper.authorizedOperations: the bit field (bit = operation code) of the
    resource type's operations the principal may perform on the resource; every one of
    them without an authorizer."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if authorizer is None or authorizer.authorize(
            principal, host, operation, resource_type, name
        ):
            bits |= 1 << operation
    return bits


@attrs.define
class AclAuthorizer:
    """The decision, over the ACLs this broker knows (`acls`: resource pattern -> entries,
    as ZooKeeper holds them)."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = attrs.Factory(dict)

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """The pattern's ACLs are now `entries` (none: the pattern has no ACLs)."""
        entries = frozenset(entries)
        if entries:
            self.acls[pattern] = entries
        else:
            self.acls.pop(pattern, None)

    def is_super_user(self, principal: str | None) -> bool:
        return principal is not None and principal in self.super_users

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to the resource: its literal name's, the literal `*`'s and
        those of every prefix of its name."""
        found: list[AccessControlEntry] = []
        for pattern, entries in self.acls.items():
            if pattern.resource_type != resource_type:
                continue
            if pattern.pattern_type == PatternType.LITERAL:
                applies = pattern.name in (name, WILDCARD_RESOURCE)
            else:
                applies = pattern.pattern_type == PatternType.PREFIXED and name.startswith(
                    pattern.name
                )
            if applies:
                found.extend(entries)
        return found

    def authorize(
        self,
        principal: str | None,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """May `principal` connecting from `host` perform `operation` on the resource?
        (None: a connection that has no principal, which nothing is granted to.)"""
        if principal is None:
            return False
        if self.is_super_user(principal):
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if any(_entry_matches(e, principal, host, operation, AclPermissionType.DENY) for e in acls):
            return False
        allowing = _IMPLIED_BY.get(operation, (operation,))
        return any(
            _entry_matches(e, principal, host, op, AclPermissionType.ALLOW)
            for op in allowing
            for e in acls
        )

    def authorize_by_resource_type(
        self, principal: str | None, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's authorizeByResourceType: may the principal perform `operation` on at
        least one resource of the type (an ALLOW of it that no DENY dominates)?"""
        if principal is None:
            return False
        if self.is_super_user(principal):
            return True

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {
                pattern.name
                for pattern, entries in self.acls.items()
                if pattern.resource_type == resource_type and pattern.pattern_type == pattern_type
                for e in entries
                if _entry_matches(e, principal, host, operation, permission)
            }

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)
        allow_literals = names(AclPermissionType.ALLOW, PatternType.LITERAL)
        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)

        def dominated(name: str) -> bool:
            return any(name[:length] in deny_prefixes for length in range(1, len(name) + 1))

        return any(not dominated(prefix) for prefix in allow_prefixes) or any(
            literal == WILDCARD_RESOURCE
            or (literal not in deny_literals and not dominated(literal))
            for literal in allow_literals
        )

    def acl_bindings(self, binding_filter: AclBindingFilter = ANY_ACL) -> list[AclBinding]:
        """The ACLs the filter matches (DescribeAcls), sorted."""
        return sorted(
            AclBinding(pattern, entry)
            for pattern, entries in self.acls.items()
            for entry in entries
            if binding_filter.matches(AclBinding(pattern, entry))
        )


def _entry_matches(
    entry: AccessControlEntry,
    principal: str,
    host: str,
    operation: AclOperation,
    permission: AclPermissionType,
) -> bool:
    return (
        entry.permission_type == permission
        and entry.principal in (principal, WILDCARD_PRINCIPAL)
        and (entry.operation == operation or entry.operation == AclOperation.ALL)
        and entry.host in (host, WILDCARD_HOST)
    )


# -- ZooKeeper's layout (kafka.zk.ZkData: ZkAclStore, ZkAclChangeStore) -----------------------

LITERAL_ACL_PATH = zkdata.KAFKA_ACL
EXTENDED_ACL_PATH = zkdata.KAFKA_ACL_EXTENDED
LITERAL_ACL_CHANGES = zkdata.KAFKA_ACL_CHANGES
EXTENDED_ACL_CHANGES = zkdata.KAFKA_ACL_EXTENDED_CHANGES
ACL_CHANGE_PREFIX = zkdata.ACL_CHANGE_PREFIX
# What the authorizer creates at start-up (AclAuthorizer.configure: createAclPaths).
ACL_PATHS = (
    LITERAL_ACL_PATH,
    LITERAL_ACL_CHANGES,
    f"{EXTENDED_ACL_PATH}/prefixed",
    EXTENDED_ACL_CHANGES,
)
_TYPES_BY_NAME = {name: kind for kind, name in RESOURCE_TYPE_NAMES.items()}
_OPERATIONS_BY_NAME = {name.lower(): op for op, name in OPERATION_NAMES.items()}
_PERMISSIONS_BY_NAME = {name.lower(): p for p, name in PERMISSION_NAMES.items()}


def store_path(pattern_type: PatternType) -> str:
    """Where a pattern type's ACLs live: `/kafka-acl` (LITERAL), else
    `/kafka-acl-extended/<pattern type, lower case>`."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{store_path(pattern_type)}/{RESOURCE_TYPE_NAMES[resource_type]}"


def resource_path(pattern: ResourcePattern) -> str:
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def resource_type_named(name: str) -> ResourceType | None:
    """The resource type of a `/kafka-acl/<Type>` child (None: not one Kafka writes)."""
    return _TYPES_BY_NAME.get(name)


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource znode's data (AclEntry.toJsonCompatibleMap)."""
    return json.dumps(
        {
            "version": 1,
            "acls": [
                {
                    "principal": e.principal,
                    "permissionType": PERMISSION_NAMES[e.permission_type],
                    "operation": OPERATION_NAMES[e.operation],
                    "host": e.host,
                }
                for e in sorted(entries)
            ],
        },
        separators=(",", ":"),
    ).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """A resource znode's ACLs (AclEntry.fromBytes: names compared without case)."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
        return frozenset(
            AccessControlEntry(
                parse_principal(acl["principal"]),
                acl["host"],
                _OPERATIONS_BY_NAME[acl["operation"].lower()],
                _PERMISSIONS_BY_NAME[acl["permissionType"].lower()],
            )
            for acl in document.get("acls", ())
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise AclError(f"cannot read ACLs {data[:200]!r}: {error!r}") from None


def change_store(pattern_type: PatternType) -> str:
    return LITERAL_ACL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_ACL_CHANGES


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """A change notification's data: `TOPIC:name` for a literal pattern (Kafka's legacy
    form, the Java enum's name), JSON for the others (ExtendedAclChangeEvent)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps(
        {
            "version": 1,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        },
        separators=(",", ":"),
    ).encode()


def decode_acl_change(changes_path: str, data: bytes) -> ResourcePattern:
    """The resource pattern a change notification names (AclError: unreadable)."""
    try:
        if changes_path == LITERAL_ACL_CHANGES:
            type_name, colon, name = data.decode().partition(":")
            if not colon:
                raise ValueError("expected ResourceType:ResourceName")
            return ResourcePattern(_resource_type_from_string(type_name), name)
        event = json.loads(data)
        return ResourcePattern(
            _resource_type_from_string(event["resourceType"]),
            event["name"],
            PatternType[event["patternType"].upper()],
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise AclError(f"cannot read ACL change {data[:200]!r}: {error!r}") from None


def _resource_type_from_string(text: str) -> ResourceType:
    """ResourceType.fromString: the enum's name, case and underscores aside."""
    wanted = text.replace("_", "").upper()
    for kind in ResourceType:
        if kind.name.replace("_", "") == wanted:
            return kind
    raise ValueError(f"unknown resource type {text!r}")


def bindings_by_pattern(
    bindings: Iterable[AclBinding],
) -> Mapping[ResourcePattern, list[AccessControlEntry]]:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return grouped
