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

The command-line tools' logging (`configure_cli_logging`) takes zkstub's log4j-like flags
(`--log-level kcore.controller=DEBUG`, `--log-config FILE`, `--log-format json`:
`zkstub.log_config`); in JSON lines the prefix becomes fields of their own (`broker_id`,
and `controller_id` / `controller_epoch` for the controller's lines).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from zkstub import log_config

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
    """Sets `broker_id`, `controller_id` (the controller's lines), `controller_epoch` and
    `log_prefix` on `record`."""
    if source is None:
        record.broker_id = None
        record.controller_id = None
        record.controller_epoch = None
        record.log_prefix = ""
        return
    record.broker_id = source.broker_id
    record.controller_id = None if source.controller_epoch is None else source.broker_id
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


def record_context(record: logging.LogRecord) -> dict[str, int | None]:
    """The prefix as JSON fields: `broker_id` for a broker's lines, and `controller_id` and
    `controller_epoch` (null while it is not the active controller) for its controller's;
    nothing for lines from outside any broker."""
    if not hasattr(record, "log_prefix"):
        annotate(record, _source.get())
    broker_id = getattr(record, "broker_id", None)
    if broker_id is None:
        return {}
    context: dict[str, int | None] = {"broker_id": broker_id}
    controller_id = getattr(record, "controller_id", None)
    if controller_id is not None:
        context["controller_id"] = controller_id
        context["controller_epoch"] = getattr(record, "controller_epoch", None)
    return context


def cli_formatter(log_format: str | None, fmt: str = CLI_FORMAT) -> logging.Formatter:
    """`--log-format`'s formatter: text lines with Kafka's prefixes (the default), or JSON."""
    if log_format == "json":
        return log_config.JsonLineFormatter(record_context)
    return PrefixFormatter(fmt)


def configure_cli_logging(args: Any, default_level: str) -> None:
    """The logging `zkstub.log_config.add_arguments`' flags ask for, on stderr. Raises
    LogConfigError (a ValueError naming the file and line) for a log config file that
    cannot be used."""
    levels = log_config.levels_from_args(args, default_level)
    install_record_factory()
    log_config.configure(levels, cli_formatter(args.log_format))
