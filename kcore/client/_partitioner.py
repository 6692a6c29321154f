"""Kafka's default partitioner (pure): murmur2 of the key for keyed records, a sticky
partition per topic for unkeyed ones.

Keyed records must land where Kafka's Java client puts them (users mix clients and rely on
key -> partition), so `murmur2` is a bit-exact port of `org.apache.kafka.common.utils
.Utils.murmur2` with Java's 32-bit signed arithmetic. Unkeyed records use the "sticky"
strategy (KIP-480 / KIP-794, simplified): every unkeyed record of a topic goes to the same
partition until the batch it opened is closed, then a new partition is drawn from the
injected `random.Random`, so unkeyed records form full batches instead of many small ones.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key", "to_positive"]

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24


def _int32(value: int) -> int:
    """The Java int a 32-bit pattern stands for."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: a signed 32-bit int, as Java returns it.

    Java's `>>>` is a logical shift of the 32-bit pattern, so every intermediate value is
    kept as an unsigned 32-bit pattern and converted to signed once at the end.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & ~3
    remaining = length % 4
    # Java's switch falls through: 3 also does 2 and 1; every tail ends with h *= m.
    if remaining == 3:
        h ^= data[tail + 2] << 16
    if remaining >= 2:
        h ^= data[tail + 1] << 8
    if remaining >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _int32(h)


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which fails on MIN)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Where Kafka's default partitioner puts a keyed record."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be > 0, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Picks partitions for records (Kafka 3.5's BuiltInPartitioner, simplified).

    `partition(topic, key, num_partitions, available)`: keyed -> murmur2 over every
    partition, available or not (a key's partition must not move while a leader is down);
    unkeyed -> the topic's sticky partition, drawn among `available` (partitions with a
    leader) when there are any. `record_appended(...)` counts the bytes produced to the
    sticky partition; after `batch_size` bytes the topic switches to another partition
    (KIP-794), so unkeyed records fill batches yet spread over the partitions.
    """

    def __init__(self, rng: random.Random, *, batch_size: int) -> None:
        self._rng = rng
        self._batch_size = batch_size
        self._sticky: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes so far)

    def partition(
        self,
        topic: str,
        key: bytes | None,
        num_partitions: int,
        available: Sequence[int] = (),
    ) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        current = self._sticky.get(topic)
        if current is not None and current[0] < num_partitions:
            return current[0]
        return self._choose(topic, num_partitions, available, previous=None)

    def record_appended(
        self,
        topic: str,
        partition: int,
        size: int,
        num_partitions: int,
        available: Sequence[int] = (),
    ) -> None:
        """An unkeyed record of `size` bytes went to `partition`."""
        current = self._sticky.get(topic)
        if current is None or current[0] != partition:
            return
        produced = current[1] + size
        if produced >= self._batch_size:
            self._choose(topic, num_partitions, available, previous=partition)
        else:
            self._sticky[topic] = (partition, produced)

    def _choose(
        self, topic: str, num_partitions: int, available: Sequence[int], previous: int | None
    ) -> int:
        candidates = [p for p in available if p < num_partitions] or list(range(num_partitions))
        if previous is not None and len(candidates) > 1:
            candidates = [p for p in candidates if p != previous]
        choice = candidates[self._rng.randrange(len(candidates))]
        self._sticky[topic] = (choice, 0)
        return choice
