"""The `kcore` command: `kcore broker --config server.properties` runs one broker process;
`kcore version`, `kcore demo`, `kcore dump-log FILE...` (Kafka's kafka-dump-log.sh), and
Kafka's tools speaking to brokers through kcore's clients (`kcore topics`, `kcore configs`,
`kcore leader-election`, `kcore console-producer`, `kcore console-consumer`,
`kcore consumer-groups`, `kcore acls`: `kcore.tools`), `kcore zookeeper-shell` (zkCli), and
`kcore security init` (the key material and settings of a secured local cluster)."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys

from kcore.errors import root_cause


def _version() -> str:
    try:
        return importlib.metadata.version("kcore")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        return "unknown"


def _cmd_version(args: argparse.Namespace) -> int:
    import msgpack
    import trio

    print(f"kcore {_version()} (trio {trio.__version__}, msgpack {msgpack.version})")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from kcore.cluster import main as demo_main

    return demo_main(args.demo_args)


def _cmd_dump_log(args: argparse.Namespace) -> int:
    """Kafka's `kafka-dump-log.sh --files F [--print-data-log]` for kcore's segment and
    producer snapshot files: "Dumping F", then what `kcore.log.dump` makes of the bytes."""
    import pathlib

    from kcore.log.dump import (
        SNAPSHOT_SUFFIX,
        TIME_INDEX_SUFFIX,
        CorruptSnapshotError,
        dump_log,
        dump_producer_snapshot,
        dump_time_index,
    )

    files = list(args.files) + [f for group in args.files_option for f in group.split(",") if f]
    if not files:
        print("kcore dump-log: name at least one segment file", file=sys.stderr)
        return 2
    status = 0
    for name in files:
        path = pathlib.Path(name)
        print(f"Dumping {name}")
        is_snapshot = path.name.endswith(SNAPSHOT_SUFFIX)
        is_time_index = path.name.endswith(TIME_INDEX_SUFFIX)
        if not (is_snapshot or is_time_index or path.name.endswith(".log")):
            print(f"Ignoring unknown file {name}", file=sys.stderr)
            continue
        try:
            data = path.read_bytes()
        except OSError as error:
            print(f"kcore dump-log: {error}", file=sys.stderr)
            status = 1
            continue
        if is_time_index:
            lines = dump_time_index(data, path.name)
        elif is_snapshot:
            try:
                lines = dump_producer_snapshot(data, path.name)
            except CorruptSnapshotError as error:
                print(error, file=sys.stderr)  # as Kafka's tool: the message, and go on
                continue
        else:
            lines = dump_log(
                data,
                path.name,
                print_data_log=args.print_data_log,
                deep_iteration=args.deep_iteration,
            )
        for line in lines:
            print(line)
    return status


def _cmd_broker(args: argparse.Namespace) -> int:
    import logging

    import trio

    from kcore.broker_process import load_config, run_broker
    from kcore.config import ConfigError

    if not _configure_logging("broker", args, "INFO"):  # lines prefixed [Broker id=N]
        return 2
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"kcore broker: --override expects key=value, got {item!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    try:
        config = load_config(args.config, overrides)
    except (ConfigError, OSError) as error:
        print(f"kcore broker: {error}", file=sys.stderr)
        return 2
    try:
        trio.run(run_broker, config)
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        cause = root_cause(error)
        # One line a user can act on; the whole story only when asked for.
        logging.getLogger("kcore.cli").debug("the broker failed", exc_info=error)
        print(f"kcore broker: {type(cause).__name__}: {cause}", file=sys.stderr)
        return 1
    return 0


def _cmd_security_init(args: argparse.Namespace) -> int:
    from kcore.tools.security_init import run

    return run(args)


def _configure_logging(command: str, args: argparse.Namespace, default_level: str) -> bool:
    """The --log-level / --log-config / --log-format flags; False (and why, on stderr) for
    a log config file that cannot be used."""
    from kcore.log_context import configure_cli_logging

    try:
        configure_cli_logging(args, default_level)
    except ValueError as error:
        print(f"kcore {command}: {error}", file=sys.stderr)
        return False
    return True


def _cmd_tool(args: argparse.Namespace) -> int:
    import trio

    from zkstub.log_config import logging_requested

    # A tool's warnings go to stderr as Python's bare lines unless logging is asked for.
    if logging_requested(args) and not _configure_logging(args.tool.name, args, "WARNING"):
        return 2
    try:
        return trio.run(args.tool.run_reporting, args)
    except (KeyboardInterrupt, BaseExceptionGroup) as error:
        # Ctrl-C, also when it reached a task inside a nursery (which groups it).
        if isinstance(root_cause(error), KeyboardInterrupt):
            return 130
        raise


def build_parser() -> argparse.ArgumentParser:
    from zkstub import log_config

    parser = argparse.ArgumentParser(
        prog="kcore", description="Kafka's ZooKeeper-mode core, rebuilt on Trio."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("version", help="print the versions").set_defaults(run=_cmd_version)
    # The demo's own parser reads its options (`main` hands it what this one leaves).
    demo = commands.add_parser(
        "demo", help="the demo (kcore demo --help: its options)", add_help=False
    )
    demo.set_defaults(run=_cmd_demo, demo_args=[])
    dump = commands.add_parser(
        "dump-log", help="print segment files as Kafka's kafka-dump-log.sh does"
    )
    dump.add_argument(
        "files", nargs="*", metavar="FILE", help="segment or snapshot files (N.log, N.snapshot)"
    )
    dump.add_argument(
        "--files",
        dest="files_option",
        action="append",
        default=[],
        metavar="F1,F2",
        help="comma-separated segment files, as Kafka's tool takes them",
    )
    dump.add_argument(
        "--print-data-log", action="store_true", help="print each record's key and payload"
    )
    dump.add_argument(
        "--deep-iteration", action="store_true", help="a line per record, without its data"
    )
    dump.set_defaults(run=_cmd_dump_log)
    broker = commands.add_parser("broker", help="run one broker (SIGTERM: controlled shutdown)")
    broker.add_argument("--config", metavar="server.properties", help="broker settings file")
    broker.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting on top of the file (repeatable)",
    )
    log_config.add_arguments(broker, default_level="INFO")
    broker.set_defaults(run=_cmd_broker)
    from kcore.tools import security_init

    security = commands.add_parser("security", help="secure a cluster (kcore security init)")
    security_commands = security.add_subparsers(dest="security_command", required=True)
    init = security_commands.add_parser(
        "init", help="write a CA, keys and settings for a secured local cluster"
    )
    security_init.add_arguments(init)
    init.set_defaults(run=_cmd_security_init)
    from kcore.tools import TOOLS

    for tool in TOOLS:
        command = commands.add_parser(tool.name, help=tool.summary, description=tool.summary)
        tool.add_arguments(command)
        log_config.add_arguments(command, default_level=None)
        command.set_defaults(run=_cmd_tool, tool=tool, tool_parser=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":
        args.demo_args = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if getattr(args, "tool", None) is not None:
        args.tool.check_or_exit(args.tool_parser, args)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
