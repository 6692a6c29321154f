"""The admin client: create / delete / describe topics, list topics, describe the cluster.

Topic creation and deletion go to the controller (found in the metadata); a broker that
answers NOT_CONTROLLER makes the client refresh its metadata and try the new controller.
`create_topic` returns once every partition of the topic has a leader, so the topic can be
produced to at once. Reference: Kafka's KafkaAdminClient.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

import actors
import transport
from kcore import errors
from kcore.client._config import check_int, check_no_unknown, parse_bootstrap
from kcore.client._connections import Connections
from kcore.client._metadata import BrokerInfo, Cluster, MetadataManager, PartitionInfo
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    TopicResult,
)

__all__ = ["Admin", "ClusterDescription", "NewTopic", "TopicDescription"]

log = logging.getLogger("kcore.client.admin")

_NOT_CONTROLLER = errors.NotControllerError.code
_REQUEST_TIMED_OUT = errors.RequestTimedOutError.code


@attrs.frozen
class NewTopic:
    """A topic to create: -1 partitions / replication factor mean the broker's defaults
    (`num.partitions`, `default.replication.factor`); `assignments` (partition -> broker
    ids) replaces both."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = attrs.field(factory=dict)
    assignments: Mapping[int, Sequence[int]] = attrs.field(factory=dict)


@attrs.frozen
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: tuple[PartitionInfo, ...]


@attrs.frozen
class ClusterDescription:
    brokers: tuple[BrokerInfo, ...]
    controller_id: int
    cluster_id: str | None


class _Session:
    """What one admin call needs: connections and a metadata view."""

    def __init__(self, connections: Connections, metadata: MetadataManager) -> None:
        self.connections = connections
        self.metadata = metadata


_SETTINGS = ("client_id", "request_timeout_ms", "retry_backoff_ms")


class Admin:
    """An admin client. Use it as `async with Admin(...) as admin:` (one set of
    connections for every call), or call it directly: each call then opens and closes its
    own connections. `bootstrap`, `network` and `rng` as for the Producer (real TCP and a
    fresh random.Random when None)."""

    def __init__(
        self,
        bootstrap: Any,
        *,
        network: transport.Network | None = None,
        rng: random.Random | None = None,
        client_id: str = "admin",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        **unknown: Any,
    ) -> None:
        check_no_unknown("admin", unknown, _SETTINGS)
        self.bootstrap = parse_bootstrap(bootstrap)
        self.request_timeout_ms = check_int("request_timeout_ms", request_timeout_ms, minimum=1)
        self.retry_backoff_ms = check_int("retry_backoff_ms", retry_backoff_ms, minimum=1)
        self.client_id = client_id
        self._network = network if network is not None else transport.TcpNetwork()
        self._rng = rng if rng is not None else random.Random()
        self._stack: contextlib.AsyncExitStack | None = None
        self._session_open: _Session | None = None

    def __repr__(self) -> str:
        return f"<Admin {self.client_id}>"

    async def __aenter__(self) -> Admin:
        if self._stack is not None:
            raise RuntimeError("an Admin can be entered once at a time")
        stack = contextlib.AsyncExitStack()
        self._session_open = await stack.enter_async_context(self._open_session())
        self._stack = stack
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        stack, self._stack, self._session_open = self._stack, None, None
        assert stack is not None
        return await stack.__aexit__(exc_type, exc, tb)

    @contextlib.asynccontextmanager
    async def _open_session(self) -> AsyncIterator[_Session]:
        async with actors.open_background_nursery() as nursery:
            connections = Connections(
                self._network,
                client_id=self.client_id,
                rng=self._rng,
                nursery=nursery,
                request_timeout=self.request_timeout_ms / 1000,
                logger=log,
            )
            metadata = MetadataManager(
                connections,
                self.bootstrap,
                rng=self._rng,
                retry_backoff=self.retry_backoff_ms / 1000,
                request_timeout=self.request_timeout_ms / 1000,
                logger=log,
            )
            try:
                yield _Session(connections, metadata)
            finally:
                await connections.aclose()

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[_Session]:
        if self._session_open is not None:
            yield self._session_open
            return
        async with self._open_session() as session:
            yield session

    # -- topics ------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        *,
        config: Mapping[str, str] | None = None,
        assignments: Mapping[int, Sequence[int]] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Creates a topic and waits (up to `timeout` seconds in all) until each of its
        partitions has a leader. Raises the broker's error as its `kcore.errors` class
        (`TopicAlreadyExistsError`, `InvalidReplicationFactorError`, ...), or
        `RequestTimedOutError` when the topic has no leaders in time."""
        await self.create_topics(
            [NewTopic(name, partitions, replication_factor, config or {}, assignments or {})],
            timeout=timeout,
        )

    async def create_topics(
        self, new_topics: Iterable[NewTopic | str], *, timeout: float = 30.0
    ) -> None:
        """Creates several topics in one request; raises the error of the first topic (in
        the given order) that failed, after the others were created."""
        topics = [t if isinstance(t, NewTopic) else NewTopic(t) for t in new_topics]
        names = [t.name for t in topics]
        creatable = {
            t.name: CreatableTopic(
                t.name,
                t.partitions,
                t.replication_factor,
                {int(p): tuple(r) for p, r in t.assignments.items()},
                {str(k): str(v) for k, v in t.config.items()},
            )
            for t in topics
        }
        async with self._session() as session:
            with _deadline(timeout, f"creating {', '.join(names)}"):
                results = await self._to_controller(
                    session,
                    names,
                    lambda pending, timeout_ms: CreateTopicsRequest(
                        tuple(creatable[n] for n in pending), timeout_ms
                    ),
                    CreateTopicsResponse,
                )
                # REQUEST_TIMED_OUT: created, but the broker gave up waiting for leaders;
                # we keep waiting (below) within our own timeout.
                _raise_first(results, names, ignore=(_REQUEST_TIMED_OUT,))
                await self._wait_for_leaders(session, names)

    async def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        await self.delete_topics([name], timeout=timeout)

    async def delete_topics(self, names: Iterable[str], *, timeout: float = 30.0) -> None:
        """Deletes topics (through the controller); raises the first topic's error, e.g.
        `UnknownTopicOrPartitionError` for a topic that does not exist."""
        names = list(names)
        async with self._session() as session:
            with _deadline(timeout, f"deleting {', '.join(names)}"):
                results = await self._to_controller(
                    session,
                    names,
                    lambda pending, timeout_ms: DeleteTopicsRequest(tuple(pending), timeout_ms),
                    DeleteTopicsResponse,
                )
                _raise_first(results, names)

    async def describe_topic(self, name: str) -> TopicDescription:
        """The topic's partitions with leader, leader epoch, replicas, ISR and offline
        replicas; `UnknownTopicOrPartitionError` when it does not exist."""
        async with self._session() as session:
            await session.metadata.refresh([name])
            topic = session.metadata.cluster.topic(name)
            if topic is None:
                code = session.metadata.topic_errors.get(name, 3)
                raise errors.error_for_code(
                    code, f"topic {name!r}: {errors.ERROR_NAMES.get(code, code)}"
                )
            return TopicDescription(topic.name, topic.topic_id, topic.partitions)

    async def list_topics(self) -> list[str]:
        async with self._session() as session:
            return sorted((await session.metadata.refresh(None)).topics)

    async def describe_cluster(self) -> ClusterDescription:
        async with self._session() as session:
            cluster = await session.metadata.refresh(())
            return ClusterDescription(
                tuple(b for _, b in sorted(cluster.brokers.items())),
                cluster.controller_id,
                cluster.cluster_id,
            )

    # -- helpers -----------------------------------------------------------------------

    async def _controller(self, session: _Session, *, refresh: bool) -> tuple[int, Cluster]:
        """The controller's id and the metadata naming it (refreshed until one is known)."""
        metadata = session.metadata
        cluster = metadata.cluster
        if refresh or cluster.controller_id not in cluster.brokers:
            while True:
                try:
                    cluster = await metadata.refresh(())
                except errors.KafkaError as exc:
                    log.info("%s: metadata refresh failed: %s", self.client_id, exc)
                    continue  # the refresh itself backs off
                if cluster.controller_id in cluster.brokers:
                    break
        return cluster.controller_id, cluster

    async def _to_controller(
        self,
        session: _Session,
        names: list[str],
        build: Callable[[list[str], int], object],
        response_type: type,
    ) -> dict[str, TopicResult]:
        """Sends `build(pending names, timeout_ms)` to the controller until every topic
        has an answer other than NOT_CONTROLLER (retrying retriable RPC failures too)."""
        results: dict[str, TopicResult] = {}
        pending = list(dict.fromkeys(names))
        refresh = False
        while pending:
            controller, cluster = await self._controller(session, refresh=refresh)
            address = cluster.address_of(controller)
            assert address is not None
            remaining = trio.current_effective_deadline() - trio.current_time()
            rpc_timeout_ms = max(0, min(self.request_timeout_ms, int(remaining * 1000)))
            # The broker's own wait (for leaders, for the deletion) ends a little before
            # our RPC timeout, so its answer (e.g. REQUEST_TIMED_OUT: created, no leaders
            # yet) arrives instead of a client-side timeout. A timeout would leave the
            # outcome unknown, and a retry would then hit TOPIC_ALREADY_EXISTS.
            broker_timeout_ms = rpc_timeout_ms * 9 // 10
            try:
                response = await session.connections.request(
                    address,
                    _api_key(response_type),
                    build(pending, broker_timeout_ms),
                    response_type,
                    timeout=rpc_timeout_ms / 1000,
                )
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("%s: request to controller %d failed: %s", self.client_id, controller, exc)
                refresh = True
                continue
            refresh = False
            for result in response.topics:
                if result.name not in pending:
                    continue
                if result.error_code == _NOT_CONTROLLER:
                    refresh = True
                    continue
                results[result.name] = result
            pending = [n for n in pending if n not in results]
            if pending and not refresh:
                raise errors.UnknownServerError(
                    f"controller {controller} did not answer for {', '.join(pending)}"
                )
        return results

    async def _wait_for_leaders(self, session: _Session, names: list[str]) -> None:
        """Polls metadata (every retry_backoff_ms) until every partition of each topic has
        a live leader."""
        while True:
            try:
                cluster = await session.metadata.refresh(names)
            except errors.KafkaError as exc:
                log.info("%s: metadata refresh failed: %s", self.client_id, exc)
                continue
            if all(_has_leaders(cluster, name) for name in names):
                return


def _api_key(response_type: type) -> ApiKey:
    return ApiKey.CREATE_TOPICS if response_type is CreateTopicsResponse else ApiKey.DELETE_TOPICS


def _has_leaders(cluster: Cluster, name: str) -> bool:
    topic = cluster.topic(name)
    return (
        topic is not None
        and bool(topic.partitions)
        and all(p.leader >= 0 and p.leader in cluster.brokers for p in topic.partitions)
    )


def _raise_first(
    results: dict[str, TopicResult], names: list[str], ignore: tuple[int, ...] = ()
) -> None:
    for name in names:
        result = results[name]
        if result.error_code != 0 and result.error_code not in ignore:
            reason = result.error_message or errors.ERROR_NAMES.get(result.error_code)
            raise errors.error_for_code(result.error_code, f"topic {name!r}: {reason}")


@contextlib.contextmanager
def _deadline(timeout: float, what: str) -> Any:
    try:
        with trio.fail_after(timeout):
            yield
    except trio.TooSlowError:
        raise errors.RequestTimedOutError(f"{what}: not done within {timeout}s") from None
