"""The `kcore` command line: the demo gets its own options, the tools' flags that do not go
together are argparse usage errors (exit status 2), and a failure is one line on standard
error (exit status 1), never a traceback."""

from __future__ import annotations

import pytest

import kcore.cluster
from kcore.cli import main


def test_demo_options_reach_the_demo(monkeypatch):
    seen = []
    monkeypatch.setattr(kcore.cluster, "main", lambda argv: seen.append(argv) or 0)
    assert main(["demo", "--plain", "--brokers", "5", "--seed=3"]) == 0
    assert main(["demo", "--help"]) == 0
    assert main(["demo"]) == 0
    assert seen == [["--plain", "--brokers", "5", "--seed=3"], ["--help"], []]


def test_other_commands_still_refuse_unknown_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["version", "--plain"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --plain" in capsys.readouterr().err
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("kcore ")


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["topics", "--list"], "the following arguments are required: --bootstrap-server"),
        (["topics", "--bootstrap-server", "h:1"], "one of the arguments --create --list"),
        (["topics", "--bootstrap-server", "h:1", "--create"], "--topic is required with --create"),
        (
            ["topics", "--bootstrap-server", "h:1", "--list", "--partitions", "3"],
            "--partitions cannot be used with --list",
        ),
        (
            ["topics", "--bootstrap-server", "h:1", "--alter", "--topic", "t"],
            "--partitions is required with --alter",
        ),
        (
            ["configs", "--bootstrap-server", "h:1", "--entity-type", "brokers", "--describe",
             "--entity-name", "one"],
            "must be a valid integer broker id, found: one",
        ),
        (
            ["configs", "--bootstrap-server", "h:1", "--entity-type", "topics", "--alter",
             "--entity-name", "t"],
            "at least one of --add-config or --delete-config",
        ),
        (
            ["configs", "--bootstrap-server", "h:1", "--entity-type", "brokers", "--alter",
             "--add-config", "log.retention.ms=1"],
            "an entity-name or default entity must be specified with --alter of users, "
            "clients, brokers or ips",
        ),
        (
            ["configs", "--bootstrap-server", "h:1", "--entity-type", "topics",
             "--entity-default", "--describe"],
            "--entity-default applies to brokers",
        ),
        (
            ["console-consumer", "--bootstrap-server", "h:1", "--topic", "t", "--offset", "5"],
            "The partition is required when offset is specified.",
        ),
        (
            ["console-consumer", "--bootstrap-server", "h:1", "--topic", "t", "--partition",
             "0", "--offset", "-5"],
            "The provided offset value '-5' is incorrect.",
        ),
        (
            ["console-producer", "--bootstrap-server", "h:1", "--topic", "t", "--property", "x"],
            "--property expects key=value, got 'x'",
        ),
    ],
)  # fmt: skip
def test_flags_that_do_not_go_together_are_usage_errors(argv, complaint, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: kcore {argv[0]} ")
    assert complaint in err


def test_a_failure_is_one_line_and_status_1(capsys):
    # Nothing listens on port 1: the metadata request cannot be sent.
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1", "--list"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("kcore topics: NetworkError: no broker answered")
    assert captured.err.count("\n") == 1
