"""Deterministic runs for tests and simulations: one seed, one history.

`pinned_scheduler(seed)` turns on Trio's deterministic scheduling (DESIGN.md section 2):
each batch of runnable tasks is sorted by task creation order and shuffled with a generator
seeded here. Use it around `trio.run(...)` with a `MockClock(autojump_threshold=0)`; other
orders (deadline ties, hash-ordered sets) are up to the code under test to keep seeded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import trio


@contextlib.contextmanager
def pinned_scheduler(seed: int) -> Iterator[None]:
    run_module = trio._core._run
    if not hasattr(run_module, "_ALLOW_DETERMINISTIC_SCHEDULING") or not hasattr(run_module, "_r"):
        raise RuntimeError(f"trio {trio.__version__} has no deterministic scheduling hook")
    saved = run_module._ALLOW_DETERMINISTIC_SCHEDULING, run_module._r.getstate()
    run_module._ALLOW_DETERMINISTIC_SCHEDULING = True
    run_module._r.seed(seed)
    try:
        yield
    finally:
        run_module._ALLOW_DETERMINISTIC_SCHEDULING = saved[0]
        run_module._r.setstate(saved[1])
