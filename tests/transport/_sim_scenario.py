"""A busy seeded SimNetwork scenario whose full history must depend on the seed alone.

Three client nodes pipeline requests to an RpcServer over a network with latency, random
extra delays and drops, while one of them is partitioned away and healed. The history is
the network's trace (connects, deliveries, drops) plus what each request returned, when.

Used by test_determinism.py in-process (loaded with runpy) and as a script in a separate
process: `python tests/transport/_sim_scenario.py SEED` prints the history as JSON.
"""

from __future__ import annotations

import json
import random
import sys

import trio
import trio.testing

import transport
from actors.testing import pinned_scheduler


async def scenario(seed: int) -> list:
    network = transport.SimNetwork(
        seed,
        latency=(0.001, 0.010),
        delay_rate=0.05,
        extra_delay=(0.01, 0.05),
        drop_rate=0.003,
        trace=True,
    )
    think = random.Random(seed * 1000 + 1)  # the handlers' work times
    results: list = []

    async def work(request: transport.Request) -> object:
        await trio.sleep(think.uniform(0.0, 0.02))
        return [request.body, request.connection.peer_name]

    server = transport.RpcServer({1: work}, name="server")

    async def one_request(client: transport.RpcClient, name: str, i: int) -> None:
        await trio.sleep(0.01 * i)
        try:
            response = await client.request(1, i)
            outcome = response.body
        except transport.TransportError as exc:
            outcome = type(exc).__name__
        results.append((round(trio.current_time(), 9), name, i, outcome))

    async def client_node(name: str, index: int) -> None:
        async with transport.open_rpc_client(
            network.node(name),
            ("server", 9092),
            client_id=name,
            rng=random.Random(seed * 1000 + 10 + index),
            request_timeout=0.3,
            close_on_timeout=True,
        ) as client:
            async with trio.open_nursery() as requests:
                for i in range(100):
                    requests.start_soon(one_request, client, name, i)

    async def faults() -> None:
        await trio.sleep(0.1)
        network.partition(["c1"], ["server"])
        await trio.sleep(0.1)
        network.block("server", "c2")
        await trio.sleep(0.5)
        network.heal()

    async with trio.open_nursery() as nursery:
        await nursery.start(
            network.node("server").serve, ("server", 9092), server.handle_connection
        )
        async with trio.open_nursery() as clients:
            clients.start_soon(faults)
            for index, name in enumerate(["c1", "c2", "c3"]):
                clients.start_soon(client_node, name, index)
        nursery.cancel_scope.cancel()
    # Through JSON, so a history compares equal to one read back from another process.
    return json.loads(json.dumps([*network.trace, *results]))


def run_scenario(seed: int) -> list:
    with pinned_scheduler(seed):
        return trio.run(scenario, seed, clock=trio.testing.MockClock(autojump_threshold=0))


if __name__ == "__main__":
    json.dump(run_scenario(int(sys.argv[1])), sys.stdout)
