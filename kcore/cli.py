"""The `kcore` command. Subcommands grow with the project (`kcore broker` comes with the
broker process)."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys


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


def _cmd_smoke(args: argparse.Namespace) -> int:
    from kcore.cluster import run_smoke_check

    return run_smoke_check()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcore", description="Kafka's ZooKeeper-mode core, rebuilt on Trio."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("version", help="print the versions").set_defaults(run=_cmd_version)
    commands.add_parser("smoke", help="check that the packages work").set_defaults(run=_cmd_smoke)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
