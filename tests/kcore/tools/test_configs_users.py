"""`kcore configs --entity-type users` end to end, as Kafka 3.5's kafka-configs.sh over
--bootstrap-server: SCRAM credentials added, described and deleted with Kafka's flags and
output, against a 2-broker cluster over real TCP whose SASL listener then lets the user in,
and no longer once the credential is deleted. What kcore does not have (user quotas, user
defaults) is refused, saying so; no password is ever printed."""

from __future__ import annotations

import pytest
import trio

import kcore
from kcore import errors
from kcore.tools import configs
from kcore.tools._tool import ToolError

pytestmark = pytest.mark.timeout(120)

# Operators and the tool on PLAINTEXT, SCRAM users on SASL_PLAINTEXT.
TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
}


@pytest.fixture
async def cluster(tmp_path):
    async with kcore.open_cluster(
        brokers=2, data_dir=tmp_path, broker_config=TWO_LISTENERS
    ) as cluster:
        await cluster.wait_for_controller()
        yield cluster


def _users(cluster, *argv):
    return configs.TOOL.main(
        ["--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "users", *argv]
    )


async def _logs_in(address: str, mechanism: str, user: str, password: str) -> bool:
    client = kcore.Admin(
        [address],
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
    """Waits until each broker's SASL listener accepts the login, or refuses it: every
    broker applies the change notification on its own."""
    addresses = [
        f"{e.host}:{e.port}"
        for _, broker in sorted(cluster.brokers.items())
        for e in broker.endpoints
        if e.listener_name == "SASL_PLAINTEXT"
    ]
    assert len(addresses) == 2
    with trio.fail_after(30):
        for address in addresses:
            while await _logs_in(address, mechanism, user, password) != accepted:
                await trio.sleep(0.05)


async def test_users_scram_credentials_added_described_and_deleted(cluster, capsys):
    added = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=a512]"
    assert await _users(cluster, "--entity-name", "alice", "--alter", "--add-config", added) == 0
    assert capsys.readouterr().out == "Completed updating config for user alice.\n"
    await _everywhere(cluster, "SCRAM-SHA-256", "alice", "alice-secret", accepted=True)
    await _everywhere(cluster, "SCRAM-SHA-512", "alice", "a512", accepted=True)

    assert await _users(cluster, "--entity-name", "alice", "--describe") == 0
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    bob = ["--entity-name", "bob", "--alter", "--add-config", "SCRAM-SHA-512=[password=b]"]
    assert await _users(cluster, *bob) == 0
    capsys.readouterr()
    assert await _users(cluster, "--describe") == 0  # every user, sorted
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096\n"
    )

    deleted = ["--entity-name", "alice", "--alter", "--delete-config", "SCRAM-SHA-256"]
    assert await _users(cluster, *deleted) == 0
    assert capsys.readouterr().out == "Completed updating config for user alice.\n"
    await _everywhere(cluster, "SCRAM-SHA-256", "alice", "alice-secret", accepted=False)
    await _everywhere(cluster, "SCRAM-SHA-512", "alice", "a512", accepted=True)
    assert await _users(cluster, "--entity-name", "alice", "--describe") == 0
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096\n"
    )
    # As in Kafka, a user without credentials is not listed.
    assert await _users(cluster, "--entity-name", "carol", "--describe") == 0
    assert capsys.readouterr().out == ""

    # The broker's refusals, one line each (exit status 1).
    assert await _users(cluster, *deleted) == 1
    assert capsys.readouterr().err == (
        "kcore configs: ResourceNotFoundError: user 'alice': Attempt to delete a user "
        "credential that does not exist\n"
    )
    many = "SCRAM-SHA-256=[iterations=16385,password=alice-secret]"
    assert await _users(cluster, "--entity-name", "alice", "--alter", "--add-config", many) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "kcore configs: UnacceptableCredentialError: user 'alice': Too many iterations\n"
    )
    assert "secret" not in captured.out + captured.err


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (
            ["--entity-name", "alice", "--alter", "--add-config", "producer_byte_rate=1024"],
            "Quota configs are not supported by kcore (it does not enforce quotas): "
            "producer_byte_rate; users take SCRAM credential configs (SCRAM-SHA-256, "
            "SCRAM-SHA-512)",
        ),
        (
            ["--entity-name", "alice", "--alter", "--delete-config", "retention.ms"],
            "Only quota and SCRAM credential configs can be deleted for 'users' using "
            "--bootstrap-server. Unexpected config names: retention.ms",
        ),
        (
            ["--entity-default", "--alter", "--add-config", "SCRAM-SHA-256=[password=x]"],
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
            "Credentials using --bootstrap-server.",
        ),
        (
            ["--entity-default", "--describe"],
            "--entity-default with users describes the default user quotas: kcore has no "
            "quotas (it does not enforce them)",
        ),
        (
            ["--entity-name", "alice", "--alter", "--add-config",
             "SCRAM-SHA-256=[iterations=1024,password=alice-secret]"],
            "Iterations 1024 is less than the minimum 4096 required for SCRAM-SHA-256",
        ),
        (
            ["--entity-name", "alice", "--alter", "--add-config",
             "SCRAM-SHA-256=[iterations=8192,pasword=alice-secret]"],
            "Invalid credential property SCRAM-SHA-256: expected "
            "SCRAM-SHA-256=[iterations=N,password=P] or SCRAM-SHA-256=[password=P]",
        ),
    ],
)  # fmt: skip
async def test_what_kcore_does_not_have_is_refused_before_asking_a_broker(argv, complaint, capsys):
    # Nothing listens there: each refusal comes before any request.
    argv = ["--bootstrap-server", "127.0.0.1:1", "--entity-type", "users", *argv]
    assert await configs.TOOL.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.err == f"kcore configs: {complaint}\n"
    assert "secret" not in captured.err


def test_add_config_reads_kafkas_credential_syntax():
    upsertions = configs.user_alterations(
        "alice", "SCRAM-SHA-256=[iterations=-1,password=p,w=1]", "SCRAM-SHA-512"
    )
    deletion, upsertion = upsertions
    assert (deletion.user, deletion.mechanism) == ("alice", "SCRAM-SHA-512")
    assert (upsertion.mechanism, upsertion.iterations, upsertion.password) == (
        "SCRAM-SHA-256", 4096, "p,w=1",
    )  # fmt: skip
    with pytest.raises(ToolError, match=r"^Invalid entity config"):
        configs.user_alterations("alice", "SCRAM-SHA-256=password=x", "")
