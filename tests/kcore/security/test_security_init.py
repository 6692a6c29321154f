"""`kcore security init`: the files it writes (keys the user's alone, settings a broker
loads), its refusal to overwrite an earlier run without `--force`, and the proof: the
commands it prints start a real secured cluster (zkstub with only a TLS port, a broker with
SSL between brokers, SASL_SSL for clients, the authorizer and ZooKeeper ACLs), on which the
admin, logging in with admin.properties, creates a topic, produces and consumes with
kcore's console tools, and reads ZooKeeper with zookeeper-client.properties."""

from __future__ import annotations

import re
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kcore.cli import main
from kcore.config import KafkaConfig
from kcore.security.tls import BrokerTls, principal
from kcore.tools import console_consumer, console_producer, topics, zookeeper_shell
from kcore.tools.security_init import Layout, start_commands

from ..tools.test_tools import stdin  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(120)
REPO_ROOT = Path(__file__).resolve().parents[3]


README_DIR = "/tmp/kcore-secure"


def _readme_blocks(language: str) -> list[str]:
    """The fenced `language` blocks of the README's "A secure cluster (TLS)" section."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n### A secure cluster (TLS)\n")
    section = text[start : text.index("\n### ", start + 1)]
    return re.findall(rf"^```{language}\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)


def test_the_readme_shows_the_commands_kcore_security_init_prints():
    commands = _readme_blocks("sh")[0].replace("\\\n", " ").splitlines()
    commands = [" ".join(line.split()) for line in commands]
    assert commands[0] == f"kcore security init --dir {README_DIR} --brokers 3"
    assert commands[1:] == start_commands(Layout(Path(README_DIR), 3))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_writes_private_keys_loadable_settings_and_never_overwrites_unasked(tmp_path, capsys):
    directory = tmp_path / "secrets"
    assert main(["security", "init", "--dir", str(directory), "--brokers", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote 10 files in {directory}" in printed
    assert f"kcore broker --config {directory}/broker-2.properties" in printed
    for name in ("ca-key.pem", "broker-1.pem", "client.pem", "broker-1.properties",
                 "admin.properties", "zookeeper-client.properties"):  # fmt: skip
        assert _mode(directory / name) == 0o600, name
    assert _mode(directory / "ca.pem") == 0o644

    config = KafkaConfig.from_properties_file(directory / "broker-2.properties")
    tls = BrokerTls.from_config(config.values)  # every key and certificate loads
    assert set(tls.listener_contexts) == {"SSL", "SASL_SSL"}
    assert tls.inter_broker_context is not None and tls.zookeeper_context is not None
    assert config.get("super.users") == (
        "User:CN=broker-1;User:CN=broker-2;User:admin;User:CN=admin"
    )
    # The keystore: the key, then the broker's certificate, then the CA's.
    leaf = x509.load_pem_x509_certificates((directory / "broker-2.pem").read_bytes())[0]
    assert principal(leaf.public_bytes(serialization.Encoding.DER)) == "User:CN=broker-2"

    before = (directory / "ca.pem").read_bytes()
    assert main(["security", "init", "--dir", str(directory), "--brokers", "2"]) == 1
    refused = capsys.readouterr().err
    assert "already holds ca.pem" in refused and "--force" in refused
    assert (directory / "ca.pem").read_bytes() == before
    assert main(["security", "init", "--dir", str(directory), "--force"]) == 0
    assert (directory / "ca.pem").read_bytes() != before  # a new CA
    assert (directory / "broker-3.properties").exists()


def _free_ports() -> tuple[int, int]:
    """A free port P with P + 100 free too (a broker's two listeners), and another one."""
    while True:
        with socket.socket() as first, socket.socket() as second, socket.socket() as third:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            if port + 100 > 65535:
                continue
            try:
                second.bind(("127.0.0.1", port + 100))
            except OSError:
                continue
            third.bind(("127.0.0.1", 0))
            return port, third.getsockname()[1]


async def _first_line(process: trio.Process) -> str:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await process.stdout.receive_some(1)
        assert chunk, f"{process.args} exited after printing {line!r}"
        line += chunk
    return line.decode().strip()


async def test_the_printed_commands_start_a_secured_cluster_the_admin_can_use(
    tmp_path,
    capsys,
    stdin,  # noqa: F811
):
    directory = tmp_path / "cluster"
    base_port, zookeeper_port = _free_ports()
    flags = ["--dir", str(directory), "--brokers", "1", "--base-port", str(base_port),
             "--zookeeper-port", str(zookeeper_port)]  # fmt: skip
    assert main(["security", "init", *flags]) == 0
    printed = capsys.readouterr().out
    start = printed.split("each in its own terminal):\n")[1].split("\n\n")[0].splitlines()
    commands = [shlex.split(line) for line in start]
    assert [c[:2] for c in commands] == [["python", "-m"], ["kcore", "broker"]]
    # Run as printed: `python` and `kcore` are this environment's.
    programs = [[sys.executable, *commands[0][1:]],
                [sys.executable, "-m", "kcore.cli", *commands[1][1:]]]  # fmt: skip
    admin = str(directory / "admin.properties")
    bootstrap = f"127.0.0.1:{base_port}"
    async with trio.open_nursery() as nursery:
        processes = []
        try:
            for program in programs:
                process = await trio.lowlevel.open_process(
                    program, stdout=subprocess.PIPE, cwd=REPO_ROOT
                )
                processes.append(process)
                with trio.fail_after(60):
                    line = await _first_line(process)
                assert " on 127.0.0.1:" in line, line
            with trio.fail_after(60):
                create = ["--bootstrap-server", bootstrap, "--command-config", admin,
                          "--create", "--topic", "orders", "--replication-factor", "1"]  # fmt: skip
                assert await topics.TOOL.main(create) == 0
                stdin(b"first\nsecond\n")
                produce = ["--bootstrap-server", bootstrap, "--topic", "orders",
                           "--producer.config", admin]  # fmt: skip
                assert await console_producer.TOOL.main(produce) == 0
                consume = ["--bootstrap-server", bootstrap, "--topic", "orders",
                           "--consumer.config", admin, "--from-beginning",
                           "--max-messages", "2"]  # fmt: skip
                assert await console_consumer.TOOL.main(consume) == 0
                assert capsys.readouterr().out.endswith("first\nsecond\n")
                # Without admin.properties the client speaks neither TLS nor SASL.
                unsecured = ["--bootstrap-server", bootstrap, "--list"]
                assert await topics.TOOL.main(unsecured) == 1
                assert "no broker answered" in capsys.readouterr().err
                # The README's client settings, as written but for the directory: mutual
                # TLS on the brokers' SSL listener, as the admin's certificate.
                (client_tls,) = _readme_blocks("properties")[:1]
                client_file = tmp_path / "client-tls.properties"
                client_file.write_text(client_tls.replace(README_DIR, str(directory)))
                by_certificate = ["--bootstrap-server", f"127.0.0.1:{base_port + 100}",
                                  "--command-config", str(client_file), "--list"]  # fmt: skip
                assert await topics.TOOL.main(by_certificate) == 0
                assert capsys.readouterr().out == "orders\n"
                zk_flags = [f"127.0.0.1:{zookeeper_port}", "-zk-tls-config-file",
                            str(directory / "zookeeper-client.properties")]  # fmt: skip
                assert await zookeeper_shell.TOOL.main([*zk_flags, "ls", "/brokers/ids"]) == 0
                assert capsys.readouterr().out.endswith("[1]\n")
        finally:
            for process in reversed(processes):
                process.terminate()
                with trio.move_on_after(30):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
            nursery.cancel_scope.cancel()
