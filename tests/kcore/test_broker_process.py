"""`kcore broker` as a real OS process against a zkstub server over TCP: it registers,
and SIGTERM shuts it down cleanly (its registration goes at once, exit status 0)."""

import signal
import subprocess
import sys

import trio

import kcore
import transport
import zkstub


async def _read_line(stream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(4096)
        if not chunk:
            break
        data += chunk
    return data


def _write_config(tmp_path, zookeeper_port, extra=""):
    config = tmp_path / "server.properties"
    config.write_text(
        "broker.id=7\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={tmp_path / 'logs'}\n"
        f"zookeeper.connect=127.0.0.1:{zookeeper_port}\n" + extra
    )
    return config


async def test_a_broker_process_registers_and_shuts_down_on_sigterm(tmp_path):
    network = transport.TcpNetwork()
    async with zkstub.open_server(network=network, address=("127.0.0.1", 0)) as server:
        port = server.address[1]
        config = _write_config(tmp_path, port)
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "kcore.cli", "broker", "--config", str(config),
             "--override", "controlled.shutdown.retry.backoff.ms=100"],
            stdout=subprocess.PIPE,
        )  # fmt: skip
        try:
            with trio.fail_after(60):
                line = await _read_line(process.stdout)
            assert line.startswith(b"kcore broker 7 listening on 127.0.0.1:"), line
            async with zkstub.connect(f"127.0.0.1:{port}", network=network) as zk:
                assert await zk.exists("/brokers/ids/7") is not None
                process.send_signal(signal.SIGTERM)
                with trio.fail_after(60):
                    assert await process.wait() == 0
                assert await zk.exists("/brokers/ids/7") is None
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_a_broker_that_cannot_reach_zookeeper_says_so_in_one_line(tmp_path):
    network = transport.TcpNetwork()
    # A port with nothing listening: bind one, then close it.
    async with zkstub.open_server(network=network, address=("127.0.0.1", 0)) as server:
        port = server.address[1]
    config = _write_config(tmp_path, port, "zookeeper.connection.timeout.ms=1000\n")
    result = await trio.run_process(
        [sys.executable, "-m", "kcore.cli", "broker", "--config", str(config)],
        capture_stdout=True, capture_stderr=True, check=False,
    )  # fmt: skip
    stderr = result.stderr.decode()
    assert result.returncode == 1
    assert "Traceback" not in stderr
    assert f"Connecting to zookeeper on 127.0.0.1:{port}" in stderr  # said while it tries
    assert stderr.splitlines()[-1].startswith(
        f"kcore broker: ZooKeeperUnreachableError: cannot reach ZooKeeper at 127.0.0.1:{port}"
    )


def _broker_config(tmp_path, broker_id: int, zk_port: int) -> str:
    config = tmp_path / f"server-{broker_id}.properties"
    config.write_text(
        f"broker.id={broker_id}\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={tmp_path / f'broker-{broker_id}'}\n"
        f"zookeeper.connect=127.0.0.1:{zk_port}\n"
    )
    return str(config)


async def test_three_brokers_stopped_together_each_shut_down_cleanly(tmp_path):
    """SIGTERM to a whole cluster at once: no broker is left waiting for a controlled shutdown
    that nobody can grant; each exits 0 and closes its session, so no registration stays."""
    network = transport.TcpNetwork()
    async with zkstub.open_server(network=network, address=("127.0.0.1", 0)) as server:
        port = server.address[1]
        processes = []
        try:
            for broker_id in (1, 2, 3):
                config = _broker_config(tmp_path, broker_id, port)
                # Retries that outlast the controlled shutdown's bound (4 backoffs), so that
                # brokers waiting on each other reach it.
                command = [sys.executable, "-m", "kcore.cli", "broker", "--config", config,
                           "--override", "controlled.shutdown.max.retries=20",
                           "--override", "controlled.shutdown.retry.backoff.ms=500"]  # fmt: skip
                process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
                processes.append(process)
            servers = []
            for process in processes:
                with trio.fail_after(60):
                    line = await _read_line(process.stdout)
                servers.append(line.decode().split(" listening on ")[1].strip())
            async with zkstub.connect(f"127.0.0.1:{port}", network=network) as zk:
                async with kcore.Admin(",".join(servers)) as admin:
                    await admin.create_topic("t", partitions=6, replication_factor=3)
                for process in processes:
                    process.send_signal(signal.SIGTERM)
                # Bounded well inside the 20 s the controlled shutdown may take, and inside
                # the sessions' timeout: had one been left open, its registration would
                # still be there.
                with trio.fail_after(60):
                    codes = [await process.wait() for process in processes]
                assert codes == [0, 0, 0]
                assert await zk.get_children("/brokers/ids") == []
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
