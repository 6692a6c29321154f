"""SCRAM users through the admin API (DescribeUserScramCredentials, AlterUserScramCredentials)
as Kafka 3.5's ZK-mode brokers answer them: the sans-IO decisions with each of Kafka's
per-user errors, the handler's I/O around them, and kcore's Admin against a simulated SASL
cluster, where a user it creates logs in on every broker and, once deleted, no longer
does."""

from __future__ import annotations

import itertools
import json
import random

import attrs
import pytest
import trio

import transport
from kcore import errors
from kcore.client import Admin
from kcore.client.admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kcore.config import KafkaConfig
from kcore.protocol.api_keys import ApiKey
from kcore.security import scram_admin
from kcore.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    credential_from_password,
    salted_password,
)
from kcore.security.scram_admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CredentialInfo,
    DescribeUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    alteration_request,
    apply_alteration,
    describe_credentials,
    plan_alteration,
    users_to_read,
)
from kcore.server.apis import KafkaApis
from kcore.server.metadata_cache import MetadataCache
from kcore.testing import open_cluster
from kcore.wire import from_wire, to_wire
from kcore.zk_client import ZooKeeperError
from kcore.zkdata import desanitized_entity_name, sanitized_entity_name

SHA256 = scram_admin.MECHANISM_TYPES["SCRAM-SHA-256"]
SHA512 = scram_admin.MECHANISM_TYPES["SCRAM-SHA-512"]
SALT = b"0123456789abcdef"
NOT_FOUND = errors.ResourceNotFoundError.code
UNACCEPTABLE = errors.UnacceptableCredentialError.code
UNSUPPORTED = errors.UnsupportedSaslMechanismError.code
DUPLICATE = errors.DuplicateResourceError.code


def upsertion(name, mechanism=SHA256, iterations=4096, password="secret"):
    mechanism_name = scram_admin.MECHANISM_NAMES.get(mechanism, "SCRAM-SHA-256")
    salted = salted_password(mechanism_name, password, SALT, 4096)
    return ScramCredentialUpsertion(name, mechanism, iterations, SALT, salted)


def alter(configs, upsertions=(), deletions=()):
    """The whole decision for `configs` (user -> configs): (results by user, writes)."""
    request = AlterUserScramCredentialsRequest(tuple(deletions), tuple(upsertions))
    plan = plan_alteration(request)
    alteration = apply_alteration(request, plan, {u: configs.get(u, {}) for u in plan.users})
    results = {}
    for result in (*plan.refused, *alteration.refused):
        assert result.user not in results  # one result per user
        results[result.user] = (result.error_code, result.error_message)
    return results, alteration.writes


def stored(mechanism="SCRAM-SHA-256", password="secret", iterations=4096):
    return credential_from_password(mechanism, password, SALT, iterations).to_config()


# -- alter: the decisions ----------------------------------------------------------------


def test_an_upsertion_stores_kafkas_form_and_keeps_the_users_other_configs():
    configs = {"alice": {"SCRAM-SHA-512": stored("SCRAM-SHA-512"), "producer_byte_rate": "1024"}}
    results, writes = alter(configs, [upsertion("alice", SHA256, 8192, "alice-secret")])
    assert results == {}
    new = writes["alice"]
    assert new["SCRAM-SHA-512"] == configs["alice"]["SCRAM-SHA-512"]
    assert new["producer_byte_rate"] == "1024"
    # Derived from the salt and salted password as Kafka's ScramFormatter derives them:
    # the same credential as one made from the password itself.
    salted = salted_password("SCRAM-SHA-256", "alice-secret", SALT, 8192)
    request = ScramCredentialUpsertion("alice", SHA256, 8192, SALT, salted)
    _, writes = alter(configs, [request])
    expected = credential_from_password("SCRAM-SHA-256", "alice-secret", SALT, 8192)
    assert ScramCredential.from_config(writes["alice"]["SCRAM-SHA-256"]) == expected
    assert writes["alice"]["SCRAM-SHA-256"].endswith(",iterations=8192")


def test_a_deletion_removes_only_its_mechanism():
    configs = {"alice": {"SCRAM-SHA-256": stored(), "SCRAM-SHA-512": stored("SCRAM-SHA-512")}}
    results, writes = alter(configs, deletions=[ScramCredentialDeletion("alice", SHA512)])
    assert results == {}
    assert writes == {"alice": {"SCRAM-SHA-256": configs["alice"]["SCRAM-SHA-256"]}}


@pytest.mark.parametrize(
    ("iterations", "refusal"),
    [
        (4095, (UNACCEPTABLE, "Too few iterations")),
        (4096, None),
        (16384, None),
        (16385, (UNACCEPTABLE, "Too many iterations")),
    ],
)
def test_iterations_outside_kafkas_bounds_are_unacceptable(iterations, refusal):
    results, writes = alter({}, [upsertion("alice", iterations=iterations)])
    if refusal is None:
        assert results == {} and list(writes) == ["alice"]
    else:
        assert results == {"alice": refusal} and writes == {}


def test_unknown_mechanisms_empty_names_and_duplicates_are_refused_per_user():
    results, writes = alter(
        {"carol": {"SCRAM-SHA-256": stored()}},
        upsertions=[
            upsertion("alice", mechanism=3),
            upsertion("", SHA256),
            upsertion("bob"),
            upsertion("bob", SHA512),  # another mechanism of the same user: fine
            upsertion("carol", SHA512),
            upsertion("dave"),
        ],
        deletions=[
            ScramCredentialDeletion("erin", 0),
            ScramCredentialDeletion("carol", SHA512),  # upserted and deleted: twice
        ],
    )
    assert results == {
        "alice": (UNSUPPORTED, "Unknown SCRAM mechanism"),
        "": (UNACCEPTABLE, "Username must not be empty"),
        "erin": (UNSUPPORTED, "Unknown SCRAM mechanism"),
        "carol": (DUPLICATE, "A user credential cannot be altered twice in the same request"),
    }
    assert sorted(writes) == ["bob", "dave"]
    assert sorted(writes["bob"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_one_illegal_alteration_refuses_all_of_its_users_alterations():
    results, writes = alter({}, [upsertion("alice"), upsertion("alice", SHA512, iterations=100)])
    assert results == {"alice": (UNACCEPTABLE, "Too few iterations")}
    assert writes == {}
    # The user's configs are not even read.
    request = AlterUserScramCredentialsRequest((), (upsertion("alice", iterations=1),))
    assert plan_alteration(request).users == ()


def test_deleting_a_credential_that_does_not_exist_refuses_the_user_not_the_others():
    configs = {"alice": {"SCRAM-SHA-256": stored()}}
    results, writes = alter(
        configs,
        upsertions=[upsertion("alice", SHA256), upsertion("carol")],
        deletions=[ScramCredentialDeletion("alice", SHA512)],
    )
    assert results == {
        "alice": (NOT_FOUND, "Attempt to delete a user credential that does not exist")
    }
    assert list(writes) == ["carol"]  # and nothing of alice's, its upsertion included
    # Deleting one mechanism and adding the other in one request.
    results, writes = alter(
        configs,
        upsertions=[upsertion("alice", SHA512)],
        deletions=[ScramCredentialDeletion("alice", SHA256)],
    )
    assert results == {} and list(writes["alice"]) == ["SCRAM-SHA-512"]


def test_an_error_for_the_whole_request_names_every_user_once():
    request = AlterUserScramCredentialsRequest(
        (ScramCredentialDeletion("bob", SHA256),), (upsertion("alice"), upsertion("bob", SHA512))
    )
    response = scram_admin.answer_all(request, errors.NotControllerError, "moved")
    assert [(r.user, r.error_code) for r in response.results] == [
        ("alice", errors.NotControllerError.code),
        ("bob", errors.NotControllerError.code),
    ]


# -- describe ----------------------------------------------------------------------------


def test_describing_everyone_lists_users_with_credentials_sorted():
    configs = {
        "carol": {"producer_byte_rate": "10"},  # no credential: left out
        "bob": {"SCRAM-SHA-512": stored("SCRAM-SHA-512", iterations=8192)},
        "alice": {"SCRAM-SHA-512": stored("SCRAM-SHA-512"), "SCRAM-SHA-256": stored()},
    }
    assert users_to_read(None) is None and users_to_read([]) is None
    for users in (None, []):
        response = describe_credentials(users, configs)
        assert response.error_code == 0
        assert response.results == (
            DescribeUserScramCredentialsResult(
                "alice",
                credential_infos=(CredentialInfo(SHA256, 4096), CredentialInfo(SHA512, 4096)),
            ),
            DescribeUserScramCredentialsResult(
                "bob", credential_infos=(CredentialInfo(SHA512, 8192),)
            ),
        )


def test_describing_named_users_answers_each_once_in_the_order_named():
    users = ["bob", "zed", "", "alice", "zed"]
    assert users_to_read(users) == ["bob", "alice"]  # the others are answered unread
    configs = {"bob": {"SCRAM-SHA-256": stored()}, "alice": {"SCRAM-SHA-256": "garbage"}}
    response = describe_credentials(users, configs)
    assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
        ("bob", 0, None),
        (
            "zed",
            DUPLICATE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: zed",
        ),
        ("", NOT_FOUND, "Username must not be empty"),
        # A credential Kafka could not parse either.
        ("alice", errors.UnknownServerError.code, scram_admin.UNEXPECTED_ERROR),
    ]
    response = describe_credentials(["nobody"], {"nobody": {}})
    assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
        ("nobody", NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody")
    ]


# -- the client's side -------------------------------------------------------------------


def test_the_client_sends_a_salted_password_never_the_password():
    alterations = [
        UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", 8192, "alice-secret"),
        UserScramCredentialUpsertion("bob", "SCRAM-SHA-256", 4096, "bob-secret", salt=SALT),
        UserScramCredentialDeletion("bob", "SCRAM-SHA-512"),
        UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", 4096, ""),
        UserScramCredentialUpsertion("dave", "SCRAM-SHA-1", 4096, "x"),
        UserScramCredentialDeletion("", "SCRAM-SHA-256"),
        # Refused by the broker, which says why; not worth hashing here.
        UserScramCredentialUpsertion("erin", "SCRAM-SHA-256", 10**9, "x"),
    ]
    request, refused = alteration_request(alterations, random.Random(3))
    assert {user: (type(e), str(e)) for user, e in refused.items()} == {
        "carol": (errors.UnacceptableCredentialError, "Password must not be empty"),
        "dave": (errors.UnsupportedSaslMechanismError, "Unknown SCRAM mechanism"),
        "": (errors.UnacceptableCredentialError, "Username must not be empty"),
    }
    assert request.deletions == (ScramCredentialDeletion("bob", SHA512),)
    alice, bob, erin = request.upsertions
    assert (alice.name, alice.mechanism, alice.iterations, len(alice.salt)) == (
        "alice", SHA512, 8192, 32,
    )  # fmt: skip
    assert alice.salted_password == salted_password(
        "SCRAM-SHA-512", "alice-secret", alice.salt, 8192
    )
    assert (bob.salt, bob.mechanism) == (SALT, SHA256)
    assert (erin.iterations, erin.salted_password) == (10**9, b"")
    assert b"secret" not in repr(to_wire(request)).encode()
    assert "secret" not in repr(alterations) and "secret" not in repr(request)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_what_the_client_sends_authenticates_its_password_once_stored(mechanism):
    upserted = UserScramCredentialUpsertion("alice", mechanism, 4096, "alice-secret")
    request, _ = alteration_request([upserted], random.Random(5))
    _, writes = alter({}, request.upsertions)
    credential = ScramCredential.from_config(writes["alice"][mechanism])

    def log_in(password: str) -> bool:
        server = ScramServer(mechanism, {"alice": credential}.get, random.Random(1))
        client = ScramClient(mechanism, "alice", password, random.Random(2))
        try:
            final = client.evaluate(server.evaluate(client.first()))
            client.evaluate(server.evaluate(final))
        except ScramError:  # a wrong proof
            return False
        return server.complete and client.complete

    assert log_in("alice-secret")
    assert not log_in("another")


def test_user_names_are_sanitized_in_zookeeper_as_kafka_sanitizes_them():
    for name, znode in [
        ("alice", "alice"),
        ("a.b-c_d", "a.b-c_d"),
        ("User:CN=a b,O=x", "User%3ACN%3Da%20b%2CO%3Dx"),
        ("star*", "star%2A"),
        ("tilde~", "tilde%7E"),
        ("名前", "%E5%90%8D%E5%89%8D"),
    ]:
        assert sanitized_entity_name(name) == znode
        assert desanitized_entity_name(znode) == name


# -- the handler's I/O (KafkaApis, its collaborators stood in for) -------------------------


@attrs.define
class _Controller:
    is_active: bool = True


@attrs.define
class _UserConfigs:
    """The ZooKeeper client's user config methods over a dict; a write for a user in
    `failing` raises as a lost connection would."""

    configs: dict[str, dict[str, str]] = attrs.field(factory=dict)
    failing: set[str] = attrs.field(factory=set)
    written: list[str] = attrs.field(factory=list)

    async def read_user_configs(self, user):
        return dict(self.configs.get(user, {}))

    async def get_all_user_configs(self):
        return {user: dict(c) for user, c in self.configs.items()}

    async def change_user_configs(self, user, configs):
        if user in self.failing:
            raise ZooKeeperError("connection lost")
        self.configs[user] = dict(configs)
        self.written.append(user)


def _apis(zk_client, controller):
    return KafkaApis(
        KafkaConfig.from_dict({"broker.id": 1, "zookeeper.connect": "unused:1"}),
        None,
        MetadataCache(1),
        zk_client,
        controller,
        broker_epoch=lambda: 1,
        cluster_id="cluster",
        rng=random.Random(0),
        new_topic_id=lambda: "topic-id",
    )


async def _alter_through_handler(apis, request):
    wire = transport.Request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 1, "t", to_wire(request), None)
    answer = await apis.handle_alter_user_scram_credentials(wire)
    return {
        r.user: (r.error_code, r.error_message)
        for r in from_wire(AlterUserScramCredentialsResponse, answer).results
    }


async def test_only_the_controller_alters_and_each_user_answers_for_its_own_write():
    zk_client = _UserConfigs(failing={"bob"})
    request = AlterUserScramCredentialsRequest(
        (ScramCredentialDeletion("carol", SHA256),),
        (upsertion("alice"), upsertion("bob"), upsertion("dave", iterations=1)),
    )
    not_controller = await _alter_through_handler(_apis(zk_client, _Controller(False)), request)
    assert not_controller == {
        user: (errors.NotControllerError.code, scram_admin.NOT_CONTROLLER)
        for user in ("alice", "bob", "carol", "dave")
    }
    assert zk_client.written == []

    answered = await _alter_through_handler(_apis(zk_client, _Controller()), request)
    assert answered == {
        "dave": (UNACCEPTABLE, "Too few iterations"),
        "carol": (NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "bob": (errors.UnknownServerError.code, scram_admin.UNEXPECTED_ERROR),
        "alice": (0, None),
    }
    assert zk_client.written == ["alice"]
    assert list(zk_client.configs["alice"]) == ["SCRAM-SHA-256"]


# -- kcore's Admin against a simulated SASL cluster ---------------------------------------

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
# Every broker's one listener takes SASL (PLAIN for the brokers and the operator, SCRAM for
# the users created here).
SASL_CLUSTER = {
    "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}
OPERATOR = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "admin",
    "sasl_plain_password": "admin-secret",
}


_logins = itertools.count()


async def _logs_in(cluster, broker_id, mechanism, user, password) -> bool:
    """Whether broker `broker_id` lets `user` in (a client that knows only that broker)."""
    endpoint = cluster.brokers[broker_id].endpoints[0]
    login = next(_logins)
    client = Admin(
        [(endpoint.host, endpoint.port)],
        network=cluster.network.node(f"login-{login}"),
        rng=random.Random(login),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )
    try:
        async with client:
            await client.list_topics()
    except errors.KafkaError:
        return False
    return True


async def _everywhere(cluster, mechanism, user, password, *, accepted: bool) -> None:
    """Waits until every broker (each applies the change notification on its own) accepts
    the login, or refuses it."""

    async def agreed() -> bool:
        for broker_id in sorted(cluster.brokers):
            if await _logs_in(cluster, broker_id, mechanism, user, password) != accepted:
                return False
        return True

    with trio.fail_after(30):  # virtual seconds
        while not await agreed():
            await trio.sleep(0.05)


async def test_a_user_the_admin_creates_logs_in_on_every_broker_until_deleted(autojump_clock):
    async with open_cluster(
        brokers=3, seed=7, logs="memory", broker_config=SASL_CLUSTER
    ) as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin(**OPERATOR) as admin:
            assert await admin.describe_user_scram_credentials() == {}
            await admin.alter_user_scram_credentials(
                [
                    UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", 8192, "alice-secret"),
                    UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", 4096, "alice-512"),
                    UserScramCredentialUpsertion("bob@example.com", "SCRAM-SHA-512", 4096, "b"),
                ]
            )
            await _everywhere(cluster, "SCRAM-SHA-256", "alice", "alice-secret", accepted=True)
            await _everywhere(cluster, "SCRAM-SHA-512", "alice", "alice-512", accepted=True)
            assert not await _logs_in(cluster, 1, "SCRAM-SHA-256", "alice", "alice-512")
            # Stored under its sanitized name (below), found by the name a client logs in with.
            await _everywhere(cluster, "SCRAM-SHA-512", "bob@example.com", "b", accepted=True)

            assert await admin.describe_user_scram_credentials() == {
                "alice": (
                    ScramCredentialInfo("SCRAM-SHA-256", 8192),
                    ScramCredentialInfo("SCRAM-SHA-512", 4096),
                ),
                "bob@example.com": (ScramCredentialInfo("SCRAM-SHA-512", 4096),),
            }
            assert list(await admin.describe_user_scram_credentials(["bob@example.com"])) == [
                "bob@example.com"
            ]
            with pytest.raises(errors.ResourceNotFoundError, match="user 'nobody': Attempt"):
                await admin.describe_user_scram_credentials(["alice", "nobody"])
            # Where and as Kafka stores them: the name sanitized, the credential in
            # ScramCredentialUtils' form, a change notification naming the user.
            assert sorted(await cluster.zk.get_children("/config/users")) == [
                "alice", "bob%40example.com",
            ]  # fmt: skip
            data, _ = await cluster.zk.get("/config/users/alice")
            stored_configs = json.loads(data)["config"]
            assert sorted(stored_configs) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
            assert ScramCredential.from_config(stored_configs["SCRAM-SHA-256"]).iterations == 8192
            assert b"alice-secret" not in data
            changes = await cluster.zk.get_children("/config/changes")
            notices = [
                json.loads((await cluster.zk.get(f"/config/changes/{c}"))[0]) for c in changes
            ]
            assert {"version": 2, "entity_path": "users/bob%40example.com"} in notices

            # A new password replaces the old one.
            await admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", 4096, "alice-new")]
            )
            await _everywhere(cluster, "SCRAM-SHA-256", "alice", "alice-new", accepted=True)
            assert not await _logs_in(cluster, 2, "SCRAM-SHA-256", "alice", "alice-secret")

            await admin.alter_user_scram_credentials(
                [UserScramCredentialDeletion("alice", "SCRAM-SHA-256")]
            )
            await _everywhere(cluster, "SCRAM-SHA-256", "alice", "alice-new", accepted=False)
            assert await _logs_in(cluster, 3, "SCRAM-SHA-512", "alice", "alice-512")
            described = await admin.describe_user_scram_credentials(["alice"])
            assert described == {"alice": (ScramCredentialInfo("SCRAM-SHA-512", 4096),)}


async def test_the_admin_raises_the_first_failed_users_error_after_the_others_applied(
    autojump_clock,
):
    async with open_cluster(brokers=3, seed=8, logs="memory") as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin() as admin:
            with pytest.raises(
                errors.ResourceNotFoundError,
                match="user 'alice': Attempt to delete a user credential that does not exist",
            ):
                await admin.alter_user_scram_credentials(
                    [
                        UserScramCredentialUpsertion("carol", "SCRAM-SHA-512", 4096, "c"),
                        UserScramCredentialDeletion("alice", "SCRAM-SHA-256"),
                        UserScramCredentialUpsertion("dave", "SCRAM-SHA-512", 100, "d"),
                    ]
                )
            assert list(await admin.describe_user_scram_credentials()) == ["carol"]
            with pytest.raises(errors.UnacceptableCredentialError, match="user 'dave': Too few"):
                await admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion("dave", "SCRAM-SHA-512", 100, "d")]
                )
            with pytest.raises(errors.UnsupportedSaslMechanismError, match="user 'erin'"):
                await admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion("erin", "SCRAM-SHA-1", 4096, "e")]
                )
            with pytest.raises(errors.DuplicateResourceError, match="user 'carol'"):
                await admin.alter_user_scram_credentials(
                    [
                        UserScramCredentialUpsertion("carol", "SCRAM-SHA-512", 4096, "c"),
                        UserScramCredentialDeletion("carol", "SCRAM-SHA-512"),
                    ]
                )
            assert list(await admin.describe_user_scram_credentials()) == ["carol"]
