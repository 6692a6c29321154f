"""Kafka's ControllerChannelManager: one queue and one sender task per live broker.

Requests to a broker go out one at a time, in the order queued. A request that fails on the
network is retried (after `retry_backoff`, on a fresh connection) until it is answered or the
broker is removed: control requests are idempotent on the broker (epoch checks), and a
broker that is gone is removed by the BrokerChange that notices it.

Supervision: the senders run under the manager's supervisor. A sender that dies on an
unexpected error (anything but the network, which it retries itself) is restarted, after
`retry_backoff`, on a fresh connection; the request in hand is lost, the ones queued behind
it go out (as Kafka's RequestSendThread goes on after a failed send). A sender failing again
and again (the supervisor's restart intensity) ends `run` with RestartIntensityError, for
the controller's supervisor to restart the manager, which restarts every sender.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from typing import Any

import attrs
import trio

import transport
from actors import MetricsRegistry, metric_name, open_supervisor
from kcore.common import Broker
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import CONTROL_RESPONSE_TYPES
from kcore.wire import WireError, from_wire, to_wire

logger = logging.getLogger("kcore.controller.channel")

ResponseCallback = Callable[[int, int, Any], None]  # (broker id, error code, decoded body)


@attrs.frozen
class _QueueItem:
    api_key: ApiKey
    request: Any
    callback: ResponseCallback | None
    enqueue_time: float


@attrs.define(eq=False)
class _BrokerSender:
    broker: Broker
    send: trio.MemorySendChannel
    receive: trio.MemoryReceiveChannel
    removed: bool = False
    # The running attempt's (each restart of the send loop enters a fresh one).
    cancel_scope: trio.CancelScope | None = None

    @property
    def queue_size(self) -> int:
        return self.send.statistics().current_buffer_used

    def remove(self) -> None:
        """Stops its task for good; what is still queued is dropped."""
        self.removed = True
        self.send.close()
        if self.cancel_scope is not None:
            self.cancel_scope.cancel()


@attrs.define(eq=False)
class ControllerChannelManager:
    controller_id: int
    network: transport.Network  # bound to the controller's broker node
    rng: random.Random
    metrics: MetricsRegistry
    listener_name: str = "PLAINTEXT"
    request_timeout: float = 30.0  # controller.socket.timeout.ms
    retry_backoff: float = 0.1
    _senders: dict[int, _BrokerSender] = attrs.field(factory=dict, init=False)
    # Senders added since `run` last looked: it starts their tasks.
    _to_start: trio.MemorySendChannel[_BrokerSender] = attrs.field(init=False)
    _to_start_receive: trio.MemoryReceiveChannel[_BrokerSender] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._to_start, self._to_start_receive = trio.open_memory_channel(math.inf)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Runs a sender task per broker added (and, at a restart, per broker still here)
        until cancelled; `remove_broker` / `shutdown` stop them."""
        async with open_supervisor(
            name=f"controller-{self.controller_id}-senders", restart_delay=self.retry_backoff
        ) as supervisor:

            def start(sender: _BrokerSender) -> None:
                name = f"controller-sender-{sender.broker.id}"
                supervisor.start_soon(self._send_loop, sender, name=name)

            # Every sender queued to start before now is registered (or was removed): one
            # task each for the registered ones, and the queue holds only later additions.
            while True:
                try:
                    self._to_start_receive.receive_nowait()
                except trio.WouldBlock:
                    break
            for broker_id in self.broker_ids:
                start(self._senders[broker_id])
            task_status.started()
            async for sender in self._to_start_receive:
                if not sender.removed:
                    start(sender)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._senders)

    def add_broker(self, broker: Broker) -> None:
        if broker.id in self._senders:
            return
        send, receive = trio.open_memory_channel(math.inf)
        sender = _BrokerSender(broker, send, receive)
        self._senders[broker.id] = sender
        self.metrics.gauge(self._queue_size_name(broker.id), lambda: sender.queue_size)
        self._to_start.send_nowait(sender)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.remove()
            self.metrics.remove(self._queue_size_name(broker_id))

    def shutdown(self) -> None:
        for broker_id in self.broker_ids:
            self.remove_broker(broker_id)

    def _queue_size_name(self, broker_id: int) -> str:
        return metric_name(
            "kafka.controller", "ControllerChannelManager", "QueueSize", broker_id=str(broker_id)
        )

    def send(
        self,
        broker_id: int,
        api_key: ApiKey,
        request: Any,
        callback: ResponseCallback | None = None,
    ) -> bool:
        """Queues a request; False (and a log line) if the broker is not known to be live."""
        sender = self._senders.get(broker_id)
        if sender is None:
            logger.warning(
                "Not sending request %s to broker %d, since it is offline.",
                api_key.name, broker_id,
            )  # fmt: skip
            return False
        sender.send.send_nowait(_QueueItem(api_key, request, callback, trio.current_time()))
        return True

    async def _send_loop(
        self,
        sender: _BrokerSender,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        broker = sender.broker
        endpoint = broker.endpoint(self.listener_name)
        address = (endpoint.host, endpoint.port)
        with trio.CancelScope() as sender.cancel_scope:
            if sender.removed:
                return
            async with transport.open_rpc_client(
                self.network,
                address,
                client_id=f"controller-{self.controller_id}",
                rng=self.rng,
                request_timeout=self.request_timeout,
                close_on_timeout=True,
            ) as client:
                async for item in sender.receive:
                    response = await self._send_until_answered(client, broker.id, item)
                    self._deliver(broker.id, item, response)

    async def _send_until_answered(
        self, client: transport.RpcClient, broker_id: int, item: _QueueItem
    ) -> transport.Response:
        body = to_wire(item.request)
        while True:
            try:
                return await client.request(item.api_key, body)
            except transport.TransportError as error:
                logger.warning(
                    "Controller %d fails to send request %s to broker %d: %r; retrying",
                    self.controller_id, item.api_key.name, broker_id, error,
                )  # fmt: skip
                await trio.sleep(self.retry_backoff)

    def _deliver(self, broker_id: int, item: _QueueItem, response: transport.Response) -> None:
        if item.callback is None:
            return
        body: Any = response.body
        response_type = CONTROL_RESPONSE_TYPES.get(item.api_key)
        if response_type is not None and response.error_code == 0:
            try:
                body = from_wire(response_type, response.body)
            except WireError as error:
                logger.error("Broker %d sent a malformed %s response: %s",
                             broker_id, item.api_key.name, error)  # fmt: skip
                return
        try:
            item.callback(broker_id, response.error_code, body)
        except Exception:
            logger.exception("Callback for %s to broker %d failed", item.api_key.name, broker_id)
