"""The clusters the demo drives: brokers embedded in this process (the default), or each
broker its own OS process (`kcore broker --config ...`), or (for tests) embedded on a
simulated network under virtual time. All offer the same handful of operations to the
demo: clients, a ZooKeeper client to watch, each running broker's /metrics, kill / start a
broker, and (embedded only) cutting links."""

from __future__ import annotations

import contextlib
import logging
import pathlib
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio
from prometheus_client.parser import text_string_to_metric_families

import transport
import zkstub
from kcore.client import Admin, Consumer, Producer
from kcore.demo.model import BrokerMetrics, broker_metrics
from kcore.metrics import prometheus_families, prometheus_samples
from kcore.testing import broker_node, open_cluster
from kcore.zk_client import KafkaZkClient

logger = logging.getLogger("kcore.demo")

SESSION_TIMEOUT_MS = 6000
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    # Short enough that a cut-off follower visibly leaves the ISR within a short demo (the
    # schedule keeps the cut for `schedule.shrink_seconds` of it); Kafka's default is 30000.
    "replica.lag.time.max.ms": 3000,
}
SCRAPE_TIMEOUT = 2.0  # seconds a broker process has to answer GET /metrics


async def wait_ready(target: Any, timeout: float = 60.0) -> None:
    """Until every broker is registered and the controller has told them all about each
    other (a topic created sooner may not find enough brokers for RF 3)."""
    zk = KafkaZkClient(target.zk, clock=time.time)
    count = len(target.broker_ids)
    with trio.fail_after(timeout):
        while True:
            registered = await zk.get_all_brokers()
            if len(registered) == count and await zk.get_controller_id() is not None:
                async with target.admin() as admin:
                    cluster = await admin.describe_cluster()
                if len(cluster.brokers) == count:
                    return
            await trio.sleep(0.1)


@attrs.define(eq=False)
class EmbeddedTarget:
    """zkstub and the brokers in this process, over real TCP on 127.0.0.1 (or a
    SimNetwork: `open_simulated`)."""

    cluster: Any  # kcore.testing.EmbeddedCluster
    can_isolate: bool = True

    @property
    def zk(self) -> Any:
        return self.cluster.zk

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.cluster.broker_count + 1))

    def running(self) -> set[int]:
        return set(self.cluster.brokers)

    def admin(self, **settings: Any) -> Admin:
        return self.cluster.admin(**settings)

    def producer(self, **settings: Any) -> Producer:
        return self.cluster.producer(**settings)

    def consumer(self, **settings: Any) -> Consumer:
        return self.cluster.consumer(**settings)

    async def broker_metrics(self, topic: str) -> dict[int, BrokerMetrics]:
        """Each running broker's numbers, read from its metrics registry through the
        mapping its /metrics serves. Nothing here waits: what a caller does with them
        before its next checkpoint sees the registries as they were read."""
        return {
            broker_id: broker_metrics(
                prometheus_samples(prometheus_families(broker.metrics.collect(), summaries=False)),
                topic,
            )
            for broker_id, broker in sorted(self.cluster.brokers.items())
        }

    async def kill(self, broker_id: int) -> None:
        await self.cluster.kill_broker(broker_id)

    async def start(self, broker_id: int) -> None:
        await self.cluster.start_broker(broker_id)

    def isolate(self, broker_id: int, from_broker: int) -> None:
        self.cluster.network.partition(broker_node(broker_id), broker_node(from_broker))

    def heal(self) -> None:
        self.cluster.network.heal()


@contextlib.asynccontextmanager
async def open_embedded(
    brokers: int, *, seed: int, data_dir: pathlib.Path | None, zookeeper: str | None
) -> AsyncIterator[EmbeddedTarget]:
    async with open_cluster(
        brokers,
        seed=seed,
        network=transport.CuttableTcpNetwork(),
        data_dir=data_dir,
        broker_config=BROKER_SETTINGS,
        clock=time.time,  # real time: record and znode timestamps are wall-clock
        zookeeper_connect=zookeeper,
    ) as cluster:
        target = EmbeddedTarget(cluster)
        await wait_ready(target)
        yield target


@contextlib.asynccontextmanager
async def open_simulated(
    brokers: int, *, seed: int, data_dir: pathlib.Path | None, zookeeper: str | None
) -> AsyncIterator[EmbeddedTarget]:
    """The embedded cluster on a seeded SimNetwork, logs in memory: for a trio.run under
    virtual time (`trio.testing.MockClock`), where the demo's minutes take seconds."""
    if zookeeper is not None:
        raise ValueError("a simulated cluster has its own ZooKeeper")
    async with open_cluster(
        brokers, seed=seed, network="sim", logs="memory", broker_config=BROKER_SETTINGS
    ) as cluster:
        target = EmbeddedTarget(cluster)
        await wait_ready(target)
        yield target


@attrs.define(eq=False)
class ProcessTarget:
    """Each broker a `python -m kcore.cli broker` child process; ZooKeeper is this
    process's zkstub server (or an external one)."""

    zk: Any
    zk_connect: str
    data_dir: pathlib.Path
    count: int
    rng: random.Random
    nursery: trio.Nursery
    network: transport.TcpNetwork = attrs.field(factory=transport.TcpNetwork)
    processes: dict[int, trio.Process] = attrs.field(factory=dict)
    ports: dict[int, int] = attrs.field(factory=dict)
    http_ports: dict[int, int] = attrs.field(factory=dict)  # where each serves /metrics
    can_isolate: bool = False

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.count + 1))

    def running(self) -> set[int]:
        return {b for b, p in self.processes.items() if p.returncode is None}

    def bootstrap(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", port) for _, port in sorted(self.ports.items())]

    def _client(self, kind: type, settings: dict[str, Any]) -> Any:
        rng = random.Random(self.rng.getrandbits(64))
        return kind(self.bootstrap(), network=self.network, rng=rng, **settings)

    def admin(self, **settings: Any) -> Admin:
        return self._client(Admin, settings)

    def producer(self, **settings: Any) -> Producer:
        return self._client(Producer, settings)

    def consumer(self, **settings: Any) -> Consumer:
        return self._client(Consumer, settings)

    def _properties(self, broker_id: int) -> pathlib.Path:
        directory = self.data_dir / f"broker-{broker_id}"
        directory.mkdir(parents=True, exist_ok=True)
        port = self.ports.get(broker_id, 0)  # a restart keeps its ports
        http_port = self.http_ports.get(broker_id, 0)
        settings = {
            "broker.id": broker_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "http.listener": f"http://127.0.0.1:{http_port}",
            "log.dirs": directory / "logs",
            "zookeeper.connect": self.zk_connect,
            **BROKER_SETTINGS,
        }
        path = directory / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        return path

    async def start(self, broker_id: int) -> None:
        config = self._properties(broker_id)
        log = (self.data_dir / f"broker-{broker_id}" / "broker.log").open("ab")
        command = [sys.executable, "-m", "kcore.cli", "broker", "--config", str(config)]
        process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=log)
        log.close()
        self.processes[broker_id] = process
        # The broker prints where it listens once it does, "kcore broker N listening on
        # H:P", then "kcore broker N http on H:P" for its http.listener.
        with trio.fail_after(60):
            listening = await self._line(broker_id, process)
            http = await self._line(broker_id, process)
        self.ports[broker_id] = int(listening.rsplit(":", 1)[1])
        self.http_ports[broker_id] = int(http.rsplit(":", 1)[1])
        self.nursery.start_soon(_drain, process.stdout)

    async def _line(self, broker_id: int, process: trio.Process) -> str:
        line = b""
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            if not chunk:
                raise RuntimeError(
                    f"broker {broker_id} exited (code {await process.wait()}); see "
                    f"{self.data_dir / f'broker-{broker_id}' / 'broker.log'}"
                )
            line += chunk
        return line.decode().rstrip("\n")

    async def broker_metrics(self, topic: str) -> dict[int, BrokerMetrics]:
        """Each running broker's numbers, scraped from its /metrics (those that answer)."""
        found = {}
        for broker_id in sorted(self.running()):
            text = await scrape_metrics(("127.0.0.1", self.http_ports[broker_id]))
            if text is not None:
                samples = prometheus_samples(text_string_to_metric_families(text))
                found[broker_id] = broker_metrics(samples, topic)
        return found

    async def kill(self, broker_id: int) -> None:
        """SIGKILL: no controlled shutdown, the session left to expire."""
        process = self.processes[broker_id]
        process.kill()
        await process.wait()

    async def stop_all(self) -> None:
        """SIGTERM to every broker (a controlled shutdown each), then wait."""
        for process in self.processes.values():
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        with trio.move_on_after(30):
            for process in self.processes.values():
                await process.wait()
        for process in self.processes.values():
            if process.returncode is None:
                process.kill()
                await process.wait()

    def isolate(self, broker_id: int, from_broker: int) -> None:
        raise NotImplementedError("links between broker processes cannot be cut")

    def heal(self) -> None:
        pass


async def scrape_metrics(address: tuple[str, int]) -> str | None:
    """GET /metrics from a broker's http.listener: the body, or None when it does not
    answer in `SCRAPE_TIMEOUT` (killed, still starting) or answers with an error."""
    host, port = address
    request = f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
    with trio.move_on_after(SCRAPE_TIMEOUT):
        try:
            stream = await trio.open_tcp_stream(host, port)
            async with stream:
                await stream.send_all(request.encode())
                response = bytearray()
                while chunk := await stream.receive_some(65536):
                    response += chunk
        except (OSError, trio.BrokenResourceError) as error:
            logger.debug("no metrics from %s:%d: %s", host, port, error)
            return None
        head, _, body = bytes(response).partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1:2]
        return body.decode() if status == [b"200"] else None
    return None


async def _drain(stream: Any) -> None:
    with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
        while await stream.receive_some(4096):
            pass


@contextlib.asynccontextmanager
async def open_processes(
    brokers: int, *, seed: int, data_dir: pathlib.Path, zookeeper: str | None
) -> AsyncIterator[ProcessTarget]:
    rng = random.Random(seed)
    network = transport.TcpNetwork()
    async with contextlib.AsyncExitStack() as stack:
        if zookeeper is None:
            server = await stack.enter_async_context(
                zkstub.open_server(network=network, address=("127.0.0.1", 0))
            )
            zookeeper = f"127.0.0.1:{server.address[1]}"
        zk = await stack.enter_async_context(
            zkstub.connect(zookeeper, network=network, rng=random.Random(rng.getrandbits(64)))
        )
        nursery = await stack.enter_async_context(trio.open_nursery())
        target = ProcessTarget(zk, zookeeper, data_dir, brokers, rng, nursery, network)
        try:
            for broker_id in target.broker_ids:
                await target.start(broker_id)
            await wait_ready(target)
            yield target
        finally:
            with trio.CancelScope(shield=True):
                await target.stop_all()
            nursery.cancel_scope.cancel()
