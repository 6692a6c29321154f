"""Whole-cluster deterministic simulation (in the spirit of FoundationDB's simulator and
TigerBeetle's VOPR): one seed drives a zkstub server, N brokers and producers on a
SimNetwork under virtual time, a fault schedule drawn from the seed, the invariants checked
every step, and at the end the history checked against what the healed cluster holds.

    result = simulate(SimConfig(seed=7))       # or: await run_simulation(config)
    assert result.ok, result.report()

With `group_consumers=N`, N members of a consumer group (`GROUP_ID`) consume the topic
and commit after processing each poll, crashed and restarted on their own seeded schedule,
the group's coordinator killed among the other faults; after settling the group gets
`catch_up_seconds` to consume every acknowledged record, and its history (what each member
consumed and committed, and what OffsetFetch said was committed) is checked by
`kcore.testing.group_history` (`SimResult.group_check`).

`simulate` pins Trio's scheduler and runs on `MockClock(autojump_threshold=0)`, so one seed
replays one history exactly (`result.trace` is the proof: same seed, same trace).
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
import trio.testing

from actors.testing import pinned_scheduler
from kcore import errors
from kcore.common import OFFSETS_TOPIC, LeaderAndIsr, TopicPartition
from kcore.coordinator.group import partition_for
from kcore.log import iter_batch_records
from kcore.server.partition import Partition
from kcore.testing._cluster import EmbeddedCluster, broker_node, open_cluster
from kcore.testing._poll import poll_until
from kcore.testing.group_history import (
    CommitOp,
    Consumed,
    GroupCheckResult,
    GroupHistory,
    OffsetRead,
    check_group,
)
from kcore.testing.history import CheckResult, Outcome, ProduceOp, check
from kcore.testing.invariants import InvariantChecker, InvariantViolation
from kcore.zk_client import KafkaZkClient, ZooKeeperError

logger = logging.getLogger("kcore.testing.sim")

TOPIC = "sim"
FAULTS = (
    "kill",
    "power_loss",
    "restart",
    "controlled_shutdown",
    "partition",
    "block",
    "isolate_controller",
    "expire_session",
    "pause",
    "lossy_network",
    "restart_zookeeper",
    "preferred_election",
    "segment_config_change",
    "reassign",
    "heal",
)
# With group consumers: crash a member (its task cancelled: no commit, no LeaveGroup) and
# restart a crashed one (on their own schedule, so that the group rebalances often), and
# kill the broker coordinating the group (drawn with the other faults).
CONSUMER_FAULTS = ("crash_consumer", "restart_consumer", "kill_coordinator")
_MEMBER_FAULTS = ("crash_consumer", "restart_consumer")
GROUP_ID = "sim-group"
OFFSETS_PARTITIONS = 3  # the brokers' offsets.topic.num.partitions when a group runs
# Virtual seconds a run may take beyond its chaos and settling before it counts as hung.
RUN_SLACK_SECONDS = 600.0
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


# The errors a broker, ZooKeeper or the network being down gives (transport and zkstub).
_FAULT_ERRORS = (
    r"(ConnectError|ConnectionClosedError|RequestTimeoutError|SessionExpiredError"
    r"|ConnectionLossError|OperationTimeoutError|ClosedError)\("
)
# What a client says when the broker it sends to is down, cut off or slow.
_UNREACHABLE = (
    r"could not connect|no response in time|connection lost|no leader could be sent to"
    r"|no broker answered"
)


@attrs.frozen
class ExpectedLog:
    """A WARNING or ERROR that the injected faults cause in a healthy cluster: a campaign
    counts these instead of showing them (anything else is shown, tagged with its seed)."""

    logger: str
    pattern: str  # re.search'd in the formatted message
    why: str


EXPECTED_UNDER_FAULTS = (
    ExpectedLog(
        "kcore.client.producer",
        r"failed: The size of the current ISR .* is insufficient to satisfy the min\.isr",
        "acks=all refused below min.insync.replicas",
    ),
    ExpectedLog(
        "kcore.client.producer",
        rf"record\(s\) for \S+ failed: .*({_UNREACHABLE})",
        "a produce that found no reachable leader in its delivery timeout",
    ),
    ExpectedLog(
        "kcore.client.producer",
        r"record\(s\) for \S+ failed: broker \d+ (is not the leader of |does not host "
        r"|answered NOT_LEADER_OR_FOLLOWER |answered NOT_ENOUGH_REPLICAS_AFTER_APPEND )",
        "a produce whose leader moved, or whose ISR shrank, until its delivery timeout",
    ),
    ExpectedLog(
        "kcore.client.",
        rf"metadata refresh (for the assignment )?failed: .*({_UNREACHABLE})",
        "a metadata refresh while the brokers it knows are down",
    ),
    ExpectedLog(
        "kcore.state.change",
        r"^Failed to elect leader for partition \S+ under strategy \w+: no eligible replica",
        "an election while every eligible replica is down",
    ),
    ExpectedLog(
        "kcore.state.change",
        rf"^Error while moving (partitions|replicas) .* to \w+: {_FAULT_ERRORS}",
        "a controller whose ZooKeeper session expired mid-change (it resigns)",
    ),
    ExpectedLog(
        "kcore.server.broker",
        rf"controlled shutdown request failed: {_FAULT_ERRORS}",
        "a controlled shutdown that cannot reach the controller",
    ),
    ExpectedLog(
        "kcore.server.broker",
        r"proceeding to an unclean shutdown$",
        "a controlled shutdown that cannot reach the controller",
    ),
    ExpectedLog(
        "kcore.server.replica_manager",
        rf"^Failed to (write the ISR of|propagate ISR changes of) .*: {_FAULT_ERRORS}",
        "an ISR change while ZooKeeper is out of reach or the session expired",
    ),
    ExpectedLog(
        "kcore.server.apis",
        # 11 STALE_CONTROLLER_EPOCH, 77 STALE_BROKER_EPOCH
        r"refuses (UpdateMetadata|LeaderAndIsr|StopReplica) from controller \d+ epoch \d+ "
        r"\(error (11|77)\)",
        "a request from a deposed controller, or for an expired broker session",
    ),
    ExpectedLog(
        "kcore.server.apis",
        r"^Number of alive brokers '\d+' does not meet the required replication factor",
        "a group's first FindCoordinator while brokers are down (the offsets topic waits)",
    ),
    ExpectedLog(
        "kcore.state.change",
        r"deletes its replicas of .*: the controller's metadata no longer lists it",
        "a replica reassigned away while its broker was cut off, removed once it hears",
    ),
    ExpectedLog(
        "kcore.server.controller_epochs",
        r"cannot verify \w+ from \S+ \(controller \d+, epoch \d+\): ZooKeeper did not answer",
        "a new controller's request while this broker cannot reach ZooKeeper (it retries)",
    ),
    ExpectedLog(
        "kcore.coordinator.group",
        # 15 COORDINATOR_NOT_AVAILABLE, 16 NOT_COORDINATOR, 27 REBALANCE_IN_PROGRESS (a
        # timed-out append, as Kafka maps it)
        r"^failed to write empty metadata for group \S+: error (15|16|27)$",
        "a group emptied while its offsets partition could not take the write",
    ),
    ExpectedLog(
        "kcore.controller.channel",
        rf"fails to send request \w+ to broker \d+: {_FAULT_ERRORS}",
        "a controller request to a broker that is down or cut off",
    ),
)


def expected_under_faults(logger_name: str, message: str) -> ExpectedLog | None:
    """Which `EXPECTED_UNDER_FAULTS` entry a log line is (None: it is worth a look)."""
    for expected in EXPECTED_UNDER_FAULTS:
        if logger_name.startswith(expected.logger) and re.search(expected.pattern, message):
            return expected
    return None


@attrs.frozen
class SimConfig:
    seed: int
    brokers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    acks: str = "all"
    idempotent: bool = False
    producers: int = 2
    chaos_seconds: float = 60.0  # virtual time with faults
    fault_interval: tuple[float, float] = (1.0, 6.0)
    faults: tuple[str, ...] = FAULTS
    settle_seconds: float = 300.0  # virtual time allowed to heal and converge
    step_seconds: float = 0.1  # invariants checked this often (virtual)
    session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 5000
    # The topic's flush.messages. Kafka acknowledges before fsync (durability comes from
    # replication), so power losses on two replicas can lose acknowledged records under its
    # default (None: never); 1 fsyncs every append and puts power loss inside the contract.
    flush_messages: int | None = 1
    # Members of a consumer group (`GROUP_ID`) consuming the topic, committing after
    # processing each poll; 0: no group (and the history of a seed as before groups).
    group_consumers: int = 0
    # With group consumers, drawn with `faults` (a subset of CONSUMER_FAULTS).
    consumer_faults: tuple[str, ...] = CONSUMER_FAULTS
    # Virtual time the group gets after settling to consume every acknowledged record.
    catch_up_seconds: float = 180.0
    # Instead of the random fault schedule: a coroutine driving the faults itself (named
    # scenarios). The workload, the invariants and the final checks are the same.
    scenario: Callable[[Simulation], Awaitable[None]] | None = attrs.field(default=None, eq=False)

    def __attrs_post_init__(self) -> None:
        unknown = sorted(set(self.faults) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {list(FAULTS)}")
        unknown = sorted(set(self.consumer_faults) - set(CONSUMER_FAULTS))
        if unknown:
            raise ValueError(f"unknown consumer faults {unknown}; known: {list(CONSUMER_FAULTS)}")
        if self.group_consumers < 0:
            raise ValueError(f"group_consumers must be >= 0, not {self.group_consumers}")
        if self.acks not in _ACKS:
            raise ValueError(f"acks must be one of {sorted(_ACKS)}, not {self.acks!r}")

    @property
    def name(self) -> str:
        """The seed and the cluster's shape: what it takes to replay a seed."""
        group = f", {self.group_consumers} group consumers" if self.group_consumers else ""
        return f"seed {self.seed} ({self.brokers} brokers, {self.partitions} partitions{group})"

    @property
    def fault_kinds(self) -> tuple[str, ...]:
        """What the random schedule draws from (kill_coordinator only with a group)."""
        if not self.group_consumers:
            return self.faults
        return self.faults + tuple(f for f in self.consumer_faults if f not in _MEMBER_FAULTS)

    @property
    def member_faults(self) -> tuple[str, ...]:
        """What the members' own schedule draws from."""
        if not self.group_consumers:
            return ()
        return tuple(f for f in self.consumer_faults if f in _MEMBER_FAULTS)

    @property
    def power_safe(self) -> bool:
        """Whether a power loss keeps every acknowledged record (each append fsynced)."""
        return self.flush_messages == 1 or "power_loss" not in self.faults

    @property
    def durable(self) -> bool:
        """Whether acks=all writes are covered by the no-loss contract."""
        return (
            self.min_insync_replicas >= 2 and not self.unclean_leader_election and self.power_safe
        )


@attrs.frozen
class SimResult:
    config: SimConfig
    ops: tuple[ProduceOp, ...]
    check: CheckResult | None
    violation: str | None
    trace: tuple[str, ...]
    group: GroupHistory | None = None  # with group consumers
    group_check: GroupCheckResult | None = None

    @property
    def ok(self) -> bool:
        return (
            self.violation is None
            and self.check is not None
            and self.check.valid
            and (self.group_check is None or self.group_check.valid)
        )

    def report(self) -> str:
        lines = [f"{self.config.name}: {'ok' if self.ok else 'FAILED'}"]
        if self.violation:
            lines.append(f"invariant violated: {self.violation}")
        if self.check is not None:
            lines.append(self.check.summary())
        if self.group_check is not None:
            lines.append(self.group_check.summary())
        elif self.config.group_consumers and self.violation is None:
            lines.append("group: not checked (the run did not get that far)")
        return "\n".join(lines)


@attrs.define(eq=False)
class GroupMemberSlot:
    """One member of the simulated group across its crashes: each restart is a new
    consumer (a new incarnation, a new member id)."""

    index: int
    incarnation: int = 0
    running: bool = False
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    consumer: Any = None  # the current incarnation's Consumer, while it runs

    @property
    def name(self) -> str:
        return f"member-{self.index}.{self.incarnation}"


@attrs.define
class Simulation:
    """One run's state, handed to a scenario: the cluster, the seeded rng, the trace."""

    config: SimConfig
    cluster: EmbeddedCluster
    rng: random.Random
    trace: list[str] = attrs.field(factory=list)
    ops: list[ProduceOp] = attrs.field(factory=list)
    checker: InvariantChecker = attrs.field(init=False)
    down: set[int] = attrs.field(factory=set)
    # Set when a scenario returns: the producers stop, and the run heals and settles.
    workload_done: bool = False
    # partition -> its replicas, as the topic's znode assigns them (read when settling, once
    # the reassignments the faults started are complete).
    assignment: dict[int, tuple[int, ...]] = attrs.field(factory=dict)
    _last_seen: dict[str, tuple] = attrs.field(factory=dict)
    # The highest leader epoch of the group's offsets partition seen so far (`coordinator`).
    _coordinator_epoch: int = -1
    # The consumer group (with config.group_consumers): its members, what they consumed
    # and committed, and what OffsetFetch said was committed.
    members: list[GroupMemberSlot] = attrs.field(factory=list)
    consumed: list[Consumed] = attrs.field(factory=list)
    commits: list[CommitOp] = attrs.field(factory=list)
    offset_reads: list[OffsetRead] = attrs.field(factory=list)
    _consumed_keys: set[tuple[TopicPartition, int]] = attrs.field(factory=set)
    _group_nursery: trio.Nursery | None = None

    def __attrs_post_init__(self) -> None:
        config = self.config
        self.checker = InvariantChecker(
            committed_may_change=config.unclean_leader_election or not config.power_safe
        )

    def log(self, text: str) -> None:
        self.trace.append(f"{trio.current_time():10.3f} {text}")

    # -- faults ----------------------------------------------------------------------------

    async def faults(self, until: float) -> None:
        low, high = self.config.fault_interval
        while True:
            await trio.sleep(self.rng.uniform(low, high))
            if trio.current_time() >= until:
                return
            await self.inject(self.rng.choice(self.config.fault_kinds))

    async def member_faults(self, until: float) -> None:
        """The members' crashes and restarts, about one every 5 s (a crash needs a running
        member, a restart a crashed one)."""
        low, high = self.config.fault_interval
        kinds = self.config.member_faults
        if not kinds:
            return
        while True:
            await trio.sleep(self.rng.uniform(low * 1.5, high * 1.5))
            if trio.current_time() >= until:
                return
            running = any(slot.running for slot in self.members)
            crashed = any(not slot.running for slot in self.members)
            possible = [
                kind
                for kind in kinds
                if (kind == "crash_consumer" and running)
                or (kind == "restart_consumer" and crashed)
            ]
            if possible:
                await self.inject(self.rng.choice(possible))

    def _running(self) -> list[int]:
        return sorted(b for b in self.cluster.brokers if b not in self.down)

    async def inject(self, kind: str) -> None:
        cluster, rng, network = self.cluster, self.rng, self.cluster.network
        running = self._running()
        if kind in ("kill", "power_loss", "controlled_shutdown") and len(running) > 1:
            victim = rng.choice(running)
            if kind == "controlled_shutdown":
                await self.stop(victim)
            else:
                await self.kill(victim, power_loss=kind == "power_loss")
        elif kind == "restart" and self.down:
            broker_id = rng.choice(sorted(self.down))
            try:
                await self.start(broker_id)
            except ZooKeeperError as error:
                # As a Kafka broker exits when ZooKeeper is out of reach at start-up.
                self.log(f"broker {broker_id} failed to start: {error}")
        elif kind == "partition" and len(running) > 1:
            a, b = rng.sample(running, 2)
            self.log(f"partition {a} | {b}")
            network.partition(broker_node(a), broker_node(b))
        elif kind == "block" and len(running) > 1:
            a, b = rng.sample(running, 2)
            self.log(f"block {a} -> {b}")
            network.block(broker_node(a), broker_node(b))
        elif kind == "isolate_controller":
            controller = cluster.controller_id()
            if controller is not None:
                self.log(f"isolate controller {controller}")
                network.isolate(broker_node(controller))
        elif kind == "expire_session" and running:
            victim = rng.choice(running)
            self.log(f"expire the session of broker {victim}")
            await cluster.expire_session(victim)
        elif kind == "pause" and running:
            victim = rng.choice(running)
            length = rng.uniform(1.0, self.config.session_timeout_ms / 1000 * 2)
            self.log(f"pause broker {victim} for {length:.2f}s")
            await self.pause(victim, length)
        elif kind == "lossy_network":
            drop, delay = rng.uniform(0.0, 0.02), rng.uniform(0.0, 0.2)
            self.log(f"lossy network: drop {drop:.3f}, delay {delay:.3f}")
            network.set_drop_rate(drop)
            network.set_delay(delay)
        elif kind == "restart_zookeeper":
            length = rng.uniform(0.5, self.config.session_timeout_ms / 1000 * 1.5)
            await self.kill_zookeeper()
            await trio.sleep(length)
            await self.start_zookeeper()
        elif kind == "preferred_election":
            # What an operator's kafka-leader-election does through ZooKeeper; the
            # controller deletes the znode when done (NodeExists: one is still pending).
            self.log("preferred replica election for every partition")
            partitions = [TopicPartition(TOPIC, p) for p in range(self.config.partitions)]
            zk = KafkaZkClient(cluster.zk, clock=cluster.clock)
            with contextlib.suppress(ZooKeeperError):
                await zk.create_preferred_replica_election(partitions)
        elif kind == "segment_config_change":
            # A dynamic topic config change every broker applies (segments roll sooner or
            # later); nothing the checker's guarantees depend on.
            segment_bytes = rng.choice([16 * 1024, 64 * 1024, 1024 * 1024])
            self.log(f"segment.bytes={segment_bytes} for topic {TOPIC}")
            zk = KafkaZkClient(cluster.zk, clock=cluster.clock)
            with contextlib.suppress(ZooKeeperError):
                overrides = await zk.read_topic_configs(TOPIC)
                overrides["segment.bytes"] = str(segment_bytes)
                await zk.change_topic_config(TOPIC, overrides)
        elif kind == "reassign":
            await self.reassign(rng)
        elif kind == "heal":
            self.log("heal the network")
            self.heal_network()
        elif kind == "crash_consumer":
            alive = [slot for slot in self.members if slot.running]
            if alive:
                self.crash_member(rng.choice(alive))
        elif kind == "restart_consumer":
            crashed = [slot for slot in self.members if not slot.running]
            if crashed:
                self.start_member(rng.choice(crashed))
        elif kind == "kill_coordinator":
            coordinator = self.coordinator()
            if coordinator is not None and coordinator not in self.down and len(running) > 1:
                self.log(f"kill the group coordinator, broker {coordinator}")
                await self.kill(coordinator)

    # -- fault primitives, for scenarios too -------------------------------------------------

    async def reassign(self, rng: random.Random) -> None:
        """What an operator's kafka-reassign-partitions does through ZooKeeper: one
        partition's replicas moved, one of them to a broker outside the set when there is
        one, and their order shuffled (so the preferred leader may change as well)."""
        partition = rng.randrange(self.config.partitions)
        replicas = None
        zk = KafkaZkClient(self.cluster.zk, clock=self.cluster.clock)
        with contextlib.suppress(ZooKeeperError):
            found = await zk.get_replica_assignment(TOPIC)
            current = found[1].get(partition) if found is not None else None
            if current is None or current.is_being_reassigned:
                return
            replicas = list(current.replicas)
            outside = [b for b in sorted(self.cluster.brokers) if b not in replicas]
            if outside:
                replicas[rng.randrange(len(replicas))] = rng.choice(outside)
            rng.shuffle(replicas)
            self.log(f"reassign partition {partition}: {list(current.replicas)} -> {replicas}")
            await zk.create_partition_reassignment({TopicPartition(TOPIC, partition): replicas})

    async def kill(self, broker_id: int, *, power_loss: bool = False) -> None:
        """A crash (disk kept); with `power_loss`, what was not fsynced is lost too, any
        prefix of it surviving (a torn tail)."""
        self.log(f"{'power loss on' if power_loss else 'kill'} broker {broker_id}")
        self.down.add(broker_id)
        await self.cluster.kill_broker(broker_id, power_loss=power_loss, torn_tail=power_loss)

    async def stop(self, broker_id: int) -> None:
        self.log(f"controlled shutdown of broker {broker_id}")
        self.down.add(broker_id)
        await self.cluster.stop_broker(broker_id)

    async def start(self, broker_id: int) -> None:
        self.log(f"restart broker {broker_id}")
        await self.cluster.start_broker(broker_id)
        self.down.discard(broker_id)

    async def kill_zookeeper(self) -> None:
        self.log("kill ZooKeeper")
        await self.cluster.kill_zookeeper()

    async def start_zookeeper(self) -> None:
        self.log("restart ZooKeeper")
        await self.cluster.start_zookeeper()

    def leader_of(self, partition: int, topic: str = TOPIC) -> int | None:
        """The broker that believes it leads `partition` with the highest leader epoch."""
        tp = TopicPartition(topic, partition)
        leaders = [
            (replica.leader_epoch, broker_id)
            for broker_id, broker in self.cluster.brokers.items()
            if broker.replica_manager is not None
            and (replica := broker.replica_manager.partition(tp)) is not None
            and replica.is_leader
        ]
        return max(leaders)[1] if leaders else None

    def coordinator(self) -> int | None:
        """The broker leading the group's `__consumer_offsets` partition (its coordinator):
        None while the only brokers that believe they lead it are at an older leader epoch
        than one seen before (deposed, not told yet: the new leader is down)."""
        tp = TopicPartition(OFFSETS_TOPIC, partition_for(GROUP_ID, OFFSETS_PARTITIONS))
        leaders = [
            (replica.leader_epoch, broker_id)
            for broker_id, broker in self.cluster.brokers.items()
            if broker.replica_manager is not None
            and (replica := broker.replica_manager.partition(tp)) is not None
            and replica.is_leader
        ]
        if not leaders:
            return None
        epoch, broker_id = max(leaders)
        self._coordinator_epoch = max(self._coordinator_epoch, epoch)
        return broker_id if epoch == self._coordinator_epoch else None

    async def partition_state(self, partition: int) -> LeaderAndIsr | None:
        """The partition's leader, ISR and epoch as the controller last wrote them to
        ZooKeeper (None while the topic's znode is not there)."""
        zk = KafkaZkClient(self.cluster.zk, clock=self.cluster.clock)
        state = await zk.get_partition_state(TopicPartition(TOPIC, partition))
        return None if state is None else state.leader_and_isr

    def isr_of(self, partition: int) -> tuple[int, ...]:
        """The ISR as the current leader has it (empty without a leader)."""
        leader = self.leader_of(partition)
        if leader is None:
            return ()
        replica = self.cluster.brokers[leader].replica_manager.partition(
            TopicPartition(TOPIC, partition)
        )
        return tuple(sorted(replica.isr))

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 120.0) -> None:
        """Waits (in virtual time) for a condition over many brokers' state."""
        await poll_until(condition, timeout=timeout)

    def acked(self) -> int:
        return sum(op.outcome is Outcome.OK for op in self.ops)

    async def pause(self, broker_id: int, length: float) -> None:
        """A long GC pause: nothing gets in or out (messages are held, not lost) while its
        clock runs on; then everything held arrives at once."""
        self.cluster.network.isolate(broker_node(broker_id))
        await trio.sleep(length)
        self.cluster.network.rejoin(broker_node(broker_id))
        self.log(f"broker {broker_id} resumes")

    def heal_network(self) -> None:
        network = self.cluster.network
        network.heal()
        network.set_drop_rate(0.0)
        network.set_delay(0.0)

    # -- invariants --------------------------------------------------------------------------

    async def watch_invariants(self) -> None:
        while True:
            self.checker.check(self.cluster)
            self._trace_cluster_changes()
            await trio.sleep(self.config.step_seconds)

    def _trace_cluster_changes(self) -> None:
        """Puts what the cluster did in the trace, next to what was done to it: the
        active controller, and each partition's leader, leader epoch and ISR."""
        controller = self.cluster.controller_id()
        seen = {"controller": (controller, self.cluster.controller_epoch())}
        for partition in range(self.config.partitions):
            leader = self.leader_of(partition)
            epoch = None
            if leader is not None:
                replica = self.cluster.brokers[leader].replica_manager.partition(
                    TopicPartition(TOPIC, partition)
                )
                epoch = replica.leader_epoch
            seen[f"p{partition}"] = (leader, epoch, self.isr_of(partition))
        if self.config.group_consumers:
            seen["coordinator"] = (self.coordinator(),)
        for key, value in seen.items():
            if self._last_seen.get(key) == value:
                continue
            self._last_seen[key] = value
            if key == "controller":
                self.log(f"controller: {value[0]} (epoch {value[1]})")
            elif key == "coordinator":
                self.log(f"group coordinator: {value[0]}")
            else:
                self.log(
                    f"{key}: leader {value[0]} (leader epoch {value[1]}), ISR {list(value[2])}"
                )

    # -- workload ----------------------------------------------------------------------------

    async def produce(self, index: int, until: float) -> None:
        name = f"producer-{index}"
        acks = _ACKS[self.config.acks]
        async with self.cluster.producer(
            acks=self.config.acks,
            enable_idempotence=self.config.idempotent,
            delivery_timeout_ms=20_000,
            request_timeout_ms=5_000,
            max_block_ms=20_000,
        ) as producer:
            sequence = 0
            while trio.current_time() < until and not self.workload_done:
                partition = self.rng.randrange(self.config.partitions)
                value = f"{name}-{sequence}".encode()
                sequence += 1
                start = trio.current_time()
                outcome, offset, error = Outcome.INDETERMINATE, -1, None
                try:
                    with trio.move_on_after(30.0):
                        meta = await producer.send_and_wait(TOPIC, value, partition=partition)
                        outcome, offset = Outcome.OK, meta.offset
                except errors.KafkaError as failure:
                    # With retries, an earlier attempt may have been written: indeterminate.
                    error = f"{type(failure).__name__}: {failure}"
                self.ops.append(
                    ProduceOp(
                        name,
                        TopicPartition(TOPIC, partition),
                        value,
                        acks,
                        self.config.idempotent,
                        outcome,
                        offset,
                        error,
                        start,
                        trio.current_time(),
                    )
                )
                self.log(
                    f"{name} send {value.decode()} -> p{partition}: {outcome.value} "
                    f"{offset if outcome is Outcome.OK else error}"
                )
                await trio.sleep(self.rng.uniform(0.0, 0.5))

    # -- the consumer group ---------------------------------------------------------------

    def start_group(self, nursery: trio.Nursery) -> None:
        """Starts `config.group_consumers` members and the OffsetFetch observer."""
        self._group_nursery = nursery
        self.members = [GroupMemberSlot(index) for index in range(self.config.group_consumers)]
        for slot in self.members:
            self.start_member(slot)
        nursery.start_soon(self.watch_commits)

    def start_member(self, slot: GroupMemberSlot) -> None:
        assert self._group_nursery is not None and not slot.running
        slot.incarnation += 1
        slot.running = True
        slot.scope = trio.CancelScope()
        self.log(f"start group {slot.name}")
        self._group_nursery.start_soon(self.consume, slot, slot.scope)

    def crash_member(self, slot: GroupMemberSlot) -> None:
        """A crash: the member's task is cancelled (no commit, no LeaveGroup)."""
        self.log(f"crash group {slot.name}")
        slot.scope.cancel()
        slot.running = False
        slot.consumer = None

    async def consume(self, slot: GroupMemberSlot, scope: trio.CancelScope) -> None:
        """One incarnation of a member: poll, process, commit what was processed (the
        positions after each partition's records) after each poll; a partition given up
        in a rebalance first commits what it processed (the revocation listener)."""
        name = slot.name
        processed: dict[TopicPartition, int] = {}  # processed, not yet committed

        async def commit(consumer: Any, offsets: dict[TopicPartition, int]) -> bool:
            generation = consumer.group_metadata().generation_id
            start = trio.current_time()
            outcome, error = Outcome.INDETERMINATE, "crashed while committing"
            try:
                await consumer.commit(offsets)
                outcome, error = Outcome.OK, None
            except (errors.CommitFailedError, errors.RebalanceInProgressError) as failure:
                outcome, error = Outcome.FAILED, f"{type(failure).__name__}: {failure}"
            except errors.KafkaError as failure:
                error = f"{type(failure).__name__}: {failure}"
            finally:
                items = tuple(sorted(offsets.items()))
                self.commits.append(
                    CommitOp(name, generation, items, outcome, start, trio.current_time(), error)
                )
                shown = ", ".join(f"p{tp.partition}={offset}" for tp, offset in items)
                self.log(
                    f"{name} commit {shown} (generation {generation}): {outcome.value}"
                    + (f" {error}" if error and outcome is not Outcome.OK else "")
                )
            for tp, offset in offsets.items():
                if processed.get(tp) == offset:
                    del processed[tp]
            return outcome is Outcome.OK

        consumer_box: list[Any] = []

        async def on_revoke(partitions: list[TopicPartition]) -> None:
            self.log(f"{name} revoked {[tp.partition for tp in partitions]}")
            mine = {tp: processed[tp] for tp in partitions if tp in processed}
            if mine and consumer_box and not scope.cancel_called:  # (a crash commits nothing)
                await commit(consumer_box[0], mine)
            for tp in partitions:
                processed.pop(tp, None)

        def on_lost(partitions: list[TopicPartition]) -> None:
            self.log(f"{name} lost {[tp.partition for tp in partitions]}")
            for tp in partitions:
                processed.pop(tp, None)

        def on_assign(partitions: list[TopicPartition]) -> None:
            self.log(f"{name} assigned {[tp.partition for tp in partitions]}")

        with scope:
            async with self.cluster.consumer(
                client_id=name,
                group_id=GROUP_ID,
                enable_auto_commit=False,
                session_timeout_ms=10_000,
                heartbeat_interval_ms=1_000,
                max_poll_interval_ms=30_000,
                request_timeout_ms=5_000,
                default_api_timeout_ms=15_000,
            ) as consumer:
                consumer_box.append(consumer)
                slot.consumer = consumer
                consumer.subscribe(
                    [TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost
                )
                while True:
                    try:
                        records = await consumer.poll(0.5)
                    except errors.KafkaError as failure:
                        self.log(f"{name} poll failed: {type(failure).__name__}: {failure}")
                        await trio.sleep(0.5)
                        continue
                    if not records:
                        continue
                    now = trio.current_time()
                    polled: dict[TopicPartition, list[int]] = {}
                    for record in records:
                        tp = TopicPartition(record.topic, record.partition)
                        self.consumed.append(Consumed(name, tp, record.offset, record.value, now))
                        self._consumed_keys.add((tp, record.offset))
                        polled.setdefault(tp, []).append(record.offset)
                    for tp in sorted(polled):
                        processed[tp] = await consumer.position(tp)
                    self.log(
                        f"{name} consumed "
                        + ", ".join(
                            f"p{tp.partition}@{offsets[0]}-{offsets[-1]}"
                            for tp, offsets in sorted(polled.items())
                        )
                    )
                    # Processing takes a while: a crash may come before the commit.
                    await trio.sleep(self.rng.uniform(0.0, 0.3))
                    await commit(consumer, dict(sorted(processed.items())))

    async def watch_commits(self) -> None:
        """An observer (no member of the group) reading the committed offsets now and then."""
        tps = [TopicPartition(TOPIC, p) for p in range(self.config.partitions)]
        async with self.cluster.consumer(
            client_id="offset-observer",
            group_id=GROUP_ID,
            enable_auto_commit=False,
            request_timeout_ms=5_000,
            default_api_timeout_ms=5_000,
        ) as observer:
            while True:
                await trio.sleep(self.rng.uniform(1.0, 3.0))
                await self.read_committed(observer, tps)

    async def read_committed(self, observer: Any, tps: list[TopicPartition]) -> None:
        start = trio.current_time()
        try:
            found = await observer.committed(tps)
        except errors.KafkaError:
            return
        offsets = tuple(sorted(found.items()))
        # Who answered (the observer's coordinator, unchanged by a successful answer), and
        # whether it still led the offsets partition then.
        known = observer._group.coordinator  # (the harness looks inside the client)
        node = None if known is None else known[0]
        stale = node is not None and node != self.coordinator()
        self.offset_reads.append(OffsetRead(offsets, start, trio.current_time(), node, stale))
        key = ("committed", offsets, stale)
        if self._last_seen.get("committed") != key:
            self._last_seen["committed"] = key
            shown = ", ".join(f"p{tp.partition}={offset}" for tp, offset in offsets)
            by = f" (stale: from broker {node}, a deposed coordinator)" if stale else ""
            self.log(f"committed offsets: {shown}{by}")

    def group_covers_topic(self) -> bool:
        owned = [
            tp.partition
            for slot in self.members
            if slot.running and slot.consumer is not None
            for tp in slot.consumer.assignment()
        ]
        return sorted(owned) == list(range(self.config.partitions))

    async def wait_for_group(self) -> None:
        """Before the faults: the group formed and its partitions assigned (which also
        creates `__consumer_offsets` while every broker runs)."""
        try:
            await poll_until(self.group_covers_topic, timeout=60.0, every=0.1)
        except trio.TooSlowError:
            raise InvariantViolation("the consumer group did not form in 60s") from None
        self.log("group formed")

    def unconsumed(self) -> list[tuple[TopicPartition, int]]:
        durable = _durable(self.config)
        return [
            (op.tp, op.offset)
            for op in self.ops
            if op.outcome is Outcome.OK
            and op.acks != 0
            and op.offset >= 0
            and durable(op)
            and (op.tp, op.offset) not in self._consumed_keys
        ]

    async def catch_up(self) -> None:
        """After settling: every member runs again, and the group gets `catch_up_seconds`
        to consume every acknowledged record (what it did not is the check's finding)."""
        for slot in self.members:
            if not slot.running:
                self.start_member(slot)
        try:
            await poll_until(
                lambda: not self.unconsumed(), timeout=self.config.catch_up_seconds, every=0.5
            )
            self.log("the group consumed every acknowledged record")
        except trio.TooSlowError:
            self.log(f"the group did not catch up: {len(self.unconsumed())} record(s) unconsumed")
        async with self.cluster.consumer(
            client_id="offset-reader", group_id=GROUP_ID, enable_auto_commit=False
        ) as observer:
            with trio.move_on_after(60):
                await self.read_committed(
                    observer, [TopicPartition(TOPIC, p) for p in range(self.config.partitions)]
                )

    def group_history(self) -> GroupHistory:
        return GroupHistory(tuple(self.consumed), tuple(self.commits), tuple(self.offset_reads))

    # -- the end: heal, settle, read everything --------------------------------------------------

    async def settle(self) -> None:
        self.heal_network()
        if not self.cluster.zookeeper_running:
            await self.start_zookeeper()
        for broker_id in sorted(self.down):
            self.log(f"restart broker {broker_id} (settling)")
            await self.cluster.start_broker(broker_id)
        self.down.clear()
        await self.read_assignment()
        await poll_until(self._converged, timeout=self.config.settle_seconds, every=0.5)
        self.log("converged")

    async def read_assignment(self) -> None:
        """The topic's assignment once no reassignment is in progress (a reassignment the
        faults started completes once its new replicas catch up). One is in progress from
        its request until /admin/reassign_partitions is gone: a request no controller has
        read yet (written while the controller was cut off) has not touched the topic's
        znode."""
        zk = KafkaZkClient(self.cluster.zk, clock=self.cluster.clock)
        with trio.fail_after(self.config.settle_seconds):
            while True:
                found = await zk.get_replica_assignment(TOPIC)
                if found is None:
                    raise InvariantViolation(f"topic {TOPIC} has no assignment after its creation")
                _topic_id, assignment = found
                requested = await zk.get_partition_reassignment()
                if requested is None and not any(
                    a.is_being_reassigned for a in assignment.values()
                ):
                    break
                await trio.sleep(0.5)
        self.assignment = {p: tuple(a.replicas) for p, a in sorted(assignment.items())}
        self.log(f"assignment: {self.assignment}")

    def _converged(self) -> bool:
        """Every partition led by one of its replicas, and each replica (per the topic's
        assignment: with more brokers than the replication factor, a broker hosts only
        some partitions) holding the leader's log, all of it committed."""
        for partition in range(self.config.partitions):
            tp = TopicPartition(TOPIC, partition)
            leaders = [
                broker_id
                for broker_id, broker in self.cluster.brokers.items()
                if broker.replica_manager is not None
                and (replica := broker.replica_manager.partition(tp)) is not None
                and replica.is_leader
            ]
            if len(leaders) != 1:
                return False
            views = []
            for broker_id in self.assignment[partition]:
                manager = self.cluster.brokers[broker_id].replica_manager
                replica = manager.partition(tp) if manager else None
                if replica is None:
                    return False
                views.append((replica.log_end_offset, replica.high_watermark, replica.leader_epoch))
            if len(set(views)) != 1:
                return False
            leader = self.cluster.brokers[leaders[0]].replica_manager.partition(tp)
            if leader.high_watermark != leader.log_end_offset:
                return False
            if sorted(leader.isr) != sorted(self.assignment[partition]):
                return False
        return True

    def _leader_of(self, tp: TopicPartition) -> Partition | None:
        """The partition's replica on the broker that leads it now, if one does."""
        for broker in self.cluster.brokers.values():
            manager = broker.replica_manager
            replica = manager.partition(tp) if manager is not None else None
            if replica is not None and replica.is_leader:
                return replica
        return None

    async def read_everything(self) -> dict[TopicPartition, list[tuple[int, bytes]]]:
        reads: dict[TopicPartition, list[tuple[int, bytes]]] = {}
        for partition in range(self.config.partitions):
            tp = TopicPartition(TOPIC, partition)
            # The auto leader rebalance keeps running after the cluster converged: while it
            # moves a leadership, the old leader may have stepped down before the new one
            # took over (as in Kafka: a client retries), so wait for one.
            await poll_until(
                lambda tp=tp: self._leader_of(tp) is not None,
                timeout=self.config.settle_seconds,
                every=0.1,
            )
            replica = self._leader_of(tp)
            log = replica.log
            batches = log.read(log.log_start_offset, 1 << 30, replica.high_watermark)
            reads[tp] = [(r.offset, r.value) for r in iter_batch_records(batches)]
            # The same records through a consumer, as a user would read them.
            async with self.cluster.consumer() as consumer:
                consumer.assign([tp])
                consumer.seek_to_beginning()
                seen: list[tuple[int, bytes]] = []
                with trio.fail_after(60):
                    while len(seen) < len(reads[tp]):
                        seen += [(r.offset, r.value) for r in await consumer.poll(timeout=1.0)]
            if seen != reads[tp]:
                raise InvariantViolation(
                    f"{tp}: a consumer read {len(seen)} records that "
                    f"differ from the leader's committed log"
                )
        return reads


async def _drive(scenario: Callable[[Simulation], Awaitable[None]], sim: Simulation) -> None:
    await scenario(sim)
    sim.log("scenario done")
    sim.workload_done = True


def _durable(config: SimConfig) -> Callable[[ProduceOp], bool]:
    def durable(op: ProduceOp) -> bool:
        return config.durable and op.acks == -1

    return durable


async def run_simulation(config: SimConfig) -> SimResult:
    trace: list[str] = []
    ops: list[ProduceOp] = []
    # A run that hangs (some task waiting for what never comes) is a finding, not a stuck
    # campaign: the whole run, teardown included, has a virtual-time budget.
    budget = config.chaos_seconds + config.settle_seconds + RUN_SLACK_SECONDS
    if config.group_consumers:
        budget += config.catch_up_seconds + 60.0
    outcome = _Outcome()
    with trio.move_on_after(budget) as scope:
        await _run(config, trace, ops, outcome)
    if scope.cancelled_caught:
        outcome.violation = f"the run did not finish within {budget:.0f}s"
        outcome.check = outcome.group_check = None
        trace.append(f"{trio.current_time():10.3f} {outcome.violation}")
    return SimResult(
        config,
        tuple(ops),
        outcome.check,
        outcome.violation,
        tuple(trace),
        outcome.group,
        outcome.group_check,
    )


@attrs.define
class _Outcome:
    violation: str | None = None
    check: CheckResult | None = None
    group: GroupHistory | None = None
    group_check: GroupCheckResult | None = None


def _broker_config(config: SimConfig) -> dict[str, object]:
    broker_config: dict[str, object] = {
        "zookeeper.session.timeout.ms": config.session_timeout_ms,
        "replica.lag.time.max.ms": config.replica_lag_time_max_ms,
        "controlled.shutdown.retry.backoff.ms": 500,
        # The auto leader rebalance runs during the chaos, not once in five minutes.
        "leader.imbalance.check.interval.seconds": 15,
    }
    if config.group_consumers:
        # `__consumer_offsets` under the same durability contract as the topic (its
        # min.insync.replicas, unclean election and fsync come from the brokers' defaults),
        # and few partitions: one group uses one.
        broker_config.update(
            {
                "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
                "min.insync.replicas": config.min_insync_replicas,
                "unclean.leader.election.enable": config.unclean_leader_election,
            }
        )
        if config.flush_messages is not None:
            broker_config["log.flush.interval.messages"] = config.flush_messages
    return broker_config


async def _run(
    config: SimConfig, trace: list[str], ops: list[ProduceOp], outcome: _Outcome
) -> None:
    rng = random.Random(config.seed)
    broker_config = _broker_config(config)
    async with open_cluster(
        config.brokers,
        seed=config.seed,
        network="sim",
        logs="memory",
        broker_config=broker_config,
        persist_zookeeper="restart_zookeeper" in config.faults,
    ) as cluster:
        sim = Simulation(config, cluster, random.Random(rng.getrandbits(64)), trace, ops)
        try:
            await cluster.wait_for_controller(timeout=60)
            async with cluster.admin() as admin:
                await admin.create_topic(
                    TOPIC,
                    partitions=config.partitions,
                    replication_factor=config.replication_factor,
                    config={
                        "min.insync.replicas": str(config.min_insync_replicas),
                        "unclean.leader.election.enable": str(
                            config.unclean_leader_election
                        ).lower(),
                        **(
                            {}
                            if config.flush_messages is None
                            else {"flush.messages": str(config.flush_messages)}
                        ),
                    },
                )
            sim.log(f"topic {TOPIC} created")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sim.watch_invariants)
                if config.group_consumers:
                    sim.start_group(nursery)
                    await sim.wait_for_group()
                until = trio.current_time() + config.chaos_seconds
                async with trio.open_nursery() as work:
                    if config.scenario is None:
                        work.start_soon(sim.faults, until)
                        if config.group_consumers:
                            work.start_soon(sim.member_faults, until)
                    else:
                        until = math.inf  # the scenario decides when the workload ends
                        work.start_soon(_drive, config.scenario, sim)
                    for index in range(config.producers):
                        work.start_soon(sim.produce, index, until)
                await sim.settle()
                if config.group_consumers:
                    await sim.catch_up()
                sim.checker.check(cluster)
                nursery.cancel_scope.cancel()
            if config.group_consumers:
                outcome.group = sim.group_history()
            reads = await sim.read_everything()
            outcome.check = check(ops, reads, durable=_durable(config))
            if outcome.group is not None:
                outcome.group_check = check_group(
                    ops,
                    outcome.group,
                    reads if config.durable else None,
                    durable=_durable(config),
                )
        except* InvariantViolation as group:  # from the watcher task: inside a group
            outcome.violation = str(group.exceptions[0])
            sim.log(f"INVARIANT VIOLATED: {outcome.violation}")
        except* trio.TooSlowError:
            outcome.violation = "the cluster did not converge after healing"
            sim.log(outcome.violation)


def simulate(config: SimConfig) -> SimResult:
    """Runs one seeded simulation to completion in its own `trio.run` (virtual time, pinned
    scheduler)."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    with pinned_scheduler(config.seed):
        return trio.run(run_simulation, config, clock=clock)
