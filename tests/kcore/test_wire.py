import enum

import attrs
import msgpack
import pytest

from kcore.wire import WireError, from_wire, to_wire


class Kind(enum.Enum):
    FULL = 1
    INCREMENTAL = 0


@attrs.frozen
class Endpoint:
    host: str
    port: int


@attrs.frozen
class Message:
    broker_id: int
    kind: Kind
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    weights: dict[int, float]
    payload: bytes = b""
    is_new: bool = False


def _round_trip(message):
    packed = msgpack.packb(to_wire(message), use_bin_type=True)
    return from_wire(type(message), msgpack.unpackb(packed, raw=False, strict_map_key=True))


def test_messages_survive_msgpack_with_integer_keyed_maps():
    message = Message(3, Kind.FULL, (Endpoint("h", 9092),), None, {1: 0.5, 2: 1}, b"\x00", True)
    assert to_wire(message)[4] == [[1, 0.5], [2, 1]]
    assert _round_trip(message) == attrs.evolve(message, weights={1: 0.5, 2: 1.0})


def test_an_older_sender_may_omit_trailing_defaults():
    decoded = from_wire(Message, [1, 0, [], "r1", []])
    assert (decoded.payload, decoded.is_new, decoded.kind) == (b"", False, Kind.INCREMENTAL)


@pytest.mark.parametrize(
    "data, complaint",
    [
        ({"broker_id": 1}, "Message: expected a list of fields, got dict"),
        ([1, 0], "Message: 2 fields, at least 5 expected"),
        (["1", 0, [], None, []], "Message.broker_id: expected int, got str"),
        ([True, 0, [], None, []], "Message.broker_id: expected int, got bool"),
        ([1, 7, [], None, []], "Message.kind: 7 is not a Kind"),
        ([1, 0, [["h", "x"]], None, []], r"Message.endpoints\[0\].port: expected int, got str"),
        ([1, 0, [], 5, []], "Message.rack: expected str, got int"),
        ([1, 0, [], None, [[1]]], r"Message.weights: expected a list of \[key, value\] pairs"),
    ],
)
def test_malformed_bodies_name_the_field(data, complaint):
    with pytest.raises(WireError, match=complaint):
        from_wire(Message, data)
