"""`python -m zkstub serve|shell ...`: run a server, or one zkCli-style command; and `ZkCli`,
ZooKeeper's own shell (zkCli.sh, ZooKeeperMain) over a zkstub client, which `kcore
zookeeper-shell` runs (Kafka's zookeeper-shell.sh).

    python -m zkstub serve --port 2181 [--host 127.0.0.1] [--data-dir D] [--tick-time 2.0]
        [--min-session-timeout S] [--max-session-timeout S] [--max-client-cnxns 60]
        [--sessionless-timeout 10] [--jute-maxbuffer 1048575] [--max-outbound-bytes 16777216]
        [--4lw-commands-whitelist srvr,ruok] [--super-digest super:BASE64SHA1]
        [--secure-port 2281 --ssl-keystore-location server.pem
         [--ssl-truststore-location ca.pem] [--ssl-client-auth need|want|none] ...]
        [--truncate-corrupt-log] [--http HOST:PORT]
        [--log-level [LOGGER=]LEVEL]... [--log-config FILE] [--log-format text|json]
    python -m zkstub shell HOST:PORT[/chroot] ls|get|stat|create|set|delete PATH [DATA]

Both shells print as ZooKeeper 3.8's zkCli.sh does (`stat` one field per line, `cZxid =
0x...`, `Node does not exist: /x`). What they print is built by the pure functions at the
top of this module; `ZkCli` only runs commands and waits.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TextIO

import attrs
import trio

import transport
from zkstub import _paths, log_config
from zkstub._acl import ACL, OPEN_ACL_UNSAFE, perms_from_letters
from zkstub._client import RpcLink, ZkClientImpl, connect, open_client
from zkstub._errors import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLossError,
    InvalidACLError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZkError,
)
from zkstub._jute_link import JuteLink
from zkstub._metrics_http import parse_address
from zkstub._server import open_server
from zkstub._storage import CorruptDataError
from zkstub._types import (
    ClientState,
    DeleteOp,
    EventType,
    Stat,
    WatchedEvent,
    WatcherType,
)
from zkstub.tls import CLIENT_AUTH, TlsSettings, TlsSettingsError

COMMANDS = ("ls", "get", "stat", "create", "set", "delete")  # `python -m zkstub shell`'s


# -- zkCli's text: pure functions -----------------------------------------------------------


def format_time(ms: int) -> str:
    """Java's Date.toString, in UTC."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(ms / 1000))


def format_stat(stat: Stat) -> str:
    """zkCli's StatPrinter."""
    return "\n".join([
        f"cZxid = 0x{stat.czxid:x}",
        f"ctime = {format_time(stat.ctime)}",
        f"mZxid = 0x{stat.mzxid:x}",
        f"mtime = {format_time(stat.mtime)}",
        f"pZxid = 0x{stat.pzxid:x}",
        f"cversion = {stat.cversion}",
        f"dataVersion = {stat.version}",
        f"aclVersion = {stat.aversion}",
        f"ephemeralOwner = 0x{stat.ephemeralOwner & 0xFFFFFFFFFFFFFFFF:x}",
        f"dataLength = {stat.dataLength}",
        f"numChildren = {stat.numChildren}",
    ])  # fmt: skip


# KeeperException.getCodeMessage: the words of "KeeperErrorCode = ... for /path".
_CODE_MESSAGES = {
    -1: "SystemError", -2: "RuntimeInconsistency", -3: "DataInconsistency",
    -4: "ConnectionLoss", -5: "MarshallingError", -6: "Unimplemented",
    -7: "OperationTimeout", -8: "BadArguments", -12: "Unknown session",
    -13: "NewConfigNoQuorum", -14: "ReconfigInProgress", -100: "APIError", -101: "NoNode",
    -102: "NoAuth", -103: "BadVersion", -108: "NoChildrenForEphemerals", -110: "NodeExists",
    -111: "Directory not empty", -112: "Session expired", -113: "Invalid callback",
    -114: "InvalidACL", -115: "AuthFailed", -118: "Session moved",
    -119: "Not a read-only call", -120: "Ephemeral node on local session",
    -121: "No such watcher", -122: "Request timeout", -123: "Reconfig is disabled",
    -124: "Session closed because client failed to authenticate",
    -125: "Quota has exceeded", -127: "Op throttled due to high load",
}  # fmt: skip


def format_error(error: ZkError, path: str) -> str:
    """zkCli's message for a failed call on `path` (CliWrapperException's)."""
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
        case InvalidACLError():
            return f"Acl is not valid : {path}"
        case NoAuthError():
            return f"Insufficient permission : {path}"
        case BadArgumentsError():
            return f"Arguments are not valid : {path}"
    words = _CODE_MESSAGES.get(error.code, f"Unknown error {error.code}")
    return f"KeeperErrorCode = {words} for {path}"


def java_path_error(path: str, *, sequential: bool = False) -> str | None:
    """What ZooKeeper's client says of a path it refuses before sending anything
    (PathUtils.validatePath: the message zkCli prints), or None for a valid path."""
    checked = path + "1" if sequential else path
    if not checked:
        return "Path length must be > 0"
    if checked[0] != "/":
        return "Path must start with / character"
    if len(checked) == 1:
        return None
    if checked[-1] == "/":
        return "Path must not end with / character"
    reason = None
    # Java walks UTF-16 code units: a character above U+FFFF is a surrogate pair.
    units = checked.encode("utf-16-be")
    chars = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    last = ord("/")
    for i in range(1, len(chars)):
        c = chars[i]
        if c == 0:
            reason = f"null character not allowed @{i}"
        elif c == ord("/") and last == ord("/"):
            reason = f"empty node name specified @{i}"
        elif c == ord(".") and last == ord("."):
            if chars[i - 2] == ord("/") and (i + 1 == len(chars) or chars[i + 1] == ord("/")):
                reason = f"relative paths not allowed @{i}"
        elif c == ord("."):
            if chars[i - 1] == ord("/") and (i + 1 == len(chars) or chars[i + 1] == ord("/")):
                reason = f"relative paths not allowed @{i}"
        elif 0 < c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or 0xFFF0 <= c:
            reason = f"invalid character @{i}"
        if reason is not None:
            return f'Invalid path string "{checked}" caused by {reason}'
        last = c
    return None


# ZooKeeperMain.MyCommandOptions: a word, or a quoted string whose quotes are dropped.
_ARGUMENT = re.compile(r"""\s*([^"']\S*|"[^"]*"|'[^']*')\s*""")
_QUOTED = re.compile(r"""^(['"])(.*)(\1)$""", re.DOTALL)


def split_command_line(line: str) -> list[str]:
    """A shell line as zkCli splits it: `create /a "hello world"` is three words."""
    words = []
    for match in _ARGUMENT.finditer(line):
        word = match.group(1)
        quoted = _QUOTED.match(word)
        words.append(quoted.group(2) if quoted else word)
    return words


_EVENT_TYPES = {
    EventType.CREATED: "NodeCreated",
    EventType.DELETED: "NodeDeleted",
    EventType.CHANGED: "NodeDataChanged",
    EventType.CHILD: "NodeChildrenChanged",
}
# The connection's own events (type None), as the Java client's watcher gets them.
_STATE_EVENTS = {
    ClientState.CONNECTED: "SyncConnected",
    ClientState.SUSPENDED: "Disconnected",
    ClientState.EXPIRED: "Expired",
    ClientState.CLOSED: "Closed",
}
# ZooKeeper.getState() as the prompt shows it. zkstub's client renews an expired session
# itself (Kafka's way), so EXPIRED is a moment of reconnecting, not the end.
_PROMPT_STATES = {
    ClientState.CONNECTING: "CONNECTING",
    ClientState.CONNECTED: "CONNECTED",
    ClientState.SUSPENDED: "CONNECTING",
    ClientState.EXPIRED: "CONNECTING",
    ClientState.CLOSED: "CLOSED",
}


def format_watched_event(state: str, event_type: str, path: str | None) -> str:
    """What zkCli's watcher prints of an event (ZooKeeperMain.printMessage puts a blank
    line before each of its two lines)."""
    path_text = "null" if path is None else path
    return f"\nWATCHER::\n\nWatchedEvent state:{state} type:{event_type} path:{path_text}"


def _jute_string(text: str | None) -> str:
    """A string as jute's ToStringOutputArchive writes it (a record's toString)."""
    if text is None:
        return ""
    escapes = {"\0": "%00", "\n": "%0A", "\r": "%0D", ",": "%2C", "}": "%7D", "%": "%25"}
    return "'" + "".join(escapes.get(c, c) for c in text)


def format_acl(scheme: str | None, identity: str | None, perms: int) -> str:
    """One ACL as zkCli's getAcl prints it: the Id record's toString (which ends in a
    newline), then `: ` and the permission letters."""
    letters = "".join(
        letter for bit, letter in zip((4, 8, 1, 2, 16), "cdrwa", strict=True) if perms & bit
    )
    return f"{_jute_string(scheme)},{_jute_string(identity)}\n: {letters}"


class CliError(Exception):
    """A command that failed: zkCli prints the message on standard error and the shell's
    exit status becomes `exit_code` (1, or 127 for a command that does not exist)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parse_options(
    words: Sequence[str], flags: str = "", valued: str = ""
) -> tuple[dict[str, str | bool], list[str]]:
    """A command's words as Apache Commons CLI's DefaultParser reads them for zkCli: the
    one-letter options (`flags` alone, `valued` with a value: `-v 3` or `-v3`, flags joined
    as `-es`) anywhere among the arguments; a negative number and `-` are arguments; `--`
    ends the options. Returns (options, arguments); the command's name is the first
    argument, as in zkCli."""
    options: dict[str, str | bool] = {}
    arguments: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--":
            arguments.extend(words[index:])
            break
        if not word.startswith("-") or word == "-" or _is_number(word):
            arguments.append(word)
            continue
        letters = word[1:]
        if letters[0] in valued:
            if len(letters) > 1:
                options[letters[0]] = letters[1:]
            elif index < len(words):
                options[letters[0]] = words[index]
                index += 1
            else:
                raise CliError(
                    "org.apache.commons.cli.MissingArgumentException: "
                    f"Missing argument for option: {letters[0]}"
                )
        elif all(letter in flags for letter in letters):
            options.update(dict.fromkeys(letters, True))
        else:
            raise CliError(
                f"org.apache.commons.cli.UnrecognizedOptionException: Unrecognized option: {word}"
            )
    return options, arguments


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _int_option(options: dict[str, str | bool], letter: str, default: int) -> int:
    value = options.get(letter)
    if value is None:
        return default
    try:
        return int(str(value))
    except ValueError:
        raise CliError(f"-{letter} argument must be an int value") from None


ADD_WATCH_MODES = ("PERSISTENT", "PERSISTENT_RECURSIVE")

# Each command's usage as zkCli lists it (`help`, and a command given wrong arguments).
USAGES = {
    "addauth": "scheme auth",
    "addWatch": "[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE]"
    " - default is PERSISTENT_RECURSIVE",
    "close": "",
    "connect": "host:port",
    "create": "[-s] [-e] [-c] path [data] [acl]",
    "delete": "[-v version] path",
    "deleteall": "path [-b batch size]",
    "get": "[-s] [-w] path",
    "getAcl": "[-s] path",
    "getAllChildrenNumber": "path",
    "getEphemerals": "path",
    "history": "",
    "ls": "[-s] [-w] [-R] path",
    "printwatches": "on|off",
    "quit": "",
    "redo": "cmdno",
    "removewatches": "path [-c|-d|-a] [-l]",
    "set": "[-s] [-v version] path data",
    "setAcl": "[-s] [-v version] [-R] path acl",
    "stat": "[-w] path",
    "sync": "path",
}


def usage_text(program: str) -> str:
    """ZooKeeperMain.usage: how to start the shell, then each command, sorted as Java's
    String order sorts them (capitals first)."""
    lines = [f"{program} host:port[/chroot] [-timeout ms] cmd args"]
    lines += [f"\t{name} {USAGES[name]}" for name in sorted(USAGES)]
    return "\n".join(lines)


def split_shell_options(words: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """ZooKeeperMain.parseOptions: the shell's own options (`-timeout MS`) before the
    command; the first other word starts the command. Unknown options are skipped, as
    zkCli skips them."""
    options: dict[str, str] = {}
    index = 0
    while index < len(words) and words[index].startswith("-"):
        option = words[index]
        index += 1
        if option == "-timeout":
            if index >= len(words):
                raise CliError(f"Error: no argument found for option {option}")
            options["timeout"] = words[index]
            index += 1
    return options, list(words[index:])


# -- sessions -------------------------------------------------------------------------------


class ShellError(Exception):
    """The shell cannot start or go on (no session could be opened): one line, exit 1."""


class _GivesUpWhenEveryHostFailed:
    """A link that stops the first session's retries once every host of the connect string
    has failed once, as a command-line client should (a server that is down answers at
    once; a long-lived client retries until its connect timeout, a shell user wants the
    reason). Reconnects after the first session retry as the client always does."""

    hosts: list[tuple[str, int]]
    failures: list[str]
    give_up: Callable[[], None] | None = None

    async def open(self, *args: Any) -> Any:
        try:
            opened = await super().open(*args)  # type: ignore[misc]
        except ConnectionLossError as error:
            if self.give_up is not None:
                self.failures.append(str(error))
                if len(self.failures) >= len(self.hosts):
                    self.give_up()
            raise
        self.give_up = None
        return opened


class _ShellJuteLink(_GivesUpWhenEveryHostFailed, JuteLink):
    pass


class _ShellRpcLink(_GivesUpWhenEveryHostFailed, RpcLink):
    pass


SCHEMES = ("jute", "msgpack", "zookeeper")


def split_scheme(server: str, default: str) -> tuple[str, str]:
    """`jute://h:p/c` -> ("jute", "h:p/c"); a connect string without one takes `default`."""
    scheme, separator, rest = server.partition("://")
    if not separator:
        return default, server
    if scheme not in SCHEMES:
        raise ShellError(f"unknown scheme {scheme}:// in {server} (known: {', '.join(SCHEMES)})")
    return scheme, rest


@contextlib.asynccontextmanager
async def open_session(
    server: str, *, session_timeout: float, network: Any = None, default_scheme: str = "jute"
) -> AsyncIterator[Any]:
    """A zkstub client for the shell: `jute://` speaks ZooKeeper's protocol (to a real
    ZooKeeper or to zkstub), `msgpack://` zkstub's own, `zookeeper://` goes through kazoo;
    a bare `host:port[/chroot]` takes `default_scheme`. ShellError, naming why, when no
    session opens within `session_timeout` or every host failed."""
    scheme, rest = split_scheme(server, default_scheme)
    entered = False
    if scheme == "zookeeper":
        try:
            async with connect(
                server, session_timeout=session_timeout, connect_timeout=session_timeout
            ) as client:
                entered = True
                yield client
        except ZkError as error:
            if entered:
                raise
            raise ShellError(_no_session(rest, str(error))) from None
        return
    try:
        hosts, chroot = _paths.split_connect_string(rest)
    except BadArgumentsError as error:
        raise ShellError(str(error)) from None
    network = network if network is not None else transport.TcpNetwork()
    link: Any
    if scheme == "jute":
        link = _ShellJuteLink(network, hosts)
    else:
        link = _ShellRpcLink(network, hosts, nursery=None)  # type: ignore[arg-type]
    link.failures = []
    with trio.CancelScope() as giving_up:
        link.give_up = giving_up.cancel
        try:
            async with open_client(
                link,
                session_timeout=session_timeout,
                chroot=chroot,
                connect_timeout=session_timeout,
            ) as client:
                entered = True
                yield client
        except ConnectionLossError as error:
            if entered:
                raise
            reason = link.failures[-1] if link.failures else str(error)
            raise ShellError(_no_session(rest, reason)) from None
    if giving_up.cancelled_caught and not entered:
        raise ShellError(_no_session(rest, link.failures[-1]))


def _no_session(where: str, reason: str) -> str:
    """One line: the layers below each name the host again (`cannot connect to h:p: cannot
    connect to h:p: ...`); said once is enough."""
    parts = [f"no ZooKeeper session at {where}", *reason.split(": ")]
    kept = [part for index, part in enumerate(parts) if index == 0 or part != parts[index - 1]]
    return ": ".join(kept)


Acl = tuple[tuple[str | None, str | None, int], ...]  # (scheme, id, perms) per entry


async def read_acl(zk: Any, path: str) -> tuple[Acl, Stat]:
    """The node's ACL and Stat, as the server answers getACL."""
    acl, stat = await zk.get_acl(path)
    return tuple((entry.scheme, entry.id, entry.perms) for entry in acl), stat


# -- the shell ------------------------------------------------------------------------------


@attrs.define(eq=False)
class ZkCli:
    """ZooKeeper's zkCli (ZooKeeperMain) over a zkstub client: `run_command(words)` runs one
    command (`zookeeper-shell H:P ls /`), `run_lines(read_line)` a session of them, one per
    line. Watch events and the connection's own are printed as zkCli's watcher prints
    them. Each returns the exit status zkCli would: that of the last command."""

    server: str
    session_timeout: float
    out: TextIO
    err: TextIO
    program: str = "zkCli"
    network: Any = None  # in TLS for a secure client port (`transport.TcpNetwork.with_tls`)
    default_scheme: str = "jute"
    # (scheme, credential) added on every session before any command (zkCli's addauth,
    # given once for the whole run: an operator's digest on a cluster with ACLs).
    auth: tuple[tuple[str, bytes], ...] = ()
    client: Any = None
    history: dict[int, str] = attrs.field(factory=dict)
    command_count: int = 0
    print_watches: bool = True
    exit_code: int = 0
    _connection: contextlib.AsyncExitStack | None = None
    _quit: bool = False

    # -- printing ---------------------------------------------------------------------------

    def _print(self, text: str, *, error: bool = False) -> None:
        stream = self.err if error else self.out
        stream.write(text + "\n")
        stream.flush()

    def _on_event(self, event: WatchedEvent) -> None:
        """The watcher of every -w command and addWatch: zkCli's default watcher."""
        if self.print_watches:
            self._print(format_watched_event("SyncConnected", _EVENT_TYPES[event.type],
                                             event.path))  # fmt: skip

    def _on_state(self, state: ClientState) -> None:
        name = _STATE_EVENTS.get(state)
        if name is not None and self.print_watches:
            self._print(format_watched_event(name, "None", None))

    def prompt(self) -> str:
        state = "CLOSED" if self.client is None else _PROMPT_STATES[self.client.state]
        return f"[zk: {self.server}({state}) {self.command_count}] "

    # -- the connection ---------------------------------------------------------------------

    async def connect(self, server: str) -> None:
        """Opens a session (closing the current one); ShellError if none opens."""
        await self.close()
        self.server = server
        # The session stays open across commands, until `close`: an exit stack holds it.
        stack = contextlib.AsyncExitStack()
        try:
            client = await stack.enter_async_context(
                open_session(server, session_timeout=self.session_timeout,
                             network=self.network, default_scheme=self.default_scheme)
            )  # fmt: skip
            for scheme, credential in self.auth:
                try:
                    await client.add_auth(scheme, credential)
                except ZkError as error:  # the credential is not in the message
                    raise ShellError(f"{server} refused {scheme} authentication: {error}") from None
        except BaseException:
            await stack.aclose()
            raise
        self.client, self._connection = client, stack
        self._on_state(ClientState.CONNECTED)  # (connected before the listener was added)
        client.add_listener(self._on_state)

    async def close(self, *, quietly: bool = False) -> None:
        """Closes the session (its ephemerals go); zkCli's watcher prints `state:Closed`
        unless `quietly` (the end of input or of a one-command run: zkCli just exits)."""
        client, stack = self.client, self._connection
        self.client, self._connection = None, None
        if stack is None:
            return
        if quietly:
            client.remove_listener(self._on_state)
        await stack.aclose()

    @property
    def connected(self) -> bool:
        return self.client is not None and self.client.state is not ClientState.CLOSED

    # -- running ----------------------------------------------------------------------------

    async def run_command(self, words: Sequence[str]) -> int:
        """`zookeeper-shell H:P cmd args`: connects, runs the command, closes."""
        self._print(f"Connecting to {self.server}")
        await self.connect(self.server)
        try:
            await self.process(list(words))
        finally:
            await self.close(quietly=True)
        return self.exit_code

    async def run_lines(
        self, read_line: Callable[[], Awaitable[bytes]], *, prompt: bool = False
    ) -> int:
        """Commands, one per line, until the input ends or `quit`; a prompt before each
        line when `prompt` (standard input is a terminal)."""
        self._print(f"Connecting to {self.server}")
        await self.connect(self.server)
        self._print("Welcome to ZooKeeper!")
        try:
            while not self._quit:
                if prompt:
                    self.out.write(self.prompt())
                    self.out.flush()
                line = await read_line()
                if not line:
                    break
                await self.execute_line(line.decode(errors="replace").rstrip("\r\n"))
        finally:
            await self.close(quietly=True)
        return self.exit_code

    async def execute_line(self, line: str) -> None:
        if not line:
            return
        words = split_command_line(line)
        self.history[self.command_count] = line
        await self.process(words)
        self.command_count += 1

    async def process(self, words: list[str]) -> None:
        """ZooKeeperMain.processCmd: runs one command; its failure is printed and sets the
        exit status."""
        try:
            await self._process(words)
            self.exit_code = 0
        except CliError as error:
            self.exit_code = error.exit_code
            self._print(str(error), error=True)

    async def _process(self, words: list[str]) -> None:
        if not words:
            self._print(usage_text(self.program), error=True)
            raise CliError("No command entered")
        command = words[0]
        if command == "help":
            self._print(usage_text(self.program))
            return
        if command not in USAGES:
            self._print(usage_text(self.program), error=True)
            raise CliError(f"Command not found: Command not found {command}", exit_code=127)
        match command:
            case "quit":
                await self.close()
                self._quit = True
                return
            case "redo" if len(words) >= 2:
                await self._redo(words[1])
            case "history":
                for index in range(max(self.command_count - 10, 0), self.command_count + 1):
                    self._print(f"{index} - {self.history.get(index, 'null')}")
            case "printwatches":
                if len(words) == 1:
                    self._print(f"printwatches is {'on' if self.print_watches else 'off'}")
                else:
                    self.print_watches = words[1] == "on"
            case "connect":
                try:
                    await self.connect(words[1] if len(words) >= 2 else self.server)
                except ShellError as error:
                    raise CliError(str(error)) from None
        # As zkCli: every command needs a live session, and says so after its own work.
        if not self.connected:
            self._print("Not connected")
            return
        if command == "close":  # (the session's nursery is not closed inside a time limit)
            await self.close()
            return
        run = getattr(self, f"_cmd_{command}", None)
        if run is None:
            return  # the shell's own commands above
        path = next((word for word in words[1:] if word.startswith("/")), "")
        with trio.move_on_after(self.session_timeout) as waiting, self._on(path):
            await run(words)
        if waiting.cancelled_caught:  # the Java client's requests fail after a lost link
            raise CliError(format_error(ConnectionLossError(), path))

    async def _redo(self, number: str) -> None:
        try:
            index = int(number, 0)
        except ValueError:
            raise CliError(f'For input string: "{number}"') from None
        if self.command_count <= index or index < 0:
            raise CliError("Command index out of range")
        line = self.history[index]
        words = split_command_line(line)
        if words[0] == "redo":
            raise CliError("No redoing redos")
        self.history[self.command_count] = line
        await self.process(words)

    # -- zkCli's commands (org.apache.zookeeper.cli.*Command) -------------------------------

    def _usage_error(self, command: str) -> CliError:
        return CliError(f"{command} {USAGES[command]}")

    @staticmethod
    def _checked_path(path: str, *, sequential: bool = False) -> str:
        problem = java_path_error(path, sequential=sequential)
        if problem is not None:
            raise CliError(problem)
        return path

    @contextlib.contextmanager
    def _on(self, path: str):
        """A call on `path`: a ZooKeeper error becomes zkCli's message."""
        try:
            yield
        except ZkError as error:
            raise CliError(format_error(error, path)) from None

    def _watch_form(self, words: list[str], name: str, usage: str) -> list[str]:
        """`ls|get|stat path watch`, zkCli 3.4's form: told to use -w, and taken as it."""
        self.err.write(f"'{name} path [watch]' has been deprecated. Please use '{usage}' "
                       "instead.\n")  # fmt: skip
        return [*words[:2], "-w", *words[3:]]

    async def _cmd_ls(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "swR")
        if len(arguments) > 2:
            words = self._watch_form(words, "ls", "ls [-w] path")
            options, arguments = parse_options(words, "swR")
        if len(arguments) < 2:
            raise self._usage_error("ls")
        path = self._checked_path(arguments[1])
        watch = self._on_event if options.get("w") else None
        with self._on(path):
            if options.get("R"):
                await self.client.get(path, watch=watch)
                self._print(path)
                await self._list_below(path, watch)
                return
            children = await self.client.get_children(path, watch=watch)
            stat = await self.client.exists(path) if options.get("s") else None
        self._print("[" + ", ".join(sorted(children)) + "]")
        if stat is not None:
            self._print(format_stat(stat))

    async def _list_below(self, path: str, watch: Callable[[WatchedEvent], None] | None) -> None:
        """ZKUtil.visitSubTreeDFS's order: a node's children, then each child's subtree
        (a node deleted meanwhile is skipped)."""
        try:
            children = sorted(await self.client.get_children(path, watch=watch))
        except NoNodeError:
            return
        below = [f"{path.rstrip('/')}/{child}" for child in children]
        for child_path in below:
            self._print(child_path)
        for child_path in below:
            await self._list_below(child_path, watch)

    async def _cmd_get(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "sw")
        if len(arguments) < 2:
            raise self._usage_error("get")
        if len(arguments) > 2:
            options, arguments = parse_options(
                self._watch_form(words, "get", "get [-s] [-w] path"), "sw"
            )
        path = self._checked_path(arguments[1])
        with self._on(path):
            data, stat = await self.client.get(path, watch=self._watch(options))
        self._print("null" if data is None else data.decode(errors="replace"))
        if options.get("s"):
            self._print(format_stat(stat))

    def _watch(self, options: dict[str, str | bool]) -> Callable[[WatchedEvent], None] | None:
        return self._on_event if options.get("w") else None

    async def _cmd_stat(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "w")
        if len(arguments) < 2:
            raise self._usage_error("stat")
        if len(arguments) > 2:
            options, arguments = parse_options(
                self._watch_form(words, "stat", "stat [-w] path"), "w"
            )
        path = self._checked_path(arguments[1])
        with self._on(path):
            stat = await self.client.exists(path, watch=self._watch(options))
        if stat is None:
            raise CliError(format_error(NoNodeError(), path))
        self._print(format_stat(stat))

    async def _cmd_create(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "esc")
        if len(arguments) < 2:
            raise self._usage_error("create")
        ephemeral, sequence = bool(options.get("e")), bool(options.get("s"))
        if options.get("c"):
            if ephemeral or sequence:
                raise CliError("-c cannot be combined with -s or -e. Containers cannot be "
                               "ephemeral or sequential.")  # fmt: skip
            raise CliError(f"Container nodes are not supported by this shell: {arguments[1]}")
        path = self._checked_path(arguments[1], sequential=sequence)
        data = arguments[2].encode() if len(arguments) > 2 else None
        with self._on(path):
            acl = self._parse_acl(arguments[3]) if len(arguments) > 3 else OPEN_ACL_UNSAFE
            created = await self.client.create(path, data, ephemeral=ephemeral, sequence=sequence,
                                               acl=acl)  # fmt: skip
        self._print(f"Created {created}", error=True)

    async def _cmd_set(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "s", "v")
        if len(arguments) < 3:
            raise self._usage_error("set")
        path = self._checked_path(arguments[1])
        version = _int_option(options, "v", -1)
        with self._on(path):
            stat = await self.client.set(path, arguments[2].encode(), version=version)
        if options.get("s"):
            self._print(format_stat(stat))

    async def _cmd_delete(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "", "v")
        if len(arguments) < 2:
            raise self._usage_error("delete")
        if len(arguments) > 2:
            self.err.write("'delete path [version]' has been deprecated. Please use "
                           "'delete [-v version] path' instead.\n")  # fmt: skip
        path = self._checked_path(arguments[1])
        version = _int_option(options, "v", -1)
        with self._on(path):
            await self.client.delete(path, version=version)

    async def _cmd_deleteall(self, words: list[str]) -> None:
        """ZKUtil.deleteRecursive: the subtree listed breadth first, then deleted leaves
        first in multis of at most -b nodes."""
        options, arguments = parse_options(words, "", "b")
        if len(arguments) < 2:
            raise self._usage_error("deleteall")
        batch_size = _int_option(options, "b", 1000)
        path = self._checked_path(arguments[1])
        tree, index = [path], 0
        with self._on(path):
            while index < len(tree):
                node = tree[index]
                index += 1
                for child in await self.client.get_children(node):
                    tree.append(f"{node.rstrip('/')}/{child}")
        failed = False
        ordered = tree[::-1]
        for start in range(0, len(ordered), max(batch_size, 1)):
            batch = ordered[start : start + max(batch_size, 1)]
            results = await self.client.multi([DeleteOp(node) for node in batch])
            if any(isinstance(result, ZkError) for result in results):
                failed = True
                break
        if failed:
            raise CliError("Failed to delete some node(s) in the subtree!")

    async def _cmd_getAcl(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "s")
        if len(arguments) < 2:
            raise self._usage_error("getAcl")
        path = self._checked_path(arguments[1])
        with self._on(path):
            acl, stat = await read_acl(self.client, path)
        for scheme, identity, perms in acl:
            self._print(format_acl(scheme, identity, perms))
        if options.get("s"):
            self._print(format_stat(stat))

    def _parse_acl(self, text: str) -> tuple[ACL, ...]:
        """zkCli's AclParser: comma-separated scheme:id:perms; an entry of another form, or
        a letter that is no permission, is reported and skipped."""
        entries = []
        for part in text.split(","):
            first, last = part.find(":"), part.rfind(":")
            if first == -1 or first == last:
                self.err.write(f"{part} does not have the form scheme:id:perm\n")
                continue
            perms = 0
            for letter in part[last + 1 :]:
                try:
                    perms |= perms_from_letters(letter)
                except ZkError:
                    self.err.write(f"Unknown perm type: {letter}\n")
            entries.append(ACL(perms, part[:first], part[first + 1 : last]))
        return tuple(entries)

    async def _cmd_addauth(self, words: list[str]) -> None:
        _, arguments = parse_options(words)
        if len(arguments) < 2:
            raise self._usage_error("addauth")
        credential = arguments[2].encode() if len(arguments) > 2 else b""
        await self.client.add_auth(arguments[1], credential)

    async def _cmd_setAcl(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "sR", "v")
        if len(arguments) < 3:
            raise self._usage_error("setAcl")
        path = self._checked_path(arguments[1])
        acl = self._parse_acl(arguments[2])
        version = _int_option(options, "v", -1)
        if not options.get("R"):
            with self._on(path):
                stat = await self.client.set_acl(path, acl, version)
            if options.get("s"):
                self._print(format_stat(stat))
            return
        # ZKUtil.visitSubTreeDFS: each node, then its children; a failure is printed
        # (its message, no newline) and the walk goes on.
        pending = [path]
        while pending:
            node = pending.pop()
            with self._on(node):
                children = await self.client.get_children(node)
            pending += [f"{node.rstrip('/')}/{child}" for child in sorted(children, reverse=True)]
            try:
                await self.client.set_acl(node, acl, version)
            except ZkError as error:
                self.out.write(format_error(error, node))

    async def _cmd_getEphemerals(self, words: list[str]) -> None:
        _, arguments = parse_options(words)
        path = self._checked_path(arguments[1]) if len(arguments) >= 2 else "/"
        with self._on(path):
            ephemerals = await self.client.get_ephemerals(path)
        self._print("[" + ", ".join(ephemerals) + "]")

    async def _cmd_getAllChildrenNumber(self, words: list[str]) -> None:
        _, arguments = parse_options(words)
        if len(arguments) < 2:
            raise self._usage_error("getAllChildrenNumber")
        path = self._checked_path(arguments[1])
        with self._on(path):
            self._print(str(await self.client.get_all_children_number(path)))

    async def _cmd_sync(self, words: list[str]) -> None:
        _, arguments = parse_options(words)
        if len(arguments) < 2:
            raise self._usage_error("sync")
        path = self._checked_path(arguments[1])
        try:
            await self.client.sync(path)
        except ZkError as error:
            self._print(f"Sync has failed. rc={error.code}")
            return
        self._print("Sync is OK")

    async def _cmd_addWatch(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "", "m")
        if len(arguments) != 2:
            raise self._usage_error("addWatch")
        mode = str(options.get("m", "PERSISTENT_RECURSIVE")).upper()
        if mode not in ADD_WATCH_MODES:
            raise self._usage_error("addWatch")
        path = self._checked_path(arguments[1])
        with self._on(path):
            await self.client.add_watch(
                path, self._on_event, recursive=mode == "PERSISTENT_RECURSIVE"
            )

    async def _cmd_removewatches(self, words: list[str]) -> None:
        options, arguments = parse_options(words, "cdal")
        if len(arguments) < 2:
            raise self._usage_error("removewatches")
        kind = WatcherType.ANY
        if options.get("c"):
            kind = WatcherType.CHILDREN
        elif options.get("d"):
            kind = WatcherType.DATA
        path = self._checked_path(arguments[1])
        held = _watch_tables_holding(self.client, path)
        with self._on(path):
            await self.client.remove_watches(path, kind)
        removed = held - _watch_tables_holding(self.client, path)
        # The Java client tells the watchers it drops itself (zkstub's client does not).
        for table, event_type in _WATCH_REMOVED_EVENTS:
            if table in removed and self.print_watches:
                self._print(format_watched_event("SyncConnected", event_type, path))


# ZKWatchManager.removeWatcher's events, by the client table the watch was in.
_WATCH_REMOVED_EVENTS = (
    ("_child_watches", "ChildWatchRemoved"),
    ("_data_watches", "DataWatchRemoved"),
    ("_persistent_watches", "PersistentWatchRemoved"),
    ("_recursive_watches", "PersistentWatchRemoved"),
)


def _watch_tables_holding(client: Any, path: str) -> set[str]:
    """Which of zkstub's client watch tables hold a watch on `path` (none for kazoo's)."""
    if not isinstance(client, ZkClientImpl):
        return set()
    return {table for table, _ in _WATCH_REMOVED_EVENTS if getattr(client, table).get(path)}


# -- `python -m zkstub shell`: one command ---------------------------------------------------


async def run_command(zk, command: str, path: str, data: str | None) -> str | None:
    """One shell command; returns what to print (None for nothing)."""
    problem = java_path_error(path)
    if problem is not None:
        raise BadArgumentsError(problem, path=path)
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
    """`python -m zkstub shell`: a bare connect string speaks zkstub's own protocol."""
    try:
        async with open_session(
            connect_string, session_timeout=10.0, default_scheme="msgpack"
        ) as zk:
            try:
                output = await run_command(zk, command, path, data)
            except BadArgumentsError as error:
                print(error, file=sys.stderr)
                return 1
            except ZkError as error:
                print(format_error(error, path), file=sys.stderr)
                return 1
    except ShellError as error:
        print(f"zkstub shell: {error}", file=sys.stderr)
        return 1
    if output is not None:
        print(output)
    return 0


# -- `python -m zkstub serve` ----------------------------------------------------------------


async def serve(
    host: str, port: int | None, data_dir: str | None, tick_time: float,
    truncate_corrupt_log: bool = False, http: tuple[str, int] | None = None,
    tls: ssl.SSLContext | None = None, secure_port: int | None = None,
    **limits: float | None,
) -> None:  # fmt: skip
    """`limits`: open_server's min/max_session_timeout, max_client_cnxns,
    sessionless_timeout, max_outbound_bytes, jute_maxbuffer, four_letter_words and
    super_digest. `http`:
    where to serve `/metrics` (ZooKeeper's Prometheus names), None for nowhere. `tls` and
    `secure_port`: ZooKeeper's secureClientPort; `port` None: no plain port."""
    async with open_server(
        network=transport.TcpNetwork(), address=(host, port or 0), data_dir=data_dir,
        tick_time=tick_time, seed=time.time_ns(),  # distinct session ids per run
        truncate_corrupt_log=truncate_corrupt_log, tls=tls,
        secure_address=(host, secure_port or 0), plaintext=port is not None, **limits,
    ) as server:  # fmt: skip
        if server.address is not None:
            print(f"zkstub serving on {server.address[0]}:{server.address[1]}", flush=True)
        if server.secure_address is not None:
            host, bound = server.secure_address
            print(f"zkstub serving TLS on {host}:{bound}", flush=True)
        async with trio.open_nursery() as nursery:
            if http is not None:
                bound = await nursery.start(server.serve_metrics, *http)
                print(f"zkstub http on {bound[0]}:{bound[1]}", flush=True)
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


def _http_address(text: str) -> tuple[str, int]:
    try:
        return parse_address(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """ZooKeeper's secure client port and its ssl.* settings (`zkstub.tls`), PEM only."""
    group = parser.add_argument_group(
        "TLS (ZooKeeper's secureClientPort and ssl.* settings, PEM key material)"
    )
    group.add_argument(
        "--secure-port", type=int, default=None, metavar="PORT",
        help="secureClientPort: serve the same tree in TLS on this port too (0 picks one)",
    )  # fmt: skip
    group.add_argument(
        "--ssl-keystore-location", default=None, metavar="FILE",
        help="ssl.keyStore.location: a PEM file with the private key and its certificate chain",
    )  # fmt: skip
    group.add_argument(
        "--ssl-keystore-password-path", default=None, metavar="FILE",
        help="ssl.keyStore.passwordPath: a file holding the password of an encrypted key",
    )  # fmt: skip
    group.add_argument("--ssl-keystore-type", default=None, help="ssl.keyStore.type: PEM")
    group.add_argument(
        "--ssl-truststore-location", default=None, metavar="FILE",
        help="ssl.trustStore.location: PEM certificates of the CAs clients' certificates are "
        "checked against (default: the system's)",
    )  # fmt: skip
    group.add_argument("--ssl-truststore-type", default=None, help="ssl.trustStore.type: PEM")
    group.add_argument(
        "--ssl-client-auth", default="need", choices=tuple(CLIENT_AUTH),
        help="ssl.clientAuth: must a client present a trusted certificate (need, "
        "ZooKeeper's default), may it (want), or not (none)",
    )  # fmt: skip
    group.add_argument("--ssl-protocol", default="TLSv1.2", help="ssl.protocol (TLSv1.2)")
    group.add_argument(
        "--ssl-enabled-protocols", default="TLSv1.2,TLSv1.3",
        help="ssl.enabledProtocols (zkstub's default TLSv1.2,TLSv1.3; ZooKeeper's is "
        "ssl.protocol alone)",
    )  # fmt: skip


_TLS_OPTIONS = (
    "ssl_keystore_location", "ssl_keystore_password_path", "ssl_keystore_type",
    "ssl_truststore_location", "ssl_truststore_type",
)  # fmt: skip


def server_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The secure client port's context from `serve`'s flags, None without --secure-port;
    TlsSettingsError naming what cannot be used."""
    if args.secure_port is None:
        given = [name for name in _TLS_OPTIONS if getattr(args, name) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise TlsSettingsError(f"{flag} is set but --secure-port is not: nothing would use it")
        return None
    password = None
    if args.ssl_keystore_password_path is not None:
        try:
            with open(args.ssl_keystore_password_path, encoding="utf-8") as file:
                password = file.read().rstrip("\r\n")
        except OSError as error:
            raise TlsSettingsError(
                f"cannot read ssl.keyStore.passwordPath {args.ssl_keystore_password_path}: "
                f"{error.strerror}"
            ) from None
    return TlsSettings(
        keystore_location=args.ssl_keystore_location,
        keystore_password=password,
        keystore_type=args.ssl_keystore_type,
        truststore_location=args.ssl_truststore_location,
        truststore_type=args.ssl_truststore_type,
        client_auth=args.ssl_client_auth,
        protocol=args.ssl_protocol,
        enabled_protocols=tuple(p.strip() for p in args.ssl_enabled_protocols.split(",") if p),
    ).server_context()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m zkstub")
    commands = parser.add_subparsers(dest="mode", required=True)
    serve_parser = commands.add_parser("serve", help="run a zkstub server over TCP")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument(
        "--port", type=int, default=None,
        help="ZooKeeper's clientPort (0 picks a free one); default 2181, or none when "
        "--secure-port is given alone",
    )  # fmt: skip
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
        "--super-digest", default=None, metavar="super:BASE64SHA1",
        help="ZooKeeper's zookeeper.DigestAuthenticationProvider.superDigest: a client "
        "that adds digest auth super:PASSWORD whose digest this is passes every ACL "
        "(python -c \"import zkstub; print(zkstub.digest('super:PASSWORD'))\")",
    )  # fmt: skip
    _add_tls_arguments(serve_parser)
    serve_parser.add_argument(
        "--truncate-corrupt-log", action="store_true",
        help="start even if a transaction log is corrupt, dropping it from the damage on "
        "(acknowledged writes after the damage are lost)",
    )  # fmt: skip
    serve_parser.add_argument(
        "--http", type=_http_address, default=None, metavar="HOST:PORT",
        help="serve /metrics (Prometheus, ZooKeeper's mntr names) here; port 0 picks one",
    )  # fmt: skip
    log_config.add_arguments(serve_parser, default_level="INFO")
    shell_parser = commands.add_parser("shell", help="run one zkCli-style command")
    shell_parser.add_argument("server", help="HOST:PORT[/chroot]")
    shell_parser.add_argument("command", choices=COMMANDS)
    shell_parser.add_argument("path")
    shell_parser.add_argument("data", nargs="?", default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mode == "serve":
        try:
            levels = log_config.levels_from_args(args, "INFO")
        except log_config.LogConfigError as error:
            print(f"zkstub: {error}", file=sys.stderr)
            return 2
        log_config.configure(
            levels,
            log_config.JsonLineFormatter()
            if args.log_format == "json"
            else logging.Formatter("%(asctime)s %(name)s %(message)s"),
        )
        try:
            tls = server_tls(args)
        except TlsSettingsError as error:
            print(f"zkstub: {error}", file=sys.stderr)
            return 2
        # ZooKeeper's clientPort may be left out when a secureClientPort is given.
        port = 2181 if args.port is None and tls is None else args.port
        try:
            limits = {
                name: getattr(args, name)
                for name in (
                    "min_session_timeout", "max_session_timeout", "max_client_cnxns",
                    "sessionless_timeout", "max_outbound_bytes", "jute_maxbuffer",
                    "four_letter_words", "super_digest",
                )
            }  # fmt: skip
            trio.run(
                partial(serve, truncate_corrupt_log=args.truncate_corrupt_log, http=args.http,
                        tls=tls, secure_port=args.secure_port, **limits),
                args.host, port, args.data_dir, args.tick_time,
            )  # fmt: skip
        except KeyboardInterrupt:
            pass
        except (CorruptDataError, ValueError) as error:
            print(f"zkstub: {error}", file=sys.stderr)
            return 1
        return 0
    return trio.run(shell, args.server, args.command, args.path, args.data)
