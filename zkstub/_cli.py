"""`python -m zkstub serve|shell ...`: run a server, or one zkCli-style command.

    python -m zkstub serve --port 2181 [--host 127.0.0.1] [--data-dir D] [--tick-time 2.0]
        [--min-session-timeout S] [--max-session-timeout S] [--max-client-cnxns 60]
        [--sessionless-timeout 10] [--jute-maxbuffer 1048575] [--max-outbound-bytes 16777216]
        [--4lw-commands-whitelist srvr,ruok] [--truncate-corrupt-log]
    python -m zkstub shell HOST:PORT[/chroot] ls|get|stat|create|set|delete PATH [DATA]

The shell prints as ZooKeeper's zkCli.sh does (`stat` one field per line, `cZxid = 0x...`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from functools import partial

import trio

import transport
from zkstub._client import connect
from zkstub._errors import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZkError,
)
from zkstub._server import open_server
from zkstub._storage import CorruptDataError
from zkstub._types import Stat

COMMANDS = ("ls", "get", "stat", "create", "set", "delete")


def format_time(ms: int) -> str:
    """Java's Date.toString, in UTC."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(ms / 1000))


def format_stat(stat: Stat) -> str:
    return "\n".join([
        f"cZxid = 0x{stat.czxid:x}",
        f"ctime = {format_time(stat.ctime)}",
        f"mZxid = 0x{stat.mzxid:x}",
        f"mtime = {format_time(stat.mtime)}",
        f"pZxid = 0x{stat.pzxid:x}",
        f"cversion = {stat.cversion}",
        f"dataVersion = {stat.version}",
        f"aclVersion = {stat.aversion}",
        f"ephemeralOwner = 0x{stat.ephemeralOwner:x}",
        f"dataLength = {stat.dataLength}",
        f"numChildren = {stat.numChildren}",
    ])  # fmt: skip


def format_error(error: ZkError, path: str) -> str:
    """zkCli's messages for the usual errors."""
    match error:
        case NoNodeError():
            return f"Node does not exist: {path}"
        case NodeExistsError():
            return f"Node already exists: {path}"
        case NotEmptyError():
            return f"Node not empty: {path}"
        case BadVersionError():
            return f"version No is not valid : {path}"
        case NoChildrenForEphemeralsError():
            return "Ephemerals cannot have children: " + path
        case BadArgumentsError():
            return f"Invalid path: {error}"
    return f"{type(error).__name__}: {error}"


async def run_command(zk, command: str, path: str, data: str | None) -> str | None:
    """One shell command; returns what to print (None for nothing)."""
    encoded = None if data is None else data.encode()
    match command:
        case "ls":
            return "[" + ", ".join(await zk.get_children(path)) + "]"
        case "get":
            value, _ = await zk.get(path)
            return "null" if value is None else value.decode(errors="replace")
        case "stat":
            stat = await zk.exists(path)
            if stat is None:
                raise NoNodeError(path=path)
            return format_stat(stat)
        case "create":
            return f"Created {await zk.create(path, encoded)}"
        case "set":
            await zk.set(path, b"" if encoded is None else encoded)
            return None
        case "delete":
            await zk.delete(path)
            return None
    raise ValueError(f"unknown command {command!r}; expected one of {', '.join(COMMANDS)}")


async def shell(connect_string: str, command: str, path: str, data: str | None) -> int:
    async with connect(connect_string, session_timeout=10.0) as zk:
        try:
            output = await run_command(zk, command, path, data)
        except ZkError as error:
            print(format_error(error, path), file=sys.stderr)
            return 1
    if output is not None:
        print(output)
    return 0


async def serve(
    host: str, port: int, data_dir: str | None, tick_time: float,
    truncate_corrupt_log: bool = False, **limits: float | None,
) -> None:  # fmt: skip
    """`limits`: open_server's min/max_session_timeout, max_client_cnxns,
    sessionless_timeout, max_outbound_bytes, jute_maxbuffer and four_letter_words."""
    async with open_server(
        network=transport.TcpNetwork(), address=(host, port), data_dir=data_dir,
        tick_time=tick_time, seed=time.time_ns(),  # distinct session ids per run
        truncate_corrupt_log=truncate_corrupt_log, **limits,
    ) as server:  # fmt: skip
        print(f"zkstub serving on {server.address[0]}:{server.address[1]}", flush=True)
        await trio.sleep_forever()


def _positive(kind: type, *, zero: bool = False):
    """An argparse type: a finite number above 0 (or 0 too, for "no limit")."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (value > 0 or (zero and value == 0)) or value != value or value == float("inf"):
            bound = ">= 0" if zero else "> 0"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text!r}")
        return value

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m zkstub")
    commands = parser.add_subparsers(dest="mode", required=True)
    serve_parser = commands.add_parser("serve", help="run a zkstub server over TCP")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=2181)
    serve_parser.add_argument("--data-dir", default=None)
    serve_parser.add_argument("--tick-time", type=_positive(float), default=2.0)
    # ZooKeeper's settings of the same names; session timeouts in seconds.
    serve_parser.add_argument("--min-session-timeout", type=_positive(float), default=None)
    serve_parser.add_argument("--max-session-timeout", type=_positive(float), default=None)
    serve_parser.add_argument("--max-client-cnxns", type=_positive(int, zero=True), default=60)
    serve_parser.add_argument("--sessionless-timeout", type=_positive(float), default=10.0)
    serve_parser.add_argument("--jute-maxbuffer", type=_positive(int), default=0xFFFFF)
    serve_parser.add_argument("--max-outbound-bytes", type=_positive(int), default=16 * 1024 * 1024)
    serve_parser.add_argument(
        "--4lw-commands-whitelist", dest="four_letter_words", default=None,
        help="ZooKeeper's 4lw.commands.whitelist: the four-letter words answered on the "
        "client port, comma-separated, * for all (default srvr)",
    )  # fmt: skip
    serve_parser.add_argument(
        "--truncate-corrupt-log", action="store_true",
        help="start even if a transaction log is corrupt, dropping it from the damage on "
        "(acknowledged writes after the damage are lost)",
    )  # fmt: skip
    shell_parser = commands.add_parser("shell", help="run one zkCli-style command")
    shell_parser.add_argument("server", help="HOST:PORT[/chroot]")
    shell_parser.add_argument("command", choices=COMMANDS)
    shell_parser.add_argument("path")
    shell_parser.add_argument("data", nargs="?", default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mode == "serve":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        try:
            limits = {
                name: getattr(args, name)
                for name in (
                    "min_session_timeout", "max_session_timeout", "max_client_cnxns",
                    "sessionless_timeout", "max_outbound_bytes", "jute_maxbuffer",
                    "four_letter_words",
                )
            }  # fmt: skip
            trio.run(
                partial(serve, truncate_corrupt_log=args.truncate_corrupt_log, **limits),
                args.host, args.port, args.data_dir, args.tick_time,
            )  # fmt: skip
        except KeyboardInterrupt:
            pass
        except (CorruptDataError, ValueError) as error:
            print(f"zkstub: {error}", file=sys.stderr)
            return 1
        return 0
    return trio.run(shell, args.server, args.command, args.path, args.data)
