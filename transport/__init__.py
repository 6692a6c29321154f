"""transport: how every kcore component talks (DESIGN.md section 4).

Bytes <-> messages (length-prefixed msgpack frames, sans-IO), whole-message connections,
the RPC envelope with pipelined requests, and two networks behind one interface: real TCP
(`TcpNetwork`) and a seeded in-memory simulation with faults (`SimNetwork`).
"""

from transport._backoff import ExponentialBackoff
from transport._client import RpcConnection, open_rpc_connection
from transport._codec import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    encode_frame,
    encode_frames,
    pack,
    unpack,
)
from transport._connection import Address, MessageConnection
from transport._envelope import (
    INVALID_REQUEST,
    NONE,
    PUSH_CORRELATION_ID,
    UNKNOWN_SERVER_ERROR,
    Response,
    RpcError,
)
from transport._errors import (
    ConnectError,
    ConnectionClosedError,
    FrameDecodeError,
    FrameTooLargeError,
    RemoteProtocolError,
    RequestTimeoutError,
    TransportError,
    TruncatedFrameError,
)
from transport._network import ConnectionHandler, Listener, Network
from transport._reconnect import RpcClient, open_rpc_client
from transport._server import (
    FrameProtocol,
    Request,
    RequestTiming,
    RpcServer,
    ServerConnection,
)
from transport._sim import SimNetwork
from transport._tcp import TcpNetwork
from transport._tcp_cut import CuttableTcpNetwork

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "INVALID_REQUEST",
    "NONE",
    "PUSH_CORRELATION_ID",
    "UNKNOWN_SERVER_ERROR",
    "Address",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionHandler",
    "CuttableTcpNetwork",
    "ExponentialBackoff",
    "FrameDecodeError",
    "FrameDecoder",
    "FrameProtocol",
    "FrameTooLargeError",
    "Listener",
    "MessageConnection",
    "Network",
    "RemoteProtocolError",
    "Request",
    "RequestTimeoutError",
    "RequestTiming",
    "Response",
    "RpcClient",
    "RpcConnection",
    "RpcError",
    "RpcServer",
    "ServerConnection",
    "SimNetwork",
    "TcpNetwork",
    "TransportError",
    "TruncatedFrameError",
    "encode_frame",
    "encode_frames",
    "open_rpc_client",
    "open_rpc_connection",
    "pack",
    "unpack",
]
