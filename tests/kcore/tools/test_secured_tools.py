"""The tools against a cluster with only a SASL_PLAINTEXT listener and the AclAuthorizer,
logging in as Kafka's tools do, with a client properties file (`--command-config`,
`--producer.config`, `--consumer.config`): an operator creates a topic and grants a user
the producer and consumer roles with `kcore acls`, the user produces and consumes with the
console tools, the grant is listed and removed (asking first, as Kafka does) and the
user's consumer is then refused at once. Without the file the tool cannot talk to the
cluster; a setting kcore cannot honour is refused naming it, never quoting a password."""

from __future__ import annotations

import io
import sys

import pytest

import kcore
from kcore.tools import acls, console_consumer, console_producer, topics
from kcore.tools._tool import ToolError, security_settings

from .test_tools import stdin  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(120)

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)
SASL_ONLY = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
    "group.initial.rebalance.delay.ms": 0,
}


def _client_properties(path, user: str) -> str:
    # As a Kafka operator writes it (client.properties in Kafka's security docs).
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="{user}" password="{user}-secret";\n'
    )
    return str(path)


@pytest.fixture
async def cluster(tmp_path):
    async with kcore.open_cluster(
        brokers=1, data_dir=tmp_path / "data", broker_config=SASL_ONLY
    ) as cluster:
        await cluster.wait_for_controller()
        yield cluster


async def test_tools_log_in_with_a_properties_file_and_acls_grant_and_revoke(
    cluster,
    tmp_path,
    capsys,
    stdin,  # noqa: F811
    monkeypatch,
):
    servers = ["--bootstrap-server", cluster.bootstrap_servers]
    admin = ["--command-config", _client_properties(tmp_path / "admin.properties", "admin")]
    alice = _client_properties(tmp_path / "alice.properties", "alice")
    create = ["--create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1"]
    assert await topics.TOOL.main([*servers, *admin, *create]) == 0
    assert capsys.readouterr().out == "Created topic orders.\n"

    grant = ["--add", "--allow-principal", "User:alice", "--producer", "--consumer",
             "--topic", "orders", "--group", "billing"]  # fmt: skip
    assert await acls.TOOL.main([*servers, *admin, *grant]) == 0
    topic = "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`"
    group = "`ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)`"
    topic_entries = (
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=CREATE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n"
    )
    group_entries = " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n"
    assert capsys.readouterr().out == (
        f"Adding ACLs for resource {topic}: \n{topic_entries}"
        f"Adding ACLs for resource {group}: \n{group_entries}"
        f"Current ACLs for resource {topic}: \n{topic_entries}"
        f"Current ACLs for resource {group}: \n{group_entries}"
    )

    # Alice produces and consumes in her group with the console tools.
    stdin(b"first\nsecond\n")
    produce = ["--topic", "orders", "--producer.config", alice]
    assert await console_producer.TOOL.main([*servers, *produce]) == 0
    consume = ["--topic", "orders", "--group", "billing", "--from-beginning",
               "--max-messages", "2", "--consumer.config", alice]  # fmt: skip
    assert await console_consumer.TOOL.main([*servers, *consume]) == 0
    captured = capsys.readouterr()
    assert captured.out == "first\nsecond\n"
    assert captured.err == "Processed a total of 2 messages\n"

    assert await acls.TOOL.main([*servers, *admin, "--list", "--principal", "User:alice"]) == 0
    assert capsys.readouterr().out == (
        "ACLs for principal `User:alice`\n"
        f"Current ACLs for resource {topic}: \n{topic_entries}"
        f"Current ACLs for resource {group}: \n{group_entries}"
    )

    # Removing asks first; "n" keeps the ACLs, "y" removes them.
    remove = [*servers, *admin, "--remove", "--topic", "orders"]
    question = f"Are you sure you want to delete all ACLs for resource filter {topic}? (y/n)\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert await acls.TOOL.main(remove) == 0
    assert (
        capsys.readouterr().out
        == question + f"Current ACLs for resource {topic}: \n{topic_entries}"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert await acls.TOOL.main(remove) == 1
    captured = capsys.readouterr()
    assert captured.out == question
    assert captured.err == (
        "kcore acls: no answer on standard input to the question above: nothing more removed "
        "(--force removes without asking)\n"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    assert await acls.TOOL.main(remove) == 0
    assert capsys.readouterr().out == question

    # Without Describe on the topic, her consumer is refused at once, not after a timeout.
    await _until_refused(servers, alice, capsys)
    assert (
        await acls.TOOL.main([*servers, *admin, "--remove", "--force", "--group", "billing"]) == 0
    )
    assert await acls.TOOL.main([*servers, *admin, "--list"]) == 0
    assert capsys.readouterr().out == ""

    # Without the file, the tool speaks plain Kafka to a SASL listener: refused.
    assert await acls.TOOL.main([*servers, "--list"]) == 1
    assert capsys.readouterr().err.startswith("kcore acls: ")


async def _until_refused(servers, properties, capsys) -> None:
    """Reads until the broker applied the removal (from its change notification)."""
    consume = ["--topic", "orders", "--from-beginning", "--max-messages", "1",
               "--consumer.config", properties]  # fmt: skip
    for _ in range(100):
        status = await console_consumer.TOOL.main([*servers, *consume])
        captured = capsys.readouterr()
        if status == 1:
            assert captured.err.startswith("kcore console-consumer: TopicAuthorizationFailedError")
            return
    raise AssertionError("alice's consumer was never refused")


@pytest.mark.parametrize(
    ("properties", "complaint"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
          "sasl.jaas.config": "x required;"},
         "sasl.mechanism=GSSAPI is not supported by kcore (supported: PLAIN, SCRAM-SHA-256, "
         "SCRAM-SHA-512)"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": "x required;"},
         "sasl.mechanism is not set, and Kafka's default, GSSAPI (Kerberos), is not supported "
         "by kcore: set sasl.mechanism to one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
          "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                              'required username="a" password="s3cret";'},
         "sasl.jaas.config names the login module "
         "org.apache.kafka.common.security.plain.PlainLoginModule; "
         "sasl.mechanism=SCRAM-SHA-256 takes "
         "org.apache.kafka.common.security.scram.ScramLoginModule"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
          "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                              'required username="a" password="s3cret'},
         "Invalid value for configuration sasl.jaas.config: a quoted value is not closed"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks",
          "ssl.truststore.password": "s3cret", "ssl.keystore.type": "JKS"},
         "ssl.truststore.password not supported by kcore's clients"),
        ({"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN"},
         "sasl.mechanism given with security.protocol=PLAINTEXT: set "
         "security.protocol=SASL_PLAINTEXT or SASL_SSL to authenticate with SASL"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent.pem"},
         "cannot load the PEM truststore /nonexistent.pem: no such file"),
        ({"security.protocol": "TLS"}, "security.protocol must be PLAINTEXT, SSL, "),
    ],
)  # fmt: skip
def test_settings_kcore_cannot_honour_are_refused_by_name(properties, complaint):
    with pytest.raises(ToolError) as refused:
        security_settings(properties, "--command-config")
    assert str(refused.value).startswith("--command-config: ")
    assert complaint in str(refused.value)
    assert "s3cret" not in str(refused.value)


def test_a_jaas_login_becomes_the_clients_sasl_settings():
    security, others = security_settings(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="p\\"w";',
            "request.timeout.ms": "5000",
        },
        "--command-config",
    )
    assert security == {
        "security_protocol": "sasl_plaintext",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 'p"w',
    }
    assert others == {"request.timeout.ms": "5000"}
