"""`python -m kcore.cluster`: the demo.

Until the embedded demo cluster exists (the demo issue), this runs a smoke check of the
packages that exist, under Trio, and says so.
"""

from __future__ import annotations

import logging
import sys

import attrs
import trio

import actors

logger = logging.getLogger("kcore.cluster")


@attrs.frozen
class _SmokeState:
    name: str
    rate_and_time_metric_name: str | None = None


@attrs.frozen
class _SmokeEvent:
    number: int
    state: _SmokeState = _SmokeState("Smoke", "SmokeRateAndTimeMs")


@attrs.define
class _Collector:
    seen: list[int] = attrs.field(factory=list)

    async def process(self, event: _SmokeEvent) -> None:
        self.seen.append(event.number)

    def preempt(self, event: _SmokeEvent) -> None:
        pass


async def _smoke() -> list[str]:
    """Runs each package's basic path and returns one line per check."""
    lines = []
    collector = _Collector()
    manager = actors.EventManager(collector, idle_state=_SmokeState("Idle", None))
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        last = None
        for number in range(100):
            last = manager.put(_SmokeEvent(number))
        await last.await_processing()
        await manager.aclose()
    if collector.seen != list(range(100)):
        raise RuntimeError(f"event manager processed {collector.seen[:10]}... out of order")
    lines.append("actors: event manager processed 100 events in order")
    return lines


def run_smoke_check() -> int:
    print("kcore: the demo cluster is not built yet; running a smoke check of the packages.")
    try:
        for line in trio.run(_smoke):
            print(f"  ok  {line}")
    except Exception as error:  # a smoke check reports, it does not crash
        print(f"  FAILED  {error!r}")
        return 1
    print("kcore: smoke check passed.")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return run_smoke_check()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
