"""The controller's channel manager under supervision: a sender that dies on an unexpected
error is restarted and sends what was queued behind the request it died on."""

import random

import trio

import transport
from actors import MetricsRegistry, open_supervisor
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


async def test_a_manager_restarted_after_its_sender_kept_dying_restarts_the_sender(
    autojump_clock,
):
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
        # As the controller runs it: a sender failing past the restart intensity ends the
        # manager's run, and the controller's supervisor starts it again.
        async with open_supervisor(name="controller") as supervisor:
            await supervisor.start(channel.run)
            channel.add_broker(Broker(2, (EndPoint("broker-2", 9092),), None, 7))
            for _ in range(5):
                channel.send(2, ApiKey.UPDATE_METADATA, _Unencodable())
            channel.send(2, ApiKey.UPDATE_METADATA, 1)
            await poll_until(lambda: received == [1], timeout=10)
            assert supervisor.restarts == {"ControllerChannelManager.run": 1}
            supervisor.cancel()
        nursery.cancel_scope.cancel()
