"""ACLs through the admin API: what DescribeAcls (29), CreateAcls (30) and DeleteAcls (31)
decide, as Kafka 3.5's AclApis and AclAuthorizer decide it, sans-IO.

The messages are kcore's msgpack ones with the field names of Kafka's schemas, so the
Kafka-protocol handlers build them straight from the codec's dicts (`from_body`). The
shell (`KafkaApis`) reads and writes ZooKeeper around these functions:

- describe: `describe(authorizer, request)` over the broker's cache;
- create: `plan_creations(request)` refuses what Kafka refuses (the CLUSTER resource by
  another name than `kafka-cluster`, an empty name, a `/` in it, an unknown element, a
  principal that is not `Type:name`) and groups the rest by resource pattern; the shell
  adds each pattern's entries to its znode and answers each creation by its pattern's
  outcome;
- delete: `deletion_targets(filters, known)` names the resource patterns to rewrite (those
  the cache knows that a filter matches, and the one an exact filter names), and
  `apply_deletion` the entries left and the bindings deleted, by filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from kcore import errors
from kcore.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_principal,
)

# Kafka's messages (AclApis).
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_NAME_ONLY = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
EMPTY_RESOURCE_NAME = "Invalid empty resource name"
FAILED_TO_CREATE = "Failed to create ACL"
UNEXPECTED_ERROR = "The server experienced an unexpected error when processing the request."


# -- the messages ------------------------------------------------------------------------


@attrs.frozen
class AclCreation:
    resource_type: int
    resource_name: str
    resource_pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@attrs.frozen
class CreateAclsRequest:
    creations: tuple[AclCreation, ...] = ()


@attrs.frozen
class AclCreationResult:
    error_code: int = 0
    error_message: str | None = None


@attrs.frozen
class CreateAclsResponse:
    results: tuple[AclCreationResult, ...] = ()


@attrs.frozen
class AclFilter:
    """DescribeAclsRequest's fields, and each of DeleteAclsRequest's filters."""

    resource_type_filter: int = ResourceType.ANY
    resource_name_filter: str | None = None
    pattern_type_filter: int = PatternType.ANY
    principal_filter: str | None = None
    host_filter: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY


@attrs.frozen
class DescribeAclsRequest:
    filter: AclFilter = AclFilter()


@attrs.frozen
class AclDescription:
    principal: str
    host: str
    operation: int
    permission_type: int


@attrs.frozen
class DescribeAclsResource:
    resource_type: int
    resource_name: str
    pattern_type: int
    acls: tuple[AclDescription, ...] = ()


@attrs.frozen
class DescribeAclsResponse:
    error_code: int = 0
    error_message: str | None = None
    resources: tuple[DescribeAclsResource, ...] = ()


@attrs.frozen
class DeleteAclsRequest:
    filters: tuple[AclFilter, ...] = ()


@attrs.frozen
class DeleteAclsMatchingAcl:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@attrs.frozen
class DeleteAclsFilterResult:
    error_code: int = 0
    error_message: str | None = None
    matching_acls: tuple[DeleteAclsMatchingAcl, ...] = ()


@attrs.frozen
class DeleteAclsResponse:
    filter_results: tuple[DeleteAclsFilterResult, ...] = ()


def from_body(message_type: type, body: Mapping[str, Any]) -> Any:
    """A message from a Kafka codec dict with the same field names (extra keys ignored)."""
    return message_type(**{f.name: body[f.name] for f in attrs.fields(message_type)})


def as_body(message: Any) -> dict:
    """A message as the Kafka codec's dict (nested messages too)."""
    return attrs.asdict(message)


# -- conversions -------------------------------------------------------------------------


def binding_of(creation: AclCreation) -> AclBinding:
    """The ACL a creation asks for (ValueError: a number that is no enum member)."""
    return AclBinding(
        ResourcePattern(
            creation.resource_type, creation.resource_name, creation.resource_pattern_type
        ),
        AccessControlEntry(
            creation.principal, creation.host, creation.operation, creation.permission_type
        ),
    )


def binding_filter_of(acl_filter: AclFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            acl_filter.resource_type_filter,
            acl_filter.resource_name_filter,
            acl_filter.pattern_type_filter,
        ),
        AccessControlEntryFilter(
            acl_filter.principal_filter,
            acl_filter.host_filter,
            acl_filter.operation,
            acl_filter.permission_type,
        ),
    )


def creation_of(binding: AclBinding) -> AclCreation:
    p, e = binding.pattern, binding.entry
    return AclCreation(
        int(p.resource_type), p.name, int(p.pattern_type),
        e.principal, e.host, int(e.operation), int(e.permission_type),
    )  # fmt: skip


def filter_of(binding_filter: AclBindingFilter) -> AclFilter:
    p, e = binding_filter.pattern_filter, binding_filter.entry_filter
    return AclFilter(
        int(p.resource_type), p.name, int(p.pattern_type),
        e.principal, e.host, int(e.operation), int(e.permission_type),
    )  # fmt: skip


def bindings_of_described(response: DescribeAclsResponse) -> list[AclBinding]:
    return [
        AclBinding(
            ResourcePattern(r.resource_type, r.resource_name, r.pattern_type),
            AccessControlEntry(a.principal, a.host, a.operation, a.permission_type),
        )
        for r in response.resources
        for a in r.acls
    ]


# -- describe ----------------------------------------------------------------------------


def describe(authorizer: AclAuthorizer, request: DescribeAclsRequest) -> DescribeAclsResponse:
    """The ACLs the filter matches, grouped by resource pattern (DescribeAclsResponse.
    aclsResources). A filter with an UNKNOWN element is INVALID_REQUEST."""
    try:
        binding_filter = binding_filter_of(request.filter)
    except ValueError as error:
        return DescribeAclsResponse(errors.InvalidRequestError.code, str(error))
    unknown = binding_filter.unknown_element()
    if unknown is not None:
        return DescribeAclsResponse(
            errors.InvalidRequestError.code, f"The filter contains an unknown element: {unknown}"
        )
    grouped: dict[ResourcePattern, list[AclDescription]] = {}
    for binding in authorizer.acl_bindings(binding_filter):
        e = binding.entry
        grouped.setdefault(binding.pattern, []).append(
            AclDescription(e.principal, e.host, int(e.operation), int(e.permission_type))
        )
    return DescribeAclsResponse(
        resources=tuple(
            DescribeAclsResource(int(p.resource_type), p.name, int(p.pattern_type), tuple(acls))
            for p, acls in grouped.items()
        )
    )


# -- create ------------------------------------------------------------------------------


@attrs.frozen
class CreationPlan:
    """`refused`: creation index -> its result; `additions`: the entries to add to each
    resource pattern, with the indexes of the creations that asked for them."""

    refused: dict[int, AclCreationResult]
    additions: dict[ResourcePattern, list[tuple[int, AccessControlEntry]]]


def plan_creations(request: CreateAclsRequest) -> CreationPlan:
    refused: dict[int, AclCreationResult] = {}
    additions: dict[ResourcePattern, list[tuple[int, AccessControlEntry]]] = {}
    for index, creation in enumerate(request.creations):
        message = _creation_refusal(creation)
        if message is not None:
            refused[index] = AclCreationResult(errors.InvalidRequestError.code, message)
            continue
        binding = binding_of(creation)
        additions.setdefault(binding.pattern, []).append((index, binding.entry))
    return CreationPlan(refused, additions)


def _creation_refusal(creation: AclCreation) -> str | None:
    if creation.resource_type == ResourceType.CLUSTER and creation.resource_name != CLUSTER_NAME:
        return CLUSTER_NAME_ONLY
    if not creation.resource_name:
        return EMPTY_RESOURCE_NAME
    try:
        binding = binding_of(creation)
        parse_principal(creation.principal)
    except (ValueError, AclError) as error:
        return f"{FAILED_TO_CREATE}: {error}"
    unknown = binding.unknown_element()
    if unknown is not None:
        return f"{FAILED_TO_CREATE}: ACL binding contains unknown elements ({unknown})"
    if "/" in creation.resource_name:
        return (
            f"{FAILED_TO_CREATE}: ACL binding contains invalid resource name: "
            f"{creation.resource_name}"
        )
    return None


def creation_results(
    request: CreateAclsRequest,
    plan: CreationPlan,
    failed: Mapping[ResourcePattern, tuple[int, str]],
) -> CreateAclsResponse:
    """Each creation's result: refused, failed with its pattern's write (`failed`: pattern
    -> (error code, message)), or created."""
    results = dict(plan.refused)
    for pattern, added in plan.additions.items():
        outcome = failed.get(pattern)
        for index, _ in added:
            results[index] = AclCreationResult(*outcome) if outcome else AclCreationResult()
    return CreateAclsResponse(tuple(results[i] for i in range(len(request.creations))))


def creations_refused(request: CreateAclsRequest, code: int, message: str) -> CreateAclsResponse:
    return CreateAclsResponse(tuple(AclCreationResult(code, message) for _ in request.creations))


# -- delete ------------------------------------------------------------------------------


def deletion_filters(request: DeleteAclsRequest) -> list[AclBindingFilter | str]:
    """Each filter, or why it cannot be one (an unknown element, a number no enum has)."""
    parsed: list[AclBindingFilter | str] = []
    for acl_filter in request.filters:
        try:
            binding_filter = binding_filter_of(acl_filter)
        except ValueError as error:
            parsed.append(str(error))
            continue
        unknown = binding_filter.unknown_element()
        parsed.append(
            binding_filter
            if unknown is None
            else f"The filter contains an unknown element: {unknown}"
        )
    return parsed


def deletion_targets(
    filters: Sequence[AclBindingFilter | str], known: Iterable[ResourcePattern]
) -> dict[ResourcePattern, list[int]]:
    """The resource patterns to rewrite, each with the indexes of the filters that match
    it: the patterns the cache knows, and those an exact filter names (AclAuthorizer.
    deleteAcls: so an ACL written but not yet in the cache is deleted too)."""
    candidates = list(known)
    for binding_filter in filters:
        if (
            isinstance(binding_filter, str)
            or not binding_filter.pattern_filter.matches_at_most_one()
        ):
            continue
        p = binding_filter.pattern_filter
        assert p.name is not None
        candidates.append(ResourcePattern(p.resource_type, p.name, p.pattern_type))
    targets: dict[ResourcePattern, list[int]] = {}
    for pattern in sorted(set(candidates)):
        matching = [
            index
            for index, binding_filter in enumerate(filters)
            if not isinstance(binding_filter, str)
            and binding_filter.pattern_filter.matches(pattern)
        ]
        if matching:
            targets[pattern] = matching
    return targets


def apply_deletion(
    pattern: ResourcePattern,
    current: Iterable[AccessControlEntry],
    filters: Sequence[AclBindingFilter | str],
    matching: Sequence[int],
) -> tuple[frozenset[AccessControlEntry], dict[AclBinding, int]]:
    """The entries left once every entry a matching filter selects is removed, and each
    removed binding with the first filter that selected it."""
    deleted: dict[AclBinding, int] = {}
    kept = set()
    for entry in sorted(current):
        selected = [
            index
            for index in matching
            if isinstance(filters[index], AclBindingFilter)
            and filters[index].entry_filter.matches(entry)  # type: ignore[union-attr]
        ]
        if selected:
            deleted[AclBinding(pattern, entry)] = selected[0]
        else:
            kept.add(entry)
    return frozenset(kept), deleted


def deletion_results(
    filters: Sequence[AclBindingFilter | str],
    deleted: Mapping[AclBinding, int],
    failed: Mapping[AclBinding, tuple[int, str]],
) -> DeleteAclsResponse:
    """Each filter's result: INVALID_REQUEST for one that could not be read, else the
    bindings it deleted (each with its pattern's write error, if that write failed)."""
    results = []
    for index, binding_filter in enumerate(filters):
        if isinstance(binding_filter, str):
            results.append(DeleteAclsFilterResult(errors.InvalidRequestError.code, binding_filter))
            continue
        matching = []
        for binding in sorted(b for b, i in deleted.items() if i == index):
            code, message = failed.get(binding, (0, None))
            p, e = binding.pattern, binding.entry
            matching.append(
                DeleteAclsMatchingAcl(
                    code,
                    message,
                    int(p.resource_type),
                    p.name,
                    int(p.pattern_type),
                    e.principal,
                    e.host,
                    int(e.operation),
                    int(e.permission_type),
                )
            )
        results.append(DeleteAclsFilterResult(matching_acls=tuple(matching)))
    return DeleteAclsResponse(tuple(results))


def deletions_refused(request: DeleteAclsRequest, code: int, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(tuple(DeleteAclsFilterResult(code, message) for _ in request.filters))
