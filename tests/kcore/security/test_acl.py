"""The authorizer's decision and ACL storage as Kafka 3.5's AclAuthorizer has them (sans-IO):
matching by literal name, `*` and prefix; DENY over ALLOW; the operations an ALLOW implies;
super users and allow.everyone.if.no.acl.found; the filters of DescribeAcls / DeleteAcls;
what CreateAcls refuses; and the ZooKeeper layout byte for byte."""

from __future__ import annotations

import json

import pytest

from kcore import errors
from kcore.config import ConfigError, KafkaConfig
from kcore.security import acl_admin
from kcore.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    parse_super_users,
    resource_path,
)
from kcore.security.acl import AclOperation as Op

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = "User:alice", "User:bob"


def ace(principal=ALICE, operation=Op.READ, permission=ALLOW, host="*"):
    return AccessControlEntry(principal, host, operation, permission)


def authorizer(acls=(), **settings):
    """An authorizer holding `acls`: (resource type, name, pattern type, entry) tuples."""
    found = AclAuthorizer(**settings)
    grouped = {}
    for kind, name, pattern_type, entry in acls:
        grouped.setdefault(ResourcePattern(kind, name, pattern_type), set()).add(entry)
    for pattern, entries in grouped.items():
        found.set_acls(pattern, entries)
    return found


# -- the decision --------------------------------------------------------------------------


def test_without_acls_only_super_users_unless_everyone_is_allowed():
    assert not authorizer().authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "t")
    assert authorizer(super_users=frozenset({ALICE})).authorize(ALICE, "h", Op.ALTER, CLUSTER, "x")
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize(
        ALICE, "h", Op.READ, TOPIC, "t"
    )
    # No principal (a SASL connection not yet authenticated) is never allowed.
    assert not authorizer(allow_everyone_if_no_acl_found=True).authorize(
        None, "h", Op.READ, TOPIC, "t"
    )


def test_a_resource_with_acls_is_closed_to_those_they_do_not_allow():
    # allow.everyone.if.no.acl.found counts only for resources without any ACL.
    found = authorizer([(TOPIC, "t", LITERAL, ace(BOB))], allow_everyone_if_no_acl_found=True)
    assert found.authorize(BOB, "h", Op.READ, TOPIC, "t")
    assert not found.authorize(ALICE, "h", Op.READ, TOPIC, "t")
    assert found.authorize(ALICE, "h", Op.READ, TOPIC, "other")


def test_literal_wildcard_and_prefixed_patterns_apply_and_nothing_else():
    found = authorizer(
        [
            (TOPIC, "orders", LITERAL, ace(operation=Op.WRITE)),
            (TOPIC, "*", LITERAL, ace(operation=Op.DESCRIBE)),
            (TOPIC, "logs-", PREFIXED, ace(operation=Op.READ)),
            (GROUP, "orders", LITERAL, ace(operation=Op.READ)),
        ]
    )
    assert found.authorize(ALICE, "h", Op.WRITE, TOPIC, "orders")
    assert not found.authorize(ALICE, "h", Op.WRITE, TOPIC, "orders2")
    assert found.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "anything")
    assert found.authorize(ALICE, "h", Op.READ, TOPIC, "logs-eu")
    assert found.authorize(ALICE, "h", Op.READ, TOPIC, "logs-")
    assert not found.authorize(ALICE, "h", Op.READ, TOPIC, "logs")
    # A literal `*` name in a prefixed pattern is just a prefix; types never mix.
    assert not found.authorize(ALICE, "h", Op.WRITE, GROUP, "orders")
    assert found.authorize(ALICE, "h", Op.READ, GROUP, "orders")


def test_deny_wins_over_allow_whichever_pattern_carries_it():
    found = authorizer(
        [
            (TOPIC, "*", LITERAL, ace(operation=Op.ALL)),
            (TOPIC, "secret-", PREFIXED, ace(operation=Op.READ, permission=DENY)),
            (TOPIC, "audit", LITERAL, ace("User:*", Op.ALL, DENY, host="10.0.0.9")),
        ]
    )
    assert found.authorize(ALICE, "h", Op.READ, TOPIC, "public")
    assert not found.authorize(ALICE, "h", Op.READ, TOPIC, "secret-plans")
    assert found.authorize(ALICE, "h", Op.WRITE, TOPIC, "secret-plans")  # only READ denied
    assert not found.authorize(ALICE, "10.0.0.9", Op.WRITE, TOPIC, "audit")
    assert found.authorize(ALICE, "10.0.0.8", Op.WRITE, TOPIC, "audit")


def test_principal_and_host_match_exactly_or_by_wildcard():
    found = authorizer(
        [
            (TOPIC, "t", LITERAL, ace("User:*", Op.READ, host="10.0.0.1")),
            (TOPIC, "t", LITERAL, ace(BOB, Op.WRITE)),
        ]
    )
    assert found.authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "t")
    assert not found.authorize(ALICE, "10.0.0.2", Op.READ, TOPIC, "t")
    assert found.authorize(BOB, "10.0.0.2", Op.WRITE, TOPIC, "t")
    assert not found.authorize(ALICE, "10.0.0.1", Op.WRITE, TOPIC, "t")
    assert not found.authorize("User:alice2", "10.0.0.2", Op.WRITE, TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_read_write_delete_and_alter_imply_describe(granted):
    found = authorizer([(TOPIC, "t", LITERAL, ace(operation=granted))])
    assert found.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "t")
    assert not found.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")


def test_alter_configs_implies_describe_configs_and_all_implies_everything():
    found = authorizer(
        [
            (TOPIC, "t", LITERAL, ace(operation=Op.ALTER_CONFIGS)),
            (CLUSTER, "kafka-cluster", LITERAL, ace(BOB, Op.ALL)),
        ]
    )
    assert found.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not found.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "t")
    for operation in (Op.CLUSTER_ACTION, Op.ALTER, Op.CREATE, Op.IDEMPOTENT_WRITE):
        assert found.authorize(BOB, "h", operation, CLUSTER, "kafka-cluster")
    # A DENY of DESCRIBE does not take READ away (implication is for ALLOW only).
    found = authorizer(
        [
            (TOPIC, "t", LITERAL, ace(operation=Op.READ)),
            (TOPIC, "t", LITERAL, ace(operation=Op.DESCRIBE, permission=DENY)),
        ]
    )
    assert found.authorize(ALICE, "h", Op.READ, TOPIC, "t")
    assert not found.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "t")


def test_authorize_by_resource_type_looks_for_one_allowed_resource():
    def allowed(*acls, **settings):
        return authorizer(acls, **settings).authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)

    assert not allowed()
    assert allowed(allow_everyone_if_no_acl_found=True)
    assert allowed((TOPIC, "t", LITERAL, ace(operation=Op.WRITE)))
    assert allowed((TOPIC, "t-", PREFIXED, ace(operation=Op.ALL)))
    assert not allowed((TOPIC, "t", LITERAL, ace(operation=Op.READ)))
    # A DENY of `*`, or of a prefix covering every allowed name, leaves nothing.
    assert not allowed(
        (TOPIC, "t", LITERAL, ace(operation=Op.WRITE)),
        (TOPIC, "*", LITERAL, ace(operation=Op.WRITE, permission=DENY)),
    )
    assert not allowed(
        (TOPIC, "team-a", LITERAL, ace(operation=Op.WRITE)),
        (TOPIC, "team", PREFIXED, ace(operation=Op.WRITE, permission=DENY)),
    )
    assert allowed(
        (TOPIC, "other", LITERAL, ace(operation=Op.WRITE)),
        (TOPIC, "team", PREFIXED, ace(operation=Op.WRITE, permission=DENY)),
    )


def test_super_users_are_parsed_as_kafka_parses_them():
    assert parse_super_users("User:admin; User:CN=broker1,O=kcore ;") == {
        "User:admin", "User:CN=broker1,O=kcore",
    }  # fmt: skip
    assert parse_super_users(None) == frozenset()
    with pytest.raises(AclError, match="principalType:principalName"):
        parse_super_users("admin")


def test_only_kafkas_acl_authorizer_is_accepted():
    base = {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/kcore-acl"}
    for name in (
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
    ):
        config = KafkaConfig.from_dict({**base, "authorizer.class.name": name})
        assert config.get("allow.everyone.if.no.acl.found") is False
    assert KafkaConfig.from_dict(base).get("authorizer.class.name") == ""
    with pytest.raises(ConfigError, match=r"super\.users: expected a string in format"):
        KafkaConfig.from_dict({**base, "super.users": "User:admin;admin"})
    name = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    with pytest.raises(ConfigError, match=f"authorizer.class.name={name} is not supported"):
        KafkaConfig.from_dict({**base, "authorizer.class.name": name})


# -- filters (DescribeAcls, DeleteAcls) ------------------------------------------------------


def test_pattern_filters_match_as_kafkas_do():
    literal = ResourcePattern(TOPIC, "orders")
    wildcard = ResourcePattern(TOPIC, "*")
    prefixed = ResourcePattern(TOPIC, "ord", PREFIXED)
    everything = [literal, wildcard, prefixed, ResourcePattern(GROUP, "orders")]

    def matched(pattern_filter):
        return [p for p in everything if pattern_filter.matches(p)]

    assert matched(ResourcePatternFilter()) == everything
    assert matched(ResourcePatternFilter(TOPIC, "orders", PatternType.ANY)) == [literal]
    assert matched(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH)) == [
        literal, wildcard, prefixed,
    ]  # fmt: skip
    assert matched(ResourcePatternFilter(TOPIC, "ord", PREFIXED)) == [prefixed]
    assert matched(ResourcePatternFilter(TOPIC, None, LITERAL)) == [literal, wildcard]
    assert ResourcePatternFilter(TOPIC, "orders", LITERAL).matches_at_most_one()
    assert not ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH).matches_at_most_one()


def test_describing_lists_the_matching_acls_by_resource():
    found = authorizer(
        [
            (TOPIC, "t", LITERAL, ace(ALICE, Op.READ)),
            (TOPIC, "t", LITERAL, ace(BOB, Op.WRITE)),
            (GROUP, "g", LITERAL, ace(ALICE, Op.READ)),
        ]
    )
    response = acl_admin.describe(
        found, acl_admin.DescribeAclsRequest(acl_admin.AclFilter(principal_filter=ALICE))
    )
    assert response.error_code == 0
    assert acl_admin.bindings_of_described(response) == sorted(
        [
            AclBinding(ResourcePattern(TOPIC, "t"), ace(ALICE, Op.READ)),
            AclBinding(ResourcePattern(GROUP, "g"), ace(ALICE, Op.READ)),
        ]
    )
    refused = acl_admin.describe(
        found, acl_admin.DescribeAclsRequest(acl_admin.AclFilter(operation=Op.UNKNOWN))
    )
    assert refused.error_code == errors.InvalidRequestError.code


# -- creations and deletions -------------------------------------------------------------------


def creation(kind=TOPIC, name="t", pattern_type=LITERAL, principal=ALICE, operation=Op.READ):
    return acl_admin.AclCreation(kind, name, pattern_type, principal, "*", operation, ALLOW)


def test_creations_kafka_refuses_are_answered_each_and_the_rest_grouped_by_pattern():
    request = acl_admin.CreateAclsRequest(
        (
            creation(),
            creation(CLUSTER, "my-cluster", operation=Op.ALTER),
            creation(name=""),
            creation(name="a/b"),
            creation(principal="alice"),
            creation(operation=Op.ANY),
            creation(pattern_type=PatternType.MATCH),
            creation(operation=Op.WRITE),
            creation(CLUSTER, "kafka-cluster", operation=Op.CLUSTER_ACTION),
        )
    )
    plan = acl_admin.plan_creations(request)
    messages = {i: r.error_message for i, r in plan.refused.items()}
    assert sorted(messages) == [1, 2, 3, 4, 5, 6]
    assert messages[1] == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert messages[2] == "Invalid empty resource name"
    assert all(m.startswith("Failed to create ACL") for i, m in messages.items() if i > 2)
    assert {r.error_code for r in plan.refused.values()} == {errors.InvalidRequestError.code}
    assert plan.additions == {
        ResourcePattern(TOPIC, "t"): [(0, ace()), (7, ace(operation=Op.WRITE))],
        ResourcePattern(CLUSTER, "kafka-cluster"): [(8, ace(operation=Op.CLUSTER_ACTION))],
    }
    failed = {ResourcePattern(CLUSTER, "kafka-cluster"): (-1, "boom")}
    results = acl_admin.creation_results(request, plan, failed).results
    assert [r.error_code for r in results] == [0, 42, 42, 42, 42, 42, 42, 0, -1]


def test_deletion_rewrites_what_the_filters_match_and_answers_per_filter():
    known = [ResourcePattern(TOPIC, "t"), ResourcePattern(TOPIC, "t-", PREFIXED)]
    filters = acl_admin.deletion_filters(
        acl_admin.DeleteAclsRequest(
            (
                acl_admin.AclFilter(ResourceType.TOPIC, "t", PatternType.MATCH, ALICE),
                acl_admin.AclFilter(ResourceType.GROUP, "g", LITERAL),  # not cached: exact
                acl_admin.AclFilter(operation=Op.UNKNOWN),
            )
        )
    )
    assert isinstance(filters[2], str)
    targets = acl_admin.deletion_targets(filters, known)
    assert targets == {ResourcePattern(TOPIC, "t"): [0], ResourcePattern(GROUP, "g"): [1]}
    kept, deleted = acl_admin.apply_deletion(
        ResourcePattern(TOPIC, "t"), {ace(ALICE), ace(BOB)}, filters, [0]
    )
    assert kept == {ace(BOB)}
    assert deleted == {AclBinding(ResourcePattern(TOPIC, "t"), ace(ALICE)): 0}
    response = acl_admin.deletion_results(filters, deleted, {})
    assert [len(r.matching_acls) for r in response.filter_results] == [1, 0, 0]
    assert response.filter_results[2].error_code == errors.InvalidRequestError.code
    (matching,) = response.filter_results[0].matching_acls
    assert (matching.resource_name, matching.principal, matching.operation) == ("t", ALICE, 3)


def test_a_binding_filter_matches_entries_by_each_given_field():
    entry_filter = AccessControlEntryFilter(principal=ALICE, permission_type=ALLOW)
    assert entry_filter.matches(ace(ALICE, Op.WRITE))
    assert not entry_filter.matches(ace(BOB))
    assert not entry_filter.matches(ace(ALICE, permission=DENY))
    assert AclBindingFilter().matches(AclBinding(ResourcePattern(GROUP, "g"), ace(BOB)))


# -- ZooKeeper's layout ---------------------------------------------------------------------


def test_acls_are_stored_where_and_as_kafka_stores_them():
    assert resource_path(ResourcePattern(TOPIC, "orders")) == "/kafka-acl/Topic/orders"
    assert resource_path(ResourcePattern(CLUSTER, "kafka-cluster")) == (
        "/kafka-acl/Cluster/kafka-cluster"
    )
    assert resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PREFIXED)) == (
        "/kafka-acl-extended/prefixed/TransactionalId/tx"
    )
    data = encode_acls({ace(ALICE, Op.DESCRIBE_CONFIGS), ace("User:*", Op.ALL, DENY, "10.0.0.1")})
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:*", "permissionType": "Deny", "operation": "All",
             "host": "10.0.0.1"},
            {"principal": ALICE, "permissionType": "Allow", "operation": "DescribeConfigs",
             "host": "*"},
        ],
    }  # fmt: skip
    assert decode_acls(data) == {
        ace(ALICE, Op.DESCRIBE_CONFIGS),
        ace("User:*", Op.ALL, DENY, "10.0.0.1"),
    }
    # What Kafka itself writes reads back (its names, its key order, its spacing).
    kafka_written = (
        b'{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"IdempotentWrite",'
        b'"principal":"User:CN=client,O=x"}]}'
    )
    assert decode_acls(kafka_written) == {ace("User:CN=client,O=x", Op.IDEMPOTENT_WRITE)}
    with pytest.raises(AclError):
        decode_acls(b'{"version":1,"acls":[{"principal":"User:a","operation":"Fly"}]}')


def test_change_notifications_name_the_pattern_as_kafka_does():
    literal = ResourcePattern(TOPIC, "orders")
    assert encode_acl_change(literal) == b"TOPIC:orders"
    assert decode_acl_change("/kafka-acl-changes", b"Topic:orders") == literal
    prefixed = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PREFIXED)
    assert json.loads(encode_acl_change(prefixed)) == {
        "version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-", "patternType": "PREFIXED",
    }  # fmt: skip
    assert decode_acl_change("/kafka-acl-extended-changes", encode_acl_change(prefixed)) == prefixed
    with pytest.raises(AclError):
        decode_acl_change("/kafka-acl-changes", b"no-separator")
