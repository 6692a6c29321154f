"""zkCli's text, as the shell (`zkstub.cli`) builds it with pure functions: how a line is
split into words, how a command's options are read, the path errors ZooKeeper's client
raises before sending anything, ACLs and watch events as zkCli prints them. And `python -m
zkstub shell` with no server: one line, no traceback."""

from __future__ import annotations

import pytest

from zkstub.cli import (
    CliError,
    format_acl,
    format_watched_event,
    java_path_error,
    parse_options,
    shell,
    split_command_line,
    split_shell_options,
    usage_text,
)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("ls /", ["ls", "/"]),
        ("  create   /a  b  ", ["create", "/a", "b"]),
        ('create /a "hello world"', ["create", "/a", "hello world"]),
        ("set /a 'it is'", ["set", "/a", "it is"]),
        ('set /a x"y', ["set", "/a", 'x"y']),  # a quote inside a word is kept
        ('create /a ""', ["create", "/a", ""]),
    ],
)
def test_a_line_splits_into_words_as_zkcli_splits_it(line, words):
    assert split_command_line(line) == words


def test_options_are_read_as_commons_cli_reads_them():
    assert parse_options(["ls", "-s", "/a", "-w"], "swR") == (
        {"s": True, "w": True},
        ["ls", "/a"],
    )
    assert parse_options(["create", "-es", "/a", "-1"], "esc") == (
        {"e": True, "s": True},
        ["create", "/a", "-1"],  # a negative number is an argument
    )
    assert parse_options(["set", "-v", "3", "/a", "x"], "s", "v")[0] == {"v": "3"}
    assert parse_options(["set", "-v3", "/a", "x"], "s", "v")[0] == {"v": "3"}
    assert parse_options(["create", "--", "/a", "-x"], "e")[1] == ["create", "/a", "-x"]
    with pytest.raises(CliError) as unknown:
        parse_options(["ls", "-x", "/"], "swR")
    assert str(unknown.value) == (
        "org.apache.commons.cli.UnrecognizedOptionException: Unrecognized option: -x"
    )
    with pytest.raises(CliError) as missing:
        parse_options(["delete", "/a", "-v"], "", "v")
    assert str(missing.value).endswith("Missing argument for option: v")


def test_the_shells_own_options_come_before_the_command():
    assert split_shell_options(["-timeout", "5000", "ls", "-w", "/"]) == (
        {"timeout": "5000"},
        ["ls", "-w", "/"],
    )
    assert split_shell_options(["ls", "-timeout"]) == ({}, ["ls", "-timeout"])
    with pytest.raises(CliError, match="no argument found for option -timeout"):
        split_shell_options(["-timeout"])


@pytest.mark.parametrize(
    ("path", "sequential", "message"),
    [
        ("/a/b", False, None),
        ("/", False, None),
        ("/a/", True, None),  # a sequential node's name may end in the parent's slash
        ("", False, "Path length must be > 0"),
        ("a", False, "Path must start with / character"),
        ("/a/", False, "Path must not end with / character"),
        ("/a//b", False, 'Invalid path string "/a//b" caused by empty node name specified @3'),
        ("/a/../b", False, 'Invalid path string "/a/../b" caused by relative paths not allowed @4'),
        ("/a/.", False, 'Invalid path string "/a/." caused by relative paths not allowed @3'),
        ("/a\x01", False, 'Invalid path string "/a\x01" caused by invalid character @2'),
        ("/a.b", False, None),
    ],
)
def test_paths_are_refused_in_zookeepers_words(path, sequential, message):
    assert java_path_error(path, sequential=sequential) == message


def test_acls_and_events_print_as_zkcli_prints_them():
    assert format_acl("world", "anyone", 31) == "'world,'anyone\n: cdrwa"
    # jute's toString escapes the characters it separates with
    assert format_acl("digest", "kafka:a,b%", 1 | 16) == "'digest,'kafka:a%2Cb%25\n: ra"
    assert format_watched_event("SyncConnected", "NodeDataChanged", "/x") == (
        "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/x"
    )
    assert format_watched_event("Closed", "None", None).endswith("type:None path:null")


def test_the_usage_lists_the_commands_in_javas_order():
    lines = usage_text("zkCli").splitlines()
    assert lines[0] == "zkCli host:port[/chroot] [-timeout ms] cmd args"
    names = [line.split()[0] for line in lines[1:]]
    assert names[:4] == ["addWatch", "addauth", "close", "connect"]
    assert names.index("getAcl") < names.index("getAllChildrenNumber") < names.index("history")


async def test_python_m_zkstub_shell_reports_a_server_that_is_down_in_one_line(capsys):
    assert await shell("127.0.0.1:1", "ls", "/", None) == 1
    err = capsys.readouterr().err
    assert err.startswith("zkstub shell: no ZooKeeper session at 127.0.0.1:1: cannot connect")
    assert err.count("\n") == 1
