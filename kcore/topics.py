"""Topic name rules as Kafka enforces them (org.apache.kafka.common.internals.Topic)."""

from __future__ import annotations

import re

from kcore.errors import InvalidTopicError

MAX_NAME_LENGTH = 249  # leaves room for ".deleted" style suffixes in a 255-byte file name
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Raises InvalidTopicError with Kafka's reason if `name` is not a legal topic name."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f'Topic name cannot be "." or "..", got {name!r}')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def has_collision_chars(name: str) -> bool:
    """'.' and '_' collide in metric names, so Kafka warns about topics using them."""
    return "_" in name or "." in name


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def has_collision(first: str, second: str) -> bool:
    """Whether two distinct names would clash in metric names ('.' vs '_')."""
    return unify_collision_chars(first) == unify_collision_chars(second)
