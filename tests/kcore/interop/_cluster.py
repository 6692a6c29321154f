"""A kcore cluster started as a user would start one: a `zkstub serve` process and three
`kcore broker --config server.properties` processes on 127.0.0.1."""

from __future__ import annotations

import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

# A crashed broker's partitions move once its ZooKeeper session expires: short, so a leader
# crash in a test takes seconds (the session timeout is a floor that a test waits out).
SESSION_TIMEOUT_MS = 6000
START_TIMEOUT_S = 60.0


def _read_line(process: subprocess.Popen, what: str) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line:
        raise RuntimeError(f"{what} exited before saying where it listens: {process.wait()}")
    return line.strip()


@attrs.define
class BrokerProcess:
    broker_id: int
    config: Path
    process: subprocess.Popen | None = None
    address: str = ""

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kcore.cli", "broker", "--config", str(self.config)],
            stdout=subprocess.PIPE,
        )
        line = _read_line(self.process, f"broker {self.broker_id}")
        self.address = line.split(" listening on ")[1]

    def kill(self) -> None:
        """SIGKILL: no controlled shutdown, the session left to expire (a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


@attrs.define
class KafkaCluster:
    brokers: dict[int, BrokerProcess]
    zookeeper: subprocess.Popen
    # How the helpers here reach brokers whose listeners are SSL (None: plain TCP).
    ssl_context: ssl.SSLContext | None = None
    # The (username, password) the helpers here authenticate with (SASL/PLAIN) on SASL
    # listeners (None: they do not).
    sasl_plain: tuple[str, str] | None = None
    zookeeper_address: str = ""

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers.values() if b.address)

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.process is not None and broker.process.poll() is None:
                broker.process.send_signal(signal.SIGTERM)
        for broker in self.brokers.values():
            broker.stop()
        self.zookeeper.terminate()
        self.zookeeper.wait(timeout=30)


def start_cluster(
    root: Path,
    broker_count: int = 3,
    *,
    listener: str = "PLAINTEXT",
    extra_config: str = "",
    ssl_context: ssl.SSLContext | None = None,
    sasl_plain: tuple[str, str] | None = None,
) -> KafkaCluster:
    """`listener` names the brokers' one listener (an SSL one needs its `ssl.*` settings in
    `extra_config`, server.properties lines, and `ssl_context` for the helpers here; a SASL
    one its `sasl.*` settings, and a PLAIN user for the helpers, `sasl_plain`)."""
    zookeeper = subprocess.Popen(
        [sys.executable, "-m", "zkstub", "serve", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
    )
    zk_address = _read_line(zookeeper, "zkstub").rsplit(" ", 1)[1]
    brokers = {}
    for broker_id in range(1, broker_count + 1):
        config = root / f"server-{broker_id}.properties"
        config.write_text(
            f"broker.id={broker_id}\n"
            f"listeners={listener}://127.0.0.1:0\n"
            f"log.dirs={root / f'broker-{broker_id}'}\n"
            f"zookeeper.connect={zk_address}\n"
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
            "controlled.shutdown.retry.backoff.ms=200\n"
            # As Kafka's own test and development set-ups: the first rebalance of a new
            # group is not held back three seconds for more members.
            "group.initial.rebalance.delay.ms=0\n" + extra_config
        )
        brokers[broker_id] = BrokerProcess(broker_id, config)
    cluster = KafkaCluster(brokers, zookeeper, ssl_context, sasl_plain, zk_address)
    try:
        for broker in brokers.values():
            broker.start()
        for broker in brokers.values():
            wait_for(
                lambda broker=broker: _knows_the_cluster(
                    broker.address, set(brokers), ssl_context, sasl_plain
                ),
                f"broker {broker.broker_id}'s metadata to name every broker and a controller",
            )
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _knows_the_cluster(
    address: str,
    broker_ids: set[int],
    ssl_context: ssl.SSLContext | None = None,
    sasl_plain: tuple[str, str] | None = None,
) -> bool:
    """Whether a Metadata request to `address` (Kafka's protocol) names every broker and a
    controller: a broker listens before the controller has told it who the others are, and
    a client's first metadata may come from any broker."""
    from kcore.protocol import kafka as codec

    with _connect(address, ssl_context, sasl_plain) as sock:
        sock.sendall(codec.encode_request(3, 1, 1, "interop-setup", {"topics": []}))
        (size,) = struct.unpack(">i", _receive(sock, 4))
        _, metadata = codec.decode_response(3, 1, _receive(sock, size))
    known = {b["node_id"] for b in metadata["brokers"]}
    return known == broker_ids and metadata["controller_id"] in broker_ids


def _connect(
    address: str, ssl_context: ssl.SSLContext | None, sasl_plain: tuple[str, str] | None = None
) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    if ssl_context is not None:
        sock = ssl_context.wrap_socket(sock, server_hostname=host)
    if sasl_plain is not None:
        _authenticate_plain(sock, *sasl_plain)
    return sock


def _authenticate_plain(sock: socket.socket, username: str, password: str) -> None:
    """SaslHandshake v1 and SaslAuthenticate v0 with SASL/PLAIN, as librdkafka sends them."""
    from kcore.protocol import kafka as codec

    token = b"\0" + username.encode() + b"\0" + password.encode()
    for api_key, body in ((17, {"mechanism": "PLAIN"}), (36, {"auth_bytes": token})):
        sock.sendall(codec.encode_request(api_key, int(api_key == 17), 1, "interop-setup", body))
        (size,) = struct.unpack(">i", _receive(sock, 4))
        _, answer = codec.decode_response(api_key, int(api_key == 17), _receive(sock, size))
        if answer["error_code"]:
            raise ConnectionError(f"SASL/PLAIN as {username} refused: {answer}")


def _metadata(
    address: str,
    topics: list[str],
    ssl_context: ssl.SSLContext | None = None,
    sasl_plain: tuple[str, str] | None = None,
) -> dict:
    """A Metadata v1 answer of the broker at `address` (Kafka's protocol) for `topics`."""
    from kcore.protocol import kafka as codec

    asked = {"topics": [{"name": t} for t in topics]}
    with _connect(address, ssl_context, sasl_plain) as sock:
        sock.sendall(codec.encode_request(3, 1, 1, "interop-setup", asked))
        (size,) = struct.unpack(">i", _receive(sock, 4))
        _, metadata = codec.decode_response(3, 1, _receive(sock, size))
    return metadata


def wait_until_every_broker_knows(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    """A new topic reaches each broker's metadata in turn; a client asking a broker that has
    not heard of it yet sees no partitions (librdkafka and kafka-python then assign nothing
    in a group until their next metadata refresh, minutes later by default)."""

    def known_everywhere() -> bool:
        for broker in cluster.brokers.values():
            if broker.process is None or broker.process.poll() is not None:
                continue
            (described,) = _metadata(
                broker.address, [topic], cluster.ssl_context, cluster.sasl_plain
            )["topics"]
            leaders = [p["leader_id"] for p in described["partitions"]]
            if described["error_code"] or len(leaders) != partitions or min(leaders) < 0:
                return False
        return True

    wait_for(known_everywhere, f"every broker's metadata to show {topic}")


def _receive(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def wait_for(condition, what: str, timeout: float = 60.0, interval: float = 0.1):
    """Polls `condition()` until it returns something truthy (real time: these clients run
    on real sockets and their own threads), failing with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
