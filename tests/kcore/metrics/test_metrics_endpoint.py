"""`kcore broker` as an OS process with `http.listener`: it says where it serves, and a
scrape of `/metrics` (a real HTTP client over TCP, parsed by Prometheus' own parser) shows
what the test did under the names Kafka's dashboards use."""

import signal
import subprocess
import sys
import urllib.request

import trio
from prometheus_client.parser import text_string_to_metric_families

import kcore
import transport
import zkstub

RECORDS = 7


async def _lines_until(stream, marker: bytes) -> list[str]:
    """The process's stdout lines, up to and including the first holding `marker`."""
    data = b""
    while marker not in data or not data.endswith(b"\n"):
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise AssertionError(f"the broker exited before saying {marker!r}: {data!r}")
        data += chunk
    return data.decode().splitlines()


def _scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_a_broker_process_serves_its_metrics_to_prometheus(tmp_path):
    network = transport.TcpNetwork()
    async with zkstub.open_server(network=network, address=("127.0.0.1", 0)) as server:
        config = tmp_path / "server.properties"
        config.write_text(
            "broker.id=5\n"
            "listeners=PLAINTEXT://127.0.0.1:0\n"
            f"log.dirs={tmp_path / 'logs'}\n"
            f"zookeeper.connect=127.0.0.1:{server.address[1]}\n"
            "http.listener=http://127.0.0.1:0\n"
            "controlled.shutdown.retry.backoff.ms=100\n"
            "offsets.topic.replication.factor=1\n"
        )
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "kcore.cli", "broker", "--config", str(config)],
            stdout=subprocess.PIPE,
        )
        try:
            with trio.fail_after(60):
                lines = await _lines_until(process.stdout, b" http on ")
            listening = lines[0].split(" listening on ")[1]
            assert lines[1].startswith("kcore broker 5 http on 127.0.0.1:"), lines
            url = f"http://{lines[1].split(' http on ')[1]}/metrics"

            async with kcore.Admin(listening) as admin:
                await admin.create_topic("t", partitions=1, replication_factor=1)
            async with kcore.Producer(listening, acks="all") as producer:
                for n in range(RECORDS):
                    await producer.send_and_wait("t", b"v%d" % n, partition=0)
            samples = await trio.to_thread.run_sync(_scrape, url)

            assert samples[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
            assert samples[("kafka_controller_kafkacontroller_globaltopiccount", ())] == 1
            topic = (("topic", "t"),)
            assert samples[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == RECORDS
            assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] == RECORDS
            log = (("partition", "0"), ("topic", "t"))
            assert samples[("kafka_log_log_logendoffset", log)] == RECORDS
            assert samples[("kafka_server_replicamanager_leadercount", ())] == 1
            assert samples[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
            produce = ("request", "Produce")
            assert (
                samples[("kafka_network_requestmetrics_totaltimems_count", (produce,))] == RECORDS
            )
            assert ("kafka_network_requestmetrics_totaltimems",
                    (("quantile", "0.99"), produce)) in samples  # fmt: skip
            connected = (("state", "CONNECTED"),)
            assert samples[("kafka_server_sessionexpirelistener_sessionstate", connected)] == 1

            process.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_each_broker_of_an_embedded_cluster_serves_its_own_metrics():
    settings = {"http.listener": "http://127.0.0.1:0"}
    async with kcore.open_cluster(brokers=2, broker_config=settings) as cluster:
        addresses = cluster.http_addresses()
        assert sorted(addresses) == [1, 2]
        assert len({port for _, port in addresses.values()}) == 2
        active = []
        for broker_id, (host, port) in addresses.items():
            samples = await trio.to_thread.run_sync(_scrape, f"http://{host}:{port}/metrics")
            if samples[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1:
                active.append(broker_id)
        assert active == [await cluster.wait_for_controller()]
