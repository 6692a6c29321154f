"""A real ZooKeeper (Debian's `zookeeper` package) as a child JVM on 127.0.0.1, for the
conformance suite and the zk-ops benchmark (public face: `zkstub.testing`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import trio

JAVA_DIR = Path("/usr/share/java")
# zookeeper.jar and what its server needs at run time (Debian's names).
JARS = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "commons-io.jar",
    "metrics-core.jar",
)
READY_TIMEOUT = 30.0
PROBE_TIMEOUT = 1.0  # one `srvr` probe; a server still starting may accept and stay silent


def java_available() -> bool:
    return shutil.which("java") is not None


def find_zookeeper_classpath() -> str | None:
    """The class path for ZooKeeperServerMain, or None when a jar is missing."""
    jars = [JAVA_DIR / jar for jar in JARS]
    if not all(jar.exists() for jar in jars):
        return None
    return ":".join(str(jar) for jar in jars)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _four_letter_word(port: int, word: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(word)
        answer = b""
        while chunk := await stream.receive_some(4096):
            answer += chunk
        return answer


@attrs.define(eq=False)
class RealZooKeeper:
    data_dir: Path
    port: int
    tick_ms: int
    host: str = "127.0.0.1"
    _process: trio.Process | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def _write_config(self) -> Path:
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=srvr,stat,ruok,cons,dump\n"
        )
        return config

    async def start(self) -> None:
        classpath = find_zookeeper_classpath()
        if classpath is None or not java_available():
            raise RuntimeError("no java or no ZooKeeper jars (apt-get install zookeeper)")
        config = self._write_config()
        command = [
            "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", str(config),
        ]  # fmt: skip
        log = open(self.log_path, "ab")  # noqa: ASYNC230 (a tiny local file)
        try:
            self._process = await trio.lowlevel.open_process(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            log.close()
        try:
            await self._wait_ready()
        except BaseException:  # cancelled while starting: never leave the JVM behind
            await self.stop()
            raise

    async def _wait_ready(self) -> None:
        """Ready when `srvr` answers (`ruok` answers before sessions are served)."""
        with trio.move_on_after(READY_TIMEOUT):
            while True:
                if self._process is not None and self._process.poll() is not None:
                    break
                with contextlib.suppress(OSError), trio.move_on_after(PROBE_TIMEOUT):
                    if b"Zookeeper version" in await _four_letter_word(self.port, b"srvr"):
                        return
                await trio.sleep(0.05)
        tail = self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""
        await self.stop()
        raise RuntimeError(f"ZooKeeper did not come up on port {self.port}:\n{tail}")

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with trio.CancelScope(shield=True):
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
            if process.poll() is None:
                process.kill()
                await process.wait()

    async def restart(self) -> None:
        """The same port and data dir: sessions that reconnect within their timeout live."""
        await self.stop()
        await self.start()

    async def expire_session(self, session_id: int, password: bytes) -> None:
        """ZooKeeper's own recipe: a second connection with the same session id and
        password, then closing it, ends the session."""
        from kazoo.client import KazooClient

        def expire() -> None:
            client = KazooClient(hosts=self.connect_string, client_id=(session_id, password))
            client.start(timeout=10)
            client.stop()
            client.close()

        await trio.to_thread.run_sync(expire)


@contextlib.asynccontextmanager
async def run_real_zookeeper(
    data_dir: Path | str, *, tick_ms: int = 2000
) -> AsyncIterator[RealZooKeeper]:
    data_dir = Path(data_dir)
    os.makedirs(data_dir / "data", exist_ok=True)
    real = RealZooKeeper(data_dir, _free_port(), tick_ms)
    await real.start()
    try:
        yield real
    finally:
        await real.stop()


class RealZooKeeperThread:
    """`run_real_zookeeper` in a thread of its own, with its own Trio loop, from `start()` to
    `stop()`: for test suites where each test runs in a fresh `trio.run` but a JVM should
    start once. `real` is the RealZooKeeper; `await call(fn, *args)` runs `fn(*args)` in
    the server's loop from another one (to expire a session, to restart the server)."""

    def __init__(self, data_dir: Path | str, *, tick_ms: int = 2000) -> None:
        self._data_dir = Path(data_dir)
        self._tick_ms = tick_ms
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.real: RealZooKeeper | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="real-zookeeper", daemon=True)

    @property
    def connect_string(self) -> str:
        assert self.real is not None
        return self.real.connect_string

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as error:  # reported by start()
            self.error = error
            self._ready.set()

    async def _main(self) -> None:
        self._stop = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        async with run_real_zookeeper(self._data_dir, tick_ms=self._tick_ms) as real:
            self.real = real
            self._ready.set()
            await self._stop.wait()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(timeout=READY_TIMEOUT * 4)
        if self.real is None:
            raise RuntimeError(f"real ZooKeeper did not start: {self.error!r}")

    async def call(self, async_fn: Any, *args: Any) -> Any:
        token = self._token
        return await trio.to_thread.run_sync(
            lambda: trio.from_thread.run(async_fn, *args, trio_token=token)
        )

    def stop(self) -> None:
        if self._token is not None and self._stop is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(timeout=60)
