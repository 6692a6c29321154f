"""Damaged data directories: a torn log tail is cut off, damage followed by acknowledged
records is refused (or cut when asked to), and a damaged snapshot is replaced by an older
one and the logs after it, never by an empty tree."""

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import zkstub
from zkstub import CorruptDataError
from zkstub._wal import HEADER_BYTES, encode_record, is_torn_tail, iter_records

REPO_ROOT = Path(zkstub.__file__).resolve().parent.parent
NAMES = ["a", "b", "c", "d", "e"]


def flip_bit(path: Path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def the_log(data_dir: Path) -> Path:
    (log,) = [path for path in data_dir.glob("log.*") if path.stat().st_size]
    return log


def offset_of_create(log: Path, path: str) -> int:
    """Where the log record creating `path` starts."""
    (offset,) = [
        offset
        for offset, _, record in iter_records(log.read_bytes())
        if record[0] == "write" and record[4][:2] == ["create", path]
    ]
    return offset


async def write_names(data_dir: Path, **options) -> None:
    async with zkstub.open_server(data_dir=data_dir, **options) as server:
        async with server.connect_local() as zk:
            for name in NAMES:
                await zk.create(f"/{name}", name.encode())


async def names_after_restart(data_dir: Path, **options) -> list[str]:
    async with zkstub.open_server(data_dir=data_dir, **options) as server:
        async with server.connect_local() as zk:
            return [name for name in await zk.get_children("/") if name != "zookeeper"]


async def serve_until_ready_or_exit(data_dir: Path, *flags: str) -> tuple[int | None, str, str]:
    """Runs `python -m zkstub serve` on `data_dir`: (None, first stdout line, "") once it
    serves (then kills it), or (exit code, stdout, stderr) if it exits first."""
    command = [sys.executable, "-m", "zkstub", "serve", "--port", "0",
               "--data-dir", str(data_dir), *flags]  # fmt: skip
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT
    )
    try:
        line = b""
        with trio.fail_after(60):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                if not chunk:
                    await process.wait()
                    stderr = b""
                    while chunk := await process.stderr.receive_some():
                        stderr += chunk
                    return process.returncode, line.decode(), stderr.decode()
                line += chunk
        return None, line.decode(), ""
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


# -- the log ----------------------------------------------------------------------------


def test_a_torn_tail_is_told_from_damage_followed_by_records():
    first, second = encode_record(["first"]), encode_record(["second"])
    data = first + second
    assert is_torn_tail(data[:-1], len(first))  # the last append stopped short
    assert is_torn_tail(first + second[:3], len(first))  # even inside the header
    assert is_torn_tail(data + bytes(100), len(data))  # allocated, never written
    flipped_body = first[:-1] + bytes([first[-1] ^ 1]) + second
    assert not is_torn_tail(flipped_body, 0)
    flipped_length = bytes([first[0] ^ 0x10]) + first[1:] + second  # looks too long
    assert not is_torn_tail(flipped_length, 0)
    assert not is_torn_tail(data[:-1] + b"x", len(first))  # complete, but fails its CRC


@pytest.mark.parametrize("where", ["body", "length"])
async def test_damage_in_the_middle_of_the_log_refuses_to_start(autojump_clock, tmp_path, where):
    await write_names(tmp_path)
    log = the_log(tmp_path)
    offset = offset_of_create(log, "/b")
    # A flipped length bit makes the record look longer than the file: like a torn tail,
    # but intact, acknowledged records follow.
    flip_bit(log, offset + HEADER_BYTES + 3 if where == "body" else offset + 1)
    damaged = log.read_bytes()
    with pytest.raises(CorruptDataError) as refused:
        await names_after_restart(tmp_path)
    message = str(refused.value)
    assert message.startswith(f"{log} is corrupt at offset {offset} (")
    assert "\n" not in message and "--truncate-corrupt-log" in message
    assert log.read_bytes() == damaged  # nothing was cut


async def test_truncate_corrupt_log_drops_the_damage_and_what_follows(
    autojump_clock, tmp_path, caplog
):
    await write_names(tmp_path)
    log = the_log(tmp_path)
    offset = offset_of_create(log, "/c")
    flip_bit(log, offset + HEADER_BYTES + 3)
    damaged = log.read_bytes()
    with caplog.at_level(logging.WARNING, logger="zkstub.storage"):
        assert await names_after_restart(tmp_path, truncate_corrupt_log=True) == ["a", "b"]
    assert f"{log} is corrupt at offset {offset}" in caplog.text
    # the dropped bytes are kept aside, and the cut log is a clean start for the next run
    assert log.with_name(log.name + ".corrupt").read_bytes() == damaged[offset:]
    assert await names_after_restart(tmp_path) == ["a", "b"]


@pytest.mark.parametrize("tear", ["incomplete record", "zeros never written"])
async def test_a_torn_tail_is_cut_with_a_warning(autojump_clock, tmp_path, caplog, tear):
    await write_names(tmp_path)
    log = the_log(tmp_path)
    offset = offset_of_create(log, "/e")
    data = log.read_bytes()
    if tear == "incomplete record":
        log.write_bytes(data[: offset + HEADER_BYTES + 2])
        kept = ["a", "b", "c", "d"]
    else:
        log.write_bytes(data + bytes(4096))
        kept = NAMES
    with caplog.at_level(logging.WARNING, logger="zkstub.storage"):
        assert await names_after_restart(tmp_path) == kept
    assert f"{log}: discarding a torn tail" in caplog.text


async def test_a_cut_log_followed_by_a_later_log_is_refused(autojump_clock, tmp_path):
    await write_names(tmp_path)
    first = the_log(tmp_path)
    async with zkstub.open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            await zk.create("/later")
    data = first.read_bytes()
    first.write_bytes(data[:-3])  # not a crash: the appends went on in the next file
    with pytest.raises(CorruptDataError, match=f"^{first} is corrupt at offset "):
        await names_after_restart(tmp_path)


async def test_serve_refuses_a_damaged_log_in_one_line_and_truncates_when_told(tmp_path):
    await write_names(tmp_path)
    log = the_log(tmp_path)
    offset = offset_of_create(log, "/b")
    flip_bit(log, offset + HEADER_BYTES + 3)
    code, _, stderr = await serve_until_ready_or_exit(tmp_path)
    assert code == 1
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1].startswith(f"zkstub: {log} is corrupt at offset {offset} (")
    code, line, _ = await serve_until_ready_or_exit(tmp_path, "--truncate-corrupt-log")
    assert code is None and line.startswith("zkstub serving on ")
    assert await names_after_restart(tmp_path) == ["a"]


# -- snapshots ---------------------------------------------------------------------------


def newest_snapshot(data_dir: Path) -> Path:
    return max(data_dir.glob("snapshot.*[0-9a-f]"), key=lambda path: path.name)


@pytest.mark.parametrize("snapshot_every", [1, 3])  # 1: no log follows the newest snapshot
async def test_a_damaged_snapshot_is_replaced_by_an_older_one_and_its_logs(
    autojump_clock, tmp_path, caplog, snapshot_every
):
    await write_names(tmp_path, snapshot_every=snapshot_every)
    snapshot = newest_snapshot(tmp_path)
    flip_bit(snapshot, snapshot.stat().st_size // 2)
    with caplog.at_level(logging.WARNING, logger="zkstub.storage"):
        assert await names_after_restart(tmp_path, snapshot_every=snapshot_every) == NAMES
    assert f"{snapshot} is corrupt at offset 0" in caplog.text
    assert snapshot.with_name(snapshot.name + ".corrupt").exists()  # set aside, not deleted
    assert await names_after_restart(tmp_path, snapshot_every=snapshot_every) == NAMES


async def damage_every_snapshot(data_dir: Path) -> list[Path]:
    async with zkstub.open_server(data_dir=data_dir, snapshot_every=2) as server:
        async with server.connect_local() as zk:
            for index in range(20):  # enough snapshots that the first logs are purged
                await zk.create(f"/n{index}")
    return flip_a_bit_in_every_snapshot(data_dir)


def flip_a_bit_in_every_snapshot(data_dir: Path) -> list[Path]:
    assert not (data_dir / f"log.{1:016x}").exists()
    snapshots = sorted(data_dir.glob("snapshot.*"))
    assert len(snapshots) == 3
    for snapshot in snapshots:
        flip_bit(snapshot, snapshot.stat().st_size - 1)
    return snapshots


async def test_no_intact_snapshot_with_its_logs_refuses_to_start(autojump_clock, tmp_path):
    snapshots = await damage_every_snapshot(tmp_path)
    with pytest.raises(CorruptDataError) as refused:
        await names_after_restart(tmp_path)
    assert str(refused.value) == (
        f"{snapshots[-1]} is corrupt at offset 0, and no older snapshot with the logs after "
        "it remains; refusing to start"
    )


async def test_serve_refuses_without_an_intact_snapshot_in_one_line(tmp_path):
    snapshots = await damage_every_snapshot(tmp_path)
    code, _, stderr = await serve_until_ready_or_exit(tmp_path)
    assert code == 1 and "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (
        f"zkstub: {snapshots[-1]} is corrupt at offset 0, and no older snapshot with the "
        "logs after it remains; refusing to start"
    )
