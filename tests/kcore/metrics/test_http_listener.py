"""The broker's HTTP listener: the little of HTTP/1.1 it speaks (sans-IO), and the Trio
server over a real socket answering GET /metrics, HEAD, and what it does not serve."""

from http import HTTPStatus

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from actors import MetricsRegistry
from kcore.config import ConfigError, KafkaConfig
from kcore.metrics import (
    HttpError,
    HttpListener,
    HttpResponse,
    encode_response,
    head_end,
    metrics_route,
    parse_request_head,
)
from kcore.metrics._http import MAX_HEAD_BYTES


def test_a_get_request_head_is_read_once_whole():
    raw = b"GET /metrics?name[]=x HTTP/1.1\r\nHost: b1:9404\r\nAccept: text/plain\r\n\r\n"
    assert head_end(raw[:-2]) is None
    assert head_end(raw + b"ignored") == len(raw)
    request = parse_request_head(raw)
    assert (request.method, request.path, request.query) == ("GET", "/metrics", "name[]=x")
    assert request.header("HOST") == "b1:9404"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST /metrics HTTP/1.1\r\n\r\n", HTTPStatus.METHOD_NOT_ALLOWED),
        (b"GET /metrics\r\n\r\n", HTTPStatus.BAD_REQUEST),  # HTTP/0.9
        (b"GET metrics HTTP/1.1\r\n\r\n", HTTPStatus.BAD_REQUEST),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", HTTPStatus.BAD_REQUEST),
        (b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", HTTPStatus.BAD_REQUEST),
    ],
)
def test_what_is_not_served_gets_a_status(raw, status):
    with pytest.raises(HttpError) as caught:
        parse_request_head(raw)
    assert caught.value.status == status


def test_a_head_too_large_is_refused_before_it_ends():
    with pytest.raises(HttpError) as caught:
        head_end(b"GET / HTTP/1.1\r\nX: " + b"x" * MAX_HEAD_BYTES)
    assert caught.value.status == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE


def test_a_response_closes_its_connection():
    response = HttpResponse(HTTPStatus.OK, "text/plain", b"hello")
    assert encode_response(response) == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
        b"Connection: close\r\n\r\nhello"
    )
    assert encode_response(response, head_only=True).endswith(b"\r\n\r\n")


async def _http(address, raw: bytes) -> tuple[int, bytes]:
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(raw)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


async def test_the_listener_serves_metrics_over_tcp(nursery):
    registry = MetricsRegistry()
    registry.gauge("kafka.server:type=ReplicaManager,name=LeaderCount", lambda: 4)
    listener = HttpListener({"/metrics": metrics_route(registry)})
    address = await nursery.start(listener.serve, "127.0.0.1", 0)
    assert address[0] == "127.0.0.1" and address[1] > 0

    status, body = await _http(address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["kafka_server_replicamanager_leadercount"].samples[0].value == 4

    assert await _http(address, b"HEAD /metrics HTTP/1.1\r\n\r\n") == (200, b"")
    status, body = await _http(address, b"GET /nope HTTP/1.1\r\n\r\n")
    assert (status, body) == (404, b"no such path /nope (try /metrics)\n")
    assert (await _http(address, b"DELETE /metrics HTTP/1.1\r\n\r\n"))[0] == 405


async def test_a_failing_route_answers_500_and_the_listener_goes_on(nursery, caplog):
    def broken(request):
        raise RuntimeError("boom")

    listener = HttpListener({"/broken": broken, "/ok": lambda r: HttpResponse(200, "t", b"ok")})
    address = await nursery.start(listener.serve, "127.0.0.1", 0)
    assert (await _http(address, b"GET /broken HTTP/1.1\r\n\r\n"))[0] == 500
    assert "GET /broken failed" in caplog.text
    assert await _http(address, b"GET /ok HTTP/1.1\r\n\r\n") == (200, b"ok")


BROKER = {"broker.id": 1, "zookeeper.connect": "127.0.0.1:2181"}


def test_http_listener_is_off_unless_set_and_a_bad_url_is_a_clear_error():
    assert KafkaConfig.from_dict(BROKER).http_listener_address is None
    config = KafkaConfig.from_dict({**BROKER, "http.listener": "http://:9404"})
    assert config.http_listener_address == ("", 9404)  # every interface
    for url, why in [
        ("https://b1:9404", "only plain http"),
        ("http://b1", "no port"),
        ("b1:9404", "expected http://host:port"),
        ("http://b1:9404/metrics", "nothing after the port"),
        ("http://b1:70000", "out of range"),
    ]:
        with pytest.raises(ConfigError, match=f"for configuration http.listener: .*{why}"):
            KafkaConfig.from_dict({**BROKER, "http.listener": url})
