"""`kcore zookeeper-shell`: Kafka's zookeeper-shell.sh, ZooKeeper 3.8's zkCli (its commands,
its output, its errors) on zkstub's client.

    kcore zookeeper-shell HOST:PORT[/chroot] [-timeout MS] [COMMAND ARGS...]

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

The shell itself is zkstub's (`zkstub.cli.ZkCli`: a ZooKeeper tool needs nothing of Kafka,
and `python -m zkstub shell` shares its output); this module is its door into `kcore`.
"""

from __future__ import annotations

import argparse
import sys

from kcore.tools._tool import Tool, ToolError, UsageError
from kcore.tools.console_producer import StandardInput
from zkstub.cli import CliError, ShellError, ZkCli, split_shell_options

DEFAULT_TIMEOUT_MS = 30000  # zkCli's -timeout


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
        metavar="[-timeout MS] COMMAND ARGS",
        help="zkCli's -timeout (session timeout in ms, default 30000), then a command to run "
        "and exit (`help` lists them); without a command, commands are read from standard "
        "input, one per line",
    )
    # argparse counts a REMAINDER positional among the missing ones when the server is
    # missing too ("required: HOST:PORT, COMMAND"); it may be empty.
    command.required = False


def _timeout_and_command(args: argparse.Namespace) -> tuple[float, list[str]]:
    try:
        options, command = split_shell_options(args.command)
    except CliError as error:
        raise UsageError(str(error)) from None
    text = options.get("timeout", str(DEFAULT_TIMEOUT_MS))
    if not text.isdigit() or int(text) <= 0:
        raise UsageError(f"-timeout expects a number of milliseconds above 0, got {text!r}")
    return int(text) / 1000, command


def check(args: argparse.Namespace) -> None:
    _timeout_and_command(args)


async def run(args: argparse.Namespace) -> int:
    session_timeout, command = _timeout_and_command(args)
    shell = ZkCli(
        args.server,
        session_timeout,
        out=sys.stdout,
        err=sys.stderr,
        program="kcore zookeeper-shell",
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
