"""One broker as an OS process (`kcore broker --config server.properties`): real TCP, logs in
`log.dirs`, SIGTERM or SIGINT for a controlled shutdown, SIGKILL survivable (the next start
recovers the logs and waits for the old registration to expire)."""

from __future__ import annotations

import gc
import logging
import random
import signal
from collections.abc import Mapping
from typing import Any

import trio

import transport
from kcore.config import KafkaConfig, parse_properties
from kcore.server.broker import BrokerServer

logger = logging.getLogger("kcore.broker_process")

YOUNG_GENERATION_OBJECTS = 10_000


def load_config(path: str | None, overrides: Mapping[str, Any]) -> KafkaConfig:
    """server.properties (if any) with `--override key=value` settings on top."""
    settings: dict[str, Any] = {}
    if path is not None:
        with open(path, encoding="utf-8") as file:
            settings = dict(parse_properties(file.read()))
    settings.update(overrides)
    return KafkaConfig.from_dict(settings)


async def run_broker(config: KafkaConfig, *, seed: int | None = None) -> None:
    """Serves until SIGTERM / SIGINT, then shuts down cleanly: a controlled shutdown of at
    most `_CONTROLLED_SHUTDOWN_BACKOFFS` retry backoffs (a second signal ends it at once),
    then the clean stop, which closes the ZooKeeper session last. The broker is never
    cancelled: a process stopped by a signal never leaves its session to expire."""
    rng = random.Random(seed)
    broker = BrokerServer(config, transport.TcpNetwork(), rng)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            # What start-up built (modules, configs, loaded logs) lives as long as the
            # process: out of the collector's sight, a full collection no longer walks it
            # (40-60 ms pauses under load before, measured by the e2e-latency benchmark).
            gc.collect()
            gc.freeze()
            # A young generation of 10 000 objects rather than 700: a LeaderAndIsr for
            # 10 000 partitions allocates hundreds of thousands, and at 700 the collector
            # ran about a thousand times (a third of a failover's CPU, measured by the
            # election-scaling benchmark); each young collection stays a few ms.
            gc.set_threshold(YOUNG_GENERATION_OBJECTS, *gc.get_threshold()[1:])
            endpoint = broker.endpoints[0]
            # One line on stdout for whoever started us (scripts, the demo's --processes).
            print(
                f"kcore broker {broker.broker_id} listening on {endpoint.host}:{endpoint.port}",
                flush=True,
            )
            if broker.http_address is not None:  # http.listener: where /metrics is
                host, port = broker.http_address
                print(f"kcore broker {broker.broker_id} http on {host}:{port}", flush=True)
            nursery.start_soon(_shutdown_on_signals, broker, signals, config)


# The controlled shutdown's bound, in `controlled.shutdown.retry.backoff.ms`.
_CONTROLLED_SHUTDOWN_BACKOFFS = 4


async def _shutdown_on_signals(broker: BrokerServer, signals: Any, config: KafkaConfig) -> None:
    """Waits for the broker's run to end (a failure) or a signal (a shutdown)."""
    async for signum in signals:
        logger.info("Broker %d got %s: controlled shutdown",
                    broker.broker_id, signal.Signals(signum).name)  # fmt: skip
        break
    async with trio.open_nursery() as shutting_down:
        shutting_down.start_soon(_skip_on_next_signal, broker, signals)
        await broker.shutdown(
            controlled_shutdown_timeout=_CONTROLLED_SHUTDOWN_BACKOFFS
            * config.controlled_shutdown_retry_backoff_ms
            / 1000
        )
        shutting_down.cancel_scope.cancel()


async def _skip_on_next_signal(broker: BrokerServer, signals: Any) -> None:
    async for signum in signals:
        logger.info("Broker %d got %s again: skipping the rest of the controlled shutdown",
                    broker.broker_id, signal.Signals(signum).name)  # fmt: skip
        broker.skip_controlled_shutdown()
