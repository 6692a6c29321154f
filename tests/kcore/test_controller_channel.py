"""The controller's channel manager under supervision: a sender that dies on an unexpected
error is restarted and sends what was queued behind the request it died on."""

import random

import trio

import transport
from actors import MetricsRegistry
from kcore.common import Broker, EndPoint
from kcore.controller.channel import ControllerChannelManager
from kcore.protocol.api_keys import ApiKey
from kcore.testing import poll_until


class _Unencodable(list):
    """A request whose encoding fails: a bug, not a network error."""

    def __iter__(self):
        raise RuntimeError("cannot encode this request")


async def test_a_sender_that_dies_is_restarted_and_sends_the_requests_behind(autojump_clock):
    network = transport.SimNetwork(0)
    received = []

    async def handle(request):
        received.append(request.body)

    server = transport.RpcServer({ApiKey.UPDATE_METADATA: handle}, name="broker-2")
    async with trio.open_nursery() as nursery:
        await nursery.start(
            network.node("broker-2").serve, ("broker-2", 9092), server.handle_connection
        )
        channel = ControllerChannelManager(
            1, network.node("broker-1"), random.Random(0), MetricsRegistry()
        )
        await nursery.start(channel.run)
        channel.add_broker(Broker(2, (EndPoint("broker-2", 9092),), None, 7))
        channel.send(2, ApiKey.UPDATE_METADATA, _Unencodable())
        channel.send(2, ApiKey.UPDATE_METADATA, 1)
        channel.send(2, ApiKey.UPDATE_METADATA, 2)
        await poll_until(lambda: received == [1, 2], timeout=10)
        nursery.cancel_scope.cancel()
