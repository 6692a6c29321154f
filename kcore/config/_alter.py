"""What IncrementalAlterConfigs does to a topic's overrides (Kafka's
ConfigAdminManager.prepareIncrementalConfigs): SET, DELETE, and APPEND / SUBTRACT for list
configs, applied in order to the overrides ZooKeeper holds. Pure: the caller reads and
writes the overrides."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from kcore import errors
from kcore.config._topic import TOPIC_DEFINITIONS, InvalidTopicConfigError


class AlterConfigOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_incremental_alterations(
    current: Mapping[str, str], alterations: Iterable[tuple[str, int, str | None]]
) -> dict[str, str]:
    """The topic overrides after `(name, op, value)` alterations; InvalidRequestError for
    a key altered twice or an unknown op, InvalidTopicConfigError (INVALID_CONFIG) for an
    unknown key or APPEND / SUBTRACT on a config that is not a list."""
    overrides = dict(current)
    seen: set[str] = set()
    for name, op, value in alterations:
        if name in seen:
            raise errors.InvalidRequestError(f"Error due to duplicate config keys: {name}")
        seen.add(name)
        definition = TOPIC_DEFINITIONS.get(name)
        if definition is None:
            raise InvalidTopicConfigError(f"Unknown topic config name: {name}")
        try:
            operation = AlterConfigOp(op)
        except ValueError:
            raise errors.InvalidRequestError(f"Unknown config operation {op} for {name}") from None
        if operation is AlterConfigOp.SET:
            if value is None:
                raise InvalidTopicConfigError(f"Null value not supported for topic config {name}")
            overrides[name] = value
        elif operation is AlterConfigOp.DELETE:
            overrides.pop(name, None)
        else:
            if definition[0].kind != "list":
                raise InvalidTopicConfigError(
                    f"Config value append is not allowed for config key: {name}"
                    if operation is AlterConfigOp.APPEND
                    else f"Config value subtract is not allowed for config key: {name}"
                )
            items = [i for i in overrides.get(name, _default_items(name)).split(",") if i]
            given = [i.strip() for i in (value or "").split(",") if i.strip()]
            if operation is AlterConfigOp.APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            overrides[name] = ",".join(items)
    return overrides


def _default_items(name: str) -> str:
    default = TOPIC_DEFINITIONS[name][0].default
    return ",".join(default) if isinstance(default, list | tuple) else str(default or "")
