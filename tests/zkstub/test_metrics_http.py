"""`zkstub serve --http HOST:PORT`: the server's `mntr` numbers at /metrics under ZooKeeper
3.8's Prometheus names, scraped from a real server process after a few operations."""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

import transport
import zkstub
from zkstub._four_letter_words import ServerFacts, mntr_pairs, prometheus_gauges
from zkstub._metrics_http import CONTENT_TYPE, parse_address, respond

REPO_ROOT = Path(zkstub.__file__).resolve().parent.parent


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == CONTENT_TYPE
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def _mntr(address: tuple[str, int]) -> dict[str, str]:
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(b"mntr\n")
        chunks = []
        while chunk := await stream.receive_some(65536):
            chunks.append(chunk)
    return dict(line.split("\t") for line in b"".join(chunks).decode().splitlines())


async def _line(stream) -> str:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        assert chunk, f"the server exited after printing {line!r}"
        line += chunk
    return line.decode().rstrip("\n")


async def test_a_zkstub_process_serves_mntr_numbers_to_prometheus():
    command = [sys.executable, "-m", "zkstub", "serve", "--port", "0", "--http", "127.0.0.1:0",
               "--4lw-commands-whitelist", "mntr", "--log-format", "json",
               "--log-level", "WARN", "--log-level", "zkstub=INFO"]  # fmt: skip
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT
    )
    try:
        with trio.fail_after(60):
            serving = await _line(process.stdout)
            http = await _line(process.stdout)
        assert serving.startswith("zkstub serving on 127.0.0.1:"), serving
        assert http.startswith("zkstub http on 127.0.0.1:"), http
        host, port = serving.removeprefix("zkstub serving on ").split(":")
        address = (host, int(port))
        url = f"http://{http.removeprefix('zkstub http on ')}/metrics"

        network = transport.TcpNetwork()
        async with zkstub.connect(f"{host}:{port}", network=network) as zk:
            await zk.create("/brokers", b"")
            await zk.create("/brokers/1", b'{"host":"b1"}', ephemeral=True)
            await zk.create("/brokers/2", b'{"host":"b2"}', ephemeral=True)
            await zk.exists("/controller", watch=lambda event: None)
            mntr = await _mntr(address)
            samples = await trio.to_thread.run_sync(_scrape, url)

        assert samples["znode_count"] == 7  # /, /zookeeper and its two, /brokers and two
        assert samples["ephemerals_count"] == 2
        assert samples["watch_count"] == 1
        assert samples["global_sessions"] == 1
        assert samples["num_alive_connections"] == 1  # the client (mntr's has closed)
        assert samples["outstanding_requests"] == 0
        assert samples["packets_received"] >= 5  # connect, 3 creates, exists
        assert samples["packets_sent"] >= 5
        assert {"avg_latency", "max_latency", "min_latency"} <= samples.keys()
        # The numbers mntr answered a moment before (its own connection aside).
        for name in ("znode_count", "ephemerals_count", "watch_count", "global_sessions",
                     "approximate_data_size"):  # fmt: skip
            assert samples[name] == float(mntr[f"zk_{name}"]), name
    finally:
        process.kill()
        await process.wait()
    stderr = b""
    while chunk := await process.stderr.receive_some():
        stderr += chunk
    lines = [json.loads(line) for line in stderr.decode().splitlines()]
    established = [line for line in lines if line["message"].startswith("Established session")]
    assert len(established) == 1, lines
    assert established[0]["level"] == "INFO"
    assert established[0]["logger"].startswith("zkstub")
    assert established[0]["time"].endswith("Z")


def test_prometheus_gauges_are_mntr_numbers_without_the_zk_prefix():
    facts = ServerFacts(
        zxid=9, node_count=4, data_bytes=40, ephemerals={1: ["/e"]}, sessions={1: 6.0},
        watches={1: ["/a", "/b"]}, connections=[], received=3, sent=2, config={},
    )  # fmt: skip
    gauges = dict(prometheus_gauges(facts))
    numeric = {
        k.removeprefix("zk_"): v for k, v in mntr_pairs(facts) if k.removeprefix("zk_") in gauges
    }
    assert len(gauges) == len(mntr_pairs(facts)) - 2  # zk_version and zk_server_state are text
    assert gauges == {name: float(value) for name, value in numeric.items()}
    assert gauges["watch_count"] == 2 and gauges["ephemerals_count"] == 1


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"200 OK"),
        (b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", b"200 OK"),
        (b"GET / HTTP/1.1\r\n\r\n", b"404 Not Found"),
        (b"POST /metrics HTTP/1.1\r\n\r\n", b"405 Method Not Allowed"),
        (b"hello\r\n\r\n", b"400 Bad Request"),
    ],
)
def test_only_a_get_of_metrics_is_answered_with_them(request_head, status):
    response = respond(request_head, lambda: b"znode_count 4.0\n")
    assert response.startswith(b"HTTP/1.1 " + status + b"\r\n")
    assert response.endswith(b"znode_count 4.0\n") == (status == b"200 OK")
    assert respond(b"HEAD /metrics HTTP/1.1\r\n\r\n", lambda: b"x").endswith(b"\r\n\r\n")


@pytest.mark.parametrize(
    ("text", "parsed"), [("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:7000", ("::1", 7000))]
)
def test_the_http_address_is_host_and_port(text, parsed):
    assert parse_address(text) == parsed


@pytest.mark.parametrize("text", ["7000", ":7000", "host:", "host:port", "h:70000"])
def test_a_bad_http_address_is_refused_naming_it(text):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address(text)
