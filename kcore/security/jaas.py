"""Kafka's `sasl.jaas.config` values (JaasConfig): one JAAS login module entry,

    <LoginModuleClass> <ControlFlag> (<option>=<value>)* ;

with the control flag one of required, requisite, sufficient, optional, and values either
a bare word or a double-quoted string (where a backslash escapes the next character, as
Java's StreamTokenizer reads it). Kafka takes exactly one entry per value. Sans-IO: text
in, `JaasEntry` out; messages never quote an option's value (they are passwords).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kcore.config import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_WORD_SEPARATORS = frozenset(' \t\r\n=;"')


@attrs.frozen
class JaasEntry:
    login_module: str
    control_flag: str
    options: Mapping[str, str] = attrs.field(repr=lambda options: f"<{len(options)} options>")

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>="<password>"` options: name -> password."""
        return {
            name.removeprefix("user_"): value
            for name, value in self.options.items()
            if name.startswith("user_") and len(name) > len("user_")
        }


def parse_jaas_config(text: str, *, setting: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module entry of a `sasl.jaas.config` value; ConfigError naming
    `setting` (never quoting the text) when it is not one."""
    tokens = _tokenize(text, setting)
    entries = []
    position = 0
    while position < len(tokens):
        entry, position = _entry(tokens, position, setting)
        entries.append(entry)
    if len(entries) != 1:
        raise ConfigError(
            f"Invalid value for configuration {setting}: JAAS config entries must be exactly "
            f"one login module (found {len(entries)})"
        )
    return entries[0]


# A token: (kind, text) with kind "word", "string" (quoted), or the punctuation itself.
_Token = tuple[str, str]


def _tokenize(text: str, setting: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            tokens.append((c, c))
            i += 1
        elif c == '"':
            chars = []
            i += 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                chars.append(text[i])
                i += 1
            if i >= len(text):
                raise ConfigError(
                    f"Invalid value for configuration {setting}: a quoted value is not closed"
                )
            tokens.append(("string", "".join(chars)))
            i += 1
        else:
            start = i
            while i < len(text) and text[i] not in _WORD_SEPARATORS:
                i += 1
            tokens.append(("word", text[start:i]))
    return tokens


def _entry(tokens: list[_Token], position: int, setting: str) -> tuple[JaasEntry, int]:
    def bad(why: str) -> ConfigError:
        return ConfigError(f"Invalid value for configuration {setting}: {why}")

    def take(index: int) -> _Token:
        if index >= len(tokens):
            raise bad("the JAAS entry ends early (it must end with ';')")
        return tokens[index]

    kind, module = take(position)
    if kind != "word":
        raise bad("a JAAS entry starts with the login module's class name")
    kind, flag = take(position + 1)
    if kind != "word" or flag.lower() not in CONTROL_FLAGS:
        raise bad(
            f"login module {module}: the control flag must be one of {', '.join(CONTROL_FLAGS)}"
        )
    options: dict[str, str] = {}
    position += 2
    while True:
        kind, name = take(position)
        if kind == ";":
            return JaasEntry(module, flag.lower(), options), position + 1
        if kind != "word":
            raise bad(f"login module {module}: an option name was expected")
        if take(position + 1)[0] != "=":
            raise bad(f"login module {module}: option {name} has no '=' and value")
        value_kind, value = take(position + 2)
        if value_kind not in ("word", "string"):
            raise bad(f"login module {module}: option {name} has no value")
        options[name] = value
        position += 3
