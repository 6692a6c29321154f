"""What the demo watches and concludes, without I/O: a snapshot of the cluster, the events
between two snapshots, how long partitions went without a leader, and the verdict on the
records (acked vs consumed).

A snapshot joins what ZooKeeper says (brokers, controller, each partition's leader and
ISR: what `kcore topics --describe` shows, from the brokers' metadata) with what each
broker's `/metrics` says (`BrokerMetrics`, read from the same Prometheus series a Kafka
dashboard reads: under-replicated and offline partitions, leader counts, log end offsets,
messages in), so the live view shows the numbers an operator's dashboard would.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping

import attrs

NO_LEADER = -1

# The Prometheus series the view reads from each broker's /metrics: Kafka's metrics as the
# JMX exporter's Kafka rules name them (kcore.metrics).
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
LEADER_COUNT = "kafka_server_replicamanager_leadercount"
PARTITION_COUNT = "kafka_server_replicamanager_partitioncount"
ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
OFFLINE_PARTITIONS = "kafka_controller_kafkacontroller_offlinepartitionscount"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"  # {topic}
LOG_END_OFFSET = "kafka_log_log_logendoffset"  # {topic, partition}

# Prometheus samples by (sample name, sorted (label, value) pairs), as a scrape parses.
Samples = Mapping[tuple[str, tuple[tuple[str, str], ...]], float]


@attrs.frozen
class BrokerMetrics:
    """What one broker's /metrics said when the demo looked."""

    under_replicated: int  # partitions it leads whose ISR is short (UnderReplicatedPartitions)
    leaders: int  # LeaderCount
    partitions: int  # PartitionCount: replicas it hosts
    active_controller: bool  # ActiveControllerCount
    offline_partitions: int  # OfflinePartitionsCount (0 unless it is the active controller)
    messages_in: int  # records appended to the topic since it started (MessagesInPerSec)
    log_end_offsets: Mapping[int, int]  # the topic's partitions it hosts: LogEndOffset


def broker_metrics(samples: Samples, topic: str) -> BrokerMetrics:
    """The view's numbers in one broker's samples; a series the broker does not have
    (no controller yet, no record of `topic` appended) counts 0."""

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    log_end_offsets = {}
    for (name, labels), found in samples.items():
        tags = dict(labels)
        if name == LOG_END_OFFSET and tags.get("topic") == topic:
            log_end_offsets[int(tags["partition"])] = int(found)
    return BrokerMetrics(
        under_replicated=int(value(UNDER_REPLICATED)),
        leaders=int(value(LEADER_COUNT)),
        partitions=int(value(PARTITION_COUNT)),
        active_controller=value(ACTIVE_CONTROLLER) == 1,
        offline_partitions=int(value(OFFLINE_PARTITIONS)),
        messages_in=int(value(MESSAGES_IN, topic=topic)),
        log_end_offsets=dict(sorted(log_end_offsets.items())),
    )


@attrs.frozen
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    high_watermark: int | None = None
    log_end_offset: int | None = None  # the leader's LogEndOffset, from its /metrics


@attrs.frozen
class ClusterView:
    """The cluster as ZooKeeper (and the leaders' high watermarks) showed it at `time`,
    and each running broker's /metrics (`brokers`: those that answered)."""

    time: float
    live_brokers: frozenset[int]
    controller: int | None
    controller_epoch: int | None
    partitions: Mapping[int, PartitionView]
    brokers: Mapping[int, BrokerMetrics] = attrs.field(factory=dict)

    @property
    def under_replicated(self) -> int:
        """The cluster's under-replicated partitions: the sum of every broker's
        UnderReplicatedPartitions, as a Kafka dashboard adds them up."""
        return sum(b.under_replicated for b in self.brokers.values())

    @property
    def offline_partitions(self) -> int:
        """OfflinePartitionsCount summed over the brokers (only an active controller's is
        not 0), as a Kafka dashboard adds it up."""
        return sum(b.offline_partitions for b in self.brokers.values())

    @property
    def active_controllers(self) -> list[int]:
        """The brokers whose ActiveControllerCount is 1 (one, once the cluster settles)."""
        return sorted(b for b, m in self.brokers.items() if m.active_controller)


def messages_in_per_second(old: ClusterView | None, new: ClusterView) -> float:
    """Records the brokers appended per second between two looks (MessagesInPerSec): each
    broker's count since the last look, over the brokers in both (a restarted broker counts
    from 0 again, so its first look after the restart is left out)."""
    if old is None or new.time <= old.time:
        return 0.0
    appended = 0
    for broker, now in new.brokers.items():
        before = old.brokers.get(broker)
        if before is not None and now.messages_in >= before.messages_in:
            appended += now.messages_in - before.messages_in
    return appended / (new.time - old.time)


def events_between(old: ClusterView | None, new: ClusterView) -> list[str]:
    """Human-readable changes from `old` to `new`, in a stable order."""
    events: list[str] = []
    if old is None:
        old = ClusterView(new.time, frozenset(), None, None, {})
    for broker in sorted(new.live_brokers - old.live_brokers):
        events.append(f"broker {broker} registered")
    for broker in sorted(old.live_brokers - new.live_brokers):
        events.append(f"broker {broker} is gone")
    if (new.controller, new.controller_epoch) != (old.controller, old.controller_epoch):
        if new.controller is None:
            events.append("no active controller")
        else:
            events.append(
                f"controller elected: broker {new.controller} (epoch {new.controller_epoch})"
            )
    for partition, now in sorted(new.partitions.items()):
        before = old.partitions.get(partition)
        if before is None:
            events.append(f"partition {partition}: leader {now.leader}, ISR {list(now.isr)}")
            continue
        if now.leader != before.leader:
            if now.leader == NO_LEADER:
                events.append(f"partition {partition}: OFFLINE (leader {before.leader} lost)")
            else:
                events.append(
                    f"partition {partition}: leader {before.leader} -> {now.leader} "
                    f"(leader epoch {now.leader_epoch})"
                )
        shrunk = sorted(set(before.isr) - set(now.isr))
        grown = sorted(set(now.isr) - set(before.isr))
        if shrunk:
            events.append(f"partition {partition}: ISR shrank to {list(now.isr)} (-{shrunk})")
        if grown:
            events.append(f"partition {partition}: ISR expanded to {list(now.isr)} (+{grown})")
    return events


def pick_cut(view: ClusterView, down: Iterable[int]) -> tuple[int, int, int] | None:
    """(partition, follower, leader) for the cut: the first partition whose leader and an
    in-sync follower are both up. ZooKeeper still names a killed broker as leader (and in
    the ISR) until its session expires, so the brokers the demo brought `down` are left
    out: cutting a dead leader off shows nothing."""
    down = set(down)
    for partition, state in sorted(view.partitions.items()):
        if state.leader == NO_LEADER or state.leader in down:
            continue
        if state.leader not in view.live_brokers:
            continue
        for follower in state.isr:
            if follower != state.leader and follower not in down:
                return partition, follower, state.leader
    return None


def pick_leader_to_kill(view: ClusterView, down: Iterable[int]) -> tuple[int, int] | None:
    """(partition, leader): the first partition led by a broker that is up."""
    down = set(down)
    for partition, state in sorted(view.partitions.items()):
        if state.leader != NO_LEADER and state.leader not in down:
            return partition, state.leader
    return None


@attrs.define
class LeaderlessClock:
    """Per partition, the seconds spent without a leader, from successive snapshots."""

    since: dict[int, float] = attrs.field(factory=dict)  # leaderless since
    total: dict[int, float] = attrs.field(factory=dict)

    def observe(self, view: ClusterView) -> None:
        for partition, state in view.partitions.items():
            self.total.setdefault(partition, 0.0)
            if state.leader == NO_LEADER:
                self.since.setdefault(partition, view.time)
            elif partition in self.since:
                self.total[partition] += view.time - self.since.pop(partition)

    def finish(self, now: float) -> dict[int, float]:
        """The totals, counting a partition still leaderless up to `now`."""
        totals = dict(self.total)
        for partition, since in self.since.items():
            totals[partition] = totals.get(partition, 0.0) + now - since
        return totals


@attrs.frozen
class Verdict:
    acked: int
    consumed: int
    lost: tuple[tuple[int, int, bytes], ...]  # (partition, offset, value) acked, never read
    moved: tuple[tuple[int, int, bytes], ...]  # acked at one offset, read at another
    duplicates: int  # values read more than once
    leaderless_seconds: Mapping[int, float]
    # per partition, the longest wait between two acknowledgements and when it began:
    # how long the producer saw it unavailable (a dead leader is noticed only after a
    # session timeout; acks=all waits for a dead follower until the ISR drops it)
    longest_ack_gap: Mapping[int, tuple[float, float]]

    @property
    def ok(self) -> bool:
        return not self.lost and not self.moved

    def lines(self) -> list[str]:
        worst = max(self.leaderless_seconds.values(), default=0.0)
        lines = [
            f"records acked (acks=all): {self.acked}",
            f"records consumed:         {self.consumed}",
            f"records lost:             {len(self.lost)}",
            f"records at a new offset:  {len(self.moved)}",
            f"duplicates consumed:      {self.duplicates}",
            f"without a leader (ZooKeeper's view): longest {worst:.1f}s ("
            + ", ".join(
                f"partition {p} {s:.1f}s" for p, s in sorted(self.leaderless_seconds.items())
            )
            + ")",
            "longest wait between acks: "
            + ", ".join(
                f"partition {p} {gap:.1f}s (from {at:.1f}s)"
                for p, (gap, at) in sorted(self.longest_ack_gap.items())
            ),
        ]
        for partition, offset, value in self.lost[:10]:
            lines.append(f"  LOST partition {partition} offset {offset}: {value!r}")
        lines.append("verdict: " + ("no acknowledged record lost" if self.ok else "DATA LOST"))
        return lines


def judge(
    acked: Iterable[tuple[int, int, bytes, float]],
    consumed: Iterable[tuple[int, int, bytes]],
    leaderless_seconds: Mapping[int, float],
) -> Verdict:
    """`acked`: (partition, offset, value, when acknowledged); `consumed`: (partition,
    offset, value). Values are unique per send."""
    timed = list(acked)
    acked = [(p, o, v) for p, o, v, _ in timed]
    consumed = list(consumed)
    read_at = {(p, v): o for p, o, v in consumed}
    counts = Counter(v for _, _, v in consumed)
    lost = tuple(sorted(r for r in acked if (r[0], r[2]) not in read_at))
    moved = tuple(
        sorted(r for r in acked if (r[0], r[2]) in read_at and read_at[r[0], r[2]] != r[1])
    )
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    return Verdict(
        len(acked),
        len(consumed),
        lost,
        moved,
        duplicates,
        dict(leaderless_seconds),
        _longest_gaps(timed),
    )


def _longest_gaps(acked: list[tuple[int, int, bytes, float]]) -> dict[int, tuple[float, float]]:
    times: dict[int, list[float]] = {}
    for partition, _, _, at in acked:
        times.setdefault(partition, []).append(at)
    gaps = {}
    for partition, stamps in sorted(times.items()):
        stamps.sort()
        gaps[partition] = max(
            ((b - a, a) for a, b in itertools.pairwise(stamps)), default=(0.0, stamps[0])
        )
    return gaps
