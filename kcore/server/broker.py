"""A broker (Kafka's KafkaServer in ZooKeeper mode): connect to ZooKeeper, create Kafka's
top-level paths, agree on the cluster id, check meta.properties, serve requests, register
`/brokers/ids/N`, and run the controller.

The broker is the root of its supervision tree: its listeners, its replica manager and its
controller run as children of one `actors` supervisor (each supervises its own tasks), and
the failure policy is written out in `_serve`.
"""

from __future__ import annotations

import base64
import enum
import logging
import math
import pathlib
import random
import time
from collections.abc import Callable
from typing import Any

import attrs
import trio

import actors
import transport
from actors import MetricsRegistry
from kcore import errors
from kcore.common import Broker, EndPoint, TopicPartition
from kcore.config import advertised_endpoints, security_protocols
from kcore.controller.controller import KafkaController
from kcore.coordinator.group import GroupConfig, GroupCoordinatorCore, uuid_member_ids
from kcore.log_context import broker_logging, controller_logging
from kcore.metrics import (
    FetchSessionMetrics,
    HttpListener,
    RequestMetrics,
    StateChangeLog,
    console_route,
    metrics_route,
    register_broker_metrics,
)
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import ControlledShutdownRequest, ControlledShutdownResponse
from kcore.security import BrokerTls, principal
from kcore.security.acl import AclAuthorizer, parse_super_users
from kcore.security.request_authorization import RequestAuthorization
from kcore.security.sasl import BrokerSasl
from kcore.security.sasl_network import SaslNetwork
from kcore.server.acl_changes import acl_change_listener
from kcore.server.apis import KafkaApis
from kcore.server.config_changes import config_change_listener
from kcore.server.controlled_shutdown import movable_partitions
from kcore.server.dynamic_broker_config import DynamicBrokerConfig, add_broker_reconfigurables
from kcore.server.group_coordinator import GroupCoordinator
from kcore.server.kafka_apis import KafkaProtocolApis
from kcore.server.kafka_protocol import KafkaProtocol
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager, MemoryLogStorage
from kcore.server.metadata_cache import MetadataCache
from kcore.server.replica_manager import ReplicaManager
from kcore.server.sasl_authenticator import SaslAuthenticator
from kcore.wire import WireError, from_wire, to_wire
from kcore.zk_client import KafkaZkClient, ZooKeeperError, open_kafka_zk_client

# The broker settings the group coordinator reads (Kafka's names).
GROUP_SETTINGS = (
    "group.min.session.timeout.ms", "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms", "group.max.size", "offsets.retention.minutes",
    "offsets.retention.check.interval.ms", "offsets.topic.num.partitions",
    "offset.metadata.max.bytes",
)  # fmt: skip

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


# The broker's own children are not restarted (a restart intensity of 0): each one's state is
# bound to the others' (the listeners' ports are registered in ZooKeeper, the controller's
# session hooks are installed once, the replica manager's partitions are what the controller
# last told it), so a child that escapes its own supervision with an error is a bug, and the
# broker goes down with that error rather than limp on without the child. Failures that are
# not bugs are handled below that level: a request handler's error answers that request with
# UNKNOWN_SERVER_ERROR and the connection serves its next request (transport.RpcServer); a
# fetcher's error restarts the fetcher (the replica manager's supervisor); a controller
# event's error is logged and the next event processed (actors.EventManager); a log dir's
# I/O error stops the broker cleanly (`LogDirFailureChannel`, `run`).
_CHILD_RESTARTS = 0
_CHILD_RESTARTS_WITHIN = 1.0  # seconds; any window: no failure is allowed in it


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
    # What it registers in /brokers/ids/N, and clients and other brokers are told:
    # advertised.listeners (else listeners), a port 0 or an empty host as bound.
    advertised_endpoints: tuple[EndPoint, ...] = attrs.field(default=(), init=False)
    # Where `http.listener` serves /metrics, as bound (None: not configured, or not yet).
    http_address: tuple[str, int] | None = attrs.field(default=None, init=False)
    metadata_cache: MetadataCache = attrs.field(init=False)
    # The config as it is now (`config` under the dynamic configs in ZooKeeper), which the
    # broker's parts are given: read at start-up, then kept current.
    dynamic_config: DynamicBrokerConfig = attrs.field(init=False)
    controller: KafkaController | None = attrs.field(default=None, init=False)
    replica_manager: ReplicaManager | None = attrs.field(default=None, init=False)
    zk_client: KafkaZkClient | None = attrs.field(default=None, init=False)
    # Where the logs report an I/O error of their log dir: the broker then stops.
    log_dir_failures: LogDirFailureChannel = attrs.field(factory=LogDirFailureChannel, init=False)
    _serve_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    # Kafka's SocketServer accepts connections from start-up but processes their requests
    # only once the request handlers exist (`enableRequestProcessing`), which is after the
    # controller: the handlers ask it things.
    _request_server: transport.RpcServer | None = attrs.field(default=None, init=False)
    _processing_requests: trio.Event = attrs.field(factory=trio.Event, init=False)
    _controlled_shutdown_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    # TLS contexts of its SSL listeners and inter-broker connections, built at start-up.
    _tls: BrokerTls = attrs.field(factory=BrokerTls, init=False)
    # SASL on its SASL listeners and inter-broker connections, built at start-up.
    _sasl: SaslAuthenticator | None = attrs.field(default=None, init=False)
    # The ACL authorizer when `authorizer.class.name` is set, once started (None: none).
    authorizer: AclAuthorizer | None = attrs.field(default=None, init=False)
    # Its recent state changes, for the web console (`http.listener`'s /).
    state_changes: StateChangeLog = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.metadata_cache = MetadataCache(self.config.broker_id)
        self.state_changes = StateChangeLog(self.config.broker_id)
        self.dynamic_config = DynamicBrokerConfig(self.config)
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
        `task_status.started(self)` once it is registered and its controller runs.

        When its log dir fails, the broker stops serving, closes its ZooKeeper session (so
        the controller moves its leaderships at once) and raises KafkaStorageError.

        Whatever its tasks log names it (`kcore.log_context`)."""
        # The web console's recent state changes: kept only while it runs, and only when
        # it has a console to show them on.
        console = self.config.http_listener_address is not None
        if console:
            self.state_changes.attach()
        try:
            with broker_logging(self.broker_id):
                await self._run(task_status)
        finally:
            if console:
                self.state_changes.detach()

    async def _run(self, task_status: trio.TaskStatus[BrokerServer]) -> None:
        self.state = BrokerState.STARTING
        network = self.network.node(self.node_name)
        try:
            # Bad key material (or TLS on a network without it) stops the broker here.
            self._tls = BrokerTls.from_config(self.config.values)
            self._tls.check_network(network)
            self._sasl = SaslAuthenticator(
                BrokerSasl.from_config(self.config.values),
                self._listener_of,
                random.Random(self.rng.getrandbits(64)),
                self.config.get("connection.failed.authentication.delay.ms") / 1000,
            )
            async with open_kafka_zk_client(
                self.config.zookeeper_connect,
                session_timeout=self.config.zookeeper_session_timeout_ms / 1000,
                connect_timeout=self.config.zookeeper_connection_timeout_ms / 1000,
                network=self._tls.zookeeper_network(network),  # zookeeper.ssl.client.enable
                rng=self.rng,
                clock=self.clock,
                secure_acls=self.config.get("zookeeper.set.acl"),
                digest_credential=_zookeeper_digest(self.config),
            ) as zk_client:
                self.zk_client = zk_client
                failure = None
                with trio.CancelScope() as self._serve_scope:
                    failure = await self._serve(zk_client, network, task_status)
                if failure is not None:
                    await self._stop_after_log_dir_failure(zk_client, *failure)
                else:  # `shutdown`: everything that served has stopped
                    try:
                        if self.replica_manager is not None:
                            self.replica_manager.shutdown()
                    finally:
                        # Last, whatever happened before: the registration and any
                        # /controller held go now, not a session timeout later.
                        await zk_client.close()
                    logger.info("[KafkaServer id=%d] shut down completed", self.broker_id)
        finally:
            self.state = BrokerState.NOT_RUNNING
            self._stopped.set()

    async def _serve(
        self, zk_client: KafkaZkClient, network: transport.Network, task_status
    ) -> tuple[str, BaseException]:
        """Starts everything and serves; returns the log dir failure that ended it."""
        await zk_client.create_top_level_paths()
        self.cluster_id = await zk_client.get_or_create_cluster_id(generate_cluster_id(self.rng))
        self._check_log_dirs()
        # Kafka's DynamicBrokerConfig.initialize: the dynamic configs count from the start.
        config = self.dynamic_config = DynamicBrokerConfig(self.config)
        await config.initialize(zk_client)
        replica_manager = self.replica_manager = ReplicaManager(
            config,
            self.broker_id,
            zk_client,
            LogManager(self.config.log_dirs, memory=self.log_storage),
            self._inter_broker_network(network),
            random.Random(self.rng.getrandbits(64)),
            broker_epoch=lambda: self.broker_epoch,
            wall_clock_ms=lambda: int(self.clock() * 1000),
            is_controller=lambda: self.controller is not None and self.controller.is_active,
            log_dir_failures=self.log_dir_failures,
            metrics=self.metrics,
        )
        replica_manager.startup()
        add_broker_reconfigurables(
            config, replica_manager, on_unclean_election_enabled=self._unclean_election_enabled
        )
        async with actors.open_supervisor(
            max_restarts=_CHILD_RESTARTS,
            within=_CHILD_RESTARTS_WITHIN,
            name=f"broker-{self.broker_id}",
        ) as supervisor:
            await supervisor.start(replica_manager.run, name="replica-manager")

            async def on_topic_config_change(topic: str) -> None:
                await replica_manager.reload_topic_config(topic)
                # Kafka's TopicConfigHandler: the controller elects the topic's offline
                # partitions again, in case it now allows an unclean election (the election
                # reads the setting itself, so other changes only cost a look).
                if self.controller is not None and self.controller.is_active:
                    self.controller.enable_topic_unclean_leader_election(topic)

            scram_credentials = self._sasl.credentials
            await scram_credentials.load(zk_client)
            config_changes = config_change_listener(
                zk_client,
                on_topic_config_change,
                wall_clock_ms=lambda: int(self.clock() * 1000),
                on_broker_config_change=config.process_config_change,
                on_user_config_change=lambda user: scram_credentials.reload(zk_client, user),
            )
            await supervisor.start(config_changes.run, name="config-changes")
            authorizer = await self._start_authorizer(supervisor, zk_client)
            self.endpoints = await self._start_listeners(supervisor, network)
            self.advertised_endpoints = advertised_endpoints(self.config.values, self.endpoints)
            broker = Broker(self.broker_id, self.advertised_endpoints, self.config.broker_rack)
            self.broker_epoch = await zk_client.register_broker(broker)
            controller = self.controller = KafkaController(
                attrs.evolve(broker, epoch=self.broker_epoch),
                zk_client,
                self._inter_broker_network(network),
                self.rng,
                self.metrics,
                request_timeout=self.config.controller_socket_timeout_ms / 1000,
                on_broker_epoch=self._set_broker_epoch,
                config=config,
            )
            controller.broker_epoch = self.broker_epoch
            # Brokers talk to each other over their first listener (kcore.config refuses any
            # other inter-broker listener), whatever its name.
            controller.channel.listener_name = self.endpoints[0].listener_name
            with controller_logging(
                self.broker_id, lambda: controller.epoch if controller.is_active else None
            ):
                await supervisor.start(controller.run, name="controller")
            group_coordinator = self._group_coordinator(replica_manager)
            await supervisor.start(group_coordinator.run, name="group-coordinator")
            register_broker_metrics(
                self.metrics, replica_manager=replica_manager, zk_client=zk_client,
                controller=controller, group_coordinator=group_coordinator.core,
            )  # fmt: skip
            if self.config.http_listener_address is not None:
                routes = {
                    "/metrics": metrics_route(self.metrics),
                    "/": console_route(
                        self, group_coordinator=group_coordinator.core,
                        state_changes=self.state_changes,
                    ),
                }  # fmt: skip
                http = HttpListener(routes, self.node_name)
                self.http_address = await supervisor.start(
                    http.serve, *self.config.http_listener_address, name="http-listener"
                )
            self._enable_request_processing(
                KafkaApis(
                    config,
                    replica_manager,
                    self.metadata_cache,
                    zk_client,
                    controller,
                    broker_epoch=lambda: self.broker_epoch,
                    cluster_id=self.cluster_id,
                    rng=self.rng,
                    new_topic_id=self.new_uuid,
                    group_coordinator=group_coordinator,
                    authorizer=authorizer,
                    listener_name_of=self._listener_of,
                )
            )
            self.state = BrokerState.RUNNING
            logger.info("[KafkaServer id=%d] started", self.broker_id)
            task_status.started(self)
            failure = await self.log_dir_failures.wait()
            supervisor.cancel()
        return failure

    def _unclean_election_enabled(self) -> None:
        """The dynamic default unclean.leader.election.enable became true (Kafka's
        DynamicLogConfig tells the controller, which elects offline partitions again)."""
        if self.controller is not None:
            self.controller.enable_default_unclean_leader_election()

    def _group_coordinator(self, replica_manager: ReplicaManager) -> GroupCoordinator:
        """The broker's group coordinator, told when it gains or loses the leadership of an
        offsets partition. Member ids draw on the broker's seeded rng, so a simulated
        cluster replays them."""
        config = self.config
        core = GroupCoordinatorCore(
            GroupConfig.from_properties({name: config.get(name) for name in GROUP_SETTINGS}),
            new_member_id=uuid_member_ids(random.Random(self.rng.getrandbits(64))),
        )

        def partition_exists(topic: str, partition: int) -> bool:
            return any(p.partition == partition for p in self.metadata_cache.partitions_of(topic))

        coordinator = GroupCoordinator(
            self.broker_id, replica_manager, core,
            wall_clock_ms=lambda: int(self.clock() * 1000), partition_exists=partition_exists,
            commit_timeout_ms=config.offsets_commit_timeout_ms,
        )  # fmt: skip
        replica_manager.leadership_listeners.append(coordinator.on_leadership_change)
        return coordinator

    def _enable_request_processing(self, apis: KafkaApis) -> None:
        # Kafka's RequestMetrics, around the handlers of both protocols.
        measured = RequestMetrics(self.metrics).instrument
        # SASL listeners serve nothing but ApiVersions and SASL until authenticated; then
        # the authorizer, when there is one, checks what the principal may do.
        sasl_guard = self._sasl.guard if self._sasl is not None else dict
        authorization = (
            None
            if apis.authorizer is None
            else RequestAuthorization(
                apis.authorizer,
                topic_exists=lambda topic: bool(self.metadata_cache.partitions_of(topic)),
                auto_create_topics=lambda: apis.config.auto_create_topics_enable,
            )
        )

        def guard(handlers: dict, *, kafka_protocol: bool) -> dict:
            if authorization is not None:
                handlers = authorization.guard(handlers, kafka_protocol=kafka_protocol)
            return sasl_guard(handlers)

        self._request_server = transport.RpcServer(
            measured(guard(apis.handlers(), kafka_protocol=False), kafka_protocol=False),
            name=self.node_name,
            # Kafka's socket.request.max.bytes: a larger request closes its connection. The
            # transport holds responses to the same bound (Kafka does not), so it must stay
            # above the largest fetch response (replica.fetch.response.max.bytes, the
            # consumers' fetch.max.bytes); Kafka's default, 100 MiB, does.
            max_frame_bytes=self.config.socket_request_max_bytes,
            # Kafka's queued.max.request.bytes: reading stops while requests in flight hold
            # this much (kcore's default bounds it; -1 is Kafka's unbounded default).
            max_queued_bytes=self.config.queued_max_request_bytes,
            # Every listener speaks Kafka's protocol too; a connection's first frame says which.
            foreign_protocol=KafkaProtocol(
                measured(
                    guard(
                        KafkaProtocolApis(
                            apis, fetch_session_metrics=FetchSessionMetrics(self.metrics)
                        ).handlers(),
                        kafka_protocol=True,
                    ),
                    kafka_protocol=True,
                )
            ),
            on_connect=self._identify_peer,
        )
        self._processing_requests.set()

    async def _start_authorizer(
        self, supervisor: actors.Supervisor, zk_client: KafkaZkClient
    ) -> AclAuthorizer | None:
        """Kafka's AclAuthorizer when `authorizer.class.name` names it (kcore.config refuses
        any other class): its ZooKeeper paths made, every ACL loaded, and its cache kept
        current by the change notifications. None without one."""
        if not self.config.get("authorizer.class.name"):
            return None
        super_users = parse_super_users(self.config.get("super.users"))  # checked when read
        authorizer = AclAuthorizer(super_users, self.config.get("allow.everyone.if.no.acl.found"))
        await zk_client.create_acl_paths()
        acl_changes = acl_change_listener(
            zk_client, authorizer, wall_clock_ms=lambda: int(self.clock() * 1000)
        )
        await supervisor.start(acl_changes.run, name="acl-changes")
        self.authorizer = authorizer
        logger.info("[KafkaServer id=%d] authorizer %s, super users %s",
                    self.broker_id, self.config.get("authorizer.class.name"),
                    sorted(super_users))  # fmt: skip
        return authorizer

    def _identify_peer(self, connection: transport.ServerConnection) -> None:
        """Keeps the peer's principal on its connection (Kafka's: `User:` and the subject of
        the TLS certificate it presented, else `User:ANONYMOUS`) for the authorizer."""
        peer = connection.context["principal"] = principal(connection.peer_certificate)
        logger.debug("Broker %d: connection from %s, principal %s",
                     self.broker_id, connection.peer_name, peer)  # fmt: skip
        if self._sasl is not None:
            self._sasl.on_connect(connection)  # SASL listeners: the principal comes from SASL

    def _listener_of(self, connection: transport.ServerConnection) -> str | None:
        """The name of the listener a connection came in on (by the port it reached)."""
        port = connection.connection.local_address[1]
        return next((e.listener_name for e in self.endpoints if e.port == port), None)

    def _inter_broker_network(self, network: transport.Network) -> transport.Network:
        """How this broker reaches other brokers: in TLS when the inter-broker listener is
        SSL, authenticated with its own credentials when it is a SASL one."""
        network = self._tls.inter_broker_network(network)
        credentials = self._sasl.sasl.inter_broker if self._sasl is not None else None
        if credentials is None:
            return network
        client_id = f"broker-{self.broker_id}"
        return SaslNetwork(network, credentials, random.Random(self.rng.getrandbits(64)), client_id)

    async def _handle_connection(self, connection: transport.MessageConnection) -> None:
        # A simulated network runs the connection's task in the connecting side's task tree:
        # what the requests' handling logs is this broker's all the same.
        with broker_logging(self.broker_id):
            await self._processing_requests.wait()
            await self._request_server.handle_connection(connection)

    async def _stop_after_log_dir_failure(
        self, zk_client: KafkaZkClient, log_dir: str, cause: BaseException
    ) -> None:
        """Kafka halts a broker whose last log dir went offline; this one stops and says why.
        Nothing is flushed or checkpointed: the log dir is what failed. The session is closed,
        so the registration goes at once and the controller elects new leaders now rather
        than after the session timeout."""
        self.state = BrokerState.SHUTTING_DOWN
        logger.error("[KafkaServer id=%d] Shutdown broker because all log dirs in %s have "
                     "failed: %r", self.broker_id, log_dir, cause)  # fmt: skip
        await zk_client.close()
        raise errors.KafkaStorageError(
            f"Broker {self.broker_id} stopped: log dir {log_dir} failed: {cause!r}"
        ) from cause

    def _set_broker_epoch(self, epoch: int) -> None:
        self.broker_epoch = epoch

    def _check_log_dirs(self) -> None:
        from kcore.log import check_meta_properties

        for log_dir in self.config.log_dirs:
            check_meta_properties(pathlib.Path(log_dir), self.broker_id, self.cluster_id)

    async def _start_listeners(
        self, supervisor: actors.Supervisor, network: transport.Network
    ) -> tuple[EndPoint, ...]:
        endpoints = []
        protocols = security_protocols(self.config.values)
        for listener in self.config.listeners:
            endpoint = EndPoint.parse(listener, protocols)
            bound = await supervisor.start(
                self._tls.listener_network(network, endpoint.listener_name).serve,
                (endpoint.host or "127.0.0.1", endpoint.port),
                self._handle_connection,
                name=f"listener-{endpoint.listener_name}",
            )
            host, port = bound.address[0], bound.address[1]
            endpoints.append(attrs.evolve(endpoint, host=host, port=port))
            logger.info("Broker %d listening on %s://%s:%d",
                        self.broker_id, endpoint.listener_name, host, port)  # fmt: skip
        return tuple(endpoints)

    # -- shutdown -------------------------------------------------------------------------

    async def shutdown(self, *, controlled_shutdown_timeout: float | None = None) -> None:
        """Kafka's clean shutdown: first a controlled shutdown (the controller moves this
        broker's leaderships away, so producers barely notice), then everything stops, the
        logs are flushed and checkpointed, and the session is closed, so the registration
        goes at once (a crash leaves it until the session expires).

        The controlled shutdown ends after `controlled.shutdown.max.retries`, at
        `controlled_shutdown_timeout` seconds, or on `skip_controlled_shutdown`; whatever
        ended it, the clean stop follows and closes the session last."""
        if self.state is BrokerState.RUNNING and self.config.controlled_shutdown_enable:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            if self.replica_manager is not None:
                self.replica_manager.begin_controlled_shutdown()
            limit = math.inf if controlled_shutdown_timeout is None else controlled_shutdown_timeout
            with trio.move_on_after(limit) as self._controlled_shutdown_scope:
                await self._controlled_shutdown()
            if self._controlled_shutdown_scope.cancelled_caught:
                logger.warning("Broker %d: controlled shutdown cut short; shutting down without it",
                               self.broker_id)  # fmt: skip
        self.state = BrokerState.SHUTTING_DOWN
        if self._serve_scope is not None:
            self._serve_scope.cancel()
        await self._stopped.wait()

    def skip_controlled_shutdown(self) -> None:
        """Ends a controlled shutdown in progress (a second SIGTERM): the broker goes on to
        its clean stop at once."""
        if self._controlled_shutdown_scope is not None:
            self._controlled_shutdown_scope.cancel()

    async def _controlled_shutdown(self) -> bool:
        """Asks the controller to move leadership off this broker, retrying
        `controlled.shutdown.max.retries` times; False if it never completed.

        Between attempts it waits `controlled.shutdown.retry.backoff.ms`, or less if the
        controller or the registered brokers change first (a new controller elected, a
        broker gone), since that is what a retry needs."""
        retries = self.config.controlled_shutdown_max_retries
        backoff = self.config.controlled_shutdown_retry_backoff_ms / 1000
        timeout = self.config.controller_socket_timeout_ms / 1000
        changed = trio.Event()
        for attempt in range(retries + 1):
            if attempt:
                with trio.move_on_after(backoff):
                    await changed.wait()
            # Bounded like the request itself: an isolated broker's ZooKeeper calls wait for a
            # connection that may never come, and a shutdown must end.
            controller = None
            live_brokers = None
            changed = trio.Event()
            with trio.move_on_after(timeout):
                live_brokers = await self._watch_cluster(changed.set)
                controller = await self._controller_endpoint()
            movable = None if live_brokers is None else self._movable_partitions(live_brokers)
            if controller is None and movable == []:
                # No controller, and nothing led here has another live replica (a whole
                # cluster stopping at once): there is nothing a controller could move.
                logger.info(
                    "Broker %d: no controller, and nothing led here can move: no other "
                    "replica is alive; proceeding", self.broker_id,
                )  # fmt: skip
                return False
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
            stranded = self._without_another_live_replica(response.remaining_partitions, movable)
            if response.error_code == 0 and len(stranded) == len(response.remaining_partitions):
                # Every partition still led here has no other live replica (its brokers are
                # gone, say a whole cluster stopping at once): no retry can move them.
                logger.info(
                    "Broker %d: controlled shutdown cannot move %s: no other replica is "
                    "alive; proceeding", self.broker_id, [str(tp) for tp in stranded],
                )  # fmt: skip
                return False
            logger.info(
                "Broker %d: controlled shutdown incomplete (error %d, %d partitions still "
                "led here); retrying", self.broker_id, response.error_code,
                len(response.remaining_partitions),
            )  # fmt: skip
        logger.warning("Broker %d: proceeding to an unclean shutdown", self.broker_id)
        return False

    async def _watch_cluster(self, on_change: Callable[[], None]) -> set[int] | None:
        """The registered broker ids, with `on_change` armed on them and on /controller;
        None if ZooKeeper does not answer."""
        if self.zk_client is None:
            return None
        try:
            await self.zk_client.watch_controller(on_deleted=on_change, on_changed=on_change)
            return set(await self.zk_client.get_all_brokers(watch=on_change))
        except ZooKeeperError:
            return None

    def _movable_partitions(self, live_brokers: set[int]) -> list[TopicPartition]:
        """The partitions led here (with more than one replica, as Kafka's
        replicatedPartitionsBrokerLeads) that another registered broker could lead."""
        if self.replica_manager is None:
            return []
        return movable_partitions(
            self.broker_id,
            {tp: p.replicas for tp, p in self.replica_manager.partitions.items() if p.is_leader},
            live_brokers,
        )

    def _without_another_live_replica(
        self, entries: Any, movable: list[TopicPartition] | None
    ) -> list[TopicPartition]:
        """The partitions among `entries` whose replicas, other than this broker, are all
        dead: not registered in ZooKeeper (`movable` lists those that have another), or
        not alive as far as the controller last told this broker."""
        stranded = []
        for entry in entries:
            tp = TopicPartition(entry.topic, entry.partition)
            state = self.metadata_cache.partitions.get(tp)
            others = () if state is None else [r for r in state.replicas if r != self.broker_id]
            if not any(self.metadata_cache.alive_broker(r) is not None for r in others) or (
                movable is not None and tp not in movable
            ):
                stranded.append(tp)
        return stranded

    async def _controller_endpoint(self) -> EndPoint | None:
        if self.zk_client is None:
            return None
        try:
            controller_id = await self.zk_client.get_controller_id()
        except ZooKeeperError:
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
            self._inter_broker_network(self.network.node(self.node_name)),
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


def _zookeeper_digest(config: Any) -> str | None:
    """The broker's ZooKeeper digest credential (`user:password`), None when unset."""
    credential = config.get("kcore.zookeeper.digest.credential")
    return None if credential is None else credential.value
