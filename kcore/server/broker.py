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
from kcore.protocol.control import ControlledShutdownRequest, ControlledShutdownResponse
from kcore.server.apis import KafkaApis
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager, MemoryLogStorage
from kcore.server.metadata_cache import MetadataCache
from kcore.server.replica_manager import ReplicaManager
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


@attrs.define(eq=False)
class BrokerServer:
    config: Any  # kcore.config.KafkaConfig
    network: transport.Network  # the whole network; the broker takes its node's view
    rng: random.Random
    clock: Callable[[], float] = time.time  # wall clock, for stamps only
    metrics: MetricsRegistry = attrs.field(factory=MetricsRegistry)
    node_name: str | None = None
    log_storage: MemoryLogStorage | None = None  # simulations: logs in memory

    state: BrokerState = attrs.field(default=BrokerState.NOT_RUNNING, init=False)
    cluster_id: str | None = attrs.field(default=None, init=False)
    broker_epoch: int = attrs.field(default=-1, init=False)
    endpoints: tuple[EndPoint, ...] = attrs.field(default=(), init=False)
    metadata_cache: MetadataCache = attrs.field(init=False)
    controller: KafkaController | None = attrs.field(default=None, init=False)
    replica_manager: ReplicaManager | None = attrs.field(default=None, init=False)
    zk: Any = attrs.field(default=None, init=False)
    _serve_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        self.metadata_cache = MetadataCache(self.config.broker_id)
        if self.node_name is None:
            self.node_name = f"broker-{self.config.broker_id}"

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    def new_uuid(self) -> str:
        return generate_cluster_id(self.rng)

    async def run(
        self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Starts the broker and serves until cancelled (a crash: nothing is flushed or
        closed) or `shutdown` (clean: logs flushed and checkpointed, session closed);
        `task_status.started(self)` once it is registered and its controller runs."""
        self.state = BrokerState.STARTING
        network = self.network.node(self.node_name)
        try:
            async with zkstub.connect(
                self.config.zookeeper_connect,
                session_timeout=self.config.zookeeper_session_timeout_ms / 1000,
                connect_timeout=self.config.zookeeper_connection_timeout_ms / 1000,
                network=network,
                rng=self.rng,
            ) as zk:
                self.zk = zk
                with trio.CancelScope() as self._serve_scope:
                    await self._serve(zk, network, task_status)
                # Only a clean shutdown gets here: everything that served has stopped.
                if self.replica_manager is not None:
                    self.replica_manager.shutdown()
                await zk.aclose()
                logger.info("[KafkaServer id=%d] shut down completed", self.broker_id)
        finally:
            self.state = BrokerState.NOT_RUNNING
            self._stopped.set()

    async def _serve(self, zk: Any, network: transport.Network, task_status) -> None:
        zk_client = KafkaZkClient(zk, self.clock)
        await zk_client.create_top_level_paths()
        self.cluster_id = await zk_client.get_or_create_cluster_id(generate_cluster_id(self.rng))
        self._check_log_dirs()
        self.replica_manager = ReplicaManager(
            self.config,
            self.broker_id,
            zk_client,
            LogManager(self.config.log_dirs, memory=self.log_storage),
            network,
            random.Random(self.rng.getrandbits(64)),
            broker_epoch=lambda: self.broker_epoch,
            wall_clock_ms=lambda: int(self.clock() * 1000),
            is_controller=lambda: self.controller is not None and self.controller.is_active,
            log_dir_failures=LogDirFailureChannel(),
        )
        self.replica_manager.startup()
        server = transport.RpcServer(KafkaApis(self).handlers(), name=self.node_name)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.replica_manager.run)
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
                config=self.config,
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

    # -- shutdown -------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Kafka's clean shutdown: first a controlled shutdown (the controller moves this
        broker's leaderships away, so producers barely notice), then everything stops, the
        logs are flushed and checkpointed, and the session is closed, so the registration
        goes at once (a crash leaves it until the session expires)."""
        if self.state is BrokerState.RUNNING and self.config.controlled_shutdown_enable:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            if self.replica_manager is not None:
                self.replica_manager.begin_controlled_shutdown()
            await self._controlled_shutdown()
        self.state = BrokerState.SHUTTING_DOWN
        if self._serve_scope is not None:
            self._serve_scope.cancel()
        await self._stopped.wait()

    async def _controlled_shutdown(self) -> bool:
        """Asks the controller to move leadership off this broker, retrying
        `controlled.shutdown.max.retries` times; False if it never completed."""
        retries = self.config.controlled_shutdown_max_retries
        backoff = self.config.controlled_shutdown_retry_backoff_ms / 1000
        timeout = self.config.controller_socket_timeout_ms / 1000
        for attempt in range(retries + 1):
            if attempt:
                await trio.sleep(backoff)
            # Bounded like the request itself: an isolated broker's ZooKeeper calls wait for a
            # connection that may never come, and a shutdown must end.
            controller = None
            with trio.move_on_after(timeout):
                controller = await self._controller_endpoint()
            if controller is None:
                logger.info("Broker %d: no controller for controlled shutdown; retrying",
                            self.broker_id)  # fmt: skip
                continue
            try:
                response = await self._ask_controller(controller, timeout)
            except (transport.TransportError, WireError) as error:
                logger.warning("Broker %d: controlled shutdown request failed: %r",
                               self.broker_id, error)  # fmt: skip
                continue
            if response.error_code == 0 and not response.remaining_partitions:
                logger.info("Broker %d: controlled shutdown succeeded", self.broker_id)
                return True
            logger.info(
                "Broker %d: controlled shutdown incomplete (error %d, %d partitions still "
                "led here); retrying", self.broker_id, response.error_code,
                len(response.remaining_partitions),
            )  # fmt: skip
        logger.warning("Broker %d: proceeding to an unclean shutdown", self.broker_id)
        return False

    async def _controller_endpoint(self) -> EndPoint | None:
        if self.zk is None:
            return None
        try:
            controller_id = await KafkaZkClient(self.zk, self.clock).get_controller_id()
        except zkstub.ZkError:
            return None
        if controller_id is None:
            return None
        if controller_id == self.broker_id:
            return self.endpoints[0] if self.endpoints else None
        broker = self.metadata_cache.alive_broker(controller_id)
        return broker.endpoints[0] if broker is not None else None

    async def _ask_controller(
        self, endpoint: EndPoint, timeout: float
    ) -> ControlledShutdownResponse:
        async with transport.open_rpc_client(
            self.network.node(self.node_name),
            (endpoint.host, endpoint.port),
            client_id=f"broker-{self.broker_id}-controlled-shutdown",
            rng=self.rng,
            request_timeout=timeout,
        ) as client:
            response = await client.request(
                ApiKey.CONTROLLED_SHUTDOWN,
                to_wire(ControlledShutdownRequest(self.broker_id, self.broker_epoch)),
            )
        if response.error_code:
            return ControlledShutdownResponse(response.error_code)
        return from_wire(ControlledShutdownResponse, response.body)

    @property
    def known_controller_id(self) -> int | None:
        return self.metadata_cache.controller_id
