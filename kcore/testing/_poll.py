"""Waiting for a condition over many components' in-process state, where no single event
says it holds (a cluster converged, every partition led): the runtime's one poller."""

from actors.testing import poll_until

__all__ = ["poll_until"]
