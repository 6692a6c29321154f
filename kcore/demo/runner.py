"""Runs the demo: a cluster, topic `demo`, an acks=all producer and a consumer, the fault
schedule, a watcher reporting what the cluster does, and the verdict at the end.

The watcher (`Watcher.look`) reads ZooKeeper for who leads what (as the controller wrote
it, which the brokers' metadata and so `kcore topics --describe` follow), each leader's
high watermark through ListOffsets (what a consumer's end offsets are), and each running
broker's /metrics for the rest: the live view shows what a Kafka dashboard would.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import random
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

import zkstub
from kcore import errors
from kcore.common import TopicPartition
from kcore.demo.model import (
    BrokerMetrics,
    ClusterView,
    LeaderlessClock,
    PartitionView,
    Verdict,
    events_between,
    judge,
    pick_cut,
    pick_leader_to_kill,
)
from kcore.demo.schedule import Action, Step, chaos_schedule, describe, shrink_seconds
from kcore.demo.targets import BROKER_SETTINGS, open_embedded, open_processes, open_simulated
from kcore.zk_client import KafkaZkClient

logger = logging.getLogger("kcore.demo")

TOPIC = "demo"
WATCH_INTERVAL = 0.5  # seconds between looks at the cluster
CATCH_UP_SECONDS = 60.0  # after the workload, how long the consumer may take to catch up


@attrs.frozen
class DemoOptions:
    brokers: int = 3
    partitions: int = 6
    duration: float = 60.0
    chaos: bool = True
    seed: int = 0
    zookeeper: str | None = None  # HOST:PORT of a real ZooKeeper instead of the embedded one
    processes: bool = False  # each broker its own OS process
    data_dir: pathlib.Path | None = None
    rate: float = 200.0  # records per second offered by the producer
    # The embedded cluster on a simulated network (tests: a trio.run under virtual time).
    simulated: bool = False

    def __attrs_post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError(f"--brokers must be at least 1, not {self.brokers}")
        if self.partitions < 1:
            raise ValueError(f"--partitions must be at least 1, not {self.partitions}")
        if self.duration <= 0:
            raise ValueError(f"--duration must be positive, not {self.duration}")
        if self.rate <= 0:
            raise ValueError(f"--rate must be positive, not {self.rate}")
        if self.simulated and (self.processes or self.zookeeper is not None):
            raise ValueError("a simulated cluster runs in this process, on its own ZooKeeper")
        if self.zookeeper is not None:
            host, sep, port = self.zookeeper.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"--zookeeper must be HOST:PORT, not {self.zookeeper!r}")

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    @property
    def min_insync_replicas(self) -> int:
        return min(2, self.replication_factor)


@attrs.define
class Progress:
    """What the workload did so far; the display reads it."""

    acked: list[tuple[int, int, bytes, float]] = attrs.field(factory=list)
    consumed: list[tuple[int, int, bytes]] = attrs.field(factory=list)
    send_errors: dict[str, int] = attrs.field(factory=dict)
    view: ClusterView | None = None
    # The view before `view`, for rates between the two.
    previous_view: ClusterView | None = None
    events: list[tuple[float, str]] = attrs.field(factory=list)
    started: float = 0.0
    phase: str = "starting"
    target: Any = None  # what the demo runs on (see kcore.demo.targets), once it is up


class Display:
    """Where the demo reports: events as they happen, and the state now and then."""

    def event(self, progress: Progress, text: str) -> None: ...

    def refresh(self, progress: Progress) -> None: ...

    def verdict(self, verdict: Verdict) -> None: ...


async def run_demo(options: DemoOptions, display: Display) -> Verdict:
    progress = Progress()

    def say(text: str) -> None:
        progress.events.append((trio.current_time() - progress.started, text))
        display.event(progress, text)

    progress.started = trio.current_time()
    async with open_target(options) as target:
        progress.target = target
        say(
            f"{len(target.broker_ids)} brokers up"
            + (" (one process each)" if options.processes else "")
        )
        await create_topic(target, options)
        say(
            f"topic {TOPIC}: {options.partitions} partitions, RF {options.replication_factor}, "
            f"min.insync.replicas={options.min_insync_replicas}"
        )
        leaderless = LeaderlessClock()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch, target, options, progress, leaderless, say, display)
            async with trio.open_nursery() as work:
                produce_done = trio.Event()
                work.start_soon(_produce, target, options, progress, produce_done)
                consumer_scope = trio.CancelScope()
                work.start_soon(_consume, target, options, progress, consumer_scope)
                if options.chaos:
                    steps = chaos_schedule(
                        options.duration,
                        can_isolate=target.can_isolate,
                        cut_seconds=shrink_seconds(BROKER_SETTINGS["replica.lag.time.max.ms"]),
                    )
                    say(describe(steps))
                    work.start_soon(_chaos, target, steps, progress, say)
                await produce_done.wait()
                progress.phase = "catching up"
                say("producer stopped; waiting for the consumer to read everything acked")
                await _wait_caught_up(progress)
                consumer_scope.cancel()
            nursery.cancel_scope.cancel()
        progress.phase = "done"
        now = trio.current_time() - progress.started
        verdict = judge(progress.acked, progress.consumed, leaderless.finish(now))
        display.verdict(verdict)
        return verdict


async def create_topic(target: Any, options: DemoOptions) -> None:
    """The demo's topic: `options.partitions` partitions, RF up to 3, min ISR up to 2."""
    async with target.admin() as admin:
        await admin.create_topic(
            TOPIC,
            partitions=options.partitions,
            replication_factor=options.replication_factor,
            config={"min.insync.replicas": str(options.min_insync_replicas)},
        )


@contextlib.asynccontextmanager
async def open_target(options: DemoOptions) -> AsyncIterator[Any]:
    """The cluster `options` ask for, ready (every broker known to the controller)."""
    with contextlib.ExitStack() as stack:
        data_dir = options.data_dir
        if data_dir is None:
            data_dir = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory("kcore-demo")))
        data_dir.mkdir(parents=True, exist_ok=True)
        opener = open_processes if options.processes else open_embedded
        if options.simulated:
            opener = open_simulated
        if options.zookeeper is None:
            async with opener(
                options.brokers, seed=options.seed, data_dir=data_dir, zookeeper=None
            ) as target:
                yield target
            return
        # Through kazoo, under a chroot of its own so runs do not meet old data; the chroot
        # goes at the end, whatever the run's outcome.
        chroot = f"/kcore-demo-{random.Random().getrandbits(32):08x}"
        zookeeper = f"zookeeper://{options.zookeeper}{chroot}"
        try:
            async with opener(
                options.brokers, seed=options.seed, data_dir=data_dir, zookeeper=zookeeper
            ) as target:
                yield target
        finally:
            with trio.CancelScope(shield=True):
                await remove_chroot(options.zookeeper, chroot)


async def remove_chroot(connect: str, chroot: str) -> None:
    """Deletes the run's chroot and everything under it (a crashed broker's ephemerals
    included: ZooKeeper lets any session delete them)."""
    try:
        with trio.fail_after(30):
            async with zkstub.connect(f"zookeeper://{connect}") as zk:
                await zk.delete(chroot, recursive=True)
    except zkstub.NoNodeError:
        pass
    except (zkstub.ZkError, OSError, trio.TooSlowError) as error:
        logger.error("could not remove %s from ZooKeeper %s: %s", chroot, connect, error)


async def _produce(target: Any, options: DemoOptions, progress: Progress, done: trio.Event) -> None:
    """Offers `rate` records per second (each with a unique value) for `duration`, with
    many sends in flight so a slow acknowledgement does not slow the offered rate."""
    interval = 1.0 / options.rate
    until = trio.current_time() + options.duration
    sequence = 0
    async with target.producer(acks="all", linger_ms=5, delivery_timeout_ms=60_000) as producer:
        async with trio.open_nursery() as sends:
            next_send = trio.current_time()
            while next_send < until:
                value = f"demo-{sequence:08d}".encode()
                # Round-robin rather than the sticky default, so every partition gets
                # steady traffic and a gap in its acks shows it was unavailable.
                partition = sequence % options.partitions
                sends.start_soon(_send_one, producer, value, partition, progress)
                sequence += 1
                next_send += interval
                await trio.sleep_until(next_send)
    done.set()


async def _send_one(producer: Any, value: bytes, partition: int, progress: Progress) -> None:
    # (partition, offset, value, seconds since the start when acknowledged)
    try:
        meta = await producer.send_and_wait(TOPIC, value, partition=partition)
    except errors.KafkaError as error:
        name = type(error).__name__
        progress.send_errors[name] = progress.send_errors.get(name, 0) + 1
        return
    at = trio.current_time() - progress.started
    progress.acked.append((meta.partition, meta.offset, value, at))


async def _consume(
    target: Any, options: DemoOptions, progress: Progress, scope: trio.CancelScope
) -> None:
    with scope:
        async with target.consumer() as consumer:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(options.partitions)])
            consumer.seek_to_beginning()
            while True:
                try:
                    records = await consumer.poll(timeout=0.5)
                except errors.KafkaError as error:
                    logger.info("poll failed (%s); polling again", error)
                    await trio.sleep(0.5)
                    continue
                progress.consumed += [(r.partition, r.offset, r.value) for r in records]


async def _wait_caught_up(progress: Progress) -> None:
    with trio.move_on_after(CATCH_UP_SECONDS):
        while True:
            read = {(p, v) for p, _, v in progress.consumed}
            if all((p, v) in read for p, _, v, _ in progress.acked):
                return
            await trio.sleep(0.2)


async def _chaos(target: Any, steps: list[Step], progress: Progress, say) -> None:
    async with trio.open_nursery() as restarts:
        await _run_steps(target, steps, progress, say, restarts)


async def _run_steps(
    target: Any, steps: list[Step], progress: Progress, say, restarts: trio.Nursery
) -> None:
    killed: list[int] = []
    down: set[int] = set()  # killed, and not started again yet

    async def restart(broker: int) -> None:
        await target.start(broker)
        down.discard(broker)

    for step in steps:
        await trio.sleep_until(progress.started + step.at)
        if step.skipped:
            say(f"CHAOS (skipped): {step.action.value}: {step.skipped}")
            continue
        view = progress.view
        if view is None:
            continue
        if step.action is Action.KILL_CONTROLLER and view.controller is not None:
            say(f"CHAOS: kill broker {view.controller}, the controller")
            await target.kill(view.controller)
            killed.append(view.controller)
            down.add(view.controller)
        elif step.action is Action.KILL_LEADER:
            picked = pick_leader_to_kill(view, down)
            if picked is not None:
                partition, leader = picked
                say(f"CHAOS: kill broker {leader}, leader of partition {partition}")
                await target.kill(leader)
                killed.append(leader)
                down.add(leader)
        elif step.action is Action.RESTART_KILLED and killed:
            broker = killed.pop()
            say(f"CHAOS: restart broker {broker}")
            # In the background: a crashed broker's start waits for its old session to
            # expire first, and the schedule goes on meanwhile.
            restarts.start_soon(restart, broker)
        elif step.action is Action.ISOLATE_FOLLOWER:
            cut = pick_cut(view, down)
            if cut is None:
                say(f"CHAOS (skipped): {step.action.value}: no partition has a leader and an "
                    "in-sync follower both up")  # fmt: skip
                continue
            partition, follower, leader = cut
            say(
                f"CHAOS: cut broker {follower} off from broker {leader} "
                f"(follower and leader of partition {partition})"
            )
            target.isolate(follower, leader)
        elif step.action is Action.HEAL:
            say("CHAOS: heal the network")
            target.heal()


async def _watch(
    target: Any,
    options: DemoOptions,
    progress: Progress,
    leaderless: LeaderlessClock,
    say,
    display: Display,
) -> None:
    async with open_watcher(target, options, progress.started) as watcher:
        while True:
            began = trio.current_time()
            view = await watcher.look()
            logger.debug("looked at the cluster in %.3fs", trio.current_time() - began)
            for text in events_between(progress.view, view):
                say(text)
            progress.previous_view, progress.view = progress.view, view
            leaderless.observe(view)
            display.refresh(progress)
            await trio.sleep(WATCH_INTERVAL)


@attrs.define(eq=False)
class Watcher:
    """Looks at the cluster for the live view (`look`); `open_watcher` makes one."""

    target: Any
    options: DemoOptions
    started: float  # trio time the demo started: views are timed from it
    zk: KafkaZkClient
    offsets: Any  # a Consumer assigned every partition, asked for their end offsets
    assignment: dict[int, Any]  # partition -> ReplicaAssignment
    high_watermarks: dict[int, int] = attrs.field(factory=dict)  # the last known

    async def look(self) -> ClusterView:
        """ZooKeeper's brokers, controller and partition states; each leader's high
        watermark (ListOffsets); then each running broker's /metrics, read last, so the
        view holds them as they are when the caller goes on without waiting."""
        zk = self.zk
        live = frozenset(await zk.get_all_brokers())
        controller = await zk.get_controller_id()
        epoch = await zk.get_controller_epoch()
        tps = [TopicPartition(TOPIC, p) for p in range(self.options.partitions)]
        states = {}
        for tp in tps:
            state = await zk.get_partition_state(tp)
            if state is not None:
                states[tp.partition] = state.leader_and_isr
        # Only partitions with a leader: an offline one would hold up the others' lookup.
        # A lookup that does not answer in time leaves the last high watermarks shown.
        led = [tp for tp in tps if tp.partition in states and states[tp.partition].leader >= 0]
        with trio.move_on_after(WATCH_INTERVAL):
            if led:
                for tp, offset in (await self.offsets.end_offsets(led)).items():
                    self.high_watermarks[tp.partition] = offset
        metrics: dict[int, BrokerMetrics] = await self.target.broker_metrics(TOPIC)
        partitions = {}
        for partition, leader_and_isr in sorted(states.items()):
            leader_metrics = metrics.get(leader_and_isr.leader)
            partitions[partition] = PartitionView(
                leader_and_isr.leader,
                leader_and_isr.leader_epoch,
                tuple(self.assignment[partition].replicas) if partition in self.assignment else (),
                tuple(leader_and_isr.isr),
                self.high_watermarks.get(partition),
                None if leader_metrics is None else leader_metrics.log_end_offsets.get(partition),
            )
        now = trio.current_time() - self.started
        controller_epoch = None if epoch is None else epoch[0]
        return ClusterView(now, live, controller, controller_epoch, partitions, metrics)


@contextlib.asynccontextmanager
async def open_watcher(target: Any, options: DemoOptions, started: float) -> AsyncIterator[Watcher]:
    """A Watcher of the demo topic (which must exist) on `target`."""
    zk = KafkaZkClient(target.zk, clock=lambda: 0.0)  # it only reads: nothing to stamp
    # Read once: the demo never reassigns (the topic exists before the watch starts).
    found = await zk.get_replica_assignment(TOPIC)
    assignment = {} if found is None else found[1]
    async with target.consumer() as offsets:
        # Assigned, so that the consumer looks up these partitions' leaders: it asks each
        # leader's ListOffsets for the high watermark (nothing is polled).
        offsets.assign([TopicPartition(TOPIC, p) for p in range(options.partitions)])
        yield Watcher(target, options, started, zk, offsets, assignment)
