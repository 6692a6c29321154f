"""The demo's live view shows the brokers' own numbers, the ones their /metrics serves and
`kcore topics --describe` agrees with: a simulated demo (seeded chaos schedule, virtual
time) checked at every refresh against each broker's Prometheus exposition, a broker kill
seen the same way by the view, the metrics and `topics --describe`, and the numbers as
the live and plain displays print them."""

from __future__ import annotations

import io

import attrs
import trio
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from actors import MetricsRegistry, metric_name
from kcore.demo.display import LiveDisplay, status_line
from kcore.demo.model import (
    ACTIVE_CONTROLLER,
    LEADER_COUNT,
    LOG_END_OFFSET,
    MESSAGES_IN,
    NO_LEADER,
    OFFLINE_PARTITIONS,
    PARTITION_COUNT,
    UNDER_REPLICATED,
    BrokerMetrics,
    ClusterView,
    PartitionView,
    broker_metrics,
    messages_in_per_second,
    pick_leader_to_kill,
)
from kcore.demo.runner import (
    TOPIC,
    DemoOptions,
    Display,
    Progress,
    create_topic,
    open_target,
    open_watcher,
    run_demo,
)
from kcore.demo.targets import scrape_metrics
from kcore.metrics import (
    HttpListener,
    exposition,
    metrics_route,
    prometheus_registry,
    prometheus_samples,
)
from kcore.tools.topics import describe_lines

VIEWED = (UNDER_REPLICATED, LEADER_COUNT, PARTITION_COUNT, ACTIVE_CONTROLLER,
          OFFLINE_PARTITIONS, MESSAGES_IN, LOG_END_OFFSET)  # fmt: skip


def _exposed(broker) -> BrokerMetrics:
    """The broker's numbers as its /metrics text says them, parsed by Prometheus' parser
    (the view's series only: parsing every line of every broker at each refresh is slow)."""
    text = exposition(prometheus_registry(broker.metrics)).decode()
    lines = [
        line for line in text.splitlines()
        if line.removeprefix("# HELP ").removeprefix("# TYPE ").startswith(VIEWED)
    ]  # fmt: skip
    families = text_string_to_metric_families("\n".join(lines) + "\n")
    return broker_metrics(prometheus_samples(families), TOPIC)


@attrs.define
class CheckingDisplay(Display):
    """At a refresh, before anything can change: the view's numbers are the ones each
    running broker's /metrics serves. Checked after every cluster event (a chaos step, a
    leader or ISR change) and every fourth refresh besides (each check renders every
    broker's exposition, which costs)."""

    refreshes: int = 0
    checked: int = 0
    under_replicated_after_a_kill: list[int] = attrs.Factory(list)
    events: list[str] = attrs.Factory(list)
    events_checked: int = 0
    last: Progress | None = None

    def event(self, progress, text):
        self.events.append(text)

    def refresh(self, progress):
        self.refreshes += 1
        self.last = progress
        view = progress.view
        if any(e.startswith("CHAOS: kill") for e in self.events):
            self.under_replicated_after_a_kill.append(view.under_replicated)
        if len(self.events) == self.events_checked and self.refreshes % 4:
            return
        self.checked += 1
        self.events_checked = len(self.events)
        cluster = progress.target.cluster
        exposed = {broker_id: _exposed(broker) for broker_id, broker in cluster.brokers.items()}
        assert view.brokers == exposed
        for partition, state in view.partitions.items():
            if state.leader in exposed:  # ZooKeeper names a killed leader until it expires
                leo = exposed[state.leader].log_end_offsets.get(partition)
                assert state.log_end_offset == leo, partition

    def verdict(self, verdict):
        pass


async def test_the_live_view_reads_what_the_brokers_metrics_say(autojump_clock):
    display = CheckingDisplay()
    options = DemoOptions(simulated=True, duration=20, rate=10, partitions=3)
    verdict = await run_demo(options, display)
    assert verdict.ok, "\n".join(verdict.lines())
    assert display.refreshes >= 25 and display.checked >= 10
    # A killed broker leaves the partitions it replicated short of their ISR, which the
    # leaders count as under-replicated; everything is whole again by the end.
    assert max(display.under_replicated_after_a_kill) > 0
    view = display.last.view
    assert view.under_replicated == 0 and view.offline_partitions == 0
    assert len(view.active_controllers) == 1
    assert view.controller == view.active_controllers[0]
    # The last look: every partition's log end (its leader's LogEndOffset) is there.
    assert all(state.log_end_offset is not None for state in view.partitions.values())
    appended = sum(m.messages_in for m in view.brokers.values())
    assert appended > 0


async def _describe(target) -> tuple[list[str], list[str]]:
    """`kcore topics --describe --topic demo`'s partition lines, all and under-replicated."""
    async with target.admin() as admin:
        description = await admin.describe_topic(TOPIC)
        live = {b.node_id for b in (await admin.describe_cluster()).brokers}
    every = describe_lines(description, {}, live)[1:]  # the topic's own line first
    under = describe_lines(description, {}, live, under_replicated=True)
    return every, under


def _view_lines(view: ClusterView) -> list[str]:
    """The view's partitions as `topics --describe` prints them."""
    return [
        f"\tTopic: {TOPIC}\tPartition: {p}\tLeader: {'none' if s.leader == NO_LEADER else s.leader}"
        f"\tReplicas: {','.join(map(str, s.replicas))}\tIsr: {','.join(map(str, s.isr))}"
        for p, s in sorted(view.partitions.items())
    ]


async def test_a_kill_shows_the_same_in_the_view_the_metrics_and_topics_describe(
    autojump_clock,
):
    options = DemoOptions(simulated=True, partitions=3)
    async with open_target(options) as target:
        await create_topic(target, options)
        async with open_watcher(target, options, trio.current_time()) as watcher:
            view = await watcher.look()
            while len(view.partitions) < 3 or view.under_replicated:
                await trio.sleep(0.5)
                view = await watcher.look()
            assert (await _describe(target))[0] == _view_lines(view)
            _, victim = pick_leader_to_kill(view, down=())  # the demo's KILL_LEADER choice
            await target.kill(victim)
            # Its session expires, the controller moves its leaderships and the leaders
            # drop it from their ISRs: every partition (RF 3 on 3 brokers) is short of it.
            with trio.fail_after(60):
                while view.under_replicated < 3 or victim in view.live_brokers:
                    await trio.sleep(0.5)
                    view = await watcher.look()
                # The brokers' metadata follows the controller's: the same lines.
                every, under = await _describe(target)
                while every != _view_lines(view):
                    await trio.sleep(0.5)
                    view = await watcher.look()
                    every, under = await _describe(target)
    assert len(under) == view.under_replicated == 3
    assert view.offline_partitions == 0
    assert all(
        victim not in state.isr and state.leader != victim for state in view.partitions.values()
    )
    assert victim not in view.brokers  # a killed broker serves no /metrics


def _view_for_display() -> Progress:
    metrics = {
        1: BrokerMetrics(2, 2, 3, True, 1, 30, {0: 12, 1: 9}),
        2: BrokerMetrics(0, 0, 3, False, 0, 0, {0: 12, 1: 9}),
    }
    partitions = {
        0: PartitionView(1, 4, (1, 2, 3), (1, 2), 11, 12),
        1: PartitionView(1, 2, (1, 2, 3), (1,), 9, 9),
        2: PartitionView(NO_LEADER, 3, (3, 2, 1), (3,), None, None),
    }
    before = ClusterView(
        1.0, frozenset({1, 2}), 1, 2, partitions, {1: attrs.evolve(metrics[1], messages_in=10)}
    )
    now = ClusterView(3.0, frozenset({1, 2}), 1, 2, partitions, metrics)
    return Progress(view=now, previous_view=before)


def test_the_displays_print_the_brokers_numbers():
    progress = _view_for_display()
    assert messages_in_per_second(progress.previous_view, progress.view) == 10.0
    line = status_line(progress, 5.0, 4.0)
    assert line.endswith(
        "brokers: messages in 10/s, under-replicated partitions 2, offline partitions 1 [2]"
    )
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(LiveDisplay()._render(progress))
    text = console.file.getvalue()
    assert "LEO" in text and "under-replicated" in text
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) > 6 and cells[1].isdigit():
            rows[int(cells[1])] = cells[2:6]  # state, role, leaders, under-replicated
    assert rows[1] == ["up", "controller (epoch 2)", "2", "2"]
    assert rows[2] == ["up", "", "0", "0"]
    assert rows[3] == ["down", "", "-", "-"]  # not running: no /metrics


async def test_a_broker_processs_metrics_are_scraped_over_http():
    registry = MetricsRegistry()
    registry.gauge(
        metric_name("kafka.server", "ReplicaManager", "UnderReplicatedPartitions"), lambda: 2
    )
    registry.gauge(
        metric_name("kafka.log", "Log", "LogEndOffset", topic=TOPIC, partition="1"), lambda: 40
    )
    registry.counter(
        metric_name("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec", topic=TOPIC)
    ).inc(7)
    listener = HttpListener({"/metrics": metrics_route(registry)}, "broker-1")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(listener.serve, "127.0.0.1", 0)
        text = await scrape_metrics(address)
        nursery.cancel_scope.cancel()
    found = broker_metrics(prometheus_samples(text_string_to_metric_families(text)), TOPIC)
    assert (found.under_replicated, found.messages_in, found.log_end_offsets) == (2, 7, {1: 40})
    assert found.active_controller is False  # no controller series: not the controller
    # A broker that is gone answers nothing: no numbers, rather than an error.
    assert await scrape_metrics(address) is None


def test_a_brokers_samples_make_its_numbers():
    samples = {
        (UNDER_REPLICATED, ()): 1.0,
        (LEADER_COUNT, ()): 2.0,
        (ACTIVE_CONTROLLER, ()): 1.0,
        (MESSAGES_IN, (("topic", TOPIC),)): 5.0,
        (MESSAGES_IN, (("topic", "other"),)): 50.0,
        (LOG_END_OFFSET, (("partition", "2"), ("topic", TOPIC))): 7.0,
        (LOG_END_OFFSET, (("partition", "0"), ("topic", "other"))): 70.0,
    }
    assert broker_metrics(samples, TOPIC) == BrokerMetrics(1, 2, 0, True, 0, 5, {2: 7})


def test_messages_in_counts_brokers_seen_twice_and_not_a_restarted_ones_reset():
    def view(time, **counts):
        brokers = {int(b[1:]): BrokerMetrics(0, 0, 0, False, 0, n, {}) for b, n in counts.items()}
        return ClusterView(time, frozenset(), None, None, {}, brokers)

    assert messages_in_per_second(None, view(1.0, b1=10)) == 0.0
    # b1 appended 10; b2 restarted (its count began again); b3 is new.
    assert messages_in_per_second(view(1.0, b1=10, b2=40), view(3.0, b1=30, b2=5, b3=9)) == 10.0
