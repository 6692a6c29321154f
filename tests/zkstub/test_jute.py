"""zkstub's jute codec: every record survives a round trip, kazoo's serializers (a client
nobody here wrote) agree with it both ways, a reply matches what a real ZooKeeper 3.8 sent
byte for byte, and what comes off the wire malformed is a MarshallingError, never a crash."""

from __future__ import annotations

import struct

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.protocol import serialization as kz
from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL as KazooACL
from kazoo.security import Id

from zkstub import (
    BadArgumentsError,
    MarshallingError,
    NoNodeError,
    Stat,
    UnimplementedError,
)
from zkstub import _jute as jute
from zkstub._jute import OpCode

STAT = Stat(2**40, 7, 1_700_000_000_000, 1_700_000_000_001, 3, 4, 0, 0x1234, 5, 6, 2**33)
ACLS = (jute.ACL(31, "world", "anyone"), jute.ACL(1, "digest", "u:x"))
HYPOTHESIS = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

REQUESTS = [
    (OpCode.CREATE, jute.CreateRequest("/a", b"data", ACLS, 3)),
    (OpCode.CREATE2, jute.CreateRequest("/a", None, jute.OPEN_ACL_UNSAFE, 0)),
    (OpCode.CREATE_CONTAINER, jute.CreateRequest("/c", b"", jute.OPEN_ACL_UNSAFE, 4)),
    (OpCode.CREATE_TTL, jute.CreateTTLRequest("/t", b"x", jute.OPEN_ACL_UNSAFE, 5, 60_000)),
    (OpCode.DELETE, jute.DeleteRequest("/a", -1)),
    (OpCode.EXISTS, jute.PathWatchRequest("/a", True)),
    (OpCode.GET_DATA, jute.PathWatchRequest("/é", False)),
    (OpCode.SET_DATA, jute.SetDataRequest("/a", b"\x00\xff", 2**31 - 1)),
    (OpCode.GET_ACL, jute.PathRequest("/a")),
    (OpCode.SET_ACL, jute.SetACLRequest("/a", ACLS, 0)),
    (OpCode.GET_CHILDREN, jute.PathWatchRequest("/", True)),
    (OpCode.SYNC, jute.PathRequest("/a")),
    (OpCode.PING, None),
    (OpCode.GET_CHILDREN2, jute.PathWatchRequest("/a", False)),
    (OpCode.CHECK, jute.CheckVersionRequest("/a", 9)),
    (
        OpCode.MULTI,
        jute.MultiRequest(
            (
                (OpCode.CREATE, jute.CreateRequest("/m", b"", jute.OPEN_ACL_UNSAFE, 1)),
                (OpCode.CREATE2, jute.CreateRequest("/n", None, jute.OPEN_ACL_UNSAFE, 0)),
                (OpCode.CREATE_TTL, jute.CreateTTLRequest("/t", b"", ACLS, 6, 1)),
                (OpCode.DELETE, jute.DeleteRequest("/m", 0)),
                (OpCode.SET_DATA, jute.SetDataRequest("/n", b"v", -1)),
                (OpCode.CHECK, jute.CheckVersionRequest("/n", 1)),
            )
        ),
    ),
    (OpCode.MULTI, jute.MultiRequest(())),
    (
        OpCode.MULTI_READ,
        jute.MultiRequest(
            (
                (OpCode.GET_DATA, jute.PathWatchRequest("/a", False)),
                (OpCode.GET_CHILDREN, jute.PathWatchRequest("/b", False)),
            )
        ),
    ),
    (OpCode.RECONFIG, jute.ReconfigRequest("server.1=h:1:2", None, None, -1)),
    (OpCode.CHECK_WATCHES, jute.WatchesRequest("/a", 1)),
    (OpCode.REMOVE_WATCHES, jute.WatchesRequest("/a", 3)),
    (OpCode.AUTH, jute.AuthRequest(0, "digest", b"user:pw")),
    (OpCode.SET_WATCHES, jute.SetWatchesRequest(42, ("/d",), ("/e", "/e2"), ())),
    (
        OpCode.SET_WATCHES2,
        jute.SetWatchesRequest(42, ("/d",), (), ("/c",), ("/p",), ("/r", "/r2")),
    ),
    (OpCode.SASL, jute.SaslRequest(b"token")),
    (OpCode.GET_EPHEMERALS, jute.PathRequest("/")),
    (OpCode.GET_ALL_CHILDREN_NUMBER, jute.PathRequest("/a")),
    (OpCode.ADD_WATCH, jute.AddWatchRequest("/a", 1)),
    (OpCode.WHO_AM_I, None),
    (OpCode.CLOSE_SESSION, None),
]

REPLIES = [
    (OpCode.CREATE, jute.PathResponse("/a0000000001")),
    (OpCode.CREATE2, jute.Create2Response("/a", STAT)),
    (OpCode.CREATE_TTL, jute.Create2Response("/t", STAT)),
    (OpCode.CREATE_CONTAINER, jute.Create2Response("/c", STAT)),
    (OpCode.DELETE, None),
    (OpCode.EXISTS, jute.StatResponse(STAT)),
    (OpCode.GET_DATA, jute.GetDataResponse(b"v", STAT)),
    (OpCode.GET_DATA, jute.GetDataResponse(None, STAT)),
    (OpCode.SET_DATA, jute.StatResponse(STAT)),
    (OpCode.GET_ACL, jute.GetACLResponse(ACLS, STAT)),
    (OpCode.SET_ACL, jute.StatResponse(STAT)),
    (OpCode.GET_CHILDREN, jute.ChildrenResponse(("a", "b"))),
    (OpCode.GET_CHILDREN, jute.ChildrenResponse(())),
    (OpCode.SYNC, jute.PathResponse("/a")),
    (OpCode.PING, None),
    (OpCode.GET_CHILDREN2, jute.Children2Response(("x",), STAT)),
    (OpCode.CHECK, jute.StatResponse(STAT)),
    (
        OpCode.MULTI,
        jute.MultiResponse(
            (
                jute.PathResponse("/m"),
                jute.Create2Response("/n", STAT),
                None,
                jute.StatResponse(STAT),
                None,
            ),
            (OpCode.CREATE, OpCode.CREATE2, OpCode.DELETE, OpCode.SET_DATA, OpCode.CHECK),
        ),
    ),
    (
        OpCode.MULTI,
        jute.MultiResponse(
            (jute.ErrorResult(0), jute.ErrorResult(-101), jute.ErrorResult(-2)),
            (OpCode.ERROR,) * 3,
        ),
    ),
    (
        OpCode.MULTI_READ,
        jute.MultiResponse(
            (
                jute.GetDataResponse(b"d", STAT),
                jute.ChildrenResponse(("c",)),
                jute.ErrorResult(-101),
            ),
            (OpCode.GET_DATA, OpCode.GET_CHILDREN, OpCode.ERROR),
        ),
    ),
    (OpCode.RECONFIG, jute.GetDataResponse(b"server.1=...", STAT)),
    (OpCode.CHECK_WATCHES, None),
    (OpCode.REMOVE_WATCHES, None),
    (OpCode.SET_WATCHES, None),
    (OpCode.SET_WATCHES2, None),
    (OpCode.SASL, jute.SaslResponse(b"challenge")),
    (OpCode.GET_EPHEMERALS, jute.EphemeralsResponse(("/e1", "/e2"))),
    (OpCode.GET_ALL_CHILDREN_NUMBER, jute.NumberResponse(12)),
    (OpCode.ADD_WATCH, jute.ErrorResult(0)),
    (OpCode.WHO_AM_I, jute.WhoAmIResponse((jute.ClientInfo("ip", "127.0.0.1"),))),
    (OpCode.CLOSE_SESSION, None),
]


def _body(frame: bytes) -> bytes:
    """A frame's body, after checking its length prefix."""
    (length,) = struct.unpack(">i", frame[:4])
    assert length == len(frame) - 4
    return frame[4:]


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize(("op", "request_"), REQUESTS, ids=lambda v: getattr(v, "name", ""))
def test_every_request_round_trips(op, request_):
    assert jute.decode_request(_body(jute.encode_request(77, op, request_))) == (77, op, request_)


@pytest.mark.parametrize(("op", "response"), REPLIES, ids=lambda v: getattr(v, "name", ""))
def test_every_reply_round_trips(op, response):
    header = jute.ReplyHeader(77, 0x100000005, 0)
    body = _body(jute.encode_reply(header, op, response))
    assert jute.decode_reply(body, {77: op}.get) == (header, response)


def test_an_error_reply_has_no_body_whatever_is_passed():
    header = jute.ReplyHeader(5, 9, NoNodeError.code)
    frame = jute.encode_reply(header, OpCode.GET_DATA, jute.GetDataResponse(b"x", STAT))
    assert len(_body(frame)) == 16
    assert jute.decode_reply(_body(frame), lambda xid: OpCode.GET_DATA) == (header, None)


def test_a_notification_decodes_without_asking_for_the_op():
    event = jute.WatcherEvent(4, jute.SYNC_CONNECTED_STATE, "/p")
    frame = jute.encode_reply(jute.ReplyHeader(-1, -1, 0), OpCode.NOTIFICATION, event)

    def no_op_lookup(xid):
        raise AssertionError("a notification answers no request")

    assert jute.decode_reply(_body(frame), no_op_lookup) == (jute.ReplyHeader(-1, -1, 0), event)


def test_a_reply_to_an_unknown_xid_gives_the_header_only():
    frame = jute.encode_reply(jute.ReplyHeader(3, 1, 0), OpCode.CREATE, jute.PathResponse("/a"))
    header = jute.decode_reply_header(_body(frame))
    assert jute.decode_reply_body(header, None, _body(frame)) is None


def test_connect_round_trips_with_and_without_read_only():
    request = jute.ConnectRequest(0, 2**40, 6000, 0x100, bytes(16), True)
    assert jute.decode_connect_request(_body(jute.encode_connect_request(request))) == request
    old = jute.ConnectRequest(0, 5, 6000, 0, b"", False, old_client=True)
    body = _body(jute.encode_connect_request(old))
    assert len(body) == 4 + 8 + 4 + 8 + 4  # no readOnly byte
    assert jute.decode_connect_request(body) == old

    response = jute.ConnectResponse(0, 4000, 0x100, b"p" * 16, False)
    assert jute.decode_connect_response(_body(jute.encode_connect_response(response))) == response
    for_old = _body(jute.encode_connect_response(response, old_client=True))
    assert len(for_old) == 4 + 4 + 8 + 4 + 16
    assert jute.decode_connect_response(for_old) == response


def test_a_multi_response_with_an_empty_result_needs_its_types():
    results = (jute.PathResponse("/a"), None)
    with pytest.raises(BadArgumentsError, match="delete or a check"):
        jute.encode_reply(jute.ReplyHeader(1, 1, 0), OpCode.MULTI, jute.MultiResponse(results))
    # Records say their own type: no types needed.
    only_records = jute.MultiResponse((jute.PathResponse("/a"), jute.ErrorResult(-2)))
    frame = jute.encode_reply(jute.ReplyHeader(1, 1, 0), OpCode.MULTI, only_records)
    _, decoded = jute.decode_reply(_body(frame), lambda xid: OpCode.MULTI)
    assert decoded.results == only_records.results
    assert decoded.types == (OpCode.CREATE, OpCode.ERROR)


# -- what a real ZooKeeper sends -------------------------------------------------------------

# ZooKeeper 3.8.0's reply to xid 3, a multi of [create /b, check /a version 5 (it was 0),
# delete /a]: the header says no error (zxid 4 is consumed), and every op is an ErrorResult:
# 0 (rolled back), -103 (BadVersion), -2 (RuntimeInconsistency, not tried), then the done
# header (-1, true, -1).
REAL_FAILED_MULTI = bytes.fromhex(
    "00000003000000000000000400000000"
    "ffffffff000000000000000000"
    "ffffffff00ffffff99ffffff99"
    "ffffffff00fffffffefffffffe"
    "ffffffff01ffffffff"
)


def test_a_failed_multi_is_encoded_as_zookeeper_sends_it():
    results = (jute.ErrorResult(0), jute.ErrorResult(-103), jute.ErrorResult(-2))
    frame = jute.encode_reply(jute.ReplyHeader(3, 4, 0), OpCode.MULTI, jute.MultiResponse(results))
    assert _body(frame) == REAL_FAILED_MULTI
    header, response = jute.decode_reply(REAL_FAILED_MULTI, lambda xid: OpCode.MULTI)
    assert header.err == 0 and response.results == results


# -- kazoo, a client nobody here wrote -------------------------------------------------------

KAZOO_ACL = [KazooACL(31, Id("world", "anyone"))]
OPEN = jute.OPEN_ACL_UNSAFE


def _kazoo_request(xid: int, request) -> bytes:
    return struct.pack(">ii", xid, request.type) + bytes(request.serialize())


@pytest.mark.parametrize(
    ("kazoo_request", "expected"),
    [
        (
            kz.Create("/k", b"v", KAZOO_ACL, 3),
            jute.CreateRequest("/k", b"v", jute.OPEN_ACL_UNSAFE, 3),
        ),
        (
            kz.Create2("/k", None, KAZOO_ACL, 0),
            jute.CreateRequest("/k", None, jute.OPEN_ACL_UNSAFE, 0),
        ),
        (kz.Delete("/k", 4), jute.DeleteRequest("/k", 4)),
        (kz.Exists("/k", True), jute.PathWatchRequest("/k", True)),
        (kz.GetData("/k", False), jute.PathWatchRequest("/k", False)),
        (kz.SetData("/k", b"w", -1), jute.SetDataRequest("/k", b"w", -1)),
        (kz.GetACL("/k"), jute.PathRequest("/k")),
        (kz.SetACL("/k", KAZOO_ACL, 2), jute.SetACLRequest("/k", jute.OPEN_ACL_UNSAFE, 2)),
        (kz.GetChildren("/k", True), jute.PathWatchRequest("/k", True)),
        (kz.GetChildren2("/k", True), jute.PathWatchRequest("/k", True)),
        (kz.Sync("/k"), jute.PathRequest("/k")),
        (kz.CheckVersion("/k", 7), jute.CheckVersionRequest("/k", 7)),
        (kz.Reconfig("j", "l", None, 5), jute.ReconfigRequest("j", "l", None, 5)),
        (kz.Auth(0, "digest", "u:p"), jute.AuthRequest(0, "digest", b"u:p")),
        (kz.SASL(b"tok"), jute.SaslRequest(b"tok")),
        (kz.Sync(""), jute.PathRequest(None)),  # kazoo writes "" as a null string
    ],
    ids=lambda v: type(v).__name__,
)
def test_requests_kazoo_encodes_decode(kazoo_request, expected):
    xid, op, decoded = jute.decode_request(_kazoo_request(9, kazoo_request))
    assert (xid, op, decoded) == (9, kazoo_request.type, expected)


def test_kazoo_transaction_decodes_as_a_multi():
    transaction = kz.Transaction(
        [
            kz.Create("/t", b"", KAZOO_ACL, 1),
            kz.Delete("/u", -1),
            kz.SetData("/v", b"x", 3),
            kz.CheckVersion("/w", 0),
        ]
    )
    _, op, request = jute.decode_request(_kazoo_request(1, transaction))
    assert op == OpCode.MULTI
    assert request.ops == (
        (OpCode.CREATE, jute.CreateRequest("/t", b"", jute.OPEN_ACL_UNSAFE, 1)),
        (OpCode.DELETE, jute.DeleteRequest("/u", -1)),
        (OpCode.SET_DATA, jute.SetDataRequest("/v", b"x", 3)),
        (OpCode.CHECK, jute.CheckVersionRequest("/w", 0)),
    )


def test_kazoo_connect_and_ping_and_close_decode():
    connect = kz.Connect(0, 17, 6000, 0x55, b"p" * 16, False)
    assert jute.decode_connect_request(bytes(connect.serialize())) == jute.ConnectRequest(
        0, 17, 6000, 0x55, b"p" * 16, False
    )
    assert jute.decode_request(struct.pack(">ii", -2, kz.Ping.type)) == (-2, OpCode.PING, None)
    assert jute.decode_request(struct.pack(">ii", 3, kz.Close.type)) == (
        3,
        OpCode.CLOSE_SESSION,
        None,
    )


def test_set_watches_matches_zookeepers_layout():
    """kazoo 2.11 has no SetWatches serializer: the layout is zookeeper.jute's, by hand."""

    def strings(items):
        out = struct.pack(">i", len(items))
        for item in items:
            out += struct.pack(">i", len(item)) + item.encode()
        return out

    body = (
        struct.pack(">iiq", -8, 101, 99) + strings(["/d"]) + strings([]) + strings(["/c1", "/c2"])
    )
    expected = jute.SetWatchesRequest(99, ("/d",), (), ("/c1", "/c2"))
    assert jute.decode_request(body) == (-8, OpCode.SET_WATCHES, expected)
    assert _body(jute.encode_request(-8, OpCode.SET_WATCHES, expected)) == body
    with pytest.raises(BadArgumentsError, match="setWatches2"):
        jute.encode_request(-8, OpCode.SET_WATCHES, jute.SetWatchesRequest(1, (), (), (), ("/p",)))


def _reply(op, response, xid=5, zxid=8) -> bytes:
    return _body(jute.encode_reply(jute.ReplyHeader(xid, zxid, 0), op, response))


def test_replies_parse_with_kazoo():
    assert kz.ReplyHeader.deserialize(_reply(OpCode.CREATE, jute.PathResponse("/a")), 0)[0] == (
        5,
        8,
        0,
    )
    assert kz.Create.deserialize(_reply(OpCode.CREATE, jute.PathResponse("/a")), 16) == "/a"
    assert kz.Create2.deserialize(_reply(OpCode.CREATE2, jute.Create2Response("/a", STAT)), 16) == (
        "/a",
        _kazoo_stat(STAT),
    )
    assert kz.Exists.deserialize(_reply(OpCode.EXISTS, jute.StatResponse(STAT)), 16) == (
        _kazoo_stat(STAT)
    )
    data, stat = kz.GetData.deserialize(
        _reply(OpCode.GET_DATA, jute.GetDataResponse(b"v", STAT)), 16
    )
    assert (data, stat) == (b"v", _kazoo_stat(STAT))
    assert kz.SetData.deserialize(_reply(OpCode.SET_DATA, jute.StatResponse(STAT)), 16) == (
        _kazoo_stat(STAT)
    )
    acls, stat = kz.GetACL.deserialize(_reply(OpCode.GET_ACL, jute.GetACLResponse(ACLS, STAT)), 16)
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [
        (31, "world", "anyone"),
        (1, "digest", "u:x"),
    ]
    assert kz.GetChildren.deserialize(
        _reply(OpCode.GET_CHILDREN, jute.ChildrenResponse(("a", "b"))), 16
    ) == ["a", "b"]
    assert kz.GetChildren2.deserialize(
        _reply(OpCode.GET_CHILDREN2, jute.Children2Response(("a",), STAT)), 16
    ) == (["a"], _kazoo_stat(STAT))
    assert kz.Sync.deserialize(_reply(OpCode.SYNC, jute.PathResponse("/s")), 16) == "/s"
    assert kz.SASL.deserialize(_reply(OpCode.SASL, jute.SaslResponse(b"c")), 16)[0] == b"c"
    event = jute.WatcherEvent(3, 3, "/w")
    notification = _reply(OpCode.NOTIFICATION, event, xid=-1, zxid=-1)
    assert kz.Watch.deserialize(notification, 16)[0] == (3, 3, "/w")


def test_multi_replies_parse_with_kazoo():
    ok = jute.MultiResponse(
        (jute.PathResponse("/m"), None, jute.StatResponse(STAT), None),
        (OpCode.CREATE, OpCode.DELETE, OpCode.SET_DATA, OpCode.CHECK),
    )
    assert kz.Transaction.deserialize(_reply(OpCode.MULTI, ok), 16) == [
        "/m",
        True,
        _kazoo_stat(STAT),
        True,
    ]
    failed = jute.MultiResponse((jute.ErrorResult(0), jute.ErrorResult(-110), jute.ErrorResult(-2)))
    results = kz.Transaction.deserialize(_reply(OpCode.MULTI, failed), 16)
    assert [type(r).__name__ for r in results] == [
        "RolledBackError",
        "NodeExistsError",
        "RuntimeInconsistency",
    ]


def test_connect_response_parses_with_kazoo():
    response = jute.ConnectResponse(0, 4000, 0x77, b"q" * 16, False)
    parsed, _ = kz.Connect.deserialize(_body(jute.encode_connect_response(response)), 0)
    assert (parsed.time_out, parsed.session_id, parsed.passwd) == (4000, 0x77, b"q" * 16)


def _kazoo_stat(stat: Stat) -> ZnodeStat:
    return ZnodeStat(*attrs.astuple(stat))  # the same fields in the same (jute's) order


# -- malformed input -------------------------------------------------------------------------


def test_requests_errors_name_the_xid_and_the_cause():
    with pytest.raises(jute.JuteRequestError) as caught:
        jute.decode_request(struct.pack(">ii", 12, 999))
    assert (caught.value.xid, caught.value.op) == (12, 999)
    assert isinstance(caught.value.error, UnimplementedError)

    truncated = _body(jute.encode_request(13, OpCode.CREATE, REQUESTS[0][1]))[:-2]
    with pytest.raises(jute.JuteRequestError) as caught:
        jute.decode_request(truncated)
    assert caught.value.xid == 13 and isinstance(caught.value.error, MarshallingError)
    assert "CreateRequest.flags" in str(caught.value)

    with pytest.raises(MarshallingError, match=r"RequestHeader\.type at offset 4") as caught:
        jute.decode_request(b"\x00\x00\x00\x01\x00")
    assert not isinstance(caught.value, jute.JuteRequestError)


def test_bad_lengths_and_utf8_are_marshalling_errors():
    header = struct.pack(">ii", 1, OpCode.SYNC)
    with pytest.raises(MarshallingError, match=r"bad PathRequest\.path length -2"):
        jute.decode_request(header + struct.pack(">i", -2))
    with pytest.raises(MarshallingError, match=r"bad PathRequest\.path length 100"):
        jute.decode_request(header + struct.pack(">i", 100) + b"/a")
    with pytest.raises(MarshallingError, match="not UTF-8"):
        jute.decode_request(header + struct.pack(">i", 2) + b"/\xff")
    children = struct.pack(">iqi", 1, 1, 0) + struct.pack(">i", 2**30)
    with pytest.raises(MarshallingError, match="count 1073741824"):
        jute.decode_reply(children, lambda xid: OpCode.GET_CHILDREN)
    bad_multi = struct.pack(">iqi", 1, 1, 0) + struct.pack(">i?i", 7, False, 0)
    with pytest.raises(MarshallingError, match="type 7"):
        jute.decode_reply(bad_multi, lambda xid: OpCode.MULTI)


def _every_truncation(body: bytes):
    return [body[:n] for n in range(len(body))]


@pytest.mark.parametrize(("op", "request_"), REQUESTS, ids=lambda v: getattr(v, "name", ""))
def test_a_truncated_request_is_a_marshalling_error(op, request_):
    body = _body(jute.encode_request(1, op, request_))
    for prefix in _every_truncation(body):
        with pytest.raises(MarshallingError):
            jute.decode_request(prefix)


@pytest.mark.parametrize(("op", "response"), REPLIES, ids=lambda v: getattr(v, "name", ""))
def test_a_truncated_reply_is_a_marshalling_error(op, response):
    body = _body(jute.encode_reply(jute.ReplyHeader(1, 1, 0), op, response))
    for prefix in _every_truncation(body):
        if op in (OpCode.DELETE, OpCode.PING, OpCode.CLOSE_SESSION) or response is None:
            if len(prefix) >= 16:
                continue  # the header is the whole reply
        with pytest.raises(MarshallingError):
            jute.decode_reply(prefix, lambda xid: op)


def test_a_truncated_connect_is_a_marshalling_error_except_its_optional_flag():
    body = _body(jute.encode_connect_request(jute.ConnectRequest(0, 1, 2, 3, bytes(16))))
    for prefix in _every_truncation(body[:-1]):
        with pytest.raises(MarshallingError):
            jute.decode_connect_request(prefix)
    assert jute.decode_connect_request(body[:-1]).old_client
    response = _body(jute.encode_connect_response(jute.ConnectResponse(0, 1, 2, bytes(16))))
    for prefix in _every_truncation(response[:-1]):
        with pytest.raises(MarshallingError):
            jute.decode_connect_response(prefix)


@HYPOTHESIS
@given(st.binary(max_size=64), st.sampled_from([op for op, _ in REQUESTS]), st.integers(0, 2))
def test_garbage_is_a_marshalling_error_or_a_record(garbage, op, where):
    """Random bytes after a valid header, after a valid length, or alone: every decoder
    gives a record or MarshallingError, nothing else."""
    bodies = [
        struct.pack(">ii", 1, op) + garbage,
        struct.pack(">iqi", 1, 1, 0) + garbage,
        garbage,
    ]
    body = bodies[where]
    for decode in (
        jute.decode_request,
        lambda b: jute.decode_reply(b, lambda xid: op),
        lambda b: jute.decode_reply(b, lambda xid: OpCode.MULTI),
        jute.decode_connect_request,
        jute.decode_connect_response,
    ):
        try:
            decode(body)
        except MarshallingError:
            pass


# -- encoders refuse what the wire cannot carry ----------------------------------------------


@pytest.mark.parametrize(
    ("op", "request_", "message"),
    [
        (OpCode.SET_DATA, jute.SetDataRequest("/a", b"", 2**31), "version must be a 32-bit"),
        (OpCode.SET_DATA, jute.SetDataRequest("/a", "text", 0), "data must be bytes"),
        (OpCode.SYNC, jute.PathRequest("/\ud800"), "cannot be UTF-8"),
        (OpCode.DELETE, jute.PathRequest("/a"), "takes a DeleteRequest"),
        (OpCode.PING, jute.PathRequest("/a"), "ping has no body"),
        (
            OpCode.MULTI,
            jute.MultiRequest(((OpCode.EXISTS, jute.PathWatchRequest("/a", False)),)),
            "exists with PathWatchRequest in a multi",
        ),
    ],
)
def test_encoders_raise_bad_arguments(op, request_, message):
    with pytest.raises(BadArgumentsError, match=message):
        jute.encode_request(1, op, request_)


def test_unknown_ops_cannot_be_encoded():
    with pytest.raises(UnimplementedError):
        jute.encode_request(1, 999, None)


# -- helpers ---------------------------------------------------------------------------------


def test_create_modes():
    assert [jute.create_mode(flags) for flags in range(4)] == [
        (False, False),
        (True, False),
        (False, True),
        (True, True),
    ]
    assert [
        jute.flags_of(e, s) for e, s in [(False, False), (True, False), (False, True), (True, True)]
    ] == [0, 1, 2, 3]
    for flags, name in [(4, "CONTAINER"), (5, "PERSISTENT_WITH_TTL"), (6, "SEQUENTIAL_WITH_TTL")]:
        with pytest.raises(UnimplementedError, match=name):
            jute.create_mode(flags)
    with pytest.raises(BadArgumentsError, match="7"):
        jute.create_mode(7)


def test_four_letter_words():
    assert len(jute.FOUR_LETTER_WORDS) == 18
    assert all(len(word) == 4 for word in jute.FOUR_LETTER_WORDS)
    for word in (b"ruok", b"srvr", b"stat", b"mntr", b"isro", b"hash", b"\xff\xf4\xff\xfd"):
        assert jute.is_four_letter_word(word)
    assert not jute.is_four_letter_word(b"\x00\x00\x00\x2c")  # a ConnectRequest's length
    assert not jute.is_four_letter_word(b"RUOK")
