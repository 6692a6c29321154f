"""zkstub.testing's real ZooKeeper: it starts ready to serve sessions, restarts on the same
port and data dir, expires sessions on demand, and never leaves a JVM behind."""

from __future__ import annotations

import pytest
import trio

import zkstub
from zkstub.testing import find_zookeeper_classpath, java_available, run_real_zookeeper


@pytest.fixture
def zookeeper_installed(require_external):
    require_external(
        "ZooKeeper",
        java_available() and find_zookeeper_classpath() is not None,
        "apt-get install zookeeper libslf4j-java default-jre-headless",
    )


async def _srvr_answers(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    async with stream:
        await stream.send_all(b"srvr")
        return b"Zookeeper version" in await stream.receive_some(4096)


async def test_serves_sessions_once_started_and_survives_restart(zookeeper_installed, tmp_path):
    # The session must outlive a JVM restart on a loaded machine: 10 s (20 ticks of 500 ms,
    # the most the server grants), not the 4 s a 200 ms tick allows, which a slow restart
    # and kazoo's reconnect backoff sometimes exceeded.
    async with run_real_zookeeper(tmp_path, tick_ms=500) as real:
        assert real.connect_string == f"127.0.0.1:{real.port}"
        assert await _srvr_answers(real.port)
        async with zkstub.connect(f"zookeeper://{real.connect_string}", session_timeout=10.0) as zk:
            await zk.create("/kept", b"v")
            port = real.port
            await real.restart()
            assert real.port == port
            with trio.fail_after(20):
                data, _ = await zk.get("/kept")
            assert data == b"v"
        await real.stop()
        assert not await _srvr_answers(real.port)


async def test_expire_session_ends_it_on_the_server(zookeeper_installed, tmp_path):
    async with run_real_zookeeper(tmp_path, tick_ms=200) as real:
        async with zkstub.connect(f"zookeeper://{real.connect_string}", session_timeout=2.0) as zk:
            renewed = trio.Event()

            async def after_new_session() -> None:
                renewed.set()

            zk.add_session_hooks(after_initializing_session=after_new_session)
            await zk.create("/mine", b"", ephemeral=True)
            old_session = zk.session_id
            await real.expire_session(zk.session_id, zk.session_password)
            with trio.fail_after(20):
                await renewed.wait()
            assert zk.session_id != old_session
            assert await zk.exists("/mine") is None


async def test_cancellation_stops_the_jvm(zookeeper_installed, tmp_path):
    with trio.CancelScope() as scope:
        async with run_real_zookeeper(tmp_path, tick_ms=200) as real:
            port = real.port
            scope.cancel()
            await trio.sleep_forever()
    assert not await _srvr_answers(port)


async def test_startup_failure_reports_the_server_log(zookeeper_installed, tmp_path):
    with pytest.raises(RuntimeError, match=r"(?s)did not come up.*tickTime"):
        async with run_real_zookeeper(tmp_path, tick_ms=0):  # ZooKeeper refuses tickTime=0
            pass
