"""Java `.properties` text as server.properties uses it (java.util.Properties.load)."""

from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """`#`/`!` comment lines, `=`, `:` or whitespace between key and value, a trailing odd
    backslash continues the line (leading blanks of the next line dropped), backslash
    escapes in keys and values."""
    result: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        if _ends_with_continuation(line):
            pending += line[:-1]
            continue
        key, value = _split(pending + line)
        result[key] = value
        pending = ""
    if pending:
        key, value = _split(pending)
        result[key] = value
    return result


def _ends_with_continuation(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        ch = line[index]
        if ch == "\\":
            index += 2
            continue
        if ch in "=:" or ch in " \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        ch = text[index]
        if ch == "\\" and index + 1 < len(text):
            nxt = text[index + 1]
            if nxt == "u" and index + 6 <= len(text):
                out.append(chr(int(text[index + 2 : index + 6], 16)))
                index += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            index += 2
            continue
        out.append(ch)
        index += 1
    return "".join(out)
