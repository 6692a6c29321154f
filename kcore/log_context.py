"""Which broker a log line comes from, in a process running one broker or a whole embedded
cluster: every record gets `broker_id` (None outside a broker), `controller_epoch` (the
active controller's epoch, for the controller's own lines) and `log_prefix`, Kafka's
prefixes: `[Broker id=1] ` for what a broker's tasks log, `[Controller id=1 epoch=3] ` for
what its controller's tasks log while it is the active controller (`[Controller id=1] `
while it is not).

How: the broker sets `_source` (a ContextVar) at the root of its task tree (`broker_logging`)
and again around its controller's start (`controller_logging`); Trio tasks inherit the
context of the task that spawns them, so every task of that broker sees it. A log record
factory (`install_record_factory`, idempotent, chained to the factory in place) copies it
onto each record when the record is made. Library code still only calls
`logging.getLogger("kcore....")`: the factory configures no handler and prints nothing.

The prefix is the formatters' (`PrefixFormatter`, `%(log_prefix)s`), never the message's:
`record.getMessage()` stays what the code logged, which is what the simulator's patterns of
expected log lines match.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator

import attrs

# The format of kcore's command-line tools (`kcore broker`, `python -m kcore.cluster`).
CLI_FORMAT = "%(asctime)s %(levelname)s %(name)s %(log_prefix)s%(message)s"


@attrs.frozen
class LogSource:
    """Whose tasks are logging: a broker's, or (`controller_epoch` set) its controller's."""

    broker_id: int
    # The controller's epoch now, None while it is not the active controller; None itself
    # for the broker's own tasks.
    controller_epoch: Callable[[], int | None] | None = None

    def epoch(self) -> int | None:
        return None if self.controller_epoch is None else self.controller_epoch()

    def prefix(self) -> str:
        if self.controller_epoch is None:
            return f"[Broker id={self.broker_id}] "
        epoch = self.controller_epoch()
        if epoch is None:
            return f"[Controller id={self.broker_id}] "
        return f"[Controller id={self.broker_id} epoch={epoch}] "


_source: contextvars.ContextVar[LogSource | None] = contextvars.ContextVar(
    "kcore_log_source", default=None
)


def current_source() -> LogSource | None:
    return _source.get()


@contextlib.contextmanager
def logging_as(source: LogSource | None) -> Iterator[None]:
    """What this task logs, and every task it spawns inside the block, is `source`'s."""
    install_record_factory()
    token = _source.set(source)
    try:
        yield
    finally:
        _source.reset(token)


def broker_logging(broker_id: int) -> contextlib.AbstractContextManager[None]:
    return logging_as(LogSource(broker_id))


def controller_logging(
    broker_id: int, epoch: Callable[[], int | None]
) -> contextlib.AbstractContextManager[None]:
    """`epoch`: the controller's epoch while it is the active controller, else None."""
    return logging_as(LogSource(broker_id, epoch))


def annotate(record: logging.LogRecord, source: LogSource | None) -> None:
    """Sets `broker_id`, `controller_epoch` and `log_prefix` on `record`."""
    if source is None:
        record.broker_id = None
        record.controller_epoch = None
        record.log_prefix = ""
        return
    record.broker_id = source.broker_id
    try:
        record.controller_epoch = source.epoch()
        record.log_prefix = source.prefix()
    except Exception:  # a half-built controller must not cost the log line
        record.controller_epoch = None
        record.log_prefix = f"[Broker id={source.broker_id}] "


def install_record_factory() -> None:
    """Chains the factory that annotates records onto the one in place, once."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "kcore_log_source", False):
        return

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        annotate(record, _source.get())
        return record

    factory.kcore_log_source = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class PrefixFormatter(logging.Formatter):
    """A Formatter whose format may use `%(log_prefix)s` (and `%(broker_id)s`): records
    made before the factory was installed get them from the current context."""

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "log_prefix"):
            annotate(record, _source.get())
        return super().format(record)


def basic_config(level: int | str, fmt: str = CLI_FORMAT) -> None:
    """The command-line tools' logging: `logging.basicConfig` with the broker prefixes."""
    install_record_factory()
    handler = logging.StreamHandler()
    handler.setFormatter(PrefixFormatter(fmt))
    logging.basicConfig(level=level, handlers=[handler])
