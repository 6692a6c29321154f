"""Errors raised by the partition log."""

from __future__ import annotations

from kcore import errors


class CorruptRecordError(errors.CorruptMessageError):
    """A record batch failed validation (size, magic or CRC32C); the message names where."""


class UnexpectedAppendOffsetError(ValueError):
    """A follower append whose first offset is below the log end offset (Kafka's
    UnexpectedAppendOffsetException)."""


class InconsistentBrokerIdError(Exception):
    """A log dir belongs to another broker id."""
