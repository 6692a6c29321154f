"""A fake shell for GroupCoordinatorCore: applies its effects to plain dicts and lists, and
advances time by hand, firing due timers in deadline order."""

from __future__ import annotations

import itertools

from kcore.coordinator.group import (
    AppendTombstones,
    CancelTimer,
    GroupConfig,
    GroupCoordinatorCore,
    MemberIdentity,
    Respond,
    SetTimer,
    StoreGroup,
    StoreOffsets,
)
from kcore.coordinator.group._codes import NONE

CONSUMER = "consumer"


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: int16 version, topics, null user data."""
    out = (0).to_bytes(2, "big") + len(topics).to_bytes(4, "big")
    for topic in topics:
        encoded = topic.encode()
        out += len(encoded).to_bytes(2, "big") + encoded
    return out + (-1).to_bytes(4, "big", signed=True)


RANGE = [("range", subscription("t"))]


class Shell:
    def __init__(self, config: GroupConfig | None = None, *, own: tuple[int, ...] = (0,)):
        self.config = config or GroupConfig(offsets_topic_num_partitions=1)
        counter = itertools.count(1)
        self.core = GroupCoordinatorCore(
            self.config, new_member_id=lambda prefix: f"{prefix}-{next(counter)}"
        )
        self.now = 0
        self.timers: dict = {}
        self.responses: dict[object, dict] = {}
        self.answer_counts: dict[object, int] = {}
        self.group_writes: list[StoreGroup] = []
        self.offset_writes: list[StoreOffsets] = []
        self.tombstones: list[AppendTombstones] = []
        self.log: list = []
        self._tokens = itertools.count(1)
        self.apply(self.core.startup(self.now))
        for partition in own:
            self.apply(self.core.begin_loading(partition, 0))
            self.apply(self.core.finish_loading(partition, self.now))

    # -- effects ----------------------------------------------------------------------

    def apply(self, effects) -> list:
        for effect in effects:
            self.log.append(effect)
            if isinstance(effect, Respond):
                self.responses[effect.token] = effect.body
                self.answer_counts[effect.token] = self.answer_counts.get(effect.token, 0) + 1
            elif isinstance(effect, SetTimer):
                self.timers[effect.key] = effect.deadline_ms
            elif isinstance(effect, CancelTimer):
                self.timers.pop(effect.key, None)
            elif isinstance(effect, StoreGroup):
                self.group_writes.append(effect)
            elif isinstance(effect, StoreOffsets):
                self.offset_writes.append(effect)
            elif isinstance(effect, AppendTombstones):
                self.tombstones.append(effect)
            else:
                raise AssertionError(f"unknown effect {effect!r}")
        return effects

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = sorted(
                ((deadline, repr(key), key) for key, deadline in self.timers.items()),
                key=lambda item: (item[0], item[1]),
            )
            due = [item for item in due if item[0] <= target]
            if not due:
                break
            deadline, _, key = due[0]
            self.now = max(self.now, deadline)
            del self.timers[key]
            self.apply(self.core.on_timer(key, self.now))
        self.now = target

    def store_groups(self, error: int = NONE) -> None:
        writes, self.group_writes = self.group_writes, []
        for write in writes:
            self.apply(self.core.group_stored(write.write_id, error, self.now))

    def store_offsets(self, error: int = NONE) -> None:
        writes, self.offset_writes = self.offset_writes, []
        for index, write in enumerate(writes):
            self.apply(self.core.offsets_stored(write.write_id, error, self.now, 100 + index))

    # -- requests (each returns its token; the response, once sent, is in .responses) ----

    def token(self) -> int:
        return next(self._tokens)

    def join(
        self,
        group_id: str = "g",
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols=RANGE,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        client_id: str = "c",
        version: int = 9,
        protocol_type: str = CONSUMER,
    ) -> int:
        token = self.token()
        self.apply(
            self.core.join_group(
                token,
                group_id=group_id,
                member_id=member_id,
                group_instance_id=instance_id,
                protocol_type=protocol_type,
                protocols=protocols,
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                client_id=client_id,
                client_host="/127.0.0.1",
                now_ms=self.now,
                api_version=version,
            )
        )
        return token

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group_id: str = "g",
        instance_id: str | None = None,
    ) -> int:
        token = self.token()
        self.apply(
            self.core.sync_group(
                token,
                group_id=group_id,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance_id,
                protocol_type=CONSUMER,
                protocol_name="range",
                assignments=assignments or {},
                now_ms=self.now,
            )
        )
        return token

    def heartbeat(
        self, member_id: str, generation: int, *, group_id: str = "g", instance_id=None
    ) -> int:
        token = self.token()
        self.apply(
            self.core.heartbeat(
                token,
                group_id=group_id,
                member_id=member_id,
                generation_id=generation,
                group_instance_id=instance_id,
                now_ms=self.now,
            )
        )
        return self.responses[token]["error_code"]

    def leave(self, *members: MemberIdentity, group_id: str = "g", version: int = 5) -> dict:
        token = self.token()
        self.apply(
            self.core.leave_group(
                token,
                group_id=group_id,
                members=list(members),
                now_ms=self.now,
                api_version=version,
            )
        )
        return self.responses[token]

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group_id: str = "g",
        member_id: str = "",
        generation: int = -1,
        metadata: str = "",
        leader_epoch: int = -1,
    ) -> int:
        token = self.token()
        topics: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": leader_epoch,
                    "committed_metadata": metadata,
                }
            )
        self.apply(
            self.core.commit_offsets(
                token,
                group_id=group_id,
                topics=[{"name": n, "partitions": p} for n, p in topics.items()],
                generation_id=generation,
                member_id=member_id,
                now_ms=self.now,
            )
        )
        return token

    def fetch(self, group_id: str = "g", partitions=None, *, require_stable=False) -> dict:
        """The OffsetFetch v8 result for one group, as {(topic, partition): (offset,
        leader epoch, metadata, error)}, plus the group error under key None."""
        token = self.token()
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [{"name": n, "partition_indexes": p} for n, p in by_topic.items()]
        self.apply(
            self.core.fetch_offsets(
                token, [(group_id, topics)], require_stable=require_stable, api_version=8
            )
        )
        (group,) = self.responses[token]["groups"]
        out: dict = {None: group["error_code"]}
        for topic in group["topics"]:
            for p in topic["partitions"]:
                out[(topic["name"], p["partition_index"])] = (
                    p["committed_offset"],
                    p["committed_leader_epoch"],
                    p["metadata"],
                    p["error_code"],
                )
        return out


def commit_errors(body: dict) -> dict[tuple[str, int], int]:
    return {
        (topic["name"], p["partition_index"]): p["error_code"]
        for topic in body["topics"]
        for p in topic["partitions"]
    }


def form_group(shell: Shell, *client_ids: str, group_id: str = "g", **join_kwargs) -> list[str]:
    """Members join (KIP-394 round trip), the initial delay passes, the leader syncs an
    assignment of one byte per member, storage succeeds: a Stable group of generation 1.
    Returns the member ids, leader first."""
    member_ids = []
    tokens = []
    for client_id in client_ids:
        first = shell.join(group_id, client_id=client_id, **join_kwargs)
        member_id = shell.responses[first]["member_id"]
        tokens.append(shell.join(group_id, member_id, client_id=client_id, **join_kwargs))
        member_ids.append(member_id)
    # the delay is extended once per round in which new members arrived
    while tokens[0] not in shell.responses:
        shell.advance(shell.config.group_initial_rebalance_delay_ms)
    generation = shell.responses[tokens[0]]["generation_id"]
    leader = shell.responses[tokens[0]]["leader"]
    ordered = [leader] + [m for m in member_ids if m != leader]
    assignment = {m: bytes([i]) for i, m in enumerate(ordered)}
    sync_tokens = [
        shell.sync(m, generation, assignment if m == leader else None, group_id=group_id)
        for m in ordered
    ]
    shell.store_groups()
    for token in sync_tokens:
        assert shell.responses[token]["error_code"] == 0
    return ordered
