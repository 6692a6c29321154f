"""Where a log dir's I/O failure goes (Kafka's LogDirFailureChannel).

An OSError from a log (append, roll, flush, truncate, checkpoint, delete) means the disk
under that log dir can no longer be trusted. The operation answers KAFKA_STORAGE_ERROR to its
client, the failure is reported here, and whoever waits on the channel (the broker) goes
down cleanly: Kafka takes the dir offline; with one log dir per broker here, that is the
broker. The first failure wins; later ones are only logged.
"""

from __future__ import annotations

import logging
from types import TracebackType

import attrs
import trio

from kcore import errors

logger = logging.getLogger("kcore.server.log_dir_failure")


@attrs.define(eq=False)
class LogDirFailureChannel:
    _failure: tuple[str, BaseException] | None = attrs.field(default=None, init=False)
    _failed: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def failure(self) -> tuple[str, BaseException] | None:
        """(log dir, cause) of the first failure, None while every dir is fine."""
        return self._failure

    def fail(self, log_dir: str, error: BaseException) -> None:
        if self._failure is not None:
            logger.error("Log dir %s failed too: %r", log_dir, error)
            return
        logger.error("Log dir %s failed: %r; stopping the broker", log_dir, error)
        self._failure = (log_dir, error)
        self._failed.set()

    def is_offline(self, log_dir: str) -> bool:
        return self._failure is not None and self._failure[0] == log_dir

    async def wait(self) -> tuple[str, BaseException]:
        """Returns once a log dir failed: (log dir, cause)."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    def handling_io_errors(
        self, log_dir: str, action: str, subject: object = None
    ) -> _HandlingIoErrors:
        """Kafka's maybeHandleIOException around work on a log in `log_dir` ("`action`
        `subject`" says what, for the error): an OSError is reported and raised as
        KafkaStorageError; a dir that already failed is not touched again (its partitions
        are offline). A class, not a generator: it wraps every read and append."""
        return _HandlingIoErrors(self, log_dir, action, subject)


@attrs.frozen
class _HandlingIoErrors:
    channel: LogDirFailureChannel
    log_dir: str
    action: str
    subject: object

    def _what(self) -> str:
        return self.action if self.subject is None else f"{self.action} {self.subject}"

    def __enter__(self) -> None:
        if self.channel.is_offline(self.log_dir):
            raise errors.KafkaStorageError(
                f"log dir {self.log_dir} is offline: cannot {self._what()}"
            )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if isinstance(error, OSError):
            self.channel.fail(self.log_dir, error)
            raise errors.KafkaStorageError(
                f"{self._what()} failed in log dir {self.log_dir}: {error}"
            ) from error
        return False
