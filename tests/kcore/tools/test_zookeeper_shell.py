"""`kcore zookeeper-shell` against a zkstub server over TCP on 127.0.0.1: one command and
exit, commands piped on standard input (no prompt), watches firing, and the failures a user
meets (a node that is not there, a command that does not exist, a server that is down or
never answers): zkCli's words on standard error, a non-zero exit status, no traceback. The
shell runs in the test's Trio loop (`TOOL.main(argv)`); one test runs `python -m kcore.cli`
itself."""

from __future__ import annotations

import os
import sys

import pytest
import trio

import transport
import zkstub
from kcore.tools import zookeeper_shell

pytestmark = pytest.mark.timeout(60)

CONNECTED = "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null\n"


@pytest.fixture
async def server():
    async with zkstub.open_server(network=transport.TcpNetwork()) as server:
        yield server


def _where(server, scheme: str = "") -> str:
    host, port = server.address
    return f"{scheme}{host}:{port}"


@pytest.fixture
def stdin(monkeypatch):
    """`stdin()` makes standard input a pipe and returns its writing end's descriptor (the
    shell reads the reading end's descriptor, as from a terminal or `echo ... |`)."""
    descriptors = []

    def pipe() -> int:
        reading, writing = os.pipe()
        descriptors.extend([reading, writing])
        monkeypatch.setattr(sys, "stdin", open(reading, "rb", closefd=False))
        return writing

    yield pipe
    for descriptor in descriptors:
        try:
            os.close(descriptor)
        except OSError:
            pass  # closed by the test: the input's end


def _feed(stdin, text: str) -> None:
    writing = stdin()
    os.write(writing, text.encode())
    os.close(writing)


async def _shell(*argv: str) -> int:
    return await zookeeper_shell.TOOL.main(list(argv))


@pytest.mark.parametrize("scheme", ["", "msgpack://"])
async def test_one_command_per_run_prints_what_zkcli_prints(server, scheme, capsys):
    where = _where(server, scheme)
    assert await _shell(where, "create", "/kafka", "") == 0
    assert await _shell(where, "create", "/kafka/brokers", '{"version":5}') == 0
    assert await _shell(where, "create", "/kafka/brokers/ids") == 0
    captured = capsys.readouterr()
    assert captured.out == f"Connecting to {where}\n{CONNECTED}" * 3
    assert captured.err == "Created /kafka\nCreated /kafka/brokers\nCreated /kafka/brokers/ids\n"

    assert await _shell(where, "get", "/kafka/brokers") == 0
    assert await _shell(where + "/kafka", "ls", "-R", "/") == 0  # a chroot
    assert await _shell(where, "getAcl", "/kafka") == 0
    assert await _shell(where, "get", "-s", "/kafka/brokers/ids") == 0
    output = capsys.readouterr().out.replace(f"Connecting to {where}\n{CONNECTED}", "")
    output = output.replace(f"Connecting to {where}/kafka\n{CONNECTED}", "")
    lines = output.splitlines()
    assert lines[:7] == [
        '{"version":5}',
        "/",
        "/brokers",
        "/brokers/ids",
        "'world,'anyone",
        ": cdrwa",
        "null",
    ]
    assert lines[7].startswith("cZxid = 0x") and lines[8].startswith("ctime = ")
    assert lines[12:] == [
        "cversion = 0",
        "dataVersion = 0",
        "aclVersion = 0",
        "ephemeralOwner = 0x0",
        "dataLength = 0",
        "numChildren = 0",
    ]

    assert await _shell(where, "deleteall", "/kafka") == 0
    assert await _shell(where, "ls", "/") == 0
    assert capsys.readouterr().out.endswith("[zookeeper]\n")


async def test_a_failed_command_says_so_in_zkclis_words_and_exits_non_zero(server, capsys):
    where = _where(server)
    assert await _shell(where, "get", "/nothing") == 1
    assert capsys.readouterr().err == "Node does not exist: /nothing\n"
    assert await _shell(where, "create", "/a") == 0
    assert await _shell(where, "create", "/a/b") == 0
    capsys.readouterr()
    assert await _shell(where, "create", "/a") == 1
    assert capsys.readouterr().err == "Node already exists: /a\n"
    assert await _shell(where, "delete", "/a") == 1
    assert capsys.readouterr().err == "Node not empty: /a\n"
    assert await _shell(where, "ls", "a") == 1
    assert capsys.readouterr().err == "Path must start with / character\n"
    assert await _shell(where, "set", "/a") == 1
    assert capsys.readouterr().err == "set [-s] [-v version] path data\n"

    assert await _shell(where, "rmr", "/a") == 127  # zkCli's status for an unknown command
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "kcore zookeeper-shell host:port[/chroot] [-timeout ms] cmd args"
    assert "\tdeleteall path [-b batch size]" in err
    assert err[-1] == "Command not found: Command not found rmr"


async def test_piped_commands_run_in_order_without_a_prompt(server, stdin, capsys):
    where = _where(server)
    script = [
        "create /w",
        "addWatch /w",  # persistent and recursive: fires on every change below /w
        "create /w/x one",
        "set /w/x two",
        "ls -s /nothing",
        "getEphemerals",
        "create -e /w/session-bound",
        "getEphemerals /w",
        "getAllChildrenNumber /w",
        "history",
        "deleteall /w",
        "quit",
        "ls /",  # never read: quit ends the session
    ]
    _feed(stdin, "\n".join(script) + "\n")
    assert await _shell(where) == 0
    captured = capsys.readouterr()
    assert "[zk:" not in captured.out  # standard input is no terminal: no prompt
    assert captured.out.split("\n") == [
        f"Connecting to {where}",
        *CONNECTED.split("\n")[:-1],
        "Welcome to ZooKeeper!",
        *_event("NodeCreated", "/w/x"),
        *_event("NodeDataChanged", "/w/x"),
        "[]",
        *_event("NodeCreated", "/w/session-bound"),
        "[/w/session-bound]",
        "2",
        *[f"{index} - {line}" for index, line in enumerate(script[:10])],
        # deleteall: listed breadth first (children sorted), deleted from the last one
        *_event("NodeDeleted", "/w/x"),
        *_event("NodeDeleted", "/w/session-bound"),
        *_event("NodeDeleted", "/w"),
        *_event("None", None, state="Closed"),
        "",
    ]
    assert captured.err.splitlines() == [
        "Created /w",
        "Created /w/x",
        "Node does not exist: /nothing",
        "Created /w/session-bound",
    ]


class _Terminal:
    """Standard input as a terminal: the shell prompts before each line."""

    def __init__(self, descriptor: int) -> None:
        self._descriptor = descriptor

    def fileno(self) -> int:
        return self._descriptor

    def isatty(self) -> bool:
        return True


async def test_at_a_terminal_each_line_gets_zkclis_prompt(server, monkeypatch, capsys):
    where = _where(server)
    reading, writing = os.pipe()
    os.write(writing, b"create /p\n\nclose\nls /\n")
    os.close(writing)
    monkeypatch.setattr(sys, "stdin", _Terminal(reading))
    try:
        assert await _shell(where) == 0
    finally:
        os.close(reading)
    out = capsys.readouterr().out
    assert out.count("[zk: ") == 5  # an empty line is prompted for again, not counted
    assert out.endswith(
        f"[zk: {where}(CONNECTED) 0] [zk: {where}(CONNECTED) 1] [zk: {where}(CONNECTED) 1] "
        + "\n".join(_event("None", None, state="Closed"))
        + f"\n[zk: {where}(CLOSED) 2] Not connected\n[zk: {where}(CLOSED) 3] "
    )


def _event(kind: str, path: str | None, state: str = "SyncConnected") -> list[str]:
    return ["", "WATCHER::", "", f"WatchedEvent state:{state} type:{kind} path:{path or 'null'}"]


async def test_a_one_shot_watch_fires_on_another_clients_change(server, stdin, capsys, wait_until):
    where = _where(server)
    writing = stdin()
    printed = []

    def shows(text: str):
        def check() -> bool:
            printed.append(capsys.readouterr().out)
            return text in "".join(printed)

        return check

    async with zkstub.connect(_where(server, "jute://")) as other:
        await other.create("/config", b"v1")
        async with trio.open_nursery() as nursery:
            status = []
            nursery.start_soon(lambda: _run_into(status, where))
            os.write(writing, b"get -w /config\n")
            await wait_until(shows("v1\n"), timeout=10)
            await other.set("/config", b"v2")
            await wait_until(shows("type:NodeDataChanged path:/config\n"), timeout=10)
            await other.set("/config", b"v3")  # a one-shot watch: no second event
            os.write(writing, b"get /config\n")
            await wait_until(shows("v3\n"), timeout=10)
            os.close(writing)
    assert status == [0]
    output = "".join(printed)
    assert output.count("NodeDataChanged") == 1
    assert output.endswith("v1\n" + "\n".join(_event("NodeDataChanged", "/config")) + "\nv3\n")


async def _run_into(status: list[int], where: str) -> None:
    status.append(await _shell(where))


async def test_a_server_that_is_down_is_one_line_and_status_1(capsys):
    # Nothing listens on port 1: refused at once, so the shell gives up without waiting.
    assert await _shell("127.0.0.1:1", "ls", "/") == 1
    captured = capsys.readouterr()
    assert captured.out == "Connecting to 127.0.0.1:1\n"
    assert captured.err.startswith(
        "kcore zookeeper-shell: no ZooKeeper session at 127.0.0.1:1: cannot connect to 127.0.0.1:1"
    )
    assert captured.err.count("\n") == 1


async def test_a_server_that_never_answers_times_out_in_one_line(capsys):
    """A port that accepts connections and says nothing (a hung server): the connect gives
    up after the session timeout's share zkCli gives it."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted = []
    async with trio.open_nursery() as nursery:

        async def hold(stream):
            accepted.append(stream)
            await trio.sleep_forever()

        nursery.start_soon(trio.serve_listeners, hold, listeners)
        assert await _shell(f"127.0.0.1:{port}", "-timeout", "600", "ls", "/") == 1
        nursery.cancel_scope.cancel()
    assert accepted
    err = capsys.readouterr().err
    assert err == (
        f"kcore zookeeper-shell: no ZooKeeper session at 127.0.0.1:{port}: "
        f"no answer to connect from 127.0.0.1:{port}\n"
    )


async def test_the_kcore_command_reads_a_pipe_and_never_prints_a_traceback(server):
    where = _where(server)
    command = [sys.executable, "-m", "kcore.cli", "zookeeper-shell"]
    runs = {}

    async def run(name: str, argv: list[str], stdin: bytes = b"") -> None:
        runs[name] = await trio.run_process(
            command + argv, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False
        )

    async with trio.open_nursery() as nursery:  # (each process takes a second to start)
        script = b"create /from-a-pipe data\nget /from-a-pipe\nget /missing\n"
        nursery.start_soon(run, "piped", [where], script)
        nursery.start_soon(run, "down", ["127.0.0.1:1", "ls", "/"])
    piped, down = runs["piped"], runs["down"]
    # The status is the last command's, as zkCli's: a script can tell it failed.
    assert piped.returncode == 1
    assert piped.stdout.decode().endswith(f"{CONNECTED}Welcome to ZooKeeper!\ndata\n")
    assert piped.stderr.decode() == "Created /from-a-pipe\nNode does not exist: /missing\n"
    assert down.returncode == 1
    assert down.stderr.decode().startswith("kcore zookeeper-shell: no ZooKeeper session at")
    assert down.stderr.decode().count("\n") == 1  # no traceback
