"""The broker's web console (`GET /` on its `http.listener`): the cluster at a glance as
this broker sees it, as one server-rendered HTML page. Pure: `ConsoleState` in, an HTML
string out (`render_console`); every value from the cluster is escaped (topic names and
group ids are anyone's input). The page refreshes itself (`<meta http-equiv="refresh">`),
carries its CSS inline and fetches nothing else.

What `ConsoleState` holds, and where it comes from, is `kcore.metrics._console_data`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

import attrs

REFRESH_SECONDS = 5


@attrs.frozen
class BrokerRow:
    broker_id: int
    up: bool  # registered, as the controller last told this broker (itself: always)
    endpoint: str  # "" when down (its endpoints are not known any more)
    is_controller: bool
    is_this_broker: bool


@attrs.frozen
class PartitionRow:
    topic: str
    partition: int
    leader: int | None  # None: no leader (offline)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    live_replicas: tuple[int, ...]  # the replicas whose brokers are up
    offline_replicas: tuple[int, ...] = ()  # the controller's: on a dead broker or failed log dir
    # This broker's replica's, when it hosts one (None: hosted elsewhere).
    high_watermark: int | None = None
    log_end_offset: int | None = None

    @property
    def offline(self) -> bool:
        return self.leader is None

    @property
    def under_replicated(self) -> bool:
        return not self.offline and len(self.isr) < len(self.replicas)

    def why_offline(self) -> str:
        live = ", ".join(map(str, self.live_replicas)) or "none"
        isr = ", ".join(map(str, self.isr)) or "empty"
        return f"no leader: ISR {isr}; live replicas {live}"


@attrs.frozen
class GroupOffsetRow:
    topic: str
    partition: int
    committed: int
    end_offset: int | None  # the high watermark of this broker's replica, if it hosts one

    @property
    def lag(self) -> int | None:
        return None if self.end_offset is None else max(self.end_offset - self.committed, 0)


@attrs.frozen
class GroupRow:
    group_id: str
    state: str
    members: int
    offsets: tuple[GroupOffsetRow, ...] = ()

    @property
    def total_lag(self) -> int | None:
        lags = [o.lag for o in self.offsets if o.lag is not None]
        return sum(lags) if lags else None


@attrs.frozen
class StateChange:
    time: str  # HH:MM:SS
    level: str
    text: str  # prefixed: [Controller id=1 epoch=3] Changed partition ...


@attrs.frozen
class ConsoleState:
    broker_id: int
    cluster_id: str | None
    controller_id: int | None  # ZooKeeper's /controller (None: none, or not read)
    controller_epoch: int | None  # ZooKeeper's /controller_epoch
    zookeeper_error: str | None  # why the controller could not be read from ZooKeeper
    brokers: tuple[BrokerRow, ...]
    partitions: tuple[PartitionRow, ...]
    groups: tuple[GroupRow, ...]
    state_changes: tuple[StateChange, ...]
    generated_at: str
    refresh_seconds: int = REFRESH_SECONDS


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
.meta{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.9em;background:#fff}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#eee}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.offline td{background:#f8d0d0}tr.under-replicated td{background:#fbe9c0}
tr.down td{background:#e4e4e4;color:#777}
.badge{display:inline-block;padding:0 .4em;border-radius:.3em;font-size:.85em}
.up{background:#cde8cd}.down-badge{background:#f3c4c4}.ctl{background:#c8daf5}
.warn{background:#fbe9c0;padding:.4em .6em;border:1px solid #e0c070}
pre{background:#fff;border:1px solid #ccc;padding:.5em;font-size:.85em;overflow-x:auto}
"""


def _ids(ids: Iterable[int]) -> str:
    return escape(", ".join(str(i) for i in ids))


def _num(value: int | None) -> str:
    return '<td class="num">' + ("&ndash;" if value is None else escape(str(value))) + "</td>"


def render_brokers(state: ConsoleState) -> str:
    rows = []
    for broker in state.brokers:
        badges = [
            '<span class="badge up">up</span>'
            if broker.up
            else '<span class="badge down-badge">down</span>'
        ]
        if broker.is_controller:
            badges.append('<span class="badge ctl">controller</span>')
        here = " (this broker)" if broker.is_this_broker else ""
        rows.append(
            f'<tr class="{"up" if broker.up else "down"}" id="broker-{broker.broker_id}">'
            f"<td>{broker.broker_id}{here}</td><td>{' '.join(badges)}</td>"
            f"<td>{escape(broker.endpoint)}</td></tr>"
        )
    return (
        '<table id="brokers"><tr><th>Broker</th><th>Status</th><th>Endpoint</th></tr>'
        + "".join(rows)
        + "</table>"
    )


def partition_row_class(row: PartitionRow) -> str:
    if row.offline:
        return "offline"
    if row.under_replicated:
        return "under-replicated"
    return "ok"


def render_partitions(partitions: Iterable[PartitionRow]) -> str:
    rows = []
    for p in partitions:
        kind = partition_row_class(p)
        if p.offline:
            status = escape(f"OFFLINE ({p.why_offline()})")
        elif p.under_replicated:
            status = "under-replicated"
        else:
            status = "ok"
        if p.offline_replicas:
            status += f"; offline replicas: {_ids(p.offline_replicas)}"
        rows.append(
            f'<tr class="{kind}" data-partition="{escape(p.topic)}-{p.partition}">'
            f'<td>{escape(p.topic)}</td><td class="num">{p.partition}</td>'
            f"<td>{'none' if p.leader is None else p.leader}</td>"
            f"<td>{_ids(p.replicas)}</td><td>{_ids(p.isr)}</td>"
            f"{_num(p.high_watermark)}{_num(p.log_end_offset)}<td>{status}</td></tr>"
        )
    if not rows:
        return "<p>No topics.</p>"
    return (
        '<table id="partitions"><tr><th>Topic</th><th>Partition</th><th>Leader</th>'
        "<th>Replicas</th><th>ISR</th><th>High watermark</th><th>Log end</th>"
        "<th>Status</th></tr>" + "".join(rows) + "</table>"
    )


def render_groups(groups: Iterable[GroupRow], broker_id: int) -> str:
    note = (
        f'<p class="meta">The groups broker {broker_id} coordinates (another broker\'s '
        "console shows the groups it coordinates); lag is against the high watermark of "
        "the partitions this broker hosts (&ndash;: hosted elsewhere).</p>"
    )
    rows = []
    for group in groups:
        rows.append(
            f'<tr data-group="{escape(group.group_id)}"><td>{escape(group.group_id)}</td>'
            f"<td>{escape(group.state)}</td>{_num(group.members)}"
            f"<td></td>{_num(None)}{_num(group.total_lag)}</tr>"
        )
        for o in group.offsets:
            rows.append(
                f"<tr><td></td><td></td><td></td>"
                f"<td>{escape(o.topic)}-{o.partition}</td>{_num(o.committed)}{_num(o.lag)}</tr>"
            )
    if not rows:
        return note + "<p>No groups coordinated here.</p>"
    return (
        note + '<table id="groups"><tr><th>Group</th><th>State</th><th>Members</th>'
        "<th>Partition</th><th>Committed</th><th>Lag</th></tr>" + "".join(rows) + "</table>"
    )


def render_state_changes(changes: Iterable[StateChange]) -> str:
    lines = [f"{c.time} {c.level} {c.text}" for c in changes]
    if not lines:
        return (
            '<p class="meta">No state changes logged yet (the kcore.state.change logger '
            "must be enabled at INFO for them to be kept).</p>"
        )
    return '<pre id="state-changes">' + escape("\n".join(lines)) + "</pre>"


def render_console(state: ConsoleState) -> str:
    """The whole page."""
    if state.zookeeper_error is not None:
        controller = (
            '<p class="warn" id="zookeeper-error">ZooKeeper unreachable: '
            f"{escape(state.zookeeper_error)}. Controller unknown; what follows is this "
            "broker's metadata cache.</p>"
        )
    elif state.controller_id is None:
        controller = '<p class="warn">No controller elected.</p>'
    else:
        controller = (
            f"<p>Controller: broker {state.controller_id}, epoch "
            f"{'?' if state.controller_epoch is None else state.controller_epoch}</p>"
        )
    offline = sum(p.offline for p in state.partitions)
    under = sum(p.under_replicated for p in state.partitions)
    summary = (
        f"<p>{len(state.partitions)} partitions: {offline} offline, {under} under-replicated; "
        f"{sum(b.up for b in state.brokers)} of {len(state.brokers)} brokers up.</p>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{int(state.refresh_seconds)}">'
        f"<title>kcore: broker {state.broker_id}</title><style>{_CSS}</style></head><body>"
        f"<h1>kcore cluster {escape(state.cluster_id or '?')}</h1>"
        f'<p class="meta">As broker {state.broker_id} sees it at {escape(state.generated_at)}; '
        f"refreshes every {int(state.refresh_seconds)} s.</p>"
        f"{controller}{summary}"
        f"<h2>Brokers</h2>{render_brokers(state)}"
        f"<h2>Topics and partitions</h2>{render_partitions(state.partitions)}"
        f"<h2>Consumer groups</h2>{render_groups(state.groups, state.broker_id)}"
        f"<h2>Recent state changes (broker {state.broker_id})</h2>"
        f"{render_state_changes(state.state_changes)}"
        "</body></html>\n"
    )
