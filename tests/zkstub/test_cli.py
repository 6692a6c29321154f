"""`python -m zkstub shell`'s zkCli-style output, against a server over TCP."""

import pytest

import transport
import zkstub
from zkstub.cli import format_stat, parse_args, shell


def test_stat_prints_like_zkcli():
    stat = zkstub.Stat(
        czxid=26, mzxid=27, ctime=0, mtime=1000, version=1, cversion=-1, aversion=0,
        ephemeralOwner=0x100, dataLength=3, numChildren=2, pzxid=28,
    )  # fmt: skip
    assert format_stat(stat).splitlines() == [
        "cZxid = 0x1a",
        "ctime = Thu Jan 01 00:00:00 UTC 1970",
        "mZxid = 0x1b",
        "mtime = Thu Jan 01 00:00:01 UTC 1970",
        "pZxid = 0x1c",
        "cversion = -1",
        "dataVersion = 1",
        "aclVersion = 0",
        "ephemeralOwner = 0x100",
        "dataLength = 3",
        "numChildren = 2",
    ]


def test_serve_arguments():
    args = parse_args(["serve", "--port", "2181", "--data-dir", "/tmp/d"])
    assert (args.mode, args.port, args.data_dir, args.host) == (
        "serve",
        2181,
        "/tmp/d",
        "127.0.0.1",
    )
    assert args.super_digest is None
    digest = "super:3/BRixgtJK5zIu/gWZCB29+Rzoo="
    assert parse_args(["serve", "--super-digest", digest]).super_digest == digest


async def test_shell_commands(capsys):
    async with zkstub.open_server(network=transport.TcpNetwork()) as server:
        where = f"127.0.0.1:{server.address[1]}"
        assert await shell(where, "create", "/x", "hello") == 0
        assert await shell(where, "get", "/x", None) == 0
        assert await shell(where, "set", "/x", "bye") == 0
        assert await shell(where, "ls", "/", None) == 0
        assert await shell(where, "stat", "/x", None) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[:4] == ["Created /x", "hello", "[x, zookeeper]", out[3]]
        assert out[3].startswith("cZxid = 0x") and "dataVersion = 1" in out
        assert await shell(where, "delete", "/x", None) == 0
        assert await shell(where, "get", "/x", None) == 1
        assert capsys.readouterr().err.strip() == "Node does not exist: /x"


@pytest.mark.parametrize("argv", [["shell", "h:1", "rm", "/x"], ["bogus"]])
def test_bad_arguments_exit(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)
