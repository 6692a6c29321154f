"""Kafka's ControllerChannelManager: one queue and one sender task per live broker.

Requests to a broker go out one at a time, in the order queued. A request that fails on the
network is retried (after `retry_backoff`, on a fresh connection) until it is answered or the
broker is removed: control requests are idempotent on the broker (epoch checks), and a
broker that is gone is removed by the BrokerChange that notices it.
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
from actors import MetricsRegistry, metric_name
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
    cancel_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    @property
    def queue_size(self) -> int:
        return self.send.statistics().current_buffer_used


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
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Owns the sender tasks; cancel it (or `shutdown`) to stop them all."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._senders.clear()

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._senders)

    def add_broker(self, broker: Broker) -> None:
        if broker.id in self._senders:
            return
        if self._nursery is None:
            raise RuntimeError("ControllerChannelManager.run is not running")
        send, receive = trio.open_memory_channel(math.inf)
        sender = _BrokerSender(broker, send, receive)
        self._senders[broker.id] = sender
        self.metrics.gauge(self._queue_size_name(broker.id), lambda: sender.queue_size)
        self._nursery.start_soon(self._send_loop, sender, name=f"controller-sender-{broker.id}")

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.cancel_scope.cancel()
            sender.send.close()
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

    async def _send_loop(self, sender: _BrokerSender) -> None:
        broker = sender.broker
        endpoint = broker.endpoint(self.listener_name)
        address = (endpoint.host, endpoint.port)
        with sender.cancel_scope:
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
                    "Controller %d epoch fails to send request %s to broker %d: %r; retrying",
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
