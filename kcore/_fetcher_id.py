"""Which replica fetcher thread a partition goes to, exactly as Kafka picks it
(AbstractFetcherManager.getFetcherId), so partitions land on the same fetcher ids."""

from __future__ import annotations

_INT_MIN = -(2**31)


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, with 32-bit overflow."""
    units = text.encode("utf-16-be")
    result = 0
    for index in range(0, len(units), 2):
        result = (31 * result + int.from_bytes(units[index : index + 2], "big")) & 0xFFFFFFFF
    return _to_int32(result)


def _kafka_abs(value: int) -> int:
    # Kafka's Utils.abs maps Integer.MIN_VALUE (whose Java abs is negative) to 0.
    return 0 if value == _INT_MIN else abs(value)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """`Utils.abs(31 * topic.hashCode() + partition) % numFetchers` in Java int arithmetic."""
    if num_fetchers <= 0:
        raise ValueError(f"num_fetchers must be positive, got {num_fetchers}")
    return _kafka_abs(_to_int32(31 * java_string_hash(topic) + partition)) % num_fetchers
