"""A broker's gauges under Kafka's names, read from its state when someone looks (a scrape,
`MetricsRegistry.snapshot`): nothing is kept in step on the request paths. Each family is a
gauge set (`MetricsRegistry.gauge_set`), one pass over the state for all its gauges:

- `kafka.server:type=ReplicaManager`: PartitionCount, LeaderCount, UnderReplicatedPartitions,
  UnderMinIsrPartitionCount, AtMinIsrPartitionCount, OfflineReplicaCount (and the ISR
  meters, `IsrChangeMeters`, which the replica manager bumps);
- `kafka.server:type=DelayedOperationPurgatory,delayedOperation=...`: PurgatorySize,
  NumDelayedOperations, for Produce, Fetch and DeleteRecords;
- `kafka.server:type=ReplicaFetcherManager,clientId=Replica`: MaxLag, and each fetched
  partition's `FetcherLagMetrics` ConsumerLag;
- `kafka.log:type=Log,topic=..,partition=..`: LogEndOffset, LogStartOffset, Size,
  NumLogSegments;
- `kafka.server:type=SessionExpireListener`: SessionState (one gauge per state, 1 for the
  current one: Kafka's is a string, which Prometheus cannot carry) and the
  ZooKeeper{Expires,Disconnects,SyncConnects}PerSec meters;
- `kafka.coordinator.group:type=GroupMetadataManager`: NumGroups, NumOffsets and
  NumGroups<State>;
- `kafka.controller:type=KafkaController`: the gauges the controller does not publish
  itself (PreferredReplicaImbalanceCount, ActiveBrokerCount, the topic-deletion counts);
- `kafka.server:type=FetchSessionCache`: NumIncrementalFetchSessions,
  NumIncrementalFetchPartitionsCached and the IncrementalFetchSessionEvictionsPerSec meter
  (`FetchSessionMetrics`, which the Kafka-protocol Fetch handler attaches its cache to).

The counting is plain functions over the state (`replica_counts`, `controller_counts`, ...),
tested directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from actors import Counter, MetricsRegistry, metric_name

_SERVER = "kafka.server"
_CONTROLLER = "kafka.controller"
_GROUP_COORDINATOR = "kafka.coordinator.group"

# zkstub's client states, in the order a session goes through them.
ZK_SESSION_STATES = ("CONNECTING", "CONNECTED", "SUSPENDED", "EXPIRED", "CLOSED")
# The state changes Kafka meters (ZooKeeperClient's stateToMeterMap, by zkstub's states).
_ZK_STATE_METERS = {
    "CONNECTED": "ZooKeeperSyncConnectsPerSec",
    "SUSPENDED": "ZooKeeperDisconnectsPerSec",
    "EXPIRED": "ZooKeeperExpiresPerSec",
}
# What `controller_counts` adds to the controller's own gauges (all 0 on an inactive one).
CONTROLLER_GAUGES = (
    "PreferredReplicaImbalanceCount", "ActiveBrokerCount", "TopicsToDeleteCount",
    "ReplicasToDeleteCount", "TopicsIneligibleToDeleteCount", "ReplicasIneligibleToDeleteCount",
)  # fmt: skip
_GROUP_STATES = {
    "PreparingRebalance": "NumGroupsPreparingRebalance",
    "CompletingRebalance": "NumGroupsCompletingRebalance",
    "Stable": "NumGroupsStable",
    "Dead": "NumGroupsDead",
    "Empty": "NumGroupsEmpty",
}


# -- counting (pure) -------------------------------------------------------------------------


@attrs.frozen
class ReplicaCounts:
    partitions: int = 0
    leaders: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0
    offline: int = 0


def replica_counts(
    partitions: Iterable[Any],
    min_insync_replicas: Callable[[str], int],
    is_offline: Callable[[Any], bool] = lambda tp: False,
) -> ReplicaCounts:
    """Kafka's ReplicaManager gauges over the hosted partitions (`Partition`s): a led
    partition is under-replicated when its ISR is smaller than its replica set, under (or
    at) min ISR by its topic's min.insync.replicas; an offline replica's log dir failed."""
    total = leaders = under_replicated = under_min = at_min = offline = 0
    for partition in partitions:
        total += 1
        if is_offline(partition.tp):
            offline += 1
            continue
        if not partition.is_leader:
            continue
        leaders += 1
        isr = len(partition.isr)
        if isr < len(partition.replicas):
            under_replicated += 1
        min_isr = min_insync_replicas(partition.tp.topic)
        if isr < min_isr:
            under_min += 1
        elif isr == min_isr:
            at_min += 1
    return ReplicaCounts(total, leaders, under_replicated, under_min, at_min, offline)


def controller_counts(context: Any) -> dict[str, int]:
    """The KafkaController gauges kcore's controller does not publish itself, from an
    active controller's context (Kafka's updateMetrics): partitions whose leader is not
    their preferred replica, live brokers, and the topic deletion backlog."""
    from kcore.states import ReplicaState

    imbalance = 0
    for tp, state in context.partition_leadership.items():
        if context.is_topic_queued_for_deletion(tp.topic):
            continue
        assignment = context.assignment(tp)
        if not assignment.replicas:
            continue
        preferred = assignment.replicas[0]
        leader_and_isr = state.leader_and_isr
        if assignment.is_being_reassigned and preferred in assignment.adding_replicas:
            # A reassignment's new preferred replica counts once it has joined the ISR.
            balanced = preferred not in leader_and_isr.isr
        else:
            balanced = leader_and_isr.leader == preferred
        imbalance += not balanced
    replicas_to_delete = ineligible_replicas = 0
    for topic in context.topics_to_be_deleted:
        for tp in context.partitions_for_topic(topic):
            for replica in context.replicas(tp):
                state = context.replica_state(tp, replica)
                replicas_to_delete += state is not ReplicaState.REPLICA_DELETION_SUCCESSFUL
                ineligible_replicas += state is ReplicaState.REPLICA_DELETION_INELIGIBLE
    return {
        "PreferredReplicaImbalanceCount": imbalance,
        "ActiveBrokerCount": len(context.live_or_shutting_down_broker_ids),
        "TopicsToDeleteCount": len(context.topics_to_be_deleted),
        "ReplicasToDeleteCount": replicas_to_delete,
        "TopicsIneligibleToDeleteCount": len(context.topics_ineligible_for_deletion),
        "ReplicasIneligibleToDeleteCount": ineligible_replicas,
    }


def group_counts(groups: Mapping[str, Any]) -> dict[str, int]:
    """GroupMetadataManager's gauges over the groups this coordinator holds."""
    counts = dict.fromkeys(_GROUP_STATES.values(), 0)
    offsets = 0
    for group in groups.values():
        name = _GROUP_STATES.get(group.state.value)
        if name is not None:
            counts[name] += 1
        offsets += len(group.offsets)
    return {"NumGroups": len(groups), "NumOffsets": offsets, **counts}


# -- meters the replica manager bumps ------------------------------------------------------


@attrs.define(eq=False)
class IsrChangeMeters:
    """ReplicaManager's IsrShrinksPerSec / IsrExpandsPerSec (an ISR write that took
    effect) and FailedIsrUpdatesPerSec (one that ZooKeeper refused or never answered)."""

    registry: MetricsRegistry
    shrinks: Counter = attrs.field(init=False)
    expands: Counter = attrs.field(init=False)
    failed: Counter = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        name = lambda n: metric_name(_SERVER, "ReplicaManager", n)  # noqa: E731
        self.shrinks = self.registry.counter(name("IsrShrinksPerSec"))
        self.expands = self.registry.counter(name("IsrExpandsPerSec"))
        self.failed = self.registry.counter(name("FailedIsrUpdatesPerSec"))

    def record(self, isr_before: int, isr_after: int | None) -> None:
        """An ISR write ended: the new ISR's size, None if it failed."""
        if isr_after is None:
            self.failed.inc()
        elif isr_after < isr_before:
            self.shrinks.inc()
        elif isr_after > isr_before:
            self.expands.inc()


# -- the gauge sets ----------------------------------------------------------------------------


def replica_manager_gauges(replica_manager: Any) -> dict[str, float]:
    log_manager = replica_manager.log_manager
    failures = replica_manager.log_dir_failures

    def is_offline(tp: Any) -> bool:
        return tp in log_manager.logs and failures.is_offline(log_manager.log_dir_of(tp))

    counts = replica_counts(
        replica_manager.partitions.values(), replica_manager.min_insync_replicas, is_offline
    )
    name = lambda n: metric_name(_SERVER, "ReplicaManager", n)  # noqa: E731
    return {
        name("PartitionCount"): counts.partitions,
        name("LeaderCount"): counts.leaders,
        name("UnderReplicatedPartitions"): counts.under_replicated,
        name("UnderMinIsrPartitionCount"): counts.under_min_isr,
        name("AtMinIsrPartitionCount"): counts.at_min_isr,
        name("OfflineReplicaCount"): counts.offline,
    }


def purgatory_gauges(purgatories: Iterable[Any]) -> dict[str, float]:
    values: dict[str, float] = {}
    for purgatory in purgatories:
        tags = {"delayedOperation": purgatory.name}
        kind = "DelayedOperationPurgatory"
        values[metric_name(_SERVER, kind, "PurgatorySize", **tags)] = purgatory.watched_count
        values[metric_name(_SERVER, kind, "NumDelayedOperations", **tags)] = purgatory.delayed_count
    return values


def fetcher_gauges(fetcher_manager: Any) -> dict[str, float]:
    """MaxLag over every partition fetched (0 with none), and each one's lag."""
    values: dict[str, float] = {}
    max_lag = 0
    for key in sorted(fetcher_manager.fetchers):
        fetcher = fetcher_manager.fetchers[key]
        for tp in sorted(fetcher.partitions):
            lag = fetcher.partitions[tp].lag
            max_lag = max(max_lag, lag)
            tags = {"clientId": fetcher.name, "topic": tp.topic, "partition": str(tp.partition)}
            values[metric_name(_SERVER, "FetcherLagMetrics", "ConsumerLag", **tags)] = lag
    values[metric_name(_SERVER, "ReplicaFetcherManager", "MaxLag", clientId="Replica")] = max_lag
    return values


def log_gauges(logs: Mapping[Any, Any]) -> dict[str, float]:
    values: dict[str, float] = {}
    for tp in sorted(logs):
        log = logs[tp]
        tags = {"topic": tp.topic, "partition": str(tp.partition)}
        values[metric_name("kafka.log", "Log", "LogEndOffset", **tags)] = log.log_end_offset
        values[metric_name("kafka.log", "Log", "LogStartOffset", **tags)] = log.log_start_offset
        values[metric_name("kafka.log", "Log", "Size", **tags)] = log.size_in_bytes
        values[metric_name("kafka.log", "Log", "NumLogSegments", **tags)] = len(
            log.segment_base_offsets()
        )
    return values


def zk_session_gauges(state: str) -> dict[str, float]:
    return {
        metric_name(_SERVER, "SessionExpireListener", "SessionState", state=name): float(
            name == state
        )
        for name in ZK_SESSION_STATES
    }


def fetch_session_gauges(cache: Any) -> dict[str, float]:
    """The sessions a FetchSessionCache holds and the partitions they cache (both 0 with no
    cache yet)."""
    name = lambda n: metric_name(_SERVER, "FetchSessionCache", n)  # noqa: E731
    return {
        name("NumIncrementalFetchSessions"): 0 if cache is None else cache.size,
        name("NumIncrementalFetchPartitionsCached"): 0 if cache is None else cache.total_partitions,
    }


@attrs.define(eq=False)
class FetchSessionMetrics:
    """Kafka's `kafka.server:type=FetchSessionCache` metrics, published from the broker's
    start as Kafka's are, though kcore makes the cache (`kcore.server.fetch_session`) only
    at the first Kafka-protocol fetch: the gauges read 0 until `attach` gives them one, and
    the eviction meter counts from then on."""

    registry: MetricsRegistry
    evictions: Counter = attrs.field(init=False)
    cache: Any = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.evictions = self.registry.counter(
            metric_name(_SERVER, "FetchSessionCache", "IncrementalFetchSessionEvictionsPerSec")
        )
        self.registry.gauge_set(
            "kafka.server:FetchSessionCache", lambda: fetch_session_gauges(self.cache)
        )

    def attach(self, cache: Any) -> None:
        """Reports `cache` (a FetchSessionCache) from now on, its evictions included."""
        self.cache = cache
        cache.on_eviction = self.evictions.inc


def register_broker_metrics(
    registry: MetricsRegistry,
    *,
    replica_manager: Any,
    zk_client: Any,
    controller: Any = None,
    group_coordinator: Any = None,
) -> None:
    """Publishes a broker's gauges into `registry` (read on each look) and meters its
    ZooKeeper session's state changes. `zk_client` is a `KafkaZkClient`; `controller` a
    `KafkaController`; `group_coordinator` a `GroupCoordinatorCore`."""
    registry.gauge_set(
        "kafka.server:ReplicaManager", lambda: replica_manager_gauges(replica_manager)
    )
    registry.gauge_set(
        "kafka.server:DelayedOperationPurgatory",
        lambda: purgatory_gauges(
            (
                replica_manager.produce_purgatory,
                replica_manager.fetch_purgatory,
                replica_manager.delete_records_purgatory,
            )
        ),
    )
    registry.gauge_set(
        "kafka.server:ReplicaFetcherManager",
        lambda: fetcher_gauges(replica_manager.fetcher_manager),
    )
    registry.gauge_set("kafka.log:Log", lambda: log_gauges(replica_manager.log_manager.logs))
    registry.gauge_set(
        "kafka.server:SessionExpireListener", lambda: zk_session_gauges(zk_client.zk.state.value)
    )
    meters = {
        state: registry.counter(metric_name(_SERVER, "SessionExpireListener", name))
        for state, name in _ZK_STATE_METERS.items()
    }

    def on_state(state: Any) -> None:
        meter = meters.get(state.value)
        if meter is not None:
            meter.inc()

    zk_client.zk.add_listener(on_state)
    if controller is not None:

        def controller_gauges() -> dict[str, float]:
            counts = controller_counts(controller.context) if controller.is_active else {}
            return {
                metric_name(_CONTROLLER, "KafkaController", name): counts.get(name, 0)
                for name in CONTROLLER_GAUGES
            }

        registry.gauge_set("kafka.controller:KafkaController", controller_gauges)
    if group_coordinator is not None:
        registry.gauge_set(
            "kafka.coordinator.group:GroupMetadataManager",
            lambda: {
                metric_name(_GROUP_COORDINATOR, "GroupMetadataManager", name): value
                for name, value in group_counts(group_coordinator.groups).items()
            },
        )
