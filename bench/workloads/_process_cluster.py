"""The benchmark cluster as users deploy one: ZooKeeper (`python -m zkstub serve`) and N
`kcore broker --config FILE` processes on 127.0.0.1, each its own OS process (one Python
process is one core), with the workload's clients in the workload's process.

    async with open_process_cluster(brokers=3) as cluster:
        await create_topic(cluster, "t", partitions=4, replication_factor=3)
        async with cluster.producer(acks="all") as producer: ...
        deleted = await cluster.watch_deregistration(2)
        await cluster.kill_broker(2)          # SIGKILL: the session left to expire
        seen_at = await deleted.wait()        # the registration's deletion, as a watch saw it
        led = await cluster.wait_until_led("t", 4, not_by=2)

It has the embedded bench cluster's shape where that makes sense (`bootstrap_servers`,
`zk_connect`, `admin()` / `producer()` / `consumer()`, `wait_for_controller`,
`kill_broker`), but it sees the brokers only as a client or ZooKeeper does: who leads a
partition is what a Metadata request to a broker answers, the controller is what
/controller names.

Every child's stdout and stderr go to files in the cluster's temp dir (with its data). A
child that exits while the cluster is open, unless killed through `kill_broker`, ends the
block with `ChildDied` naming it, its exit status and the last lines of its stderr. Every
wait is bounded; on exit (an error or a cancellation too) every child is SIGKILLed and
reaped: nothing outlives the block, and its temp dir goes with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

import actors
import transport
import zkstub
from kcore import errors, zkdata
from kcore.client import Admin, Consumer, Producer
from kcore.client._connections import Address, Connections
from kcore.client._metadata import Cluster as ClientView
from kcore.common import NO_LEADER
from kcore.embedded import CLUSTER_BROKER_DEFAULTS
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import MetadataRequest, MetadataResponse

__all__ = [
    "ChildDied",
    "Deregistration",
    "Led",
    "MetadataLook",
    "ProcessCluster",
    "Terminated",
    "open_metadata_look",
    "open_process_cluster",
    "watch_deregistration",
]

log = logging.getLogger("bench.process_cluster")

START_TIMEOUT = 60.0  # a child's start: interpreter, imports, ZooKeeper registration
READY_TIMEOUT = 60.0  # until every broker's metadata names every broker and a controller
KILL_TIMEOUT = 10.0  # reaping a SIGKILLed child
# Metadata polls (`MetadataLook.wait_until_led`): a broker is asked at most this often,
# about at most this many partitions at once. An answer about 10 000 partitions cost a
# broker ~0.1 s of CPU (measured): asked for whole, the watching would slow what it watches.
METADATA_POLL_INTERVAL = 0.05
METADATA_ASK_PARTITIONS = 1000
_STDERR_TAIL_BYTES = 8192
SHM = "/dev/shm"  # tmpfs on Linux: `storage="memory"`


class ChildDied(Exception):
    """A child of the cluster exited while the cluster needed it (at start, or while the
    block ran), and was not killed by `kill_broker`."""

    def __init__(
        self, name: str, returncode: int | None, stderr_tail: str, what: str = "died"
    ) -> None:
        status = "still running" if returncode is None else f"exit status {returncode}"
        tail = f"; stderr (last lines): {stderr_tail}" if stderr_tail else "; nothing on stderr"
        super().__init__(f"{name} {what} ({status}){tail}")
        self.name = name
        self.returncode = returncode


@attrs.define(eq=False)
class _Child:
    """One child process, its output files, and whether its exit was asked for."""

    name: str  # "zkstub", "broker 2": what an error calls it
    process: trio.Process
    stdout_path: Path
    stderr_path: Path
    killed: bool = False  # by us: its exit is no failure

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def stderr_tail(self) -> str:
        """Its stderr's last few lines, joined (the cause of a failure is usually there)."""
        try:
            with self.stderr_path.open("rb") as file:
                file.seek(max(0, file.seek(0, os.SEEK_END) - _STDERR_TAIL_BYTES))
                text = file.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return " | ".join(line[:300] for line in lines[-5:])

    def cpu_seconds(self) -> float | None:
        """User + system CPU time it used so far (Linux's /proc), None where unknown."""
        return _process_cpu_seconds(self.process.pid)

    async def kill(self) -> None:
        self.killed = True
        if self.process.returncode is None:
            self.process.kill()
        with trio.move_on_after(KILL_TIMEOUT) as scope:
            await self.process.wait()
        if scope.cancelled_caught:  # SIGKILL not reaped in 10 s: say so, do not hang
            log.error("%s (pid %d) was not reaped after SIGKILL", self.name, self.process.pid)

    def died(self) -> ChildDied:
        return ChildDied(self.name, self.process.returncode, self.stderr_tail())


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


async def _read_line(child: _Child, stream: Any, what: str, timeout: float) -> str:
    """The child's first stdout line (where it listens); ChildDied if it exits or says
    nothing within `timeout`."""
    data = b""
    with trio.move_on_after(timeout):
        while not data.endswith(b"\n"):
            chunk = await stream.receive_some(1)
            if not chunk:  # it exited
                with trio.move_on_after(KILL_TIMEOUT):
                    await child.process.wait()
                raise child.died()
            data += chunk
        return data.decode().strip()
    raise ChildDied(
        child.name, child.process.returncode, child.stderr_tail(),
        f"printed no {what!r} line within {timeout} s",
    )  # fmt: skip


@attrs.frozen
class Led:
    """When every partition asked about was led by a survivor as Metadata showed it: first
    seen in the answer that arrived at `seen_at` (an upper bound), while the last answer
    that did not show it was asked for at `not_yet_at` (a lower bound: the change came
    after that). The pair brackets the moment; their difference is the resolution."""

    seen_at: float
    not_yet_at: float
    polls: int


@attrs.define(eq=False)
class Deregistration:
    """A watch on a broker's /brokers/ids/N: `wait()` returns when (Trio's clock) this
    process learnt the registration was deleted: its session expired or closed."""

    path: str
    _seen: trio.Event = attrs.field(factory=trio.Event)
    at: float | None = None

    def _on_event(self, _event: Any) -> None:
        if self.at is None:
            self.at = trio.current_time()
            self._seen.set()

    async def wait(self, timeout: float = 120.0) -> float:
        with trio.fail_after(timeout):
            await self._seen.wait()
        assert self.at is not None
        return self.at


async def watch_deregistration(zk: Any, broker_id: int) -> Deregistration:
    """A watch through the zkstub client `zk` on the broker's registration, set now
    (before the kill it is to see). If it is already gone, `wait()` returns at once."""
    watch = Deregistration(zkdata.broker_path(broker_id))
    if await zk.exists(watch.path, watch=watch._on_event) is None:
        watch._on_event(None)
    return watch


@attrs.define(eq=False)
class ProcessCluster:
    """A running process cluster (`open_process_cluster`): its children, where they
    listen, and clients and looks bound to it."""

    data_dir: Path
    zk_connect: str
    session_timeout_ms: int
    _zookeeper: _Child
    _zk: Any  # a zkstub client of this process's, for /controller and the watches
    _network: transport.TcpNetwork
    _rng: random.Random
    _nursery: trio.Nursery
    look: MetadataLook  # Metadata requests to one chosen broker
    _brokers: dict[int, _Child] = attrs.field(factory=dict)
    addresses: dict[int, Address] = attrs.field(factory=dict)  # running brokers only
    closing: bool = False
    failure: ChildDied | None = None

    # -- where things are -------------------------------------------------------------------

    @property
    def zk(self) -> Any:
        """This process's zkstub client of the cluster's ZooKeeper, for inspection."""
        return self._zk

    @property
    def broker_ids(self) -> list[int]:
        """The running brokers, in id order."""
        return sorted(b for b, child in self._brokers.items() if child.running)

    def bootstrap(self) -> list[Address]:
        return [self.addresses[b] for b in self.broker_ids if b in self.addresses]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.bootstrap())

    def pid(self, broker_id: int) -> int:
        return self._brokers[broker_id].process.pid

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds each running child used so far ("broker-1", ..., "zkstub"); a
        difference of two readings over a wall-clock interval is its share of a core."""
        readings = {f"broker-{b}": self._brokers[b].cpu_seconds() for b in self.broker_ids}
        readings["zkstub"] = self._zookeeper.cpu_seconds()
        return {name: cpu for name, cpu in readings.items() if cpu is not None}

    # -- clients ---------------------------------------------------------------------------

    def _client(self, kind: type, settings: Mapping[str, Any]) -> Any:
        rng = random.Random(self._rng.getrandbits(64))
        return kind(self.bootstrap(), network=self._network, rng=rng, **settings)

    def admin(self, **settings: Any) -> Admin:
        return self._client(Admin, settings)

    def producer(self, **settings: Any) -> Producer:
        return self._client(Producer, settings)

    def consumer(self, **settings: Any) -> Consumer:
        return self._client(Consumer, settings)

    # -- brokers ---------------------------------------------------------------------------

    async def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: no controlled shutdown; the registration stays until the session
        expires (`watch_deregistration` sees when)."""
        child = self._brokers.get(broker_id)
        if child is None or not child.running:
            raise ValueError(f"broker {broker_id} is not running (running: {self.broker_ids})")
        self.addresses.pop(broker_id, None)
        await child.kill()

    async def watch_deregistration(self, broker_id: int) -> Deregistration:
        return await watch_deregistration(self._zk, broker_id)

    # -- the controller --------------------------------------------------------------------

    async def controller_id(self) -> int | None:
        """The broker /controller names, None while there is none."""
        try:
            data, _ = await self._zk.get(zkdata.CONTROLLER)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_controller(data)

    async def controller_epoch(self) -> int | None:
        try:
            data, _ = await self._zk.get(zkdata.CONTROLLER_EPOCH)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_controller_epoch(data)

    async def wait_for_controller(self, timeout: float = READY_TIMEOUT) -> int:
        """Until /controller names a running broker and every running broker's metadata
        names that controller and every running broker (a topic created next may then use
        them all, and a client's first metadata names them whichever broker it asks)."""
        with trio.fail_after(timeout):
            while True:
                controller = await self.controller_id()
                if controller in self.broker_ids and await self._everyone_knows(controller):
                    return controller
                await trio.sleep(0.05)

    async def _everyone_knows(self, controller: int) -> bool:
        running = set(self.broker_ids)
        for broker_id in running:
            view = await self.metadata(broker_id, ())
            if view is None or view.controller_id != controller or set(view.brokers) != running:
                return False
        return True

    # -- what a client sees ----------------------------------------------------------------

    async def metadata(self, broker_id: int, topics: Iterable[str] | None) -> ClientView | None:
        return await self.look.metadata(self.addresses, broker_id, topics)

    async def leaders(self, topic: str, partitions: int) -> dict[int, int]:
        """Partition -> its leader, as the first running broker that answers says."""
        for broker_id in self.broker_ids:
            view = await self.metadata(broker_id, [topic])
            described = None if view is None else view.topic(topic)
            if described is not None:
                return {
                    p.partition: p.leader
                    for p in described.partitions[:partitions]
                    if p.leader != NO_LEADER
                }
        return {}

    async def wait_until_led(
        self, topic: str, partitions: int, *, not_by: int | None = None, timeout: float = 300.0
    ) -> Led:
        """Until every running broker's Metadata shows each of the topic's partitions led
        by a running broker other than `not_by` (see `MetadataLook.wait_until_led`)."""
        return await self.look.wait_until_led(
            self.addresses, {topic: partitions}, not_by=not_by, timeout=timeout
        )


@attrs.define(eq=False)
class MetadataLook:
    """Metadata requests to a chosen broker, read as a client reads them: how the process
    cluster sees leaders, and the election workloads in both clusters."""

    connections: Connections

    async def metadata(
        self, addresses: Mapping[int, Address], broker_id: int, topics: Iterable[str] | None
    ) -> ClientView | None:
        """The broker's answer about `topics` (None: all), or None when it does not answer
        (dead, not listening yet, timed out)."""
        address = addresses.get(broker_id)
        if address is None:
            return None
        request = MetadataRequest(None if topics is None else tuple(topics))
        try:
            response = await self.connections.request(
                address, ApiKey.METADATA, request, MetadataResponse, timeout=10.0
            )
        except errors.KafkaError:
            return None
        return ClientView.from_response(response)[0]

    async def wait_until_led(
        self,
        addresses: Mapping[int, Address],
        topics: Mapping[str, int],
        *,
        not_by: int | None = None,
        timeout: float = 300.0,
        poll_interval: float = METADATA_POLL_INTERVAL,
        ask_at_most: int = METADATA_ASK_PARTITIONS,
    ) -> Led:
        """Until every broker in `addresses` (but `not_by`) answers Metadata showing each
        topic's first `topics[name]` partitions led by a broker it lists, other than
        `not_by`: whichever broker a client asks, it finds every leader.

        Watching must cost the brokers little of the time being measured, and an answer
        about 10 000 partitions costs a broker about 0.1 s of CPU. So each broker is
        asked about its first topics not yet seen led, at most `ask_at_most` partitions'
        worth in one request, every `poll_interval` s; a topic seen led is not asked
        about again (a later answer could only be newer), and a broker whose answer
        showed all it was asked about led is asked about the next ones at once. The
        brokers are asked side by side. Many small topics make this cheap; one large
        topic is asked about whole. The resolution is `poll_interval` plus the round
        trips that find the rest led (see `Led`)."""
        polls = 0
        not_yet_at = trio.current_time()

        async def until_led_at(broker_id: int) -> None:
            nonlocal polls, not_yet_at
            waiting = list(topics)
            while True:
                round_began = trio.current_time()
                while waiting:
                    asked = _first_topics(waiting, topics, ask_at_most)
                    asked_at = trio.current_time()
                    view = await self.metadata(addresses, broker_id, asked)
                    polls += 1
                    led = [t for t in asked if _led(view, t, topics[t], not_by)]
                    waiting[:] = [t for t in waiting if t not in led]
                    if len(led) < len(asked):
                        not_yet_at = max(not_yet_at, asked_at)
                        break
                if not waiting:
                    return
                await trio.sleep_until(round_began + poll_interval)

        with trio.fail_after(timeout):
            # The brokers asked side by side: one busy answering does not delay the others.
            async with trio.open_nursery() as nursery:
                for broker_id in sorted(addresses):
                    if broker_id != not_by:
                        nursery.start_soon(until_led_at, broker_id)
        return Led(trio.current_time(), not_yet_at, polls)


def _first_topics(waiting: list[str], topics: Mapping[str, int], budget: int) -> list[str]:
    """The first of `waiting`, and those after it while their partitions fit `budget`."""
    chosen, total = [], 0
    for name in waiting:
        if chosen and total + topics[name] > budget:
            break
        chosen.append(name)
        total += topics[name]
    return chosen


def _led(view: ClientView | None, topic: str, partitions: int, not_by: int | None) -> bool:
    described = None if view is None else view.topic(topic)
    if described is None or described.num_partitions < partitions:
        return False
    return all(
        p.leader != NO_LEADER and p.leader != not_by and p.leader in view.brokers
        for p in described.partitions[:partitions]
    )


def _properties(settings: Mapping[str, Any]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


async def _spawn(root: Path, name: str, command: list[str]) -> tuple[_Child, Any]:
    """Starts a child with stdout piped (its first line says where it listens) and stderr
    to a file; returns it and its stdout stream."""
    slug = name.replace(" ", "-")
    stdout_path, stderr_path = root / f"{slug}.stdout", root / f"{slug}.stderr"
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr
        )
    return _Child(name, process, stdout_path, stderr_path), process.stdout


async def _copy_rest(stream: Any, path: Path) -> None:
    """What a child prints after its first line, kept in a file (a pipe nobody reads
    would block it once full)."""
    with path.open("ab") as file, contextlib.suppress(trio.ClosedResourceError):
        async for chunk in stream:
            file.write(chunk)
            file.flush()


@contextlib.asynccontextmanager
async def open_process_cluster(
    brokers: int = 3,
    broker_config: Mapping[str, Any] | None = None,
    *,
    session_timeout_ms: int = 6000,
    per_broker_config: Mapping[int, Mapping[str, Any]] | None = None,
    storage: str = "disk",
    start_late: Iterable[int] = (),
    seed: int | None = None,
) -> AsyncIterator[ProcessCluster]:
    """zkstub and brokers 1..N, each a process, with the embedded bench cluster's broker
    settings (`zookeeper.session.timeout.ms`, a 100 ms controlled-shutdown backoff,
    `offsets.topic.replication.factor` = min(3, N)) plus `broker_config`, and per broker
    `per_broker_config` on top. Entered once every broker's metadata names every broker
    and the controller. zkstub accepts session timeouts from 1 s to 60 s, so one broker
    may be given another than the rest. The brokers in `start_late` start once the others
    have a controller, so none of them is the first controller.

    `storage="memory"` puts the temp dir (logs, zkstub's data) on /dev/shm (tmpfs, where
    an fsync costs nothing), for the workloads that measure the controller, not the disk
    (the embedded cluster's `logs="memory"`): creating a partition's log fsyncs its
    directory, and on a busy shared disk 10 000 of them took minutes."""
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    settings = {
        "zookeeper.session.timeout.ms": session_timeout_ms,
        "offsets.topic.replication.factor": min(3, brokers),
        **CLUSTER_BROKER_DEFAULTS,
        **(broker_config or {}),
    }
    per_broker = {
        broker_id: {**settings, **(per_broker_config or {}).get(broker_id, {})}
        for broker_id in range(1, brokers + 1)
    }
    children: list[_Child] = []  # every child started, to be killed on the way out
    cluster: ProcessCluster | None = None
    body_error: BaseException | None = None
    with tempfile.TemporaryDirectory(prefix="kcore-bench-", dir=_temp_root(storage)) as temp:
        try:
            async with actors.open_background_nursery() as nursery:
                try:
                    cluster = await _start(
                        Path(temp), nursery, children, per_broker, session_timeout_ms,
                        start_late, seed,
                    )  # fmt: skip
                    yield cluster
                except BaseException as error:
                    body_error = error
                    raise
                finally:
                    if cluster is not None:
                        cluster.closing = True
                    # This process's sessions first: they would fail as their servers go.
                    nursery.cancel_scope.cancel()
                    with trio.CancelScope(shield=True):
                        # Brokers first: zkstub gone first would have them retry meanwhile.
                        for child in reversed(children):
                            await child.kill()
        except BaseExceptionGroup as group:
            # A child's death (raised by its watcher) is the error, not the group around it;
            # else the block's own error, not what its sessions raised as the cluster went.
            if cluster is not None and cluster.failure is not None:
                raise cluster.failure from group
            if body_error is not None and not isinstance(body_error, trio.Cancelled):
                log.debug("while the process cluster closed: %r", group)
                raise body_error from None
            if len(group.exceptions) == 1:  # e.g. Terminated
                raise group.exceptions[0] from None
            raise
    if cluster is not None and cluster.failure is not None:
        raise cluster.failure


async def _start(
    root: Path,
    nursery: trio.Nursery,
    children: list[_Child],
    per_broker: Mapping[int, Mapping[str, Any]],
    session_timeout_ms: int,
    start_late: Iterable[int],
    seed: int | None,
) -> ProcessCluster:
    """zkstub, then the brokers, each group at once (each spends a second or more importing),
    those in `start_late` once the others have a controller."""
    # The tick as the embedded bench cluster's, for the shortest session (sessions expire
    # on half-tick checks).
    shortest = min(settings["zookeeper.session.timeout.ms"] for settings in per_broker.values())
    cluster = await _start_zookeeper(
        root, nursery, children, min(2.0, shortest / 1000 / 2), session_timeout_ms,
        random.Random(seed),
    )  # fmt: skip
    late = set(start_late)
    for group in ([b for b in per_broker if b not in late], sorted(late)):
        outputs = {
            broker_id: await _spawn_broker(cluster, broker_id, per_broker[broker_id], children)
            for broker_id in group
        }
        for broker_id, stdout in outputs.items():
            await _await_listening(cluster, broker_id, stdout)
        if group:
            await cluster.wait_for_controller(READY_TIMEOUT)
    return cluster


def _temp_root(storage: str) -> str | None:
    if storage == "disk":
        return None
    if storage != "memory":
        raise ValueError(f"storage must be 'disk' or 'memory', not {storage!r}")
    if not os.path.isdir(SHM):
        raise ValueError(f"storage='memory' needs a tmpfs at {SHM}")
    return SHM


async def _start_zookeeper(
    root: Path,
    nursery: trio.Nursery,
    children: list[_Child],
    tick: float,
    session_timeout_ms: int,
    rng: random.Random,
) -> ProcessCluster:
    """zkstub's process (its data in `root`), and this process's sessions with it."""
    zookeeper, stdout = await _spawn(root, "zkstub", [
        sys.executable, "-m", "zkstub", "serve", "--host", "127.0.0.1", "--port", "0",
        "--data-dir", str(root / "zookeeper"), "--tick-time", str(tick),
        "--min-session-timeout", "1", "--max-session-timeout", "60", "--log-level", "WARNING",
    ])  # fmt: skip
    children.append(zookeeper)
    line = await _read_line(zookeeper, stdout, "serving", START_TIMEOUT)  # "... on HOST:PORT"
    nursery.start_soon(_copy_rest, stdout, zookeeper.stdout_path)
    zk_connect = line.rsplit(" ", 1)[1]
    network = transport.TcpNetwork()
    zk = await nursery.start(_zk_session, zk_connect, network, rng)
    look = await nursery.start(_metadata_look, network, rng)
    cluster = ProcessCluster(
        root,
        zk_connect,
        session_timeout_ms,
        zookeeper,
        zk,
        network,
        rng,
        nursery,
        look,
    )
    nursery.start_soon(_watch_child, cluster, zookeeper)
    nursery.start_soon(_end_on_sigterm)
    return cluster


class Terminated(Exception):
    """This process got SIGTERM while a process cluster was open (a timeout's kill, say)."""


async def _end_on_sigterm() -> None:
    """SIGTERM ends the block with `Terminated`, so its children are killed on the way out
    (Python's default for SIGTERM exits at once, running no `finally`, and would leave
    them running). Only the main thread can receive signals; elsewhere this does nothing."""
    try:
        receiver = trio.open_signal_receiver(signal.SIGTERM)
    except RuntimeError:  # not the main thread
        return
    with receiver as signals:
        async for _ in signals:
            raise Terminated("SIGTERM: the process cluster's children are killed")


async def _spawn_broker(
    cluster: ProcessCluster, broker_id: int, settings: Mapping[str, Any], children: list[_Child]
) -> Any:
    """Starts the broker's process; returns its stdout (`_await_listening` reads it)."""
    directory = cluster.data_dir / f"broker-{broker_id}"
    directory.mkdir()
    config = directory / "server.properties"
    config.write_text(
        _properties({
            "broker.id": broker_id,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": directory / "logs",
            "zookeeper.connect": cluster.zk_connect,
            **settings,
        }),
        encoding="utf-8",
    )  # fmt: skip
    child, stdout = await _spawn(
        cluster.data_dir, f"broker {broker_id}",
        # WARNING, as the embedded bench cluster logs (Python's default): a broker at INFO
        # writes a line per partition per state change, thousands for an election.
        [sys.executable, "-m", "kcore.cli", "broker", "--config", str(config),
         "--log-level", "WARNING"],
    )  # fmt: skip
    children.append(child)
    cluster._brokers[broker_id] = child
    return stdout


async def _await_listening(cluster: ProcessCluster, broker_id: int, stdout: Any) -> None:
    child = cluster._brokers[broker_id]
    # "kcore broker N listening on HOST:PORT"
    line = await _read_line(child, stdout, "listening", START_TIMEOUT)
    cluster._nursery.start_soon(_copy_rest, stdout, child.stdout_path)
    host, port = line.split(" listening on ")[1].rsplit(":", 1)
    cluster.addresses[broker_id] = (host, int(port))
    cluster._nursery.start_soon(_watch_child, cluster, child)


async def _watch_child(cluster: ProcessCluster, child: _Child) -> None:
    """Raises ChildDied when the child exits unasked while the cluster is open."""
    await child.process.wait()
    if child.killed or cluster.closing:
        return
    cluster.failure = child.died()
    log.error("%s", cluster.failure)
    raise cluster.failure


async def _zk_session(
    zk_connect: str, network: Any, rng: random.Random, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    async with zkstub.connect(
        zk_connect, network=network, rng=random.Random(rng.getrandbits(64)), session_timeout=30.0
    ) as zk:
        task_status.started(zk)
        await trio.sleep_forever()


async def _metadata_look(
    network: Any, rng: random.Random, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    async with open_metadata_look(network, random.Random(rng.getrandbits(64))) as look:
        task_status.started(look)
        await trio.sleep_forever()


@contextlib.asynccontextmanager
async def open_metadata_look(
    network: transport.Network, rng: random.Random | None = None
) -> AsyncIterator[MetadataLook]:
    """A `MetadataLook` with connections of its own, closed on exit."""
    async with actors.open_background_nursery() as nursery:
        connections = Connections(
            network,
            client_id="bench-observer",
            rng=rng or random.Random(),
            nursery=nursery,
            request_timeout=10.0,
            logger=log,
        )
        try:
            yield MetadataLook(connections)
        finally:
            await connections.aclose()
            nursery.cancel_scope.cancel()
