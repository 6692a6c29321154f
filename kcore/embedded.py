"""kcore inside a Trio application: one broker (`open_broker`), or a whole cluster in this
process (`open_cluster`: a ZooKeeper and brokers 1..N), each living in the caller's task
and stopped cleanly when the `async with` block ends.

    async with kcore.open_cluster(brokers=3) as cluster:
        async with kcore.Producer(cluster.bootstrap_servers) as producer:
            await producer.send_and_wait("t", b"v")

Real TCP on 127.0.0.1 and a fresh random.Random unless given. `kcore.testing.open_cluster`
is the same cluster with the hooks tests need (crashes, expired sessions, a simulated
network under virtual time); its `EmbeddedCluster` extends `Cluster`.
"""

from __future__ import annotations

import contextlib
import math
import pathlib
import random
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import attrs
import trio

import actors
import transport
import zkstub
from kcore.client import Admin, Consumer, Producer
from kcore.common import EndPoint
from kcore.config import ConfigError, KafkaConfig, parse_http_listener
from kcore.errors import NotControllerError
from kcore.server.broker import BrokerServer
from kcore.server.log_manager import MemoryLogStorage
from kcore.zk_client import KafkaZkClient

__all__ = [
    "BROKER_PORT",
    "ZK_NODE",
    "ZK_PORT",
    "Cluster",
    "EmbeddedBroker",
    "broker_node",
    "open_broker",
    "open_cluster",
    "start_cluster",
]

# Node names and ports on a network that addresses nodes by name (transport.SimNetwork).
ZK_NODE = "zk"
ZK_PORT = 2181
BROKER_PORT = 9092

# Brokers of one in-process cluster retry an incomplete controlled shutdown after this long
# (Kafka's default, 5 s, is for brokers on separate machines): stopping the last broker,
# whose leaderships have nowhere to go, would otherwise take controlled.shutdown.max.retries
# times 5 s.
CLUSTER_BROKER_DEFAULTS = {"controlled.shutdown.retry.backoff.ms": 100}


def broker_node(broker_id: int) -> str:
    return f"broker-{broker_id}"


def _address(endpoint: EndPoint) -> str:
    return f"{endpoint.host}:{endpoint.port}"


# -- one broker ---------------------------------------------------------------------------


@attrs.frozen
class EmbeddedBroker:
    """A running broker (`open_broker`): where it listens and who it is."""

    server: BrokerServer

    @property
    def broker_id(self) -> int:
        return self.server.broker_id

    @property
    def cluster_id(self) -> str | None:
        return self.server.cluster_id

    @property
    def endpoints(self) -> tuple[EndPoint, ...]:
        """Its listeners as bound (a configured port 0 is the port the OS chose)."""
        return self.server.endpoints

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) of its first listener, the one clients are told about."""
        return (self.endpoints[0].host, self.endpoints[0].port)

    @property
    def bootstrap_servers(self) -> str:
        """`"host:port"` of its first listener, for a client's bootstrap servers."""
        return _address(self.endpoints[0])

    @property
    def http_address(self) -> tuple[str, int] | None:
        """(host, port) its `http.listener` serves /metrics on, as bound; None if unset."""
        return self.server.http_address


@contextlib.asynccontextmanager
async def open_broker(
    config: Mapping[str, Any] | KafkaConfig,
    *,
    network: transport.Network | None = None,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[EmbeddedBroker]:
    """Runs one broker for the duration of the block: Kafka's settings as a dict (or a
    KafkaConfig), so `broker.id`, `zookeeper.connect` and usually `listeners` and
    `log.dirs`. Entered once it is registered and serving. On exit, Kafka's clean
    shutdown (leadership moved away, logs flushed, ZooKeeper session closed); if the block
    is cancelled, the broker stops as in a crash, which its next start recovers from."""
    if not isinstance(config, KafkaConfig):
        config = KafkaConfig.from_dict(config)
    server = BrokerServer(
        config,
        network if network is not None else transport.TcpNetwork(),
        rng if rng is not None else random.Random(),
        clock=clock,
    )
    async with actors.open_background_nursery() as nursery:
        await nursery.start(server.run)
        try:
            yield EmbeddedBroker(server)
        finally:
            await server.shutdown()


# -- a cluster ----------------------------------------------------------------------------


@attrs.define(eq=False)
class Cluster:
    """ZooKeeper (zkstub, or one elsewhere) and brokers 1..N in this process.

    Clients bound to it: `admin()`, `producer(...)`, `consumer(...)` (Kafka's client
    settings as keywords); for clients made elsewhere, `bootstrap_servers`. Operations:
    `stop_broker(id)` (a clean, controlled shutdown), `start_broker(id)`,
    `restart_broker(id)`, `wait_for_controller()`. `brokers` maps each running broker's id
    to its BrokerServer."""

    network: transport.Network
    rng: random.Random
    data_dir: pathlib.Path
    broker_count: int
    broker_overrides: Mapping[str, Any]
    clock: Callable[[], float]
    _nursery: trio.Nursery
    _zk_settings: dict[str, Any]  # to start it again the same way
    external_zookeeper: str | None = None  # its connect string, when not embedded
    zk_server: Any = None  # the embedded zkstub server
    # Where the embedded zkstub serves /metrics, as bound (None: not asked for; see
    # `open_cluster`'s zookeeper_http_listener), and where it is asked to (a restart keeps
    # the port first bound).
    zookeeper_http_address: tuple[str, int] | None = None
    zookeeper_http: tuple[str, int] | None = None
    brokers: dict[int, BrokerServer] = attrs.field(factory=dict)
    _zk: Any = None  # a zkstub client of the cluster's own
    _zk_scope: trio.CancelScope | None = None
    _scopes: dict[int, trio.CancelScope] = attrs.field(factory=dict)
    _clients: int = 0

    @property
    def is_sim(self) -> bool:
        return isinstance(self.network, transport.SimNetwork)

    @property
    def zk_connect(self) -> str:
        """ZooKeeper's connect string (`zookeeper.connect` for another broker to join)."""
        if self.external_zookeeper is not None:
            return self.external_zookeeper
        host, port = self.zk_server.address[0], self.zk_server.address[1]
        return f"{host}:{port}"

    def broker_config(self, broker_id: int) -> KafkaConfig:
        host = broker_node(broker_id) if self.is_sim else "127.0.0.1"
        port = BROKER_PORT if self.is_sim else 0
        settings = {
            "broker.id": broker_id,
            "listeners": f"PLAINTEXT://{host}:{port}",
            "log.dirs": str(self.data_dir / f"broker-{broker_id}"),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": 6000,
        }
        settings.update(self.broker_overrides)
        return KafkaConfig.from_dict(settings)

    def _log_storage(self, broker_id: int) -> MemoryLogStorage | None:
        """Where the broker keeps its logs: None is files under its log.dirs."""
        return None

    # -- brokers --------------------------------------------------------------------------

    async def start_broker(self, broker_id: int) -> BrokerServer:
        """Starts a broker. After a crash its old registration stays until its session
        expires, and Kafka refuses to start while it is there; this waits for that first."""
        if broker_id in self.brokers:
            raise ValueError(f"broker {broker_id} is already running")
        await self._wait_registration_gone(broker_id)
        broker = BrokerServer(
            self.broker_config(broker_id),
            self.network,
            random.Random(self.rng.getrandbits(64)),
            clock=self.clock,
            node_name=broker_node(broker_id),
            log_storage=self._log_storage(broker_id),
        )
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await broker.run(task_status=task_status)
            if self.brokers.get(broker_id) is broker:
                del self.brokers[broker_id]

        await self._nursery.start(run, name=f"broker-{broker_id}")
        self.brokers[broker_id] = broker
        self._scopes[broker_id] = scope
        return broker

    async def _wait_registration_gone(self, broker_id: int) -> None:
        path = f"/brokers/ids/{broker_id}"
        while True:
            gone = trio.Event()
            if await self._zk.exists(path, watch=lambda _event, gone=gone: gone.set()) is None:
                return
            await gone.wait()

    async def stop_broker(self, broker_id: int) -> None:
        """A clean shutdown: the session is closed, so the registration goes at once."""
        await self._running(broker_id).shutdown()
        await self._stop_task(broker_id)

    async def restart_broker(self, broker_id: int) -> BrokerServer:
        if broker_id in self.brokers:
            await self.stop_broker(broker_id)
        return await self.start_broker(broker_id)

    async def shutdown(self) -> None:
        """Stops every running broker cleanly, one after the other."""
        for broker_id in sorted(self.brokers):
            await self.stop_broker(broker_id)

    def _running(self, broker_id: int) -> BrokerServer:
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise ValueError(f"broker {broker_id} is not running (running: {sorted(self.brokers)})")
        return broker

    async def _stop_task(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self._scopes.pop(broker_id).cancel()
        await trio.lowlevel.checkpoint()

    async def _start_zookeeper(self) -> None:
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                async with zkstub.open_server(**self._zk_settings) as server:
                    async with trio.open_nursery() as nursery:
                        http = None
                        if self.zookeeper_http is not None:
                            host, port = self.zookeeper_http
                            http = await nursery.start(
                                server.serve_metrics, host or "0.0.0.0", port
                            )
                        task_status.started((server, http))
                        await trio.sleep_forever()

        self.zk_server, self.zookeeper_http_address = await self._nursery.start(
            run, name="zookeeper"
        )
        if self.zookeeper_http_address is not None:
            self.zookeeper_http = self.zookeeper_http_address
        self._zk_scope = scope

    # -- clients --------------------------------------------------------------------------

    def bootstrap(self) -> list[tuple[str, int]]:
        """The running brokers' addresses, in broker id order."""
        return [
            (b.endpoints[0].host, b.endpoints[0].port)
            for _, b in sorted(self.brokers.items())
            if b.endpoints
        ]

    @property
    def bootstrap_servers(self) -> str:
        """The running brokers' addresses as `"host:port,host:port"`."""
        return ",".join(f"{host}:{port}" for host, port in self.bootstrap())

    def http_addresses(self) -> dict[int, tuple[str, int]]:
        """Where each running broker serves /metrics (those with an `http.listener`:
        `broker_config={"http.listener": "http://127.0.0.1:0"}` gives each its own port)."""
        return {
            broker_id: b.http_address
            for broker_id, b in sorted(self.brokers.items())
            if b.http_address is not None
        }

    def _client_args(self, kind: str) -> dict[str, Any]:
        self._clients += 1
        name = f"{kind}-{self._clients}"
        network = self.network.node(name)
        return {"network": network, "rng": random.Random(self.rng.getrandbits(64))}

    def admin(self, **settings: Any) -> Admin:
        """A `kcore.Admin` bound to this cluster (use it with `async with`)."""
        return Admin(self.bootstrap(), **self._client_args("admin"), **settings)

    def producer(self, **settings: Any) -> Producer:
        """A `kcore.Producer`; settings are Kafka's (acks, linger_ms, ...)."""
        return Producer(self.bootstrap(), **self._client_args("producer"), **settings)

    def consumer(self, **settings: Any) -> Consumer:
        """A `kcore.Consumer`; settings are Kafka's (auto_offset_reset, ...)."""
        return Consumer(self.bootstrap(), **self._client_args("consumer"), **settings)

    # -- the controller -------------------------------------------------------------------

    def active_controllers(self) -> list[int]:
        """Running brokers whose controller believes it is active."""
        return sorted(
            b.broker_id for b in self.brokers.values() if b.controller and b.controller.is_active
        )

    async def wait_for_controller(self, timeout: float = math.inf) -> int:
        """Waits until ZooKeeper's /controller names a running broker that is active and
        knows every running broker (so a topic created next may use all of them)."""
        zk_client = KafkaZkClient(self._zk, self.clock)
        with trio.fail_after(timeout):
            while True:
                registered = await zk_client.get_controller_id()
                if registered is not None and registered in self.active_controllers():
                    # Asked through the controller's event queue: its context is the event
                    # task's alone.
                    try:
                        known = await self.brokers[registered].controller.live_broker_ids()
                    except NotControllerError:
                        known = []
                    running = {b.broker_id for b in self.brokers.values() if b.broker_epoch >= 0}
                    if running <= set(known):
                        return registered
                await trio.sleep(0.01)


C = TypeVar("C", bound=Cluster)


@contextlib.asynccontextmanager
async def start_cluster(
    cluster_type: type[C],
    brokers: int,
    *,
    network: transport.Network,
    rng: random.Random,
    data_dir: pathlib.Path | str | None,
    broker_config: Mapping[str, Any] | None,
    clock: Callable[[], float],
    tick_time: float,
    persist_zookeeper: bool,
    zookeeper_connect: str | None,
    **fields: Any,
) -> AsyncIterator[C]:
    """The machinery under both `open_cluster`s: ZooKeeper (unless `zookeeper_connect`
    names one elsewhere) and brokers 1..N, each started in turn, as a `cluster_type` built
    with `fields` too. On exit everything is cancelled, as in a power cut; a clean stop is
    the caller's (`Cluster.shutdown`). Every random choice comes from `rng`. Unless
    `broker_config` says otherwise, `__consumer_offsets` gets min(3, brokers) replicas."""
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    is_sim = isinstance(network, transport.SimNetwork)
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="kcore-"))
        root = pathlib.Path(data_dir)
        zk_settings: dict[str, Any] = {
            "network": network.node(ZK_NODE),
            "address": (ZK_NODE, ZK_PORT) if is_sim else ("127.0.0.1", 0),
            "tick_time": tick_time,
            "clock": clock,
            "data_dir": root / "zookeeper" if persist_zookeeper else None,
        }
        async with actors.open_background_nursery() as nursery:
            cluster = cluster_type(
                network=network,
                rng=rng,
                data_dir=root,
                broker_count=brokers,
                broker_overrides={
                    # A cluster smaller than Kafka's default offsets replication factor
                    # still gets consumer groups (Kafka's own test clusters do the same).
                    "offsets.topic.replication.factor": min(3, brokers),
                    **(broker_config or {}),
                },
                clock=clock,
                nursery=nursery,
                zk_settings=zk_settings,
                external_zookeeper=zookeeper_connect,
                **fields,
            )
            if zookeeper_connect is None:
                await cluster._start_zookeeper()
                # A restart must find it at the same address (a real port, with TCP).
                zk_settings["address"] = cluster.zk_server.address
            async with zkstub.connect(
                cluster.zk_connect,
                network=network.node("inspector"),
                rng=random.Random(rng.getrandbits(64)),
            ) as zk:
                cluster._zk = zk
                for broker_id in range(1, brokers + 1):
                    await cluster.start_broker(broker_id)
                try:
                    yield cluster
                finally:
                    nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def open_cluster(
    brokers: int = 3,
    *,
    data_dir: pathlib.Path | str | None = None,
    broker_config: Mapping[str, Any] | None = None,
    zookeeper_connect: str | None = None,
    zookeeper_http_listener: str | None = None,
    network: transport.Network | None = None,
    rng: random.Random | None = None,
) -> AsyncIterator[Cluster]:
    """A cluster in this process: an embedded ZooKeeper (zkstub; or the one
    `zookeeper_connect` names, `"zookeeper://host:port/chroot"` for a real ZooKeeper) and
    brokers 1..N listening on 127.0.0.1. Entered once a controller is elected and knows
    every broker; on exit every broker shuts down cleanly.

    `data_dir` holds the brokers' logs and ZooKeeper's data: open the cluster on the same
    directory again and its topics and records are there. A temporary directory, removed
    on exit, when None. `broker_config`: Kafka settings for every broker.

    `zookeeper_http_listener="http://host:port"` has the embedded zkstub serve /metrics
    there as `zkstub serve --http` does (ZooKeeper's Prometheus names; port 0 picks one),
    as the brokers' `http.listener` does theirs: `cluster.zookeeper_http_address` is
    where, as bound."""
    zookeeper_http = None
    if zookeeper_http_listener is not None:
        if zookeeper_connect is not None:
            raise ValueError(
                "zookeeper_http_listener serves the embedded ZooKeeper's metrics; "
                f"{zookeeper_connect} is not embedded"
            )
        try:
            zookeeper_http = parse_http_listener(zookeeper_http_listener)
        except ConfigError as error:
            raise ValueError(f"zookeeper_http_listener: {error}") from None
    async with start_cluster(
        Cluster,
        brokers,
        network=network if network is not None else transport.TcpNetwork(),
        rng=rng if rng is not None else random.Random(),
        data_dir=data_dir,
        broker_config={**CLUSTER_BROKER_DEFAULTS, **(broker_config or {})},
        clock=time.time,
        tick_time=2.0,  # ZooKeeper's default tickTime
        persist_zookeeper=True,
        zookeeper_connect=zookeeper_connect,
        zookeeper_http=zookeeper_http,
    ) as cluster:
        await cluster.wait_for_controller()
        try:
            yield cluster
        finally:
            await cluster.shutdown()
