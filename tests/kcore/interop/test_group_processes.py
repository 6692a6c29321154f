"""A consumer group of three `kcore console-consumer --group` processes over real TCP, one
killed with SIGKILL while records are produced: after the session timeout its partitions
move to the other two, every acknowledged record is printed by some member at least once,
and, since a member commits only what it has printed (auto-commit at its next poll), no
offset the group committed skips a record nobody printed."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import attrs
import pytest
import trio

from kcore.client import Admin, Producer

from ._cluster import KafkaCluster, wait_for, wait_until_every_broker_knows

PARTITIONS = 6
# Within the brokers' group.min.session.timeout.ms (6000, Kafka's default): the floor the
# test waits out once, after the kill.
SESSION_TIMEOUT_MS = 6000


@attrs.define
class Member:
    """One console consumer process and the records it printed, as (partition, offset,
    value), read from its standard output by a thread of its own."""

    name: str
    process: subprocess.Popen
    printed: list[tuple[int, int, bytes]] = attrs.field(factory=list)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            partition, offset, value = line.rstrip(b"\n").split(b"\t", 2)
            self.printed.append(
                (int(partition.removeprefix(b"Partition:")),
                 int(offset.removeprefix(b"Offset:")), value)
            )  # fmt: skip

    def kill(self) -> None:
        """SIGKILL (a crash: no LeaveGroup, no last commit); then what it printed is all
        read."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        assert self.reader is not None
        self.reader.join(timeout=30)


def _start_member(cluster: KafkaCluster, topic: str, group: str, name: str) -> Member:
    properties = {
        "client.id": name,  # how the group's description names the member
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 1000,
        "auto.commit.interval.ms": 200,
        "fetch.max.wait.ms": 100,
    }
    command = [
        sys.executable, "-m", "kcore.cli", "console-consumer",
        "--bootstrap-server", cluster.bootstrap_servers, "--topic", topic, "--group", group,
        "--from-beginning",
        "--property", "print.partition=true", "--property", "print.offset=true",
    ]  # fmt: skip
    for key, value in properties.items():
        command += ["--consumer-property", f"{key}={value}"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    member = Member(name, process)
    member.reader = threading.Thread(target=member.read, name=f"read-{name}", daemon=True)
    member.reader.start()
    return member


@attrs.define
class Production:
    """Records sent one after another, partition by partition in turn, until stopped:
    each acknowledged one as (partition, offset, value)."""

    cluster: KafkaCluster
    topic: str
    acknowledged: list[tuple[int, int, bytes]] = attrs.field(factory=list)
    stopping: threading.Event = attrs.field(factory=threading.Event)
    thread: threading.Thread | None = None
    failure: BaseException | None = None

    async def _produce(self) -> None:
        async with Producer(self.cluster.bootstrap_servers, acks="all") as producer:
            index = 0
            while not self.stopping.is_set():
                value = f"record-{index}".encode()
                meta = await producer.send_and_wait(self.topic, value, partition=index % PARTITIONS)
                self.acknowledged.append((meta.partition, meta.offset, value))
                index += 1
                await trio.sleep(0.01)  # a steady trickle, not a flood

    def _run(self) -> None:
        try:
            trio.run(self._produce)
        except BaseException as error:
            self.failure = error

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="produce", daemon=True)
        self.thread.start()

    def check(self) -> None:
        """Raises what stopped the production, if anything did."""
        if self.failure is not None:
            raise AssertionError(f"producing failed: {self.failure!r}") from self.failure

    def halt(self) -> None:
        self.stopping.set()
        assert self.thread is not None
        self.thread.join(timeout=60)

    def stop(self) -> list[tuple[int, int, bytes]]:
        """Stops producing; what was acknowledged."""
        self.halt()
        self.check()
        return list(self.acknowledged)


def _admin(cluster: KafkaCluster, call):
    async def run():
        async with Admin(cluster.bootstrap_servers) as admin:
            return await call(admin)

    return trio.run(run)


def _assignments(cluster: KafkaCluster, group: str) -> dict[str, set[int]] | None:
    """Each member's partitions, by client id, once the group is Stable (else None)."""
    described = _admin(cluster, lambda admin: admin.describe_group(group))
    if described.state != "Stable":
        return None
    return {m.client_id: {tp.partition for tp in m.assignment} for m in described.members}


def _committed(cluster: KafkaCluster, topic: str, group: str) -> dict[int, int]:
    offsets = _admin(cluster, lambda admin: admin.list_group_offsets(group))
    return {tp.partition: offset for tp, offset in offsets.items() if tp.topic == topic}


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.kill()


@pytest.mark.timeout(180)
def test_a_killed_members_partitions_move_and_nothing_is_skipped(kafka_cluster, members):
    cluster = kafka_cluster
    topic, group = f"members-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _admin(cluster, lambda admin: admin.create_topic(topic, PARTITIONS, replication_factor=2))
    wait_until_every_broker_knows(cluster, topic, PARTITIONS)
    production = Production(cluster, topic)
    production.start()
    try:
        for name in ("member-0", "member-1", "member-2"):
            members.append(_start_member(cluster, topic, group, name))
        by_name = {member.name: member for member in members}

        def three_members_share_the_partitions() -> dict[str, set[int]] | None:
            production.check()
            assigned = _assignments(cluster, group)
            if assigned is None or sorted(assigned) != sorted(by_name):
                return None
            return assigned if all(len(p) == PARTITIONS // 3 for p in assigned.values()) else None

        assigned = wait_for(
            three_members_share_the_partitions, "three members, two partitions each"
        )
        victim = by_name["member-0"]
        victims_partitions = assigned[victim.name]

        def victim_committed_its_partitions() -> bool:
            production.check()
            committed = _committed(cluster, topic, group)
            printed = {p for p, _, _ in victim.printed}
            return victims_partitions <= printed and all(
                committed.get(p, 0) > 0 for p in victims_partitions
            )

        wait_for(victim_committed_its_partitions, "the victim to print and commit its records")
        victim.kill()
        survivors = [member for member in members if member is not victim]
        committed_at_kill = _committed(cluster, topic, group)

        def the_others_took_over() -> bool:
            production.check()
            assigned = _assignments(cluster, group)
            if assigned is None or sorted(assigned) != sorted(m.name for m in survivors):
                return False
            if set().union(*assigned.values()) != set(range(PARTITIONS)):
                return False
            # ... and print the victim's partitions from where it committed on
            moved = [(p, o) for member in survivors for p, o, _ in member.printed]
            return all(
                any(p == partition and o >= committed_at_kill[p] for p, o in moved)
                for partition in victims_partitions
            )

        wait_for(the_others_took_over, "the survivors to consume the killed member's partitions")
        acknowledged = production.stop()

        def printed() -> set[tuple[int, int, bytes]]:
            return {record for member in members for record in member.printed}

        wait_for(
            lambda: set(acknowledged) <= printed(),
            "every acknowledged record to be printed by some member",
        )
        assert len(acknowledged) > 0
    finally:
        production.halt()
    for member in survivors:
        member.kill()  # everything they printed is read: the comparison below is exact
    committed = _committed(cluster, topic, group)
    printed_offsets = {(p, o) for p, o, _ in printed()}
    for commits in (committed_at_kill, committed):
        skipped = [
            (partition, offset)
            for partition, end in commits.items()
            for offset in range(end)
            if (partition, offset) not in printed_offsets
        ]
        assert skipped == []  # committed past a record nobody printed
    assert set(committed) == set(range(PARTITIONS))
    # The victim's partitions were printed by it before the kill and by a survivor after.
    for partition in victims_partitions:
        assert any(p == partition for p, _, _ in victim.printed)
        assert any(p == partition for m in survivors for p, _, _ in m.printed)
