"""ZooKeeper's own shell, zkCli.sh from Debian's `zookeeper` package, runs one scripted session
against a fresh real ZooKeeper and a fresh zkstub server: the two transcripts must be the same
(timestamps aside; zxids too must match, since both servers number the same transactions)."""

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import trio

import transport
import zkstub
import zkstub.testing as testing

ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")

SCRIPT = """\
create /zkcli
create /zkcli/a hello
ls /zkcli
get /zkcli/a
set /zkcli/a world
get -s /zkcli/a
create -e /zkcli/eph temp
create -s /zkcli/seq- x
ls -s /zkcli
ls -w /zkcli
create /zkcli/b
get -w /zkcli/a
set /zkcli/a again
stat -w /zkcli/c
create /zkcli/c
delete /zkcli/b
delete /zkcli
delete -v 7 /zkcli/a
create /zkcli/a
stat /zkcli/nothing
getAcl /zkcli/a
addauth digest alice:alice-secret
create /zkcli/secret s auth::cdrwa,world:anyone:r
getAcl /zkcli/secret
setAcl /zkcli/a world:anyone:ra
getAcl -s /zkcli/a
set /zkcli/a denied
setAcl -v 0 /zkcli/a world:anyone:cdrwa
setAcl -s -v 1 /zkcli/a world:anyone:cdrwa,digest:bob:x:q
setAcl -R /zkcli/secret world:anyone:cdrwa
sync /zkcli
getAllChildrenNumber /zkcli
getEphemerals /zkcli
deleteall /zkcli
ls /zkcli
ls /
quit
"""

# Lines that differ between any two runs: log noise, the JVM's start, the server's address.
NOISE = re.compile(r"^(\[main|SLF4J|Connecting to|Welcome to|JLine|\s*$)")
TIMES = re.compile(r"^(ctime|mtime) = .*$", re.MULTILINE)
SESSION = re.compile(r"ephemeralOwner = 0x[0-9a-f]+")


def transcript(server: str) -> list[str]:
    """What zkCli.sh printed, normalised; watch events are printed by another thread than
    the commands' output, so the order between the two is the JVM's and lines are sorted."""
    done = subprocess.run(
        [str(ZKCLI), "-server", server], input=SCRIPT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "JVMFLAGS": "-Xshare:auto -XX:TieredStopAtLevel=1"},
    )  # fmt: skip
    text = TIMES.sub(r"\1 = (time)", done.stdout + done.stderr)
    lines = [SESSION.sub("ephemeralOwner = (session)", line) for line in text.splitlines()]
    return sorted(line for line in lines if not NOISE.match(line))


@pytest.mark.zookeeper
async def test_a_zkcli_session_reads_the_same_on_zkstub_as_on_zookeeper(zkcli):
    with tempfile.TemporaryDirectory(prefix="zkcli-") as data_dir:
        async with testing.run_real_zookeeper(Path(data_dir)) as real:
            expected = await trio.to_thread.run_sync(transcript, real.connect_string)
    async with zkstub.open_server(network=transport.TcpNetwork()) as server:
        host, port = server.address
        got = await trio.to_thread.run_sync(transcript, f"{host}:{port}")
    assert "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/zkcli" in expected
    assert got == expected
