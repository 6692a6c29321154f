"""transport-raw: the transport alone on real TCP loopback, the baseline every later
throughput figure is divided by.

- stream: one connection streaming frames of 100 B, 1 KiB and 64 KiB, sent with
  `send_many` (one msgpack pack per message, frames joined per send) N at a time; one row
  per interval of the receiver (frames and bytes received in it).
- round trip: `RpcServer` echo + one `RpcConnection`, 1 and 64 requests in flight; one row
  per request (its latency).

Both ends run in this process (one Trio thread), so the figures include the receiver's
decoding as well as the sender's encoding.
"""

from __future__ import annotations

import math

import attrs
import trio

import transport
from bench._clock import WallStamp
from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload

__all__ = ["RawParams", "params_for", "run_transport_raw"]

NAME = "transport-raw"
END_OF_STREAM = None  # the sender's last message
ECHO = 1  # the echo server's api key
MIN_MEASURED_FRAMES = 128
MIN_SAMPLES = 16  # round trips measured at the least


@attrs.frozen
class RawParams:
    duration: float = 2.0  # measured seconds per case
    warmup: float = 0.2  # seconds run before measuring
    interval: float = 0.1  # seconds per stream row
    # (frame size in bytes including its 4-byte header, frames per send)
    stream_cases: tuple[tuple[int, int], ...] = (
        (100, 1),
        (100, 64),
        (1024, 1),
        (1024, 64),
        (65536, 1),
        (65536, 16),
    )
    in_flight: tuple[int, ...] = (1, 64)
    body_bytes: int = 100  # request and response body size for round trips


def params_for(options: WorkloadOptions) -> RawParams:
    if options.quick:
        return RawParams(duration=0.1, warmup=0.02, interval=0.02)
    return RawParams()


@workload(
    NAME,
    "frames/s and MB/s streaming 100 B / 1 KiB / 64 KiB frames, and round trips/s at 1 "
    "and 64 in flight, over TCP loopback: the baseline for every other workload",
)
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    return await run_transport_raw(rows, params_for(options))


async def run_transport_raw(
    rows: RowWriter, params: RawParams, network: transport.Network | None = None
) -> Summary:
    network = transport.TcpNetwork() if network is None else network
    stamp = WallStamp.now(rows.clock)
    summary = []
    for frame_bytes, per_send in params.stream_cases:
        summary.append(await _stream(rows, params, network, stamp, frame_bytes, per_send))
    for in_flight in params.in_flight:
        summary.append(await _round_trips(rows, params, network, stamp, in_flight))
    return summary


def _size_name(nbytes: int) -> str:
    return f"{nbytes // 1024}KiB" if nbytes % 1024 == 0 else f"{nbytes}B"


def payload_for_frame(frame_bytes: int) -> bytes:
    """A bytes payload whose frame (header + msgpack bin) is exactly `frame_bytes` long."""
    size = max(0, frame_bytes - 4 - 5)
    while size > 0 and len(transport.encode_frame(b"\0" * size)) > frame_bytes:
        size -= 1
    while len(transport.encode_frame(b"\0" * size)) < frame_bytes:
        size += 1
    payload = b"\0" * size
    if len(transport.encode_frame(payload)) != frame_bytes:
        raise ValueError(f"no payload makes a frame of exactly {frame_bytes} bytes")
    return payload


async def _serve(nursery: trio.Nursery, network: transport.Network, handler) -> transport.Address:
    listener = await nursery.start(network.serve, ("127.0.0.1", 0), handler)
    return listener.address


async def _stream(
    rows: RowWriter,
    params: RawParams,
    network: transport.Network,
    stamp: WallStamp,
    frame_bytes: int,
    per_send: int,
) -> dict[str, object]:
    case = f"stream-{_size_name(frame_bytes)}-x{per_send}"
    case_params = {
        "frame_bytes": frame_bytes,
        "frames_per_send": per_send,
        "network": "tcp-loopback",
    }
    messages = [payload_for_frame(frame_bytes)] * per_send
    intervals: list[tuple[float, float, int]] = []
    received_all = trio.Event()
    # Set once connected: the warm-up and the measured time count from there, so a slow
    # set-up (a loaded machine) cannot eat them.
    measure_from = math.inf

    async def receive(conn: transport.MessageConnection) -> None:
        started = None
        frames = 0
        while True:
            if await conn.receive() is END_OF_STREAM:
                break
            frames += 1
            if frames & 31:
                continue
            now = trio.current_time()  # every 32 frames: a clock read per frame would show
            if started is None:
                if now >= measure_from:
                    started, frames = now, 0
            elif now - started >= params.interval:
                intervals.append((started, now, frames))
                started, frames = now, 0
        if started is not None and frames:
            intervals.append((started, trio.current_time(), frames))
        received_all.set()

    async with trio.open_nursery() as nursery:
        address = await _serve(nursery, network, receive)
        conn = await network.connect(address)
        measure_from = trio.current_time() + params.warmup
        stop_at = measure_from + params.duration
        # At least MIN_MEASURED_FRAMES go out after the warm-up, so even a tiny run
        # measures something (the receiver looks at the clock every 32 frames).
        measured_frames = 0
        while trio.current_time() < stop_at or measured_frames < MIN_MEASURED_FRAMES:
            await conn.send_many(messages)
            if trio.current_time() >= measure_from:
                measured_frames += per_send
        await conn.send(END_OF_STREAM)
        await received_all.wait()
        await conn.aclose()
        nursery.cancel_scope.cancel()

    for start, end, frames in intervals:
        rows.write(
            case=case,
            op="stream_interval",
            params=case_params,
            start_time=stamp(start),
            latency_ns=round((end - start) * 1e9),
            nbytes=frames * frame_bytes,
            count=frames,
        )
    seconds = sum(end - start for start, end, _ in intervals)
    frames = sum(n for _, _, n in intervals)
    return {
        "case": case,
        "frames_per_s": round(frames / seconds) if seconds else 0,
        "MB_per_s": round(frames * frame_bytes / seconds / 1e6, 1) if seconds else 0.0,
    }


async def _echo(request: transport.Request) -> object:
    return request.body


async def _round_trips(
    rows: RowWriter,
    params: RawParams,
    network: transport.Network,
    stamp: WallStamp,
    in_flight: int,
) -> dict[str, object]:
    case = f"round-trip-x{in_flight}"
    case_params = {
        "in_flight": in_flight,
        "body_bytes": params.body_bytes,
        "network": "tcp-loopback",
    }
    body = b"\0" * params.body_bytes
    nbytes = len(transport.encode_frame([ECHO, 0, 0, "bench", body])) + len(
        transport.encode_frame([0, 0, body])
    )
    samples: list[tuple[float, float, int]] = []  # (start, end, error code)
    server = transport.RpcServer({ECHO: _echo}, name="bench-echo")
    async with trio.open_nursery() as nursery:
        address = await _serve(nursery, network, server.handle_connection)
        async with transport.open_rpc_connection(network, address, client_id="bench") as rpc:
            measure_from = trio.current_time() + params.warmup
            stop_at = measure_from + params.duration

            async def requester() -> None:
                # (at least a few measured round trips, however slow the machine)
                while (start := trio.current_time()) < stop_at or len(samples) < MIN_SAMPLES:
                    response = await rpc.request(ECHO, body)
                    if start >= measure_from:
                        samples.append((start, trio.current_time(), response.error_code))

            async with trio.open_nursery() as requesters:
                for _ in range(in_flight):
                    requesters.start_soon(requester)
        nursery.cancel_scope.cancel()

    for start, end, error_code in samples:
        rows.write(
            case=case,
            op="round_trip",
            params=case_params,
            start_time=stamp(start),
            latency_ns=round((end - start) * 1e9),
            nbytes=nbytes,
            outcome="ok" if error_code == 0 else f"error_code_{error_code}",
        )
    latencies = sorted(end - start for start, end, _ in samples)
    return {
        "case": case,
        "round_trips_per_s": round(len(samples) / params.duration),
        "p50_us": round(_quantile(latencies, 0.50) * 1e6, 1),
        "p99_us": round(_quantile(latencies, 0.99) * 1e6, 1),
    }


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
