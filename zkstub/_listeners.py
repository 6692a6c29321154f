"""The state listeners every zkstub client keeps (sync callbacks, told of each change)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from zkstub._types import ClientState

logger = logging.getLogger("zkstub.client")


class StateListeners:
    def __init__(self) -> None:
        self._listeners: list[Callable[[ClientState], None]] = []

    def add(self, listener: Callable[[ClientState], None]) -> None:
        self._listeners.append(listener)

    def remove(self, listener: Callable[[ClientState], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def notify(self, state: ClientState) -> None:
        """Calls every listener; one that raises is logged and the others still run."""
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                logger.exception("state listener %r failed on %s", listener, state)
