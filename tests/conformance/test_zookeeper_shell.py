"""`kcore zookeeper-shell`'s shell (zkstub's `ZkCli`, speaking ZooKeeper's protocol) and
ZooKeeper's own zkCli.sh (Debian's `zookeeper` package) run one scripted session each against
the same real ZooKeeper 3.8: the transcripts must be the same, but for what differs between
any two sessions (zxids, times, the session id) and the usage's list of commands."""

from __future__ import annotations

import io
import os
import re
import subprocess
from pathlib import Path

import pytest
import trio

import zkstub
from zkstub.cli import ZkCli

ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")

SCRIPT = """\
create /zkshell
create /zkshell/a hello
ls /zkshell
get -s /zkshell/a
set -s /zkshell/a world
create -e /zkshell/eph temp
create -s /zkshell/seq- x
create /zkshell/a/b "two words"
ls -s /zkshell
ls -R /zkshell
get -w /zkshell/a
set /zkshell/a again
stat /zkshell/nothing
getAcl -s /zkshell/a
addauth digest alice:alice-secret
create /zkshell/secret s auth::cdrwa,world:anyone:r
getAcl /zkshell/secret
setAcl /zkshell/a world:anyone:ra
getAcl -s /zkshell/a
set /zkshell/a denied
setAcl -v 0 /zkshell/a world:anyone:cdrwa
setAcl -s -v 1 /zkshell/a world:anyone:cdrwa,digest:bob:x:q
setAcl -R /zkshell/secret world:anyone:cdrwa
sync /zkshell
getAllChildrenNumber /zkshell
getEphemerals /zkshell
addWatch /zkshell
create /zkshell/a/deep 1
removewatches /zkshell
set -v 7 /zkshell/a x
delete /zkshell
ls zkshell
ls -x /zkshell
history
deleteall /zkshell
ls /zkshell
quit
"""

NOISE = re.compile(r"^(\[main|SLF4J|Connecting to|Welcome to|JLine|\s*$|\t)")
VARYING = [
    (re.compile(r"^(ctime|mtime) = .*$"), r"\1 = (time)"),
    (re.compile(r"^([cmp]Zxid) = 0x[0-9a-f]+$"), r"\1 = (zxid)"),
    (re.compile(r"ephemeralOwner = 0x[0-9a-f]+"), "ephemeralOwner = (session)"),
    (re.compile(r"^(ZooKeeper -server|zkCli) .*"), "(usage)"),
]


def normalised(text: str) -> list[str]:
    """Sorted: zkCli prints watch events from another thread than the commands' output."""
    lines = []
    for line in text.splitlines():
        if NOISE.match(line):
            continue
        for pattern, replacement in VARYING:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return sorted(lines)


def zkcli_transcript(server: str) -> str:
    done = subprocess.run(
        [str(ZKCLI), "-server", server], input=SCRIPT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "JVMFLAGS": "-Xshare:auto -XX:TieredStopAtLevel=1"},
    )  # fmt: skip
    return done.stdout + done.stderr


async def our_transcript(server: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    lines = [line.encode() + b"\n" for line in SCRIPT.splitlines()]

    async def read_line() -> bytes:
        await trio.lowlevel.checkpoint()
        return lines.pop(0) if lines else b""

    shell = ZkCli(server, 30.0, out=out, err=err)
    await shell.run_lines(read_line)
    return out.getvalue() + err.getvalue()


@pytest.mark.zookeeper
async def test_our_shell_prints_what_zkcli_prints_on_a_real_zookeeper(zkcli, real_zookeeper):
    server = real_zookeeper.connect_string
    expected = await trio.to_thread.run_sync(zkcli_transcript, server)
    got = await our_transcript(server)
    assert "WatchedEvent state:SyncConnected type:PersistentWatchRemoved path:/zkshell" in got
    assert normalised(got) == normalised(expected)
    async with zkstub.connect(f"jute://{server}") as zk:  # each session cleaned up after it
        assert await zk.exists("/zkshell") is None
