"""Wall-clock stamps for result rows, read from Trio's clock: one wall-clock read per run,
then Trio time (monotonic) for every stamp."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
import trio

__all__ = ["WallStamp"]


@attrs.frozen
class WallStamp:
    wall_start: float
    trio_start: float

    @classmethod
    def now(cls, wall_clock: Callable[[], float] = time.time) -> WallStamp:
        return cls(wall_clock(), trio.current_time())

    def __call__(self, trio_time: float) -> float:
        return self.wall_start + (trio_time - self.trio_start)
