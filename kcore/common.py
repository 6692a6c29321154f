"""Plain data the whole Kafka domain shares: topic partitions, leader-and-ISR, endpoints."""

from __future__ import annotations

import enum

import attrs

NO_LEADER = -1  # Kafka's LeaderAndIsr.NoLeader
OFFSETS_TOPIC = "__consumer_offsets"  # Kafka's internal topic of groups and their offsets
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0  # the state znode's version right after creation
NO_EPOCH = -1  # Kafka's LeaderAndIsr.NoEpoch
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: the topic is going away
EPOCH_DURING_DELETE = -2  # Kafka's LeaderAndIsr.EpochDuringDelete: StopReplica while deleting


@attrs.frozen(order=False)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    # Ordered by (topic, partition), written out: attrs' generated comparisons build
    # tuples generically, and sorting thousands of partitions is on the controller's
    # hot path.
    def __lt__(self, other: TopicPartition) -> bool:
        if other.__class__ is not TopicPartition:
            return NotImplemented
        return (self.topic, self.partition) < (other.topic, other.partition)

    def __le__(self, other: TopicPartition) -> bool:
        if other.__class__ is not TopicPartition:
            return NotImplemented
        return (self.topic, self.partition) <= (other.topic, other.partition)

    def __gt__(self, other: TopicPartition) -> bool:
        if other.__class__ is not TopicPartition:
            return NotImplemented
        return (self.topic, self.partition) > (other.topic, other.partition)

    def __ge__(self, other: TopicPartition) -> bool:
        if other.__class__ is not TopicPartition:
            return NotImplemented
        return (self.topic, self.partition) >= (other.topic, other.partition)


@attrs.frozen
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR; `partition_epoch` is the version of the
    partition's state znode, which every write of it is conditioned on."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return self.new_leader_and_isr(leader, self.isr)

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        """The next leader epoch: every leader or ISR change the controller makes bumps it."""
        return attrs.evolve(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        return attrs.evolve(self, partition_epoch=partition_epoch)


@attrs.frozen
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


@attrs.frozen
class ReplicaAssignment:
    """A partition's replicas, and during a reassignment the ones being added / removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@attrs.frozen
class EndPoint:
    """A listener as brokers advertise it: `PLAINTEXT://host:port`."""

    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        return f"{self.listener_name}://{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: dict[str, str] | None = None) -> EndPoint:
        """Parses `NAME://host:port` (an empty host means all interfaces, as in Kafka)."""
        name, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not port.isdigit() or not name:
            raise ValueError(f"bad listener {text!r}: expected NAME://host:port")
        host = host.strip("[]")  # IPv6 literals come bracketed
        protocol = (protocol_map or {}).get(name, name)
        return cls(host, int(port), name, protocol)


@attrs.frozen
class Broker:
    """A registered broker: id, endpoints, rack, and its epoch (the czxid of its znode)."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    epoch: int = -1

    def endpoint(self, listener_name: str = "PLAINTEXT") -> EndPoint:
        for endpoint in self.endpoints:
            if endpoint.listener_name == listener_name:
                return endpoint
        raise KeyError(f"broker {self.id} has no listener {listener_name}")


class ElectionType(enum.IntEnum):
    """Kafka's ElectionType (its numbers are the ElectLeaders request's): PREFERRED moves
    leadership to the preferred replica, UNCLEAN elects one for a leaderless partition."""

    PREFERRED = 0
    UNCLEAN = 1
