"""`kcore zookeeper-shell`: Kafka's zookeeper-shell.sh, ZooKeeper 3.8's zkCli (its commands,
its output, its errors) on zkstub's client.

    kcore zookeeper-shell HOST:PORT[/chroot] [-zk-tls-config-file FILE] [-timeout MS]
        [COMMAND ARGS...]

With a command it runs that one and exits with its status (`kcore zookeeper-shell
127.0.0.1:2181 get /controller`); without, it reads commands from standard input, one per
line, until the input ends or `quit`, with zkCli's prompt (`[zk: 127.0.0.1:2181(CONNECTED)
0] `) when standard input is a terminal and none when it is not (`echo "ls /brokers/ids" |
kcore zookeeper-shell ...`). `kcore zookeeper-shell H:P help` lists the commands.

The connect string is any of `zookeeper.connect`'s forms. A bare `HOST:PORT` speaks
ZooKeeper's own protocol, as Kafka's shell does, so it reaches a real ZooKeeper and zkstub
alike (zkstub's port speaks both); `msgpack://HOST:PORT` speaks zkstub's own protocol and
`zookeeper://HOST:PORT` goes through kazoo (which has no addWatch, removewatches,
getEphemerals, getAllChildrenNumber or getAcl). `-timeout` is zkCli's: the session timeout,
also how long the shell waits for a session (default 30000); the shell gives up sooner,
naming why, once every host has refused or failed to answer.

`-zk-tls-config-file FILE` is Kafka's: a properties file whose `zookeeper.ssl.*` and
`zookeeper.clientCnxnSocket` settings, as a broker's (`zookeeper.ssl.client.enable=true`,
PEM key and trust stores), make the connection TLS, to a ZooKeeper's secureClientPort; its
other settings are ignored, as Kafka's tool ignores them, but for kcore's
`kcore.zookeeper.digest.credential` (the brokers' ZooKeeper identity, `user:password`),
which the shell adds as `addauth digest` before any command, so an operator can change the
znodes of a cluster with `zookeeper.set.acl=true` in one command. A broker's own
server.properties is such a file. (`addauth digest user:password` typed in the shell works
too, for the rest of that session.)

The shell itself is zkstub's (`zkstub.cli.ZkCli`: a ZooKeeper tool needs nothing of Kafka,
and `python -m zkstub shell` shares its output); this module is its door into `kcore`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import transport
from kcore.config import ConfigError, KafkaConfig, Password, parse_properties
from kcore.security.tls import zookeeper_context
from kcore.tools._tool import Tool, ToolError, UsageError
from kcore.tools.console_producer import StandardInput
from zkstub.cli import CliError, ShellError, ZkCli, split_shell_options

DEFAULT_TIMEOUT_MS = 30000  # zkCli's -timeout
TLS_CONFIG_FILE = "-zk-tls-config-file"  # Kafka's ZooKeeperMainWithTlsSupportForKafka's
# What the file may set (Kafka's ZkSslConfigToSystemPropertyMap, and kcore's digest).
_ZOOKEEPER_TLS_PREFIX = "zookeeper.ssl."
_FILE_SETTINGS = ("zookeeper.clientCnxnSocket", "kcore.zookeeper.digest.credential")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "server",
        metavar="HOST:PORT[/chroot]",
        help="the ZooKeeper (or zkstub) to connect to: host:port[,host:port...][/chroot], "
        "optionally jute://, msgpack:// or zookeeper://",
    )
    command = parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="[-zk-tls-config-file FILE] [-timeout MS] COMMAND ARGS",
        help="Kafka's -zk-tls-config-file (zookeeper.ssl.* settings: TLS to a "
        "secureClientPort; kcore.zookeeper.digest.credential: addauth digest), zkCli's "
        "-timeout (session timeout in ms, default 30000), then a command to run and exit "
        "(`help` lists them); without a command, commands are read from standard input, "
        "one per line",
    )
    # argparse counts a REMAINDER positional among the missing ones when the server is
    # missing too ("required: HOST:PORT, COMMAND"); it may be empty.
    command.required = False


def _tls_config_file(words: list[str]) -> tuple[str | None, list[str]]:
    """-zk-tls-config-file FILE, wherever it is among the words (Kafka's tool looks for it
    so), and the other words."""
    if TLS_CONFIG_FILE not in words:
        return None, words
    index = words.index(TLS_CONFIG_FILE)
    if index == len(words) - 1:
        raise UsageError(f"Error: no filename provided with option {TLS_CONFIG_FILE}")
    return words[index + 1], words[:index] + words[index + 2 :]


def _timeout_and_command(args: argparse.Namespace) -> tuple[float, list[str]]:
    _, words = _tls_config_file(list(args.command))
    try:
        options, command = split_shell_options(words)
    except CliError as error:
        raise UsageError(str(error)) from None
    text = options.get("timeout", str(DEFAULT_TIMEOUT_MS))
    if not text.isdigit() or int(text) <= 0:
        raise UsageError(f"-timeout expects a number of milliseconds above 0, got {text!r}")
    return int(text) / 1000, command


def check(args: argparse.Namespace) -> None:
    _timeout_and_command(args)


def connection_settings(path: str, server: str) -> tuple[Any, tuple[tuple[str, bytes], ...]]:
    """The network (in TLS or not) and the authentication a -zk-tls-config-file asks for,
    checked as a broker's settings are (what kcore cannot honour is refused, naming it)."""
    try:
        with open(path, encoding="utf-8") as file:
            settings = parse_properties(file.read())
    except OSError as error:
        raise ToolError(f"cannot read {TLS_CONFIG_FILE} {path}: {error.strerror}") from None
    kept = {
        key: value
        for key, value in settings.items()
        if key.startswith(_ZOOKEEPER_TLS_PREFIX) or key in _FILE_SETTINGS
    }
    try:
        # Checked as a broker's: the same names, defaults and refusals.
        config = KafkaConfig.from_dict({"broker.id": 0, "zookeeper.connect": server, **kept})
        context = zookeeper_context(config.values)
    except ConfigError as error:
        raise ToolError(f"{path}: {error}") from None
    network = transport.TcpNetwork()
    credential = config.get("kcore.zookeeper.digest.credential")
    auth = ()
    if isinstance(credential, Password):
        auth = (("digest", credential.value.encode()),)
    return (network if context is None else network.with_tls(context)), auth


async def run(args: argparse.Namespace) -> int:
    session_timeout, command = _timeout_and_command(args)
    config_file, _ = _tls_config_file(list(args.command))
    network, auth = None, ()
    if config_file is not None:
        network, auth = connection_settings(config_file, args.server)
    shell = ZkCli(
        args.server,
        session_timeout,
        out=sys.stdout,
        err=sys.stderr,
        program="kcore zookeeper-shell",
        network=network,
        auth=auth,
    )
    try:
        if command:
            return await shell.run_command(command)
        try:
            descriptor = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            raise ToolError("no command given, and standard input cannot be read") from None
        return await shell.run_lines(StandardInput(descriptor).read_line, prompt=sys.stdin.isatty())
    except ShellError as error:
        raise ToolError(str(error)) from None


TOOL = Tool(
    "zookeeper-shell",
    "Browse and change ZooKeeper's znodes (Kafka's zookeeper-shell.sh, ZooKeeper's zkCli).",
    add_arguments,
    run,
    check,
)
