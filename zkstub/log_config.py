"""The command-line logging flags of `zkstub serve` and of `kcore` (which builds on this
module: a layer may use the one below it), log4j-like:

    --log-level LEVEL                  the root logger's level (repeatable, the last one wins)
    --log-level kcore.controller=DEBUG one logger's level (and its children's)
    --log-config FILE                  the same per line, a properties file (below)
    --log-format text|json             json: one JSON object per line

Levels are log4j's names or Python's, any case: TRACE (Python's DEBUG: nothing logs below
it), DEBUG, INFO, WARN or WARNING, ERROR, FATAL or CRITICAL, OFF (nothing), ALL.

The file takes Kafka's log4j.properties lines for loggers, and the short form of the flags:

    # comments and blank lines are skipped
    log4j.rootLogger=INFO, stdout        the root's level (appender names are ignored)
    log4j.logger.kcore.controller=TRACE  a logger's level
    kcore.state.change=DEBUG             the same, short
    root=WARN                            the root's level, short

Any other line (an appender's settings, a misspelt level) is refused at start-up, naming the
file, the line and why: a typo that silently leaves a logger at its default is the thing a
user turning on DEBUG to find a problem cannot afford. Flags apply after the file, so a flag
overrides it for a one-off run.

What decides (the parsing and the JSON line) is pure; `configure` installs one handler on
the root logger.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import pathlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

ROOT = ""  # the root logger's name in a levels mapping, as logging.getLogger("") takes it
FORMATS = ("text", "json")

# log4j's level names, and Python's own. TRACE is log4j's level below DEBUG: Python code
# logs nothing below DEBUG, so it shows what DEBUG shows.
LEVELS: dict[str, int] = {
    "ALL": 1,
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}

_LOG4J_ROOT = "log4j.rootLogger"
_LOG4J_LOGGER = "log4j.logger."


class LogConfigError(ValueError):
    """A level, a flag or a file line that cannot be used; the message names it."""


def parse_level(text: str) -> int:
    level = LEVELS.get(text.strip().upper())
    if level is None:
        raise LogConfigError(
            f"unknown log level {text.strip()!r} (known: {', '.join(LEVELS)}, any case)"
        )
    return level


def parse_level_spec(text: str) -> tuple[str, int]:
    """A `--log-level` value: `LEVEL` (the root's) or `LOGGER=LEVEL`."""
    name, equals, level = text.partition("=")
    if not equals:
        return ROOT, parse_level(text)
    name = name.strip()
    if not name:
        raise LogConfigError(f"no logger name before '=' in {text!r} (LOGGER=LEVEL)")
    return (ROOT if name == "root" else name), parse_level(level)


def parse_log_config(text: str, source: str = "<log config>") -> dict[str, int]:
    """A properties file's lines as logger name -> level (ROOT for the root), in order."""
    levels: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        where = f"{source}:{number}: {line!r}"
        key, value = _split_property(line)
        if value is None:
            raise LogConfigError(f"{where}: expected LOGGER=LEVEL")
        if key == _LOG4J_ROOT:
            name = ROOT
        elif key.startswith(_LOG4J_LOGGER) and len(key) > len(_LOG4J_LOGGER):
            name = key[len(_LOG4J_LOGGER) :]
        elif key.startswith("log4j."):
            raise LogConfigError(
                f"{where}: only logger levels are read (log4j.rootLogger, log4j.logger.NAME); "
                "output is chosen with --log-format"
            )
        elif key == "root":
            name = ROOT
        else:
            name = key
        # log4j's `LEVEL, appender, ...`: the level is what is before the first comma.
        level_text = value.split(",", 1)[0]
        try:
            levels[name] = parse_level(level_text)
        except LogConfigError as error:
            raise LogConfigError(f"{where}: {error}") from None
    return levels


def _split_property(line: str) -> tuple[str, str | None]:
    """`key=value` or `key: value`, as a Java properties line (no escapes, no continuations)."""
    cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
    if cut <= 0:
        return line, None
    return line[:cut].strip(), line[cut + 1 :].strip()


def read_log_config(path: str | pathlib.Path) -> dict[str, int]:
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LogConfigError(f"cannot read log config {path}: {error}") from None
    return parse_log_config(text, str(path))


def merge_levels(
    default_root: int, file_levels: Mapping[str, int], flag_levels: Iterable[tuple[str, int]]
) -> dict[str, int]:
    """The levels to set: the root's default, then the file's, then the flags' in order."""
    levels = {ROOT: default_root}
    levels.update(file_levels)
    for name, level in flag_levels:
        levels.pop(name, None)  # keep the order of application: the last word is last
        levels[name] = level
    return levels


def iso_time(created: float) -> str:
    """A record's time in ISO 8601, UTC, to the millisecond: `2024-05-01T09:30:00.123Z`."""
    stamp = datetime.datetime.fromtimestamp(created, tz=datetime.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonLineFormatter(logging.Formatter):
    """One JSON object per record, on one line: `time`, `level`, `logger`, what `context`
    adds for the record (kcore: the broker and controller), `message`, and `exception` /
    `stack` when the record has them (the traceback's text, newlines escaped by JSON)."""

    def __init__(self, context: Callable[[logging.LogRecord], dict[str, Any]] | None = None):
        super().__init__()
        self._context = context

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
        }
        if self._context is not None:
            line.update(self._context(record))
        line["message"] = record.getMessage()
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def add_arguments(parser: argparse.ArgumentParser, default_level: str | None) -> None:
    """`--log-level`, `--log-config`, `--log-format` on `parser`. `default_level`: the
    root's level when no flag or file sets it (None: the program configures logging only
    when one of these flags is given)."""

    def level_spec(text: str) -> tuple[str, int]:
        try:
            return parse_level_spec(text)
        except LogConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    group = parser.add_argument_group("logging")
    default = f" (default {default_level})" if default_level else ""
    group.add_argument(
        "--log-level",
        action="append",
        default=[],
        type=level_spec,
        metavar="[LOGGER=]LEVEL",
        help=f"the root's level{default}, or one logger's: kcore.controller=DEBUG "
        "(repeatable; TRACE DEBUG INFO WARN ERROR FATAL OFF)",
    )
    group.add_argument(
        "--log-config",
        metavar="FILE",
        help="logger levels, one LOGGER=LEVEL (or log4j.logger.LOGGER=LEVEL) per line; "
        "--log-level flags apply after it",
    )
    group.add_argument(
        "--log-format",
        choices=FORMATS,
        default=None,
        help="text (default) or json: one JSON object per line",
    )


def logging_requested(args: argparse.Namespace) -> bool:
    return bool(args.log_level or args.log_config or args.log_format)


def levels_from_args(args: argparse.Namespace, default_level: str) -> dict[str, int]:
    """The levels `add_arguments`' flags ask for; a file that cannot be read or has a bad
    line raises LogConfigError."""
    file_levels = {} if args.log_config is None else read_log_config(args.log_config)
    return merge_levels(parse_level(default_level), file_levels, args.log_level)


def configure(
    levels: Mapping[str, int], formatter: logging.Formatter, stream: TextIO | None = None
) -> logging.Handler:
    """One handler on the root logger writing to `stream` (stderr) with `formatter`, and
    each logger's level. Handlers already on the root logger stay."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logging.getLogger().addHandler(handler)
    for name, level in levels.items():
        logging.getLogger(name or None).setLevel(level)
    return handler
