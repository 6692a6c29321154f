"""An embedded cluster for tests, the demo and embedding: a zkstub server and N brokers on one
network (`"sim"`: a seeded SimNetwork, for virtual time; `"tcp"`: real TCP on 127.0.0.1).

    async with open_cluster(brokers=3, seed=0, network="sim") as cluster:
        controller = await cluster.wait_for_controller()
        await cluster.kill_broker(controller)

Broker ids are 1..N. Everything random comes from `seed`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import pathlib
import random
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import attrs
import trio

import actors
import transport
import zkstub
from kcore.server.broker import BrokerServer
from kcore.server.log_manager import MemoryLogStorage

logger = logging.getLogger("kcore.testing.cluster")

ZK_NODE = "zk"
ZK_PORT = 2181
BROKER_PORT = 9092


def broker_node(broker_id: int) -> str:
    return f"broker-{broker_id}"


@attrs.define(eq=False)
class EmbeddedCluster:
    network: Any  # transport.SimNetwork | transport.TcpNetwork
    zk_server: Any
    zk: Any  # a zkstub client for inspection
    rng: random.Random
    data_dir: pathlib.Path
    broker_count: int
    broker_overrides: Mapping[str, Any]
    clock: Callable[[], float]
    _nursery: trio.Nursery
    _zk_settings: dict[str, Any] = attrs.field(factory=dict)  # to start it again the same way
    _zk_scope: trio.CancelScope | None = None
    brokers: dict[int, BrokerServer] = attrs.field(factory=dict)
    _scopes: dict[int, trio.CancelScope] = attrs.field(factory=dict)
    _clients: int = 0
    # Per broker, its "disk" when logs are kept in memory (simulations); None: real files.
    disks: dict[int, Any] | None = None
    external_zookeeper: str | None = None  # its connect string, when not embedded

    @property
    def is_sim(self) -> bool:
        return isinstance(self.network, transport.SimNetwork)

    @property
    def zk_connect(self) -> str:
        if self.external_zookeeper is not None:
            return self.external_zookeeper
        host, port = self.zk_server.address[0], self.zk_server.address[1]
        return f"{host}:{port}"

    def broker_config(self, broker_id: int) -> Any:
        from kcore.config import KafkaConfig

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
            log_storage=None
            if self.disks is None
            else self.disks.setdefault(broker_id, MemoryLogStorage()),
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
            if await self.zk.exists(path, watch=lambda _event, gone=gone: gone.set()) is None:
                return
            await gone.wait()

    async def kill_broker(
        self, broker_id: int, *, power_loss: bool = False, torn_tail: bool = False
    ) -> None:
        """A crash: tasks cancelled, memory lost, disk kept, the ZooKeeper session left to
        expire (its registration stays until then, as with a real crash). With in-memory
        logs, `power_loss` also drops what was not fsynced (`torn_tail`: any prefix of it
        survives, possibly mid-batch); real files keep what the OS holds."""
        broker = self._running(broker_id)
        if broker.zk_client is not None:
            broker.zk_client.abort()
        if self.is_sim:
            self.network.kill_node(broker_node(broker_id))
        await self._stop_task(broker_id)
        if self.disks is not None and broker_id in self.disks:
            self.disks[broker_id].crash(self.rng, power_loss=power_loss, torn_tail=torn_tail)

    async def stop_broker(self, broker_id: int) -> None:
        """A clean shutdown: the session is closed, so the registration goes at once."""
        await self._running(broker_id).shutdown()
        await self._stop_task(broker_id)

    async def restart_broker(self, broker_id: int) -> BrokerServer:
        if broker_id in self.brokers:
            await self.stop_broker(broker_id)
        return await self.start_broker(broker_id)

    async def expire_session(self, broker_id: int) -> None:
        if self.external_zookeeper is not None:
            raise ValueError(f"ZooKeeper runs elsewhere ({self.external_zookeeper})")
        broker = self._running(broker_id)
        await self.zk_server.expire_session(broker.zk_client.session_id)

    def _running(self, broker_id: int) -> BrokerServer:
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise ValueError(f"broker {broker_id} is not running (running: {sorted(self.brokers)})")
        return broker

    async def _stop_task(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self._scopes.pop(broker_id).cancel()
        await trio.lowlevel.checkpoint()

    # -- ZooKeeper ------------------------------------------------------------------------

    async def _start_zookeeper(self) -> None:
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                async with zkstub.open_server(**self._zk_settings) as server:
                    task_status.started(server)
                    await trio.sleep_forever()

        self.zk_server = await self._nursery.start(run, name="zookeeper")
        self._zk_scope = scope

    async def kill_zookeeper(self) -> None:
        """The ZooKeeper process dies: connections reset, sessions frozen in its data dir
        (they expire after a restart unless their clients come back in time)."""
        if self.external_zookeeper is not None:
            raise ValueError(f"ZooKeeper runs elsewhere ({self.external_zookeeper})")
        if self._zk_settings.get("data_dir") is None:
            raise ValueError(
                "ZooKeeper can be restarted only with open_cluster(persist_zookeeper=True)"
            )
        if self._zk_scope is None:
            raise ValueError("ZooKeeper is not running")
        if self.is_sim:
            self.network.kill_node(ZK_NODE)
        self._zk_scope.cancel()
        self._zk_scope = None
        await trio.lowlevel.checkpoint()

    async def start_zookeeper(self) -> None:
        """Restarts a killed ZooKeeper from its data dir, at the same address."""
        if self._zk_scope is not None:
            raise ValueError("ZooKeeper is already running")
        await self._start_zookeeper()

    @property
    def zookeeper_running(self) -> bool:
        return self._zk_scope is not None

    # -- clients --------------------------------------------------------------------------

    def bootstrap(self) -> list[tuple[str, int]]:
        """The running brokers' addresses, in broker id order."""
        return [
            (b.endpoints[0].host, b.endpoints[0].port)
            for _, b in sorted(self.brokers.items())
            if b.endpoints
        ]

    def _client_args(self, kind: str) -> dict[str, Any]:
        self._clients += 1
        name = f"{kind}-{self._clients}"
        network = self.network.node(name)
        return {"network": network, "rng": random.Random(self.rng.getrandbits(64))}

    def admin(self, **settings: Any) -> Any:
        """A `kcore.client.Admin` bound to this cluster (use it with `async with`)."""
        from kcore.client import Admin

        return Admin(self.bootstrap(), **self._client_args("admin"), **settings)

    def producer(self, **settings: Any) -> Any:
        """A `kcore.client.Producer`; settings are Kafka's (acks, linger_ms, ...)."""
        from kcore.client import Producer

        return Producer(self.bootstrap(), **self._client_args("producer"), **settings)

    def consumer(self, **settings: Any) -> Any:
        from kcore.client import Consumer

        return Consumer(self.bootstrap(), **self._client_args("consumer"), **settings)

    # -- the controller -------------------------------------------------------------------

    def active_controllers(self) -> list[int]:
        """Running brokers whose controller believes it is active."""
        return sorted(
            b.broker_id for b in self.brokers.values() if b.controller and b.controller.is_active
        )

    def controller_id(self) -> int | None:
        """The active controller with the highest epoch, if any."""
        active = [self.brokers[b] for b in self.active_controllers()]
        if not active:
            return None
        return max(active, key=lambda b: b.controller.epoch).broker_id

    def controller_epoch(self) -> int | None:
        controller = self.controller_id()
        return None if controller is None else self.brokers[controller].controller.epoch

    async def wait_for_controller(self, timeout: float = math.inf) -> int:
        """Waits until ZooKeeper's /controller names a running broker that is active and
        knows every running broker (so a topic created next may use all of them)."""
        from kcore.zk_client import KafkaZkClient

        zk_client = KafkaZkClient(self.zk, self.clock)
        with trio.fail_after(timeout):
            while True:
                registered = await zk_client.get_controller_id()
                if registered is not None and registered in self.active_controllers():
                    known = self.brokers[registered].controller.context.live_broker_ids
                    running = {b.broker_id for b in self.brokers.values() if b.broker_epoch >= 0}
                    if running <= known:
                        return registered
                await trio.sleep(0.01)


@contextlib.asynccontextmanager
async def open_cluster(
    brokers: int = 3,
    *,
    seed: int = 0,
    network: str | Any = "sim",
    data_dir: pathlib.Path | str | None = None,
    broker_config: Mapping[str, Any] | None = None,
    tick_time: float = 2.0,
    clock: Callable[[], float] | None = None,
    logs: str = "files",
    persist_zookeeper: bool = False,
    zookeeper_connect: str | None = None,
) -> AsyncIterator[EmbeddedCluster]:
    """`logs="memory"` keeps the brokers' logs in memory (simulations: kills may lose
    unflushed data); `"files"` writes them under `data_dir` (a temp dir by default).
    `persist_zookeeper` gives ZooKeeper a data dir (every write fsynced), which
    `kill_zookeeper` / `start_zookeeper` need. `zookeeper_connect` uses a ZooKeeper that
    runs elsewhere instead of the embedded zkstub server (`"zookeeper://host:port/chroot"`
    for a real ZooKeeper, through kazoo); the cluster then cannot kill it."""
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    if logs not in ("files", "memory"):
        raise ValueError(f"logs must be 'files' or 'memory', not {logs!r}")
    rng = random.Random(seed)
    if network == "sim":
        network = transport.SimNetwork(seed)
    elif network == "tcp":
        network = transport.TcpNetwork()
    elif isinstance(network, str):
        raise ValueError(f"network must be 'sim', 'tcp' or a Network, not {network!r}")
    is_sim = isinstance(network, transport.SimNetwork)
    wall_clock = clock or _virtual_wall_clock()
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="kcore-"))
        root = pathlib.Path(data_dir)
        zk_settings: dict[str, Any] = {
            "network": network.node(ZK_NODE),
            "address": (ZK_NODE, ZK_PORT) if is_sim else ("127.0.0.1", 0),
            "tick_time": tick_time,
            "clock": wall_clock,
            "data_dir": root / "zookeeper" if persist_zookeeper else None,
        }
        async with actors.open_background_nursery() as nursery:
            cluster = EmbeddedCluster(
                network, None, None, rng, root, brokers, dict(broker_config or {}),
                wall_clock, nursery, zk_settings,
            )  # fmt: skip
            if zookeeper_connect is None:
                await cluster._start_zookeeper()
                # A restart must find it at the same address (a real port, with TCP).
                zk_settings["address"] = cluster.zk_server.address
            else:
                cluster.external_zookeeper = zookeeper_connect
            async with zkstub.connect(
                cluster.zk_connect,
                network=network.node("inspector"),
                rng=random.Random(rng.getrandbits(64)),
            ) as zk:
                cluster.zk = zk
                if logs == "memory":
                    cluster.disks = {}
                for broker_id in range(1, brokers + 1):
                    await cluster.start_broker(broker_id)
                try:
                    yield cluster
                finally:
                    nursery.cancel_scope.cancel()


def _virtual_wall_clock() -> Callable[[], float]:
    """Wall-clock stamps that follow Trio's clock from a fixed origin, so a seeded run stamps
    the same znode times twice."""
    origin = 1_700_000_000.0

    def now() -> float:
        return origin + trio.current_time()

    return now
