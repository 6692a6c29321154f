"""What every tool shares: how it is declared (its flags, the checks argparse cannot make, its
Trio body), how it fails (one line on stderr and a non-zero exit, never a traceback), and how
Kafka's `key=value` flags (`--property`, `--producer-property`) are read."""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from kcore.errors import root_cause

T = TypeVar("T")


class UsageError(Exception):
    """Flags that do not go together: reported as argparse reports a missing flag (the
    usage, then the complaint; exit status 2)."""


class ToolError(Exception):
    """A failure the tool explains in its own words (a topic that does not exist, a setting
    kcore does not support): reported as one line, exit status 1."""


def _no_check(_args: argparse.Namespace) -> None:
    return None


@attrs.frozen
class Tool:
    """A `kcore NAME` subcommand: `add_arguments` declares its flags, `check` refuses
    combinations argparse cannot express (raising UsageError), `run` does the work inside
    Trio and returns the exit status."""

    name: str
    summary: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Awaitable[int]]
    check: Callable[[argparse.Namespace], None] = _no_check

    def build_parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=f"kcore {self.name}", description=self.summary)
        self.add_arguments(parser)
        return parser

    def check_or_exit(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        try:
            self.check(args)
        except UsageError as error:
            parser.error(str(error))  # exits with status 2, as argparse does

    async def main(self, argv: Sequence[str]) -> int:
        """The tool as `kcore NAME ARGV...` runs it, from a running Trio program (tests,
        embedding): argparse's usage errors exit (SystemExit), anything else is reported."""
        parser = self.build_parser()
        args = parser.parse_args(list(argv))
        self.check_or_exit(parser, args)
        return await self.run_reporting(args)

    async def run_reporting(self, args: argparse.Namespace) -> int:
        try:
            return await self.run(args)
        except Exception as error:
            cause = root_cause(error)  # a nursery's group, a supervisor's wrapper
            named = "" if isinstance(cause, ToolError) else f"{type(cause).__name__}: "
            print(f"kcore {self.name}: {named}{cause}", file=sys.stderr)
        return 1


def add_bootstrap_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="brokers to connect to",
    )


def add_key_values(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """A repeatable `FLAG key=value` (Kafka's `--property`, `--producer-property`, ...)."""
    parser.add_argument(flag, action="append", default=[], metavar="KEY=VALUE", help=help)


def key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """`["k=v", ...]` (a repeated flag) as a dict. The value is kept as written, spaces
    included (`key.separator= `), and may contain '='."""
    parsed = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"{flag} expects key=value, got {item!r}")
        parsed[key.strip()] = value
    return parsed


def client_settings(properties: Mapping[str, str], client: type, flag: str) -> dict[str, Any]:
    """Kafka client properties (`linger.ms=5`) as the keyword arguments of kcore's client
    class (`linger_ms=5`), each converted to the type of the keyword's default. A property
    the client does not take is refused with the ones it does, in Kafka's spelling."""
    defaults = {}
    for name, parameter in inspect.signature(client).parameters.items():
        default = parameter.default
        if default is None and parameter.annotation in ("bool | None", bool | None):
            default = False  # a switch whose default is decided later (enable.idempotence)
        if (
            parameter.kind is inspect.Parameter.KEYWORD_ONLY
            and default is not inspect.Parameter.empty
            and isinstance(default, bool | int | str)  # Kafka's settings, not hooks
        ):
            defaults[name] = default
    return {
        name: _typed(text, defaults[name], f"{flag} {name.replace('_', '.')}={text}")
        for name, text in python_names(properties, defaults, flag).items()
    }


def properties_to_fields(cls: type[T], properties: Mapping[str, str], flag: str) -> T:
    """An attrs class of switches and separators from Kafka's property names: a bool field
    is on when its property is `true` (any case), as Kafka's tools read them; any other
    field takes the property's UTF-8 bytes."""
    fields = {field.name: field for field in attrs.fields(cls)}
    values: dict[str, Any] = {}
    for name, text in python_names(properties, fields, flag).items():
        switch = fields[name].type in (bool, "bool")
        values[name] = text.strip().lower() == "true" if switch else text.encode()
    return cls(**values)


def python_names(properties: Mapping[str, str], known: Iterable[str], flag: str) -> dict[str, str]:
    """The properties by Python's spelling of their names (`linger.ms`: `linger_ms`); one
    that is not `known` is refused, with the ones that are, in Kafka's spelling."""
    known = set(known)
    named = {}
    for key, text in properties.items():
        name = key.replace(".", "_")
        if name not in known:
            supported = ", ".join(sorted(n.replace("_", ".") for n in known))
            raise ToolError(f"{flag} {key} is not supported (supported: {supported})")
        named[name] = text
    return named


def _typed(text: str, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ToolError(f"{where}: expected true or false")
        return text.lower() == "true"
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ToolError(f"{where}: expected an integer") from None
    return text  # strings, and `acks`, which the client reads from "all" / "-1" / "1" itself
