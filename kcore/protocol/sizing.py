"""How many bytes a message adds around the records it carries, so a fetch can be sized to
fit a frame limit (`socket.request.max.bytes` on a broker, the transport's frame limit on a
client): Kafka bounds only the records by `max_bytes`, but kcore's transport also bounds
whole frames, responses included."""

from __future__ import annotations

from collections.abc import Iterable

# The response envelope ([correlation id, error code, body]) and the FetchResponse's list
# headers: msgpack ints take at most 9 bytes, list headers at most 5.
FETCH_RESPONSE_FIXED_BYTES = 64
# One FetchPartitionResponse without its topic's and records' bytes: a list header, eight
# ints (at most 9 bytes each), a diverging epoch (two ints), the str and bin headers.
FETCH_PARTITION_OVERHEAD_BYTES = 128


def fetch_response_overhead_bytes(topics: Iterable[str]) -> int:
    """An upper bound of a FetchResponse's encoded size beyond its records, for a response
    answering one partition of each of `topics` (a topic repeats once per partition)."""
    return FETCH_RESPONSE_FIXED_BYTES + sum(
        FETCH_PARTITION_OVERHEAD_BYTES + len(topic.encode()) for topic in topics
    )


def fetch_records_limit(frame_limit: int, topics: Iterable[str]) -> int:
    """The most record bytes a FetchResponse answering `topics` may carry and still fit a
    frame of `frame_limit` bytes (0 when even its envelope would not)."""
    return max(0, frame_limit - fetch_response_overhead_bytes(topics))
