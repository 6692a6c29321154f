"""KafkaZkClient: Kafka's ZooKeeper operations on top of any zkstub client, the one place in
kcore's runtime that knows znode operations (the paths and JSON are `kcore.zkdata`'s).
Everything else calls its named methods and catches `ZooKeeperError`.

Every write the controller makes goes through `fenced(...)`: a multi whose first op checks
the version of `/controller_epoch` the controller was elected with, so a controller that was
replaced (a zombie behind a partition, a paused process) cannot write. A failed check is
ControllerMovedError, as in Kafka.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Self

import attrs
import trio

import transport
import zkstub
from kcore import errors, zkdata
from kcore.common import (
    Broker,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kcore.security import acl

logger = logging.getLogger("kcore.zk_client")

MATCH_ANY_VERSION = -1

# The base class of every ZooKeeper failure, under kcore's name: callers catch it without
# importing zkstub.
ZooKeeperError = zkstub.ZkError


# What a watch calls when its znode (or its list of children) changes: no argument, so no
# zkstub type reaches the caller; it re-reads (and re-arms) with the method that armed it.
Watch = Callable[[], None]


@attrs.frozen
class _Watcher:
    """A zkstub watcher calling a `Watch`. Equal when their callbacks are: the client
    registers a watcher once per znode however often it is armed, as it would the
    callback itself."""

    on_event: Watch

    def __call__(self, _event: zkstub.WatchedEvent) -> None:
        self.on_event()


@attrs.frozen
class _ControllerWatcher:
    on_deleted: Watch
    on_changed: Watch

    def __call__(self, event: zkstub.WatchedEvent) -> None:
        if event.type is zkstub.EventType.DELETED:
            self.on_deleted()
        else:
            self.on_changed()


def _watcher(watch: Watch | None) -> _Watcher | None:
    return None if watch is None else _Watcher(watch)


@attrs.frozen
class _CreationWatcher:
    """Calls its `Watch` only when the znode is created (Kafka's handlers that override
    handleCreation alone): the controller's own writes to it then wake nothing."""

    on_created: Watch

    def __call__(self, event: zkstub.WatchedEvent) -> None:
        if event.type is zkstub.EventType.CREATED:
            self.on_created()


class ZooKeeperUnreachableError(zkstub.ConnectionLossError):
    """No session could be opened with `zookeeper.connect` within the connection timeout."""


class ControllerMovedError(Exception):
    """Another broker became controller: this one's write was fenced, or its election lost."""


@attrs.frozen
class UpdateLeaderAndIsrResult:
    """Per partition: the written LeaderAndIsr (with its new partition epoch) or the error;
    partitions whose znode version moved (BadVersion) are to be retried after a re-read."""

    finished: dict[TopicPartition, LeaderAndIsr | Exception]
    to_retry: list[TopicPartition]


# Between attempts of a request that met a lost connection. The zkstub client itself waits
# for its reconnection before sending; this only keeps an adapter that fails fast while
# disconnected (kazoo) from spinning.
CONNECTION_LOSS_RETRY_BACKOFF = 0.1
# Requests about many partitions are pipelined, this many in flight (Kafka sends them all
# asynchronously and awaits the responses): one round trip each, one after the other,
# made a 10 000-partition election take minutes.
PIPELINE_DEPTH = 512


async def _pipelined(calls: list[Callable[[], Any]]) -> list[Any]:
    """Runs the calls with up to PIPELINE_DEPTH in flight; each one's result, or the
    exception it raised, in call order (the caller decides which errors end it all)."""
    results: list[Any] = [None] * len(calls)
    pending = iter(enumerate(calls))

    # A few workers taking the next call in turn: cheaper than a task per call behind a
    # limiter, which cost more than the requests themselves at 10 000 partitions.
    async def worker() -> None:
        for index, call in pending:
            try:
                results[index] = await call()
            except Exception as error:
                results[index] = error

    if len(calls) == 1:
        await worker()
        return results
    async with trio.open_nursery() as nursery:
        for _ in range(min(len(calls), PIPELINE_DEPTH)):
            nursery.start_soon(worker)
    return results


def _raise_controller_moved(results: Iterable[Any]) -> None:
    for result in results:
        if isinstance(result, ControllerMovedError):
            raise result


# The controller's writes about many partitions travel many to a multi, the multi fenced by
# one check of the controller epoch (Kafka sends one fenced setData per partition,
# pipelined; here a request and a server transaction per partition were most of a
# 10 000-partition election). A multi stays far below jute.maxbuffer (1 MiB), whatever the
# topic names' length.
FENCED_BATCH_OPS = 200
FENCED_BATCH_BYTES = 256 * 1024


def _op_bytes(op: zkstub.MultiOp) -> int:
    data = getattr(op, "data", None)
    return len(op.path) + (len(data) if data else 0)


def _batched(items: list[tuple[Any, zkstub.MultiOp]]) -> list[list[tuple[Any, zkstub.MultiOp]]]:
    """Consecutive runs of at most FENCED_BATCH_OPS ops and about FENCED_BATCH_BYTES."""
    batches: list[list[tuple[Any, zkstub.MultiOp]]] = []
    batch: list[tuple[Any, zkstub.MultiOp]] = []
    size = 0
    for item in items:
        op_size = _op_bytes(item[1])
        if batch and (len(batch) >= FENCED_BATCH_OPS or size + op_size > FENCED_BATCH_BYTES):
            batches.append(batch)
            batch, size = [], 0
        batch.append(item)
        size += op_size
    if batch:
        batches.append(batch)
    return batches


def _failed_op(results: list[Any]) -> int | None:
    """The index of the op that failed a multi (its results are then errors: RolledBack
    before that op, RuntimeInconsistency after it), or None when the multi applied."""
    if not any(isinstance(result, Exception) for result in results):
        return None
    return next(
        (
            index
            for index, result in enumerate(results)
            if isinstance(result, Exception) and not _is_multi_filler(result)
        ),
        -1,
    )


@attrs.define
class RetryUntilConnected:
    """Kafka's `retryRequestsUntilConnected`: a lost connection is no answer, so a request
    that met one is sent again once the session is back. An expired session, and every
    other error, is an answer. A write may then be applied twice, which callers already
    handle as Kafka's do: NodeExists from our own earlier create (`_checked_ephemeral_create`,
    `_check_controller_and_epoch`), BadVersion from our own earlier update (a re-read).

    It is a `zkstub.ZkClient` itself: what is no request (session, state, listeners, hooks,
    closing) is the wrapped client's."""

    zk: zkstub.ZkClient

    async def _retry(self, method: str, *args: Any, **kwargs: Any) -> Any:
        call = getattr(self.zk, method)
        while True:
            try:
                return await call(*args, **kwargs)
            except zkstub.ConnectionLossError as error:
                logger.debug("ZooKeeper %s met a lost connection (%s); retrying", method, error)
                await trio.sleep(CONNECTION_LOSS_RETRY_BACKOFF)

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("create", *args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("get", *args, **kwargs)

    async def set(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("set", *args, **kwargs)

    async def exists(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("exists", *args, **kwargs)

    async def get_children(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("get_children", *args, **kwargs)

    async def multi(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("multi", *args, **kwargs)

    async def multi_get(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("multi_get", *args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("delete", *args, **kwargs)

    async def sync(self, *args: Any, **kwargs: Any) -> Any:
        return await self._retry("sync", *args, **kwargs)

    @property
    def session_id(self) -> int:
        return self.zk.session_id

    @property
    def session_timeout(self) -> float:
        return self.zk.session_timeout

    @property
    def state(self) -> zkstub.ClientState:
        return self.zk.state

    @property
    def chroot(self) -> str:
        return self.zk.chroot

    def add_listener(self, listener: Callable[[zkstub.ClientState], None]) -> None:
        self.zk.add_listener(listener)

    def remove_listener(self, listener: Callable[[zkstub.ClientState], None]) -> None:
        self.zk.remove_listener(listener)

    def add_session_hooks(
        self,
        before_initializing_session: Callable[[], Awaitable[None]] | None = None,
        after_initializing_session: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.zk.add_session_hooks(before_initializing_session, after_initializing_session)

    async def aclose(self) -> None:
        await self.zk.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _retrying(zk: zkstub.ZkClient) -> RetryUntilConnected:
    return zk if isinstance(zk, RetryUntilConnected) else RetryUntilConnected(zk)


# ZkData.SensitiveRootPaths: what only the creator may read (user and broker configs hold
# credentials and passwords).
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_tokens")


def default_acls(secure: bool, path: str) -> tuple[zkstub.ACL, ...]:
    """Kafka's ZkData.defaultAcls: with zookeeper.set.acl, everything for the creator and
    reading for everyone, but for the sensitive paths (the creator only) and the old
    consumers' /consumers (open, as different consumers write under it); else open."""
    if not secure or path == zkdata.CONSUMERS:
        return zkstub.OPEN_ACL_UNSAFE
    if any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS):
        return zkstub.CREATOR_ALL_ACL
    return (*zkstub.CREATOR_ALL_ACL, *zkstub.READ_ACL_UNSAFE)


class WithSecureAcls:
    """A zkstub client whose creates carry Kafka's `default_acls` for their path (parents
    made on the way included, each with its own, as KafkaZkClient.createRecursive does);
    everything else is the wrapped client's. The CREATOR entries stand for the identities
    the client authenticated with (`zkstub.ZkClient.add_auth`)."""

    def __init__(self, zk: zkstub.ZkClient) -> None:
        self.zk = zk

    def __getattr__(self, name: str) -> Any:
        return getattr(self.zk, name)

    async def create(
        self,
        path: str,
        data: bytes | None = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        make_parents: bool = False,
    ) -> str:
        acl = default_acls(True, path)
        try:
            return await self.zk.create(path, data, ephemeral=ephemeral, sequence=sequence,
                                        acl=acl)  # fmt: skip
        except zkstub.NoNodeError:
            if not make_parents:
                raise
        await self._create_parents(parent_path(path))
        return await self.zk.create(path, data, ephemeral=ephemeral, sequence=sequence, acl=acl)

    async def _create_parents(self, path: str) -> None:
        if path == "/":
            return
        try:
            await self.zk.create(path, None, acl=default_acls(True, path))
        except zkstub.NodeExistsError:
            return
        except zkstub.NoNodeError:
            await self._create_parents(parent_path(path))
            with contextlib.suppress(zkstub.NodeExistsError):
                await self.zk.create(path, None, acl=default_acls(True, path))

    async def multi(self, ops: Iterable[Any]) -> list[Any]:
        return await self.zk.multi(
            attrs.evolve(op, acl=default_acls(True, op.path))
            if isinstance(op, zkstub.CreateOp) else op
            for op in ops
        )  # fmt: skip


def parent_path(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


@contextlib.asynccontextmanager
async def open_kafka_zk_client(
    connect: str,
    *,
    session_timeout: float,
    connect_timeout: float,
    network: transport.Network,
    rng: random.Random,
    clock: Callable[[], float],
    secure_acls: bool = False,
    digest_credential: str | None = None,
) -> AsyncIterator[KafkaZkClient]:
    """A session to `zookeeper.connect` (a zkstub server, or a real ZooKeeper with the
    `zookeeper://` scheme), ended on leaving the block as `zkstub.connect` ends it: closed,
    or abandoned to expire when the block is cancelled or fails (a crash).

    `digest_credential` ("user:password"): the session authenticates with ZooKeeper's
    digest scheme (on every connection), where Kafka authenticates with SASL (JAAS's
    Client section). `secure_acls` (Kafka's zookeeper.set.acl): every node is created with
    Kafka's `default_acls`, whose creator is that identity; Kafka refuses it without one
    (KafkaServer: "zookeeper.set.acl is true, but ..."), and so does this."""
    if secure_acls and digest_credential is None:
        raise ValueError("zookeeper.set.acl is true, but no ZooKeeper credential is set to "
                         "create the nodes as")  # fmt: skip
    logger.info("Connecting to zookeeper on %s", connect)
    async with contextlib.AsyncExitStack() as stack:
        try:
            zk = await stack.enter_async_context(
                zkstub.connect(
                    connect,
                    session_timeout=session_timeout,
                    connect_timeout=connect_timeout,
                    network=network,
                    rng=rng,
                )
            )
        except zkstub.ConnectionLossError as error:
            raise ZooKeeperUnreachableError(
                f"cannot reach ZooKeeper at {connect} within {connect_timeout:g}s "
                f"(zookeeper.connection.timeout.ms): {error}"
            ) from error
        if digest_credential is not None:
            await zk.add_auth("digest", digest_credential)
        yield KafkaZkClient(WithSecureAcls(zk) if secure_acls else zk, clock)


@attrs.define
class KafkaZkClient:
    zk: zkstub.ZkClient = attrs.field(converter=_retrying)  # any zkstub client, retried
    clock: Callable[[], float]  # wall clock (seconds) for the timestamps Kafka stamps
    # The session this client registered its ephemerals with (KAFKA-7165: an ephemeral
    # left by our own previous session is deleted and re-created).
    _registered_session_id: int | None = None
    # False once the client answered a multiRead with UnimplementedError (kazoo has none).
    _multi_get_supported: bool = attrs.field(default=True, init=False)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def _single_attempt(self) -> zkstub.ZkClient:
        """The client without RetryUntilConnected, for requests whose caller answers a
        lost connection itself: sent again, they could misreport (a topic create that did
        apply would meet NodeExists and answer TOPIC_ALREADY_EXISTS)."""
        return self.zk.zk

    # -- the session ----------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self.zk.session_id

    async def close(self) -> None:
        """Closes the session cleanly: its ephemerals (the broker's registration, the
        /controller it holds) go at once."""
        await self.zk.aclose()

    def abort(self) -> None:
        """Drops the connection without closing the session (a crashed process): the
        ephemerals stay until the session expires."""
        self.zk.zk.abort()

    def add_session_hooks(
        self,
        before_initializing_session: Callable[[], Awaitable[None]] | None = None,
        after_initializing_session: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Awaited around each new session after an expiry: `before` once the old one is
        gone, `after` once the new one exists (what Kafka's controller re-registers on)."""
        self.zk.add_session_hooks(before_initializing_session, after_initializing_session)

    # -- start-up -------------------------------------------------------------------------

    async def create_top_level_paths(self) -> None:
        for path in zkdata.PERSISTENT_PATHS:
            await self.make_sure_persistent_path_exists(path)

    async def make_sure_persistent_path_exists(self, path: str) -> None:
        try:
            await self.zk.create(path, None, make_parents=True)
        except zkstub.NodeExistsError:
            pass

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        try:
            data, _ = await self.zk.get(zkdata.CLUSTER_ID)
            return zkdata.decode_cluster_id(data)
        except zkstub.NoNodeError:
            pass
        try:
            await self.zk.create(
                zkdata.CLUSTER_ID, zkdata.encode_cluster_id(proposed), make_parents=True
            )
            return proposed
        except zkstub.NodeExistsError:  # another broker won the race
            data, _ = await self.zk.get(zkdata.CLUSTER_ID)
            return zkdata.decode_cluster_id(data)

    # -- brokers --------------------------------------------------------------------------

    async def register_broker(self, broker: Broker) -> int:
        """Creates `/brokers/ids/N` as an ephemeral; returns the broker epoch (its czxid)."""
        path = zkdata.broker_path(broker.id)
        stat = await self._checked_ephemeral_create(
            path, zkdata.encode_broker(broker, self._now_ms())
        )
        logger.info(
            "Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
            broker.id, path, ",".join(e.connection_string for e in broker.endpoints), stat.czxid,
        )  # fmt: skip
        return stat.czxid

    async def _checked_ephemeral_create(self, path: str, data: bytes) -> zkstub.Stat:
        while True:
            # Create empty, then set: the znode's version then tells a registration apart
            # from a node that was merely created (Kafka's CheckedEphemeral does the same).
            results = await self.zk.multi(
                [zkstub.Op.create(path, None, ephemeral=True), zkstub.Op.set(path, data, 0)]
            )
            if not isinstance(results[0], Exception):
                self._registered_session_id = self.zk.session_id
                return results[1]
            if not isinstance(results[0], zkstub.NodeExistsError):
                raise results[0]
            try:
                _, stat = await self.zk.get(path)
            except zkstub.NoNodeError:
                logger.info("The ephemeral node at %s went away while reading it; retrying", path)
                continue
            owner = stat.ephemeralOwner
            if owner == self.zk.session_id:
                return stat
            if owner == self._registered_session_id:
                logger.info(
                    "Ephemeral %s is owned by this client's previous session 0x%x, not the "
                    "current 0x%x: deleting and re-creating it",
                    path, owner, self.zk.session_id,
                )  # fmt: skip
                try:
                    await self.zk.delete(path, version=stat.version)
                except (zkstub.NoNodeError, zkstub.BadVersionError):
                    pass
                continue
            # Another session's: most often this broker's own before a crash (kill -9), whose
            # session the server expires within its timeout. Kafka refuses to start at once;
            # a restarted process should rather wait for it, as long as the expiry can take.
            if await self._wait_for_deletion(path, owner):
                continue
            logger.error(
                "Error while creating ephemeral at %s, node already exists and owner 0x%x "
                "does not match current session 0x%x", path, owner, self.zk.session_id,
            )  # fmt: skip
            raise zkstub.NodeExistsError(
                f"{path} is still held by another live session 0x{owner:x} after waiting "
                f"{self._ephemeral_wait:.0f}s for it to expire: is another process running "
                "with the same id?",
                path=path,
            )

    @property
    def _ephemeral_wait(self) -> float:
        # A session expires between its timeout and one tick later; its timeout is at most
        # ours when it was this broker's, with the same configuration.
        return 2 * self.zk.session_timeout

    async def _wait_for_deletion(self, path: str, owner: int) -> bool:
        """Waits until the ephemeral at `path` goes; False if it is still there after
        `_ephemeral_wait` seconds."""
        logger.info(
            "%s is held by session 0x%x (a previous incarnation's, if it crashed): waiting up "
            "to %.0fs for that session to expire", path, owner, self._ephemeral_wait,
        )  # fmt: skip
        with trio.move_on_after(self._ephemeral_wait):
            while True:
                gone = trio.Event()
                if await self.zk.exists(path, watch=lambda _event, gone=gone: gone.set()) is None:
                    return True
                await gone.wait()
        return False

    async def get_all_brokers(self, watch: Watch | None = None) -> dict[int, Broker]:
        """Every registered broker, with its epoch, by id (`watch` on the list of ids)."""
        brokers = {}
        for child in await self.zk.get_children(zkdata.BROKER_IDS, watch=_watcher(watch)):
            if not child.isdigit():
                continue
            broker_id = int(child)
            try:
                data, stat = await self.zk.get(zkdata.broker_path(broker_id))
            except zkstub.NoNodeError:
                continue  # went away while we listed
            brokers[broker_id] = zkdata.decode_broker(broker_id, data, stat.czxid)
        return dict(sorted(brokers.items()))

    # -- controller election --------------------------------------------------------------

    async def get_controller_id(self) -> int | None:
        try:
            data, _ = await self.zk.get(zkdata.CONTROLLER)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_controller(data)

    async def watch_controller(self, *, on_deleted: Watch, on_changed: Watch) -> int | None:
        """Registers an existence/data watch on /controller (the ControllerChange handler:
        `on_deleted` when it goes, `on_changed` when it is created or rewritten) and
        returns the current controller id, if any."""
        watcher = _ControllerWatcher(on_deleted, on_changed)
        stat = await self.zk.exists(zkdata.CONTROLLER, watch=watcher)
        if stat is None:
            return None
        try:
            data, _ = await self.zk.get(zkdata.CONTROLLER)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_controller(data)

    async def get_controller_epoch(self) -> tuple[int, zkstub.Stat] | None:
        try:
            data, stat = await self.zk.get(zkdata.CONTROLLER_EPOCH)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_controller_epoch(data), stat

    async def get_elected_controller(self, *, sync: bool = False) -> tuple[int | None, int | None]:
        """(the controller's broker id, the controller epoch) as ZooKeeper holds them, what a
        broker checks a control request's claim against. The epoch is None when
        /controller_epoch does not exist; the id None when /controller does not, or was not
        written by the election that set this epoch (the one multi writes both, so
        /controller's czxid is the epoch znode's mzxid: two reads with an election between
        them pair nothing). `sync` first brings the ZooKeeper server this client talks to
        up to date with its leader (an election may not have reached a follower yet)."""
        if sync:
            await self.zk.sync(zkdata.CONTROLLER_EPOCH)
        try:
            epoch_data, epoch_stat = await self.zk.get(zkdata.CONTROLLER_EPOCH)
        except zkstub.NoNodeError:
            return None, None
        epoch = zkdata.decode_controller_epoch(epoch_data)
        try:
            data, stat = await self.zk.get(zkdata.CONTROLLER)
        except zkstub.NoNodeError:
            return None, epoch
        if stat.czxid != epoch_stat.mzxid:
            return None, epoch
        return zkdata.decode_controller(data), epoch

    async def register_controller_and_increment_controller_epoch(
        self, controller_id: int
    ) -> tuple[int, int]:
        """Creates /controller and bumps /controller_epoch in one multi conditioned on the
        epoch's version; returns (new epoch, epoch znode version). ControllerMovedError when
        another broker got there first."""
        timestamp = self._now_ms()
        current = await self.get_controller_epoch()
        if current is None:
            epoch, epoch_version = await self._maybe_create_controller_epoch()
        else:
            epoch, epoch_version = current[0], current[1].version
        new_epoch = epoch + 1
        results = await self.zk.multi(
            [
                zkstub.Op.create(
                    zkdata.CONTROLLER,
                    zkdata.encode_controller(controller_id, timestamp),
                    ephemeral=True,
                ),
                zkstub.Op.set(
                    zkdata.CONTROLLER_EPOCH,
                    zkdata.encode_controller_epoch(new_epoch),
                    epoch_version,
                ),
            ]
        )
        failure = next(
            (r for r in results if isinstance(r, Exception) and not _is_multi_filler(r)), None
        )
        if failure is None:
            return new_epoch, results[1].version
        if isinstance(failure, zkstub.NodeExistsError | zkstub.BadVersionError):
            return await self._check_controller_and_epoch(controller_id, new_epoch)
        raise failure

    async def _maybe_create_controller_epoch(self) -> tuple[int, int]:
        try:
            await self.zk.create(
                zkdata.CONTROLLER_EPOCH,
                zkdata.encode_controller_epoch(zkdata.INITIAL_CONTROLLER_EPOCH),
            )
            logger.info(
                "Successfully created %s with initial epoch %d",
                zkdata.CONTROLLER_EPOCH, zkdata.INITIAL_CONTROLLER_EPOCH,
            )  # fmt: skip
            return zkdata.INITIAL_CONTROLLER_EPOCH, zkdata.INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except zkstub.NodeExistsError:
            current = await self.get_controller_epoch()
            if current is None:
                raise RuntimeError(f"{zkdata.CONTROLLER_EPOCH} went away while read") from None
            return current[0], current[1].version

    async def _check_controller_and_epoch(
        self, controller_id: int, new_epoch: int
    ) -> tuple[int, int]:
        """After NodeExists / BadVersion: our own earlier attempt may have succeeded (e.g. a
        reply lost with the connection). It did if /controller is ours at the new epoch."""
        current_id = await self.get_controller_id()
        if current_id is None:
            raise ControllerMovedError(
                f"The ephemeral node at {zkdata.CONTROLLER} went away while checking whether "
                "the controller election succeeds. Aborting controller startup procedure"
            )
        if current_id == controller_id:
            current = await self.get_controller_epoch()
            if current is not None and current[0] == new_epoch:
                return new_epoch, current[1].version
        raise ControllerMovedError(
            "Controller moved to another broker. Aborting controller startup procedure"
        )

    async def delete_controller(self, expected_epoch_zk_version: int) -> None:
        """Resignation: deletes /controller, fenced by the epoch version."""
        try:
            await self.fenced(zkstub.Op.delete(zkdata.CONTROLLER), expected_epoch_zk_version)
        except zkstub.NoNodeError:
            pass

    # -- fenced writes --------------------------------------------------------------------

    async def fenced(self, op: zkstub.MultiOp, expected_epoch_zk_version: int) -> Any:
        """Runs one write op conditioned on /controller_epoch still having the version this
        controller was elected with. Returns the op's result or raises its error."""
        (op_result,) = await self._fenced_multi([op], expected_epoch_zk_version)
        if isinstance(op_result, Exception):
            raise op_result
        return op_result

    async def _fenced_multi(
        self, ops: list[zkstub.MultiOp], expected_epoch_zk_version: int
    ) -> list[Any]:
        """The ops in one multi after the controller epoch's check: their results (errors
        in place when the multi failed on one of them). ControllerMovedError when the check
        fails."""
        check = zkstub.Op.check(zkdata.CONTROLLER_EPOCH, expected_epoch_zk_version)
        check_result, *op_results = await self.zk.multi([check, *ops])
        if isinstance(check_result, zkstub.BadVersionError):
            raise ControllerMovedError(
                f"Controller epoch zkVersion check fails. Expected zkVersion = "
                f"{expected_epoch_zk_version}"
            )
        if isinstance(check_result, Exception) and not _is_multi_filler(check_result):
            raise check_result
        return op_results

    async def fenced_each(
        self, ops: Mapping[Any, zkstub.MultiOp], expected_epoch_zk_version: int
    ) -> dict[Any, Any]:
        """Runs one write op per key with the outcome of its own `fenced` write: the op's
        result, or its ZooKeeper error (other errors, and ControllerMovedError, are
        raised). Many keys share a multi fenced by one check, the multis pipelined; a multi
        fails whole when one op fails, so that op's key gets its error and the others go
        again without it (those before it would have applied: one multi; those after it
        are unknown: halves, so many failures cost rounds in their logarithm)."""
        outcomes: dict[Any, Any] = {}
        batches = _batched(list(ops.items()))
        while batches:
            answers = await _pipelined(
                [
                    lambda batch=batch: self._fenced_multi(
                        [op for _, op in batch], expected_epoch_zk_version
                    )
                    for batch in batches
                ]
            )
            _raise_controller_moved(answers)
            again: list[list[tuple[Any, zkstub.MultiOp]]] = []
            for batch, answer in zip(batches, answers, strict=True):
                if isinstance(answer, Exception):
                    if not isinstance(answer, zkstub.ZkError):
                        raise answer
                    # The multi itself failed (an expired session): every op's answer.
                    outcomes.update((key, answer) for key, _ in batch)
                    continue
                failed = _failed_op(answer)
                if failed is None or failed < 0:
                    # Applied (or failed without saying which op: each op its own error).
                    outcomes.update(
                        (key, result) for (key, _), result in zip(batch, answer, strict=True)
                    )
                    continue
                outcomes[batch[failed][0]] = answer[failed]
                before, after = batch[:failed], batch[failed + 1 :]
                half = (len(after) + 1) // 2
                again += [part for part in (before, after[:half], after[half:]) if part]
            batches = again
        return outcomes

    # -- topics and partitions ------------------------------------------------------------

    async def get_all_topics(self, watch: Watch | None = None) -> list[str]:
        return await self.zk.get_children(zkdata.BROKER_TOPICS, watch=_watcher(watch))

    async def get_replica_assignment(
        self, topic: str, watch: Watch | None = None
    ) -> tuple[str | None, dict[int, ReplicaAssignment]] | None:
        try:
            data, _ = await self.zk.get(zkdata.topic_path(topic), watch=_watcher(watch))
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_topic(topic, data)

    async def create_topic_assignment(
        self, topic: str, topic_id: str | None, assignment: Mapping[int, ReplicaAssignment]
    ) -> None:
        """What the admin path writes (not the controller): NodeExistsError if it exists."""
        await self.zk.create(zkdata.topic_path(topic), zkdata.encode_topic(topic_id, assignment))

    async def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Mapping[int, ReplicaAssignment],
        expected_epoch_zk_version: int,
    ) -> None:
        await self.fenced(
            zkstub.Op.set(zkdata.topic_path(topic), zkdata.encode_topic(topic_id, assignment)),
            expected_epoch_zk_version,
        )

    async def create_topic(
        self,
        name: str,
        topic_id: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str],
    ) -> None:
        """Writes the topic's config and assignment (Kafka: config first, so the controller
        and brokers never see a topic without its overrides). TopicAlreadyExistsError when
        its assignment is there already. (Kafka's AdminZkClient.)"""
        zk = self._single_attempt
        config_path = zkdata.config_path("topics", name)
        data = zkdata.encode_config(dict(configs))
        try:
            await zk.create(config_path, data, make_parents=True)
        except zkstub.NodeExistsError:
            await zk.set(config_path, data)
        try:
            await zk.create(
                zkdata.topic_path(name),
                zkdata.encode_topic(
                    topic_id, {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}
                ),
            )
        except zkstub.NodeExistsError:
            raise errors.TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None

    async def add_partitions(
        self, topic: str, added: Mapping[int, Sequence[int]], expected_count: int
    ) -> None:
        """Adds partitions to a topic's assignment (Kafka's AdminZkClient.addPartitions): the
        controller's PartitionModifications watch creates them. The write is conditional on
        the znode's version, so two concurrent additions cannot both apply; a topic whose
        partition count is no longer `expected_count` is an InvalidPartitionsError."""
        zk = self._single_attempt
        path = zkdata.topic_path(topic)
        try:
            data, stat = await zk.get(path)
        except zkstub.NoNodeError:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist") from None
        topic_id, assignment = zkdata.decode_topic(topic, data)
        if len(assignment) != expected_count:
            raise errors.InvalidPartitionsError(
                f"Topic {topic} changed while adding partitions: it has {len(assignment)} now"
            )
        combined = dict(assignment)
        combined.update({p: ReplicaAssignment(tuple(r)) for p, r in added.items()})
        try:
            await zk.set(path, zkdata.encode_topic(topic_id, combined), version=stat.version)
        except zkstub.BadVersionError:
            raise errors.InvalidPartitionsError(
                f"Topic {topic} changed while adding partitions; try again"
            ) from None

    async def mark_topic_for_deletion(self, name: str) -> None:
        """/admin/delete_topics/T: the controller's TopicDeletion event takes it from there."""
        try:
            await self._single_attempt.create(
                zkdata.delete_topic_path(name), None, make_parents=True
            )
        except zkstub.NodeExistsError:
            pass  # already marked

    async def get_topic_deletions(self, watch: Watch | None = None) -> list[str]:
        """The topics marked for deletion (`watch` on the marks)."""
        return await self.zk.get_children(zkdata.DELETE_TOPICS, watch=_watcher(watch))

    async def delete_topic_deletions(
        self, topics: Iterable[str], expected_epoch_zk_version: int
    ) -> None:
        """Removes the marks (the topics are gone, or deletion is disabled), fenced."""
        for topic in topics:
            await self._delete_fenced(zkdata.delete_topic_path(topic), expected_epoch_zk_version)

    async def get_preferred_replica_election(
        self, watch: Watch | None = None
    ) -> set[TopicPartition] | None:
        """The partitions /admin/preferred_replica_election names, None when it does not
        exist; `watch` on its creation (or change) either way."""
        path = zkdata.PREFERRED_REPLICA_ELECTION
        stat = await self.zk.exists(path, watch=_watcher(watch))
        if stat is None:
            return None
        try:
            data, _ = await self.zk.get(path)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_preferred_replica_election(data)

    async def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        """What Kafka's kafka-preferred-replica-election tool wrote: the controller elects
        the partitions' preferred replicas, then deletes the znode. NodeExistsError while
        an earlier one is still being processed."""
        await self._single_attempt.create(
            zkdata.PREFERRED_REPLICA_ELECTION,
            zkdata.encode_preferred_replica_election(partitions),
            make_parents=True,
        )

    async def create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Iterable[int]]
    ) -> None:
        """What Kafka's kafka-reassign-partitions tool wrote before KIP-455: the controller
        reassigns the partitions, removing each from the znode when it completes.
        NodeExistsError while an earlier one is still in progress."""
        await self._single_attempt.create(
            zkdata.REASSIGN_PARTITIONS,
            zkdata.encode_reassignment(reassignment),
            make_parents=True,
        )

    async def delete_preferred_replica_election(self, expected_epoch_zk_version: int) -> None:
        """The controller is done with /admin/preferred_replica_election (fenced)."""
        await self._delete_fenced(zkdata.PREFERRED_REPLICA_ELECTION, expected_epoch_zk_version)

    async def get_partition_reassignment(
        self, on_created: Watch | None = None
    ) -> dict[TopicPartition, tuple[int, ...]] | None:
        """What /admin/reassign_partitions asks for (partition -> target replicas), None
        when it does not exist; `on_created` is called when it is next created (only then:
        Kafka's PartitionReassignmentHandler)."""
        path = zkdata.REASSIGN_PARTITIONS
        watcher = None if on_created is None else _CreationWatcher(on_created)
        stat = await self.zk.exists(path, watch=watcher)
        if stat is None:
            return None
        try:
            data, _ = await self.zk.get(path)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_reassignment(data)

    async def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]], expected_epoch_zk_version: int
    ) -> None:
        """The controller rewrites /admin/reassign_partitions (fenced), creating it if it is
        gone (Kafka's setOrCreatePartitionReassignment)."""
        data = zkdata.encode_reassignment(reassignment)
        try:
            await self.fenced(
                zkstub.Op.set(zkdata.REASSIGN_PARTITIONS, data), expected_epoch_zk_version
            )
        except zkstub.NoNodeError:
            await self._fenced_create_if_absent(zkdata.ADMIN, expected_epoch_zk_version)
            await self.fenced(
                zkstub.Op.create(zkdata.REASSIGN_PARTITIONS, data), expected_epoch_zk_version
            )

    async def delete_partition_reassignment(self, expected_epoch_zk_version: int) -> None:
        """Every reassignment /admin/reassign_partitions asked for is done (fenced)."""
        await self._delete_fenced(zkdata.REASSIGN_PARTITIONS, expected_epoch_zk_version)

    async def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """Claims the next block of producer ids [start, end] with a conditional write on
        `/latest_producer_id_block`, retrying when another broker claims one at the same
        time (Kafka's ZkProducerIdManager)."""
        zk = self._single_attempt
        while True:
            try:
                data, stat = await zk.get(zkdata.PRODUCER_ID_BLOCK)
            except zkstub.NoNodeError:
                data, stat = None, None
            previous = zkdata.decode_producer_id_block(data)
            start = 0 if previous is None else previous[2] + 1
            end = start + zkdata.PRODUCER_ID_BLOCK_SIZE - 1
            encoded = zkdata.encode_producer_id_block(broker_id, start, end)
            try:
                if stat is None:
                    await zk.create(zkdata.PRODUCER_ID_BLOCK, encoded)
                else:
                    await zk.set(zkdata.PRODUCER_ID_BLOCK, encoded, version=stat.version)
            except (zkstub.BadVersionError, zkstub.NodeExistsError):
                continue
            return start, end

    async def read_topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's overrides from /config/topics/T ({} when it has none), for a broker:
        retried across a lost connection or a session being replaced, as guessing the
        defaults instead could weaken min.insync.replicas. (Not for the controller: its
        session hook waits for the event that would be retrying here.)"""
        return await self.read_entity_configs("topics", topic)

    async def read_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """/config/<entity_type>/<entity_name> ({} when absent; Kafka's
        AdminZkClient.fetchEntityConfig), retried as `read_topic_configs` is."""
        path = zkdata.config_path(entity_type, entity_name)
        while True:
            try:
                data, _ = await self.zk.get(path)
                return zkdata.decode_config(path, data)
            except zkstub.NoNodeError:
                return {}
            except zkstub.SessionExpiredError as error:
                logger.info("Reading %s failed (%r); retrying", path, error)
                await trio.sleep(CONNECTION_LOSS_RETRY_BACKOFF)

    async def get_entity_names(self, entity_type: str) -> list[str]:
        """The entities with configs under /config/<entity_type> (users, say), sorted."""
        path = zkdata.config_path(entity_type, "").rstrip("/")
        try:
            return sorted(await self.zk.get_children(path))
        except zkstub.NoNodeError:
            return []

    async def read_user_configs(self, user: str) -> dict[str, str]:
        """A user's configs (SCRAM credentials by mechanism name, quotas) from
        /config/users/<user sanitized as Kafka's Sanitizer does>, {} when it has none."""
        return await self.read_entity_configs("users", zkdata.sanitized_entity_name(user))

    async def get_all_user_configs(self) -> dict[str, dict[str, str]]:
        """Every user with a config znode: name (desanitized) -> configs."""
        return {
            zkdata.desanitized_entity_name(name): await self.read_entity_configs("users", name)
            for name in await self.get_entity_names("users")
        }

    async def change_user_configs(self, user: str, configs: Mapping[str, str]) -> None:
        """A user's configs replaced as a whole, then the notification `users/<sanitized>`
        (Kafka's AdminZkClient.changeConfigs for a user)."""
        await self.change_entity_configs("users", zkdata.sanitized_entity_name(user), configs)

    async def change_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """Kafka's AdminZkClient.changeTopicConfig: the topic's overrides replaced as a
        whole, then a change notification (/config/changes/config_change_N) that every
        broker's config listener processes. UnknownTopicOrPartitionError for a topic that
        does not exist."""
        if await self._single_attempt.exists(zkdata.topic_path(topic)) is None:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
        await self.change_entity_configs("topics", topic, configs)

    async def change_entity_configs(
        self, entity_type: str, entity_name: str, configs: Mapping[str, str]
    ) -> None:
        """Kafka's AdminZkClient.changeEntityConfig: /config/<entity_type>/<entity_name>
        replaced as a whole, then the change notification naming it (`brokers/<default>`,
        `brokers/1`, `topics/T`)."""
        zk = self._single_attempt
        path = zkdata.config_path(entity_type, entity_name)
        data = zkdata.encode_config(dict(configs))
        try:
            await zk.set(path, data)
        except zkstub.NoNodeError:
            await zk.create(path, data, make_parents=True)
        await zk.create(
            f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
            zkdata.encode_config_change(f"{entity_type}/{entity_name}"),
            sequence=True,
            make_parents=True,
        )

    async def get_config_changes(self, watch: Watch | None = None) -> list[str]:
        """The change notifications' names (`watch` on new ones), oldest first."""
        names = await self.zk.get_children(zkdata.CONFIG_CHANGES, watch=_watcher(watch))
        return sorted(n for n in names if n.startswith(zkdata.CONFIG_CHANGE_PREFIX))

    async def read_config_change(self, name: str) -> tuple[str, int] | None:
        """A notification's entity path ("topics/T") and creation time (ms since the epoch,
        ZooKeeper's ctime); None once it has been purged."""
        path = f"{zkdata.CONFIG_CHANGES}/{name}"
        try:
            data, stat = await self.zk.get(path)
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_config_change(data), stat.ctime

    async def delete_config_change(self, name: str) -> None:
        with contextlib.suppress(zkstub.NoNodeError):
            await self.zk.delete(f"{zkdata.CONFIG_CHANGES}/{name}")

    # -- ACLs (Kafka's AclAuthorizer: /kafka-acl, /kafka-acl-extended and their changes) ----

    async def create_acl_paths(self) -> None:
        for path in acl.ACL_PATHS:
            await self.make_sure_persistent_path_exists(path)

    async def get_resource_acls(
        self, pattern: acl.ResourcePattern
    ) -> tuple[frozenset[acl.AccessControlEntry], int]:
        """A resource pattern's ACLs and its znode's version (-1: no znode)."""
        try:
            data, stat = await self.zk.get(acl.resource_path(pattern))
        except zkstub.NoNodeError:
            return frozenset(), -1
        return acl.decode_acls(data), stat.version

    async def get_all_acls(self) -> dict[acl.ResourcePattern, frozenset[acl.AccessControlEntry]]:
        """Every stored ACL by resource pattern (AclAuthorizer.loadAllAcls); a znode that
        cannot be read is logged and left out."""
        found = {}
        for pattern_type in (acl.PatternType.LITERAL, acl.PatternType.PREFIXED):
            try:
                type_names = await self.zk.get_children(acl.store_path(pattern_type))
            except zkstub.NoNodeError:
                continue
            for type_name in sorted(type_names):
                resource_type = acl.resource_type_named(type_name)
                if resource_type is None:
                    continue
                with contextlib.suppress(zkstub.NoNodeError):
                    names = await self.zk.get_children(
                        acl.resource_type_path(pattern_type, resource_type)
                    )
                    for name in sorted(names):
                        pattern = acl.ResourcePattern(resource_type, name, pattern_type)
                        try:
                            entries, _ = await self.get_resource_acls(pattern)
                        except acl.AclError as error:
                            logger.error("Skipping the ACLs of %s: %s", pattern, error)
                            continue
                        if entries:
                            found[pattern] = entries
        return found

    async def update_resource_acls(
        self,
        pattern: acl.ResourcePattern,
        update: Callable[[frozenset[acl.AccessControlEntry]], frozenset[acl.AccessControlEntry]],
    ) -> frozenset[acl.AccessControlEntry]:
        """AclAuthorizer.updateResourceAcls: the pattern's ACLs replaced by `update(current)`
        with a conditional write (read again and retried when another writer came first),
        the znode deleted when none are left, then the change notification every broker's
        authorizer reloads the pattern on. Returns the ACLs written."""
        path = acl.resource_path(pattern)
        attempted = False
        while True:
            current, version = await self.get_resource_acls(pattern)
            new = update(current)
            if new == current:
                if not attempted:
                    return new
                break  # an earlier attempt was applied after all (its answer was lost)
            attempted = True
            try:
                if not new:
                    await self.zk.delete(path, version=version)
                elif version < 0:
                    await self.zk.create(path, acl.encode_acls(new), make_parents=True)
                else:
                    await self.zk.set(path, acl.encode_acls(new), version=version)
            except (zkstub.BadVersionError, zkstub.NodeExistsError, zkstub.NoNodeError):
                continue
            break
        await self.zk.create(
            f"{acl.change_store(pattern.pattern_type)}/{acl.ACL_CHANGE_PREFIX}",
            acl.encode_acl_change(pattern),
            sequence=True,
            make_parents=True,
        )
        return new

    async def get_acl_changes(self, changes_path: str, watch: Watch | None = None) -> list[str]:
        """The ACL change notifications under `changes_path` (`watch` on new ones), oldest
        first."""
        try:
            names = await self.zk.get_children(changes_path, watch=_watcher(watch))
        except zkstub.NoNodeError:
            return []
        return sorted(n for n in names if n.startswith(acl.ACL_CHANGE_PREFIX))

    async def read_acl_change(
        self, changes_path: str, name: str
    ) -> tuple[acl.ResourcePattern, int] | None:
        """The resource pattern a notification names and its creation time (ms); None once
        purged. AclError for one that cannot be read."""
        try:
            data, stat = await self.zk.get(f"{changes_path}/{name}")
        except zkstub.NoNodeError:
            return None
        return acl.decode_acl_change(changes_path, data or b""), stat.ctime

    async def delete_acl_change(self, changes_path: str, name: str) -> None:
        with contextlib.suppress(zkstub.NoNodeError):
            await self.zk.delete(f"{changes_path}/{name}")

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Each topic's overrides from /config/topics/T ({} when it has none), the reads
        pipelined, for the controller. Unlike `read_topic_configs` an expired session is
        an answer (raised): the controller's expiry hook waits for the event reading."""
        names = sorted(set(topics))

        async def read(topic: str) -> dict[str, str]:
            path = zkdata.config_path("topics", topic)
            try:
                data, _ = await self.zk.get(path)
            except zkstub.NoNodeError:
                return {}
            return zkdata.decode_config(path, data)

        results = await _pipelined([lambda topic=topic: read(topic) for topic in names])
        for result in results:
            if isinstance(result, Exception):
                raise result
        return dict(zip(names, results, strict=True))

    async def delete_topic_znode(self, topic: str, expected_epoch_zk_version: int) -> None:
        """/brokers/topics/T and its partitions' states, children first, fenced."""
        await self._delete_recursive_fenced(zkdata.topic_path(topic), expected_epoch_zk_version)

    async def delete_topic_configs(
        self, topics: Iterable[str], expected_epoch_zk_version: int
    ) -> None:
        for topic in topics:
            await self._delete_fenced(
                zkdata.config_path("topics", topic), expected_epoch_zk_version
            )

    async def _delete_recursive_fenced(self, path: str, expected_epoch_zk_version: int) -> None:
        try:
            children = await self.zk.get_children(path)
        except zkstub.NoNodeError:
            return
        for child in sorted(children):
            await self._delete_recursive_fenced(f"{path}/{child}", expected_epoch_zk_version)
        await self._delete_fenced(path, expected_epoch_zk_version)

    async def _delete_fenced(self, path: str, expected_epoch_zk_version: int) -> None:
        """A fenced delete of a znode that may be gone already."""
        try:
            await self.fenced(zkstub.Op.delete(path), expected_epoch_zk_version)
        except zkstub.NoNodeError:
            pass

    async def get_partition_state(
        self, tp: TopicPartition, watch: Watch | None = None
    ) -> LeaderIsrAndControllerEpoch | None:
        """The partition's state, None when it has none; `watch` on its changes (the
        controller's on a partition being reassigned: Kafka's
        PartitionReassignmentIsrChangeHandler)."""
        try:
            data, stat = await self.zk.get(zkdata.partition_state_path(tp), watch=_watcher(watch))
        except zkstub.NoNodeError:
            return None
        return zkdata.decode_partition_state(tp, data, stat.version)

    async def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | None]:
        """Many partitions' states; None where there is none. Other errors (a lost
        session) are raised. Read many to a request (ZooKeeper's multiRead), the requests
        pipelined (Kafka pipelines one getData per partition: here a request per partition
        was half of a 10 000-partition election); one getData each, pipelined, where the
        client has no multiRead (kazoo)."""
        tps = list(partitions)
        if not tps:
            return {}
        if self._multi_get_supported:
            batches = [tps[i : i + FENCED_BATCH_OPS] for i in range(0, len(tps), FENCED_BATCH_OPS)]
            answers = await _pipelined(
                [lambda batch=batch: self._get_partition_state_batch(batch) for batch in batches]
            )
            if not any(isinstance(answer, zkstub.UnimplementedError) for answer in answers):
                states: dict[TopicPartition, LeaderIsrAndControllerEpoch | None] = {}
                for answer in answers:
                    if isinstance(answer, Exception):
                        raise answer
                    states |= answer
                return {tp: states[tp] for tp in tps}
            self._multi_get_supported = False
        results = await _pipelined([lambda tp=tp: self.get_partition_state(tp) for tp in tps])
        for result in results:
            if isinstance(result, Exception):
                raise result
        return dict(zip(tps, results, strict=True))

    async def _get_partition_state_batch(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | None]:
        results = await self.zk.multi_get([zkdata.partition_state_path(tp) for tp in tps])
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch | None] = {}
        for tp, result in zip(tps, results, strict=True):
            if isinstance(result, zkstub.NoNodeError):
                states[tp] = None
            elif isinstance(result, Exception):
                raise result
            else:
                data, stat = result
                states[tp] = zkdata.decode_partition_state(tp, data, stat.version)
        return states

    async def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_epoch_zk_version: int,
    ) -> dict[TopicPartition, Exception | None]:
        """Creates `partitions/P/state` (and its parents) for new partitions, fenced, many
        to a multi (Kafka's createTopicPartitionStatesRaw: the topics' `partitions`, the
        partitions' znodes, then their states); per partition None on success or the error
        (NodeExistsError if its state was there already)."""
        for topic in sorted({tp.topic for tp in states}):
            await self._fenced_create_if_absent(
                zkdata.partitions_path(topic), expected_epoch_zk_version
            )
        tps = sorted(states)
        parents = await self.fenced_each(
            {tp: zkstub.Op.create(zkdata.partition_path(tp), None) for tp in tps},
            expected_epoch_zk_version,
        )
        outcome: dict[TopicPartition, Exception | None] = {
            tp: error
            for tp, error in parents.items()
            if isinstance(error, Exception) and not isinstance(error, zkstub.NodeExistsError)
        }
        created = await self.fenced_each(
            {
                tp: zkstub.Op.create(
                    zkdata.partition_state_path(tp), zkdata.encode_partition_state(states[tp])
                )
                for tp in tps
                if tp not in outcome
            },
            expected_epoch_zk_version,
        )
        for tp, result in created.items():
            outcome[tp] = result if isinstance(result, Exception) else None
        return {tp: outcome[tp] for tp in tps}

    async def _fenced_create_if_absent(self, path: str, expected_epoch_zk_version: int) -> None:
        try:
            await self.fenced(zkstub.Op.create(path, None), expected_epoch_zk_version)
        except zkstub.NodeExistsError:
            pass

    async def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Writes each partition's state conditioned on its partition epoch (znode version),
        fenced, many to a multi (`fenced_each`). A partition whose version moved
        (BadVersion) is to be retried after a re-read, as in Kafka."""
        tps = sorted(leader_and_isrs)
        results = await self.fenced_each(
            {
                tp: zkstub.Op.set(
                    zkdata.partition_state_path(tp),
                    zkdata.encode_partition_state(
                        LeaderIsrAndControllerEpoch(leader_and_isrs[tp], controller_epoch)
                    ),
                    leader_and_isrs[tp].partition_epoch,
                )
                for tp in tps
            },
            expected_epoch_zk_version,
        )
        finished: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        to_retry: list[TopicPartition] = []
        for tp in tps:
            result = results[tp]
            if isinstance(result, zkstub.BadVersionError):
                to_retry.append(tp)
            elif isinstance(result, Exception):
                finished[tp] = result
            else:
                written = leader_and_isrs[tp]
                # (with_partition_epoch's value, built directly: evolve costs more)
                finished[tp] = LeaderAndIsr(
                    written.leader, written.leader_epoch, written.isr, result.version
                )
        return UpdateLeaderAndIsrResult(finished, to_retry)

    async def conditional_update_partition_state(
        self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch, expected_version: int
    ) -> int | None:
        """A leader's own ISR write (Kafka's conditionalUpdatePath on the partition's state):
        the znode's new version (the new partition epoch), or None when the znode changed
        since the leader read it; other failures raise ZooKeeperError. A lost connection is
        no answer: the write is sent again once connected, as Kafka's are; if the first
        attempt did apply, the second meets BadVersion and the check below finds our own
        state there. (Reading that check once, without waiting to be connected, took a lost
        reply for a stale epoch: the leader then waited for a LeaderAndIsr that never came,
        its ISR frozen.)"""
        path = zkdata.partition_state_path(tp)
        try:
            stat = await self.zk.set(
                path, zkdata.encode_partition_state(state), version=expected_version
            )
        except zkstub.BadVersionError as error:
            # After a lost connection the write may have applied: if the znode holds exactly
            # what we wrote, it did (Kafka's checker in conditionalUpdatePath).
            version = await self._version_if_written(tp, state, expected_version)
            if version is not None:
                return version
            logger.info(
                "Failed to update ISR of %s to %s: the partition epoch %d is stale; waiting for "
                "the controller's LeaderAndIsr (%r)",
                tp,
                list(state.leader_and_isr.isr),
                expected_version,
                error,
            )
            return None
        return stat.version

    async def _version_if_written(
        self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch, expected_version: int
    ) -> int | None:
        """The znode's version if it holds `state` one version after the one we wrote on."""
        try:
            data, stat = await self.zk.get(zkdata.partition_state_path(tp))
        except zkstub.ZkError:
            return None
        written = zkdata.decode_partition_state(tp, data, stat.version).leader_and_isr
        wanted = state.leader_and_isr
        same = (written.leader, written.leader_epoch, written.isr) == (
            wanted.leader,
            wanted.leader_epoch,
            wanted.isr,
        )
        return stat.version if same and stat.version == expected_version + 1 else None

    # -- notifications --------------------------------------------------------------------

    async def create_isr_change_notification(self, partitions: Sequence[TopicPartition]) -> None:
        """What a leader writes after changing ISRs: a sequential notification node the
        controller's watch picks up. Sent once: a leader that meets an error records the
        partitions again and writes at its next check (sent again after a lost reply, it
        would announce them twice)."""
        await self._single_attempt.create(
            zkdata.isr_change_path(), zkdata.encode_isr_change(partitions), sequence=True
        )

    async def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        return await self.zk.get_children(zkdata.ISR_CHANGE_NOTIFICATION, watch=_watcher(watch))

    async def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        partitions: set[TopicPartition] = set()
        for name in names:
            try:
                data, _ = await self.zk.get(zkdata.isr_change_path(name))
            except zkstub.NoNodeError:
                continue
            partitions |= zkdata.decode_isr_change(data)
        return partitions

    async def delete_isr_change_notifications(
        self, names: Iterable[str], expected_epoch_zk_version: int
    ) -> None:
        for name in names:
            await self._delete_fenced(zkdata.isr_change_path(name), expected_epoch_zk_version)


def _is_multi_filler(error: Exception) -> bool:
    """The results a failed multi gives the ops that did not fail themselves."""
    return isinstance(error, zkstub.RolledBackError | zkstub.RuntimeInconsistencyError)
