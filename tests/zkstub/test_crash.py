"""A zkstub server process killed (SIGKILL) in the middle of writes loses nothing it
acknowledged: every write is fsynced before its reply leaves the server."""

import contextlib
import functools
import signal
import subprocess
import sys
from pathlib import Path

import trio

import transport
import zkstub

WRITERS = 4
REPO_ROOT = Path(zkstub.__file__).resolve().parent.parent


@contextlib.asynccontextmanager
async def serve_process(data_dir):
    """`python -m zkstub serve` on a free port; yields (process, port)."""
    command = [sys.executable, "-m", "zkstub", "serve", "--port", "0", "--data-dir", data_dir]
    async with trio.open_nursery() as nursery:
        run = functools.partial(
            trio.run_process, command, stdout=subprocess.PIPE, check=False, cwd=REPO_ROOT
        )
        process = await nursery.start(run)
        try:
            line = b""
            with trio.fail_after(30):
                while not line.endswith(b"\n"):
                    chunk = await process.stdout.receive_some(1)
                    assert chunk, "the server exited before it was serving"
                    line += chunk
            port = int(line.decode().rsplit(":", 1)[1])
            yield process, port
        finally:
            if process.returncode is None:
                process.kill()


async def test_kill_during_writes_loses_no_acknowledged_write(tmp_path):
    data_dir = str(tmp_path)
    acknowledged: list[str] = []
    async with serve_process(data_dir) as (process, port):
        network = transport.TcpNetwork()
        async with zkstub.connect(f"127.0.0.1:{port}", network=network) as zk:
            await zk.create("/k")

            async def write(writer: int) -> None:
                for index in range(10_000):
                    path = f"/k/w{writer}-{index}"
                    try:
                        await zk.create(path, path.encode())
                    except (zkstub.ConnectionLossError, zkstub.SessionExpiredError):
                        return
                    acknowledged.append(path)

            async with trio.open_nursery() as nursery:
                for writer in range(WRITERS):
                    nursery.start_soon(write, writer)
                with trio.fail_after(30):
                    while len(acknowledged) < 200:
                        await trio.sleep(0.01)
                process.send_signal(signal.SIGKILL)  # while every writer has one in flight
            zk.abort()
        await process.wait()
    async with serve_process(data_dir) as (process, port):
        async with zkstub.connect(f"127.0.0.1:{port}", network=transport.TcpNetwork()) as zk:
            stored = set(await zk.get_children("/k"))
            missing = [path for path in acknowledged if path.rsplit("/", 1)[1] not in stored]
            assert not missing, f"acknowledged but lost: {missing[:5]}"
            assert (await zk.get(acknowledged[-1]))[0] == acknowledged[-1].encode()
        process.kill()
