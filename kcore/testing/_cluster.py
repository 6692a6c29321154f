"""An embedded cluster for tests and the demo: `kcore.open_cluster`'s cluster on a seeded
network (`"sim"`: a SimNetwork, for virtual time; `"tcp"`: real TCP on 127.0.0.1), with
the hooks tests need: crashes with or without power loss, expired sessions, a ZooKeeper
that dies and comes back, and a look at the controllers.

    async with open_cluster(brokers=3, seed=0, network="sim") as cluster:
        controller = await cluster.wait_for_controller()
        await cluster.kill_broker(controller)

Broker ids are 1..N. Everything random comes from `seed`.
"""

from __future__ import annotations

import contextlib
import pathlib
import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import attrs
import trio

import transport
from kcore.embedded import (
    BROKER_PORT,
    ZK_NODE,
    ZK_PORT,
    Cluster,
    broker_node,
    start_cluster,
)
from kcore.server.log_manager import MemoryLogStorage

__all__ = ["BROKER_PORT", "ZK_NODE", "ZK_PORT", "EmbeddedCluster", "broker_node", "open_cluster"]


@attrs.define(eq=False)
class EmbeddedCluster(Cluster):
    # Per broker, its "disk" when logs are kept in memory (simulations); None: real files.
    disks: dict[int, Any] | None = None

    @property
    def zk(self) -> Any:
        """A zkstub client of the cluster's ZooKeeper, for inspection."""
        return self._zk

    def _log_storage(self, broker_id: int) -> MemoryLogStorage | None:
        if self.disks is None:
            return None
        return self.disks.setdefault(broker_id, MemoryLogStorage())

    # -- brokers --------------------------------------------------------------------------

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

    async def expire_session(self, broker_id: int) -> None:
        if self.external_zookeeper is not None:
            raise ValueError(f"ZooKeeper runs elsewhere ({self.external_zookeeper})")
        broker = self._running(broker_id)
        await self.zk_server.expire_session(broker.zk_client.session_id)

    # -- ZooKeeper ------------------------------------------------------------------------

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

    # -- the controller -------------------------------------------------------------------

    def controller_id(self) -> int | None:
        """The active controller with the highest epoch, if any."""
        active = [self.brokers[b] for b in self.active_controllers()]
        if not active:
            return None
        return max(active, key=lambda b: b.controller.epoch).broker_id

    def controller_epoch(self) -> int | None:
        controller = self.controller_id()
        return None if controller is None else self.brokers[controller].controller.epoch


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
    for a real ZooKeeper, through kazoo); the cluster then cannot kill it. On exit
    everything stops as in a power cut (no clean shutdown)."""
    if logs not in ("files", "memory"):
        raise ValueError(f"logs must be 'files' or 'memory', not {logs!r}")
    rng = random.Random(seed)
    if network == "sim":
        network = transport.SimNetwork(seed)
    elif network == "tcp":
        network = transport.TcpNetwork()
    elif isinstance(network, str):
        raise ValueError(f"network must be 'sim', 'tcp' or a Network, not {network!r}")
    async with start_cluster(
        EmbeddedCluster,
        brokers,
        network=network,
        rng=rng,
        data_dir=data_dir,
        broker_config=broker_config,
        clock=clock or _virtual_wall_clock(),
        tick_time=tick_time,
        persist_zookeeper=persist_zookeeper,
        zookeeper_connect=zookeeper_connect,
        disks={} if logs == "memory" else None,
    ) as cluster:
        yield cluster


def _virtual_wall_clock() -> Callable[[], float]:
    """Wall-clock stamps that follow Trio's clock from a fixed origin, so a seeded run stamps
    the same znode times twice."""
    origin = 1_700_000_000.0

    def now() -> float:
        return origin + trio.current_time()

    return now
