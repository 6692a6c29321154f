"""Capped exponential backoff with jitter (Kafka's `ExponentialBackoff`), sans-IO."""

from __future__ import annotations

import math
import random

import attrs

__all__ = ["ExponentialBackoff"]


@attrs.frozen
class ExponentialBackoff:
    """`delay(failures)`: `initial * multiplier**failures`, capped at `maximum`, then
    scaled by a factor drawn uniformly from `[1 - jitter, 1 + jitter]` with `rng`."""

    initial: float
    maximum: float
    rng: random.Random
    multiplier: float = 2.0
    jitter: float = 0.2

    def __attrs_post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                f"backoff needs 0 < initial <= maximum, got initial={self.initial}, "
                f"maximum={self.maximum}"
            )
        if self.multiplier <= 1 or not 0 <= self.jitter < 1:
            raise ValueError(f"bad backoff multiplier {self.multiplier} or jitter {self.jitter}")

    def delay(self, failures: int) -> float:
        term = self._unjittered(failures)
        if self.jitter:
            term *= self.rng.uniform(1 - self.jitter, 1 + self.jitter)
        return term

    def shortest_delay(self, failures: int) -> float:
        """The least `delay(failures)` can be, whatever the jitter draws (draws nothing)."""
        return self._unjittered(failures) * (1 - self.jitter)

    def _unjittered(self, failures: int) -> float:
        # Cap the exponent, not just the result, so a long outage cannot overflow.
        max_exponent = math.log(self.maximum / self.initial, self.multiplier)
        return min(self.initial * self.multiplier ** min(failures, max_exponent), self.maximum)
