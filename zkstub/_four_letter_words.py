"""ZooKeeper's four-letter-word commands (`ruok`, `srvr`, `mntr`, ...), sans-IO: the text each
one answers, from a snapshot of the server's state.

A client sends the four letters where a request's length would be; the server answers with
text and closes the connection (`echo ruok | nc host 2181`). Like ZooKeeper 3.5.3+, only the
commands in `4lw.commands.whitelist` run (default `srvr`; `*` for all); any other known one is
answered with ZooKeeper's refusal. The layouts are ZooKeeper 3.8's (`server/command/*.java`),
so tools that parse them (monitoring scripts reading `mntr`'s tab-separated pairs, `srvr`'s
`Mode:` line) work unchanged.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable

import attrs

COMMANDS = ("conf", "cons", "dump", "envi", "mntr", "ruok", "srvr", "stat", "wchs")
DEFAULT_WHITELIST = frozenset({"srvr"})
VERSION = "3.8.0-zkstub"  # the ZooKeeper release whose behaviour zkstub matches


def parse_whitelist(value: str | Iterable[str] | None) -> frozenset[str]:
    """`4lw.commands.whitelist`: comma-separated names, `*` for every command. An unknown
    name is refused, naming it (ZooKeeper only warns, and the typo stays unnoticed)."""
    if value is None:
        return DEFAULT_WHITELIST
    names = value.split(",") if isinstance(value, str) else list(value)
    chosen = {name.strip() for name in names if name.strip()}
    if "*" in chosen:
        return frozenset(COMMANDS)
    unknown = sorted(chosen - set(COMMANDS))
    if unknown:
        raise ValueError(
            f"4lw.commands.whitelist names unknown commands {', '.join(unknown)}; "
            f"known: {', '.join(COMMANDS)} or *"
        )
    return frozenset(chosen)


@attrs.frozen
class ConnectionFacts:
    peer: str  # "host:port"
    session_id: int | None
    received: int
    sent: int


@attrs.frozen
class ServerFacts:
    """What the reports show, gathered by the server at the moment of the command."""

    zxid: int
    node_count: int
    data_bytes: int  # paths and data, as ZooKeeper's approximate data size
    ephemerals: dict[int, list[str]]  # session id -> its ephemeral paths
    sessions: dict[int, float]  # session id -> negotiated timeout, seconds
    watches: dict[int, list[str]]  # session id -> watched paths
    connections: list[ConnectionFacts]
    received: int
    sent: int
    config: dict[str, str]  # conf's key=value lines
    max_file_descriptors: int = -1


def answer(command: str, whitelist: frozenset[str], facts: ServerFacts) -> str:
    """The text the command is answered with."""
    if command not in whitelist:
        return f"{command} is not executed because it is not in the whitelist.\n"
    return _REPORTS[command](facts)


def _ruok(_: ServerFacts) -> str:
    return "imok"


def _srvr(facts: ServerFacts) -> str:
    return (
        f"Zookeeper version: {VERSION}\n"
        "Latency min/avg/max: 0/0.0/0\n"
        f"Received: {facts.received}\n"
        f"Sent: {facts.sent}\n"
        f"Connections: {len(facts.connections)}\n"
        "Outstanding: 0\n"
        f"Zxid: 0x{facts.zxid:x}\n"
        "Mode: standalone\n"
        f"Node count: {facts.node_count}\n"
    )


def _connection_line(c: ConnectionFacts) -> str:
    session = "" if c.session_id is None else f",sid=0x{c.session_id:x}"
    return f" /{c.peer}[1](queued=0,recved={c.received},sent={c.sent}{session})\n"


def _stat(facts: ServerFacts) -> str:
    clients = "".join(_connection_line(c) for c in facts.connections)
    head, _, rest = _srvr(facts).partition("Latency")
    return f"{head}Clients:\n{clients}\nLatency{rest}"


def _cons(facts: ServerFacts) -> str:
    return "".join(_connection_line(c) for c in facts.connections) + "\n"


def mntr_pairs(facts: ServerFacts) -> list[tuple[str, str | int]]:
    """`mntr`'s keys and values, in its order. ZooKeeper 3.8 builds `mntr` from its metrics
    registry, and its Prometheus provider exports the same gauges without the `zk_` prefix
    (`prometheus_gauges`)."""
    return [
        ("zk_version", VERSION),
        ("zk_server_state", "standalone"),
        ("zk_avg_latency", "0.0"),
        ("zk_max_latency", "0"),
        ("zk_min_latency", "0"),
        ("zk_packets_received", facts.received),
        ("zk_packets_sent", facts.sent),
        ("zk_num_alive_connections", len(facts.connections)),
        ("zk_outstanding_requests", 0),
        ("zk_znode_count", facts.node_count),
        ("zk_watch_count", sum(len(paths) for paths in facts.watches.values())),
        ("zk_ephemerals_count", sum(len(paths) for paths in facts.ephemerals.values())),
        ("zk_approximate_data_size", facts.data_bytes),
        ("zk_open_file_descriptor_count", _open_file_descriptors()),
        ("zk_max_file_descriptor_count", facts.max_file_descriptors),
        ("zk_global_sessions", len(facts.sessions)),
        ("zk_local_sessions", 0),
    ]


def _mntr(facts: ServerFacts) -> str:
    return "".join(f"{key}\t{value}\n" for key, value in mntr_pairs(facts))


_TEXT_KEYS = frozenset({"zk_version", "zk_server_state"})  # mntr lines that are not numbers


def prometheus_gauges(facts: ServerFacts) -> list[tuple[str, float]]:
    """`mntr`'s numbers as ZooKeeper 3.8's Prometheus metrics provider names them (each
    ServerStats / DataTree gauge under its registered name: `znode_count`,
    `num_alive_connections`, ...): the same values `mntr` answers at the same moment."""
    return [
        (key.removeprefix("zk_"), float(value))
        for key, value in mntr_pairs(facts)
        if key not in _TEXT_KEYS
    ]


def _open_file_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def _conf(facts: ServerFacts) -> str:
    return "".join(f"{key}={value}\n" for key, value in facts.config.items())


def _envi(_: ServerFacts) -> str:
    pairs = [
        ("zookeeper.version", VERSION),
        ("host.name", platform.node()),
        ("python.version", sys.version.split()[0]),
        ("os.name", platform.system()),
        ("os.arch", platform.machine()),
        ("os.version", platform.release()),
        ("user.dir", os.getcwd()),
    ]
    return "Environment:\n" + "".join(f"{key}={value}\n" for key, value in pairs)


def _wchs(facts: ServerFacts) -> str:
    watching = [sid for sid, paths in facts.watches.items() if paths]
    paths = {path for sid in watching for path in facts.watches[sid]}
    total = sum(len(facts.watches[sid]) for sid in watching)
    return f"{len(watching)} connections watching {len(paths)} paths\nTotal watches:{total}\n"


def _dump(facts: ServerFacts) -> str:
    lines = ["SessionTracker dump:", f"Global Sessions({len(facts.sessions)}):"]
    for sid, timeout in sorted(facts.sessions.items()):
        lines.append(f"0x{sid:x}\t{round(timeout * 1000)}ms")
    owners = sorted(sid for sid, paths in facts.ephemerals.items() if paths)
    lines += ["ephemeral nodes dump:", f"Sessions with Ephemerals ({len(owners)}):"]
    for sid in owners:
        lines.append(f"0x{sid:x}:")
        lines += [f"\t{path}" for path in sorted(facts.ephemerals[sid])]
    lines.append(f"Connections with Ephemerals ({len(owners)}):")
    return "\n".join(lines) + "\n"


_REPORTS = {
    "conf": _conf,
    "cons": _cons,
    "dump": _dump,
    "envi": _envi,
    "mntr": _mntr,
    "ruok": _ruok,
    "srvr": _srvr,
    "stat": _stat,
    "wchs": _wchs,
}
