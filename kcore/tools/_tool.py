"""What every tool shares: how it is declared (its flags, the checks argparse cannot make, its
Trio body), how it fails (one line on stderr and a non-zero exit, never a traceback), how
Kafka's `key=value` flags (`--property`, `--producer-property`) are read, and how a client
properties file (`--command-config`, `--consumer.config`, `--producer.config`) becomes the
settings of kcore's clients, security included (`security.protocol`, `sasl.mechanism`,
`sasl.jaas.config`, `ssl.*`)."""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import trio

from kcore.client import Admin
from kcore.client._config import SECURITY_SETTINGS, ClientConfigError, security_network
from kcore.config import ConfigError, parse_properties
from kcore.errors import root_cause
from kcore.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas_config

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


# Kafka's client security properties kcore's clients honour, by their keyword there; the
# SASL user and password come from `sasl.jaas.config`, as in Kafka.
SECURITY_PROPERTIES = {
    name.replace("_", "."): name for name in SECURITY_SETTINGS if not name.startswith("sasl_plain")
}
SASL_JAAS_CONFIG = "sasl.jaas.config"
_LOGIN_MODULES = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
}


def add_command_config(parser: argparse.ArgumentParser, flag: str = "--command-config") -> None:
    """Kafka's `--command-config FILE` (`--admin.config` for kafka-leader-election): the
    file's settings land in `args.command_config` whatever the flag."""
    parser.add_argument(
        flag,
        dest="command_config",
        metavar="FILE",
        help="a properties file of client settings, e.g. security.protocol=SASL_SSL, "
        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location",
    )
    parser.set_defaults(command_config_flag=flag)


async def read_properties_file(path: str, flag: str) -> dict[str, str]:
    """The Java properties in the file at `path` (as Kafka's Utils.loadProps reads it)."""
    try:
        return parse_properties(await trio.Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ToolError(f"{flag}: {error}") from None


async def command_config(path: str | None, client: type, flag: str) -> dict[str, Any]:
    """The keyword arguments of kcore's `client` (Admin, Producer, Consumer) that the
    properties file at `path` (none: {}) describes, security included."""
    properties = {} if path is None else await read_properties_file(path, flag)
    return client_config(properties, client, flag)


async def admin_config(args: argparse.Namespace, client_id: str) -> dict[str, Any]:
    """The Admin's keyword arguments for a tool: its client id, then what its
    `--command-config` file sets."""
    settings: dict[str, Any] = {"client_id": client_id}
    settings.update(await command_config(args.command_config, Admin, args.command_config_flag))
    return settings


def client_config(properties: Mapping[str, str], client: type, flag: str) -> dict[str, Any]:
    """`client_settings` and `security_settings` of `properties` together."""
    security, others = security_settings(properties, flag)
    return {**client_settings(others, client, flag), **security}


def security_settings(
    properties: Mapping[str, str], flag: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The security keywords of kcore's clients (`security_protocol`, `sasl_*`, `ssl_*`)
    that Kafka's security properties among `properties` describe, and the other
    properties. A security setting kcore cannot honour (a JKS store's password, Kerberos,
    a login callback) is refused naming it; no message quotes a value."""
    security: dict[str, Any] = {}
    others: dict[str, str] = {}
    unsupported = []
    for key, value in properties.items():
        if key in SECURITY_PROPERTIES:
            security[SECURITY_PROPERTIES[key]] = value.strip()
        elif key == SASL_JAAS_CONFIG:
            pass
        elif key.startswith(("ssl.", "sasl.")):
            unsupported.append(key)
        else:
            others[key] = value
    if unsupported:
        supported = ", ".join(sorted([*SECURITY_PROPERTIES, SASL_JAAS_CONFIG]))
        raise ToolError(
            f"{flag}: {', '.join(sorted(unsupported))} not supported by kcore's clients "
            f"(the security settings they take: {supported})"
        )
    protocol = security.get("security_protocol", "PLAINTEXT").upper()
    sasl_given = sorted(
        key for key in properties if key == SASL_JAAS_CONFIG or key == "sasl.mechanism"
    )
    if protocol.startswith("SASL_"):
        security.update(_sasl_login(properties, flag))
    elif sasl_given and protocol in ("PLAINTEXT", "SSL"):
        raise ToolError(
            f"{flag}: {', '.join(sasl_given)} given with security.protocol={protocol}: set "
            "security.protocol=SASL_PLAINTEXT or SASL_SSL to authenticate with SASL"
        )
    try:
        security_network(**security)  # a bad value or a missing file fails here, named
    except ClientConfigError as error:
        message = str(error)
        for name in SECURITY_SETTINGS:  # in Kafka's spelling, as the file writes them
            message = message.replace(name, name.replace("_", "."))
        raise ToolError(f"{flag}: {message}") from None
    return security, others


def _sasl_login(properties: Mapping[str, str], flag: str) -> dict[str, str]:
    """`sasl_mechanism`, `sasl_plain_username` and `sasl_plain_password` from Kafka's
    `sasl.mechanism` and `sasl.jaas.config` (whose login module must be the mechanism's)."""
    mechanism = properties.get("sasl.mechanism", "").strip().upper()
    if not mechanism:
        raise ToolError(
            f"{flag}: sasl.mechanism is not set, and Kafka's default, GSSAPI (Kerberos), is "
            f"not supported by kcore: set sasl.mechanism to one of {', '.join(_LOGIN_MODULES)}"
        )
    if mechanism not in _LOGIN_MODULES:
        raise ToolError(
            f"{flag}: sasl.mechanism={mechanism} is not supported by kcore "
            f"(supported: {', '.join(_LOGIN_MODULES)})"
        )
    text = properties.get(SASL_JAAS_CONFIG)
    if text is None:
        raise ToolError(
            f"{flag}: {SASL_JAAS_CONFIG} is needed with a SASL security.protocol, e.g. "
            f'{_LOGIN_MODULES[mechanism]} required username="alice" password="...";'
        )
    try:
        entry = parse_jaas_config(text, setting=SASL_JAAS_CONFIG)
    except ConfigError as error:
        raise ToolError(f"{flag}: {error}") from None
    if entry.login_module != _LOGIN_MODULES[mechanism]:
        raise ToolError(
            f"{flag}: {SASL_JAAS_CONFIG} names the login module {entry.login_module}; "
            f"sasl.mechanism={mechanism} takes {_LOGIN_MODULES[mechanism]}"
        )
    if entry.username is None or entry.password is None:
        raise ToolError(f"{flag}: {SASL_JAAS_CONFIG} must give the options username and password")
    return {
        "sasl_mechanism": mechanism,
        "sasl_plain_username": entry.username,
        "sasl_plain_password": entry.password,
    }
