"""What the web console (`GET /`) shows, gathered from one broker when the page is asked
for: its metadata cache (brokers, partitions with leader / ISR / offline replicas), its
replica manager (high watermark and log end of the replicas it hosts), ZooKeeper (the
controller and its epoch, through the broker's own client, bounded by
`ZOOKEEPER_TIMEOUT_S`: the page renders without it, saying so), its group coordinator
(the groups it coordinates, their committed offsets) and `StateChangeLog` (its recent
state changes).

Groups coordinated by another broker are not fetched over the network: each broker's
console shows the groups it coordinates, and says so. A page must not wait on other
brokers (the console is for when things are wrong), and the group's lag is only exact on
the broker that hosts its partitions anyway.
"""

from __future__ import annotations

import collections
import logging
import time
from http import HTTPStatus
from typing import Any

import attrs
import trio

from kcore.metrics._console import (
    BrokerRow,
    ConsoleState,
    GroupOffsetRow,
    GroupRow,
    PartitionRow,
    StateChange,
    render_console,
)
from kcore.metrics._http import HttpRequest, HttpResponse

ZOOKEEPER_TIMEOUT_S = 2.0
STATE_CHANGES_KEPT = 50
STATE_CHANGE_LOGGER = "kcore.state.change"


class StateChangeLog(logging.Handler):
    """The last `STATE_CHANGES_KEPT` records of the `kcore.state.change` logger that one
    broker's tasks logged (its controller's included: `kcore.log_context` tells them
    apart). An in-memory capture the broker owns: attached while it runs (`attach`,
    `detach`), it prints nothing. It sees what the logging configuration lets through
    (INFO for state changes)."""

    def __init__(self, broker_id: int, kept: int = STATE_CHANGES_KEPT) -> None:
        super().__init__()
        self.broker_id = broker_id
        self.records: collections.deque[StateChange] = collections.deque(maxlen=kept)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "broker_id", None) != self.broker_id:
            return
        try:
            text = getattr(record, "log_prefix", "") + record.getMessage()
        except Exception:  # a bad format string must not cost the broker anything
            text = f"{record.msg!r} % {record.args!r}"
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        self.records.append(StateChange(stamp, record.levelname, text))

    def attach(self) -> None:
        logging.getLogger(STATE_CHANGE_LOGGER).addHandler(self)

    def detach(self) -> None:
        logging.getLogger(STATE_CHANGE_LOGGER).removeHandler(self)


@attrs.frozen
class ControllerInZooKeeper:
    controller_id: int | None = None
    epoch: int | None = None
    error: str | None = None


async def controller_in_zookeeper(
    zk_client: Any, timeout: float = ZOOKEEPER_TIMEOUT_S
) -> ControllerInZooKeeper:
    """/controller and /controller_epoch, or why they could not be read in `timeout`."""
    if zk_client is None:
        return ControllerInZooKeeper(error="not connected yet")
    with trio.move_on_after(timeout):
        try:
            controller_id = await zk_client.get_controller_id()
            epoch = await zk_client.get_controller_epoch()
        except Exception as error:  # ZooKeeperError and its kin: the page says what
            return ControllerInZooKeeper(error=f"{type(error).__name__}: {error}")
        return ControllerInZooKeeper(controller_id, None if epoch is None else epoch[0])
    return ControllerInZooKeeper(error=f"no answer within {timeout:g} s")


def broker_rows(broker: Any, controller_id: int | None) -> tuple[BrokerRow, ...]:
    """Every broker the metadata cache names: the live ones, and those that only appear
    as replicas (down)."""
    cache = broker.metadata_cache
    known = set(cache.brokers) | {broker.broker_id}
    for state in cache.partitions.values():
        known.update(state.replicas)
    rows = []
    for broker_id in sorted(known):
        live = cache.brokers.get(broker_id)
        endpoints = live.endpoints if live is not None else ()
        if broker_id == broker.broker_id:
            endpoints = endpoints or broker.endpoints
        rows.append(
            BrokerRow(
                broker_id,
                up=live is not None or broker_id == broker.broker_id,
                endpoint=", ".join(e.connection_string for e in endpoints),
                is_controller=broker_id == controller_id,
                is_this_broker=broker_id == broker.broker_id,
            )
        )
    return tuple(rows)


def partition_rows(broker: Any) -> tuple[PartitionRow, ...]:
    cache = broker.metadata_cache
    hosted = broker.replica_manager.partitions if broker.replica_manager is not None else {}
    rows = []
    for tp in sorted(cache.partitions):
        state = cache.partitions[tp]
        local = hosted.get(tp)
        live = tuple(r for r in state.replicas if r in cache.brokers or r == broker.broker_id)
        rows.append(
            PartitionRow(
                tp.topic,
                tp.partition,
                leader=None if state.leader < 0 else state.leader,
                replicas=tuple(state.replicas),
                isr=tuple(state.isr),
                live_replicas=live,
                offline_replicas=tuple(state.offline_replicas),
                high_watermark=None if local is None else local.high_watermark,
                log_end_offset=None if local is None else local.log_end_offset,
            )
        )
    return tuple(rows)


def group_rows(group_coordinator: Any, broker: Any) -> tuple[GroupRow, ...]:
    """The groups `group_coordinator` (a GroupCoordinatorCore) holds, with each committed
    offset's lag behind the high watermark of this broker's replica."""
    if group_coordinator is None:
        return ()
    hosted = broker.replica_manager.partitions if broker.replica_manager is not None else {}
    rows = []
    for group_id in sorted(group_coordinator.groups):
        group = group_coordinator.groups[group_id]
        offsets = []
        for tp in sorted(group.offsets):
            local = hosted.get(tp)
            offsets.append(
                GroupOffsetRow(
                    tp.topic,
                    tp.partition,
                    group.offsets[tp].offset_and_metadata.offset,
                    None if local is None else local.high_watermark,
                )
            )
        rows.append(GroupRow(group_id, group.state.value, len(group.members), tuple(offsets)))
    return tuple(rows)


async def console_state(
    broker: Any,
    *,
    group_coordinator: Any = None,
    state_changes: StateChangeLog | None = None,
    zookeeper_timeout: float = ZOOKEEPER_TIMEOUT_S,
) -> ConsoleState:
    """The console's state, read from `broker` (a BrokerServer) now."""
    controller = await controller_in_zookeeper(broker.zk_client, zookeeper_timeout)
    controller_id = controller.controller_id
    if controller.error is not None:  # the last the controller told this broker
        controller_id = broker.metadata_cache.controller_id
    return ConsoleState(
        broker_id=broker.broker_id,
        cluster_id=broker.cluster_id,
        controller_id=controller.controller_id,
        controller_epoch=controller.epoch,
        zookeeper_error=controller.error,
        brokers=broker_rows(broker, controller_id),
        partitions=partition_rows(broker),
        groups=group_rows(group_coordinator, broker),
        state_changes=tuple(state_changes.records) if state_changes is not None else (),
        generated_at=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(broker.clock())),
    )


def console_route(
    broker: Any, *, group_coordinator: Any = None, state_changes: StateChangeLog | None = None
):
    """GET /: the console page, gathered now."""

    async def console(request: HttpRequest) -> HttpResponse:
        state = await console_state(
            broker, group_coordinator=group_coordinator, state_changes=state_changes
        )
        return HttpResponse(
            HTTPStatus.OK, "text/html; charset=utf-8", render_console(state).encode()
        )

    return console
