"""A broker (Kafka's KafkaServer in ZooKeeper mode): connect to ZooKeeper, create Kafka's
top-level paths, agree on the cluster id, check meta.properties, serve requests, register
`/brokers/ids/N`, and run the controller.
"""

from __future__ import annotations

import base64
import enum
import logging
import pathlib
import random
import time
from collections.abc import Callable
from typing import Any

import attrs
import trio

import transport
import zkstub
from actors import MetricsRegistry
from kcore.common import Broker, EndPoint
from kcore.controller.controller import KafkaController
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import UpdateMetadataRequest, UpdateMetadataResponse
from kcore.server.control_requests import control_request_error
from kcore.server.metadata_cache import MetadataCache
from kcore.wire import WireError, from_wire, to_wire
from kcore.zk_client import KafkaZkClient

logger = logging.getLogger("kcore.server.broker")


class BrokerState(enum.Enum):
    NOT_RUNNING = 0
    STARTING = 1
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


def generate_cluster_id(rng: random.Random) -> str:
    """Kafka's Uuid.toString: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")


def decode_body(message_type: type, request: transport.Request) -> Any:
    try:
        return from_wire(message_type, request.body)
    except WireError as error:
        raise transport.RpcError(transport.INVALID_REQUEST, str(error)) from None


@attrs.define(eq=False)
class BrokerServer:
    config: Any  # kcore.config.KafkaConfig
    network: transport.Network  # the whole network; the broker takes its node's view
    rng: random.Random
    clock: Callable[[], float] = time.time  # wall clock, for stamps only
    metrics: MetricsRegistry = attrs.field(factory=MetricsRegistry)
    node_name: str | None = None

    state: BrokerState = attrs.field(default=BrokerState.NOT_RUNNING, init=False)
    cluster_id: str | None = attrs.field(default=None, init=False)
    broker_epoch: int = attrs.field(default=-1, init=False)
    endpoints: tuple[EndPoint, ...] = attrs.field(default=(), init=False)
    metadata_cache: MetadataCache = attrs.field(init=False)
    controller: KafkaController | None = attrs.field(default=None, init=False)
    zk: Any = attrs.field(default=None, init=False)
    _cancel_scope: trio.CancelScope | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.metadata_cache = MetadataCache(self.config.broker_id)
        if self.node_name is None:
            self.node_name = f"broker-{self.config.broker_id}"

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    async def run(
        self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Starts the broker and serves until cancelled; `task_status.started(self)` once it
        is registered and its controller is running."""
        self.state = BrokerState.STARTING
        network = self.network.node(self.node_name)
        try:
            with trio.CancelScope() as self._cancel_scope:
                async with zkstub.connect(
                    self.config.zookeeper_connect,
                    session_timeout=self.config.zookeeper_session_timeout_ms / 1000,
                    connect_timeout=self.config.zookeeper_connection_timeout_ms / 1000,
                    network=network,
                    rng=self.rng,
                ) as zk:
                    self.zk = zk
                    await self._serve(zk, network, task_status)
        finally:
            self.state = BrokerState.NOT_RUNNING

    async def _serve(self, zk: Any, network: transport.Network, task_status) -> None:
        zk_client = KafkaZkClient(zk, self.clock)
        await zk_client.create_top_level_paths()
        self.cluster_id = await zk_client.get_or_create_cluster_id(generate_cluster_id(self.rng))
        self._check_log_dirs()
        server = transport.RpcServer(
            {ApiKey.UPDATE_METADATA: self._handle_update_metadata},
            name=self.node_name,
        )
        async with trio.open_nursery() as nursery:
            self.endpoints = await self._start_listeners(nursery, network, server)
            broker = Broker(self.broker_id, self.endpoints, self.config.broker_rack)
            self.broker_epoch = await zk_client.register_broker(broker)
            self.controller = KafkaController(
                attrs.evolve(broker, epoch=self.broker_epoch),
                zk_client,
                network,
                self.rng,
                self.metrics,
                request_timeout=self.config.controller_socket_timeout_ms / 1000,
                on_broker_epoch=self._set_broker_epoch,
            )
            self.controller.broker_epoch = self.broker_epoch
            await nursery.start(self.controller.run)
            self.state = BrokerState.RUNNING
            logger.info("[KafkaServer id=%d] started", self.broker_id)
            task_status.started(self)

    def _set_broker_epoch(self, epoch: int) -> None:
        self.broker_epoch = epoch

    def _check_log_dirs(self) -> None:
        from kcore.log import check_meta_properties

        for log_dir in self.config.log_dirs:
            check_meta_properties(pathlib.Path(log_dir), self.broker_id, self.cluster_id)

    async def _start_listeners(
        self, nursery: trio.Nursery, network: transport.Network, server: transport.RpcServer
    ) -> tuple[EndPoint, ...]:
        endpoints = []
        for listener in self.config.listeners:
            endpoint = EndPoint.parse(listener)
            bound = await nursery.start(
                network.serve,
                (endpoint.host or "127.0.0.1", endpoint.port),
                server.handle_connection,
            )
            host, port = bound.address[0], bound.address[1]
            endpoints.append(attrs.evolve(endpoint, host=host, port=port))
            logger.info("Broker %d listening on %s://%s:%d",
                        self.broker_id, endpoint.listener_name, host, port)  # fmt: skip
        return tuple(endpoints)

    async def shutdown(self) -> None:
        """Stops the broker cleanly: its session is closed, so its registration goes at
        once (a crash leaves it until the session expires)."""
        self.state = BrokerState.SHUTTING_DOWN
        if self.zk is not None:
            await self.zk.aclose()
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    # -- control requests -----------------------------------------------------------------

    async def _handle_update_metadata(self, request: transport.Request) -> Any:
        update = decode_body(UpdateMetadataRequest, request)
        error = control_request_error(
            broker_epoch_in_request=update.broker_epoch,
            current_broker_epoch=self.broker_epoch,
            controller_epoch_in_request=update.controller_epoch,
            current_controller_epoch=self.metadata_cache.controller_epoch,
        )
        if error:
            logger.warning(
                "Broker %d refuses UpdateMetadata from controller %d epoch %d (error %d)",
                self.broker_id, update.controller_id, update.controller_epoch, error,
            )  # fmt: skip
        else:
            self.metadata_cache.update(update)
        return to_wire(UpdateMetadataResponse(error))

    @property
    def known_controller_id(self) -> int | None:
        return self.metadata_cache.controller_id
