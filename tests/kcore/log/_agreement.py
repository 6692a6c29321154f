"""The file log and the memory log driven through the same seeded random operations: they
must look the same after every step, and the file log the same again once reopened."""

from __future__ import annotations

import pathlib
import random
from collections.abc import Callable
from typing import Any

from kcore.log import MemoryPartitionLog, PartitionLog


def check_file_and_memory_logs_agree(
    tmp_path: pathlib.Path,
    settings: dict[str, Any],
    seed: int,
    step: Callable[[random.Random, list, int], None],
    observe: Callable[[Any], Any],
    steps: int = 150,
) -> None:
    """`step(rng, logs, now_ms)` does one operation on both logs; `observe(log)` is what
    must agree."""
    rng = random.Random(seed)
    file_log = PartitionLog(tmp_path, **settings)
    memory_log = MemoryPartitionLog(**settings)
    now_ms = 0
    for _ in range(steps):
        now_ms += rng.randint(0, 20)
        step(rng, [file_log, memory_log], now_ms)
        assert observe(file_log) == observe(memory_log)
    expected = observe(file_log)
    file_log.close()
    reopened = PartitionLog(
        tmp_path,
        **settings,
        recovery_point=file_log.recovery_point,
        log_start_offset=file_log.log_start_offset,
    )
    assert observe(reopened) == expected
    reopened.close()
