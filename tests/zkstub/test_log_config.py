"""The log4j-like logging flags and file of `zkstub serve` and `kcore` (zkstub.log_config):
what a user writes becomes the levels they meant, and a mistake is refused naming it."""

import argparse
import json
import logging
import sys

import pytest

from zkstub import log_config
from zkstub.log_config import (
    ROOT,
    JsonLineFormatter,
    LogConfigError,
    merge_levels,
    parse_level_spec,
    parse_log_config,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DEBUG", (ROOT, logging.DEBUG)),
        ("warn", (ROOT, logging.WARNING)),
        ("kcore.controller=DEBUG", ("kcore.controller", logging.DEBUG)),
        ("kcore.state.change=trace", ("kcore.state.change", logging.DEBUG)),
        ("root=ERROR", (ROOT, logging.ERROR)),
        ("kcore=FATAL", ("kcore", logging.CRITICAL)),
        ("kcore=OFF", ("kcore", logging.CRITICAL + 10)),
    ],
)
def test_a_level_flag_is_the_root_or_one_logger(text, expected):
    assert parse_level_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "named"), [("DEBIG", "'DEBIG'"), ("kcore=LOUD", "'LOUD'"), ("=INFO", "=INFO")]
)
def test_a_bad_level_flag_is_refused_naming_it(text, named):
    with pytest.raises(LogConfigError, match=named):
        parse_level_spec(text)


def test_a_log4j_properties_file_and_the_short_form_both_read():
    text = """
# Kafka's config/log4j.properties, the logger lines
log4j.rootLogger=INFO, stdout, kafkaAppender
log4j.logger.kcore.controller=TRACE, controllerAppender
! a properties comment
kcore.state.change = WARN
kcore.network: ERROR
"""
    assert parse_log_config(text) == {
        ROOT: logging.INFO,
        "kcore.controller": logging.DEBUG,
        "kcore.state.change": logging.WARNING,
        "kcore.network": logging.ERROR,
    }


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("kcore.controller=DEBG", "unknown log level 'DEBG'"),
        ("kcore.controller DEBUG", "expected LOGGER=LEVEL"),
        ("log4j.appender.stdout=org.apache.log4j.ConsoleAppender", "only logger levels"),
    ],
)
def test_a_bad_line_is_refused_naming_the_file_and_line(line, why):
    with pytest.raises(LogConfigError) as refused:
        parse_log_config(f"root=INFO\n\n{line}\n", "log.properties")
    assert str(refused.value).startswith(f"log.properties:3: {line!r}: ")
    assert why in str(refused.value)


def test_flags_apply_after_the_file_in_order():
    levels = merge_levels(
        logging.INFO,
        {ROOT: logging.WARNING, "kcore.controller": logging.DEBUG},
        [("kcore.controller", logging.ERROR), (ROOT, logging.DEBUG)],
    )
    assert levels == {ROOT: logging.DEBUG, "kcore.controller": logging.ERROR}


def _parse(argv, default_level="INFO"):
    parser = argparse.ArgumentParser()
    log_config.add_arguments(parser, default_level)
    return parser.parse_args(argv)


def test_the_flags_repeat_and_a_bare_level_still_sets_the_root(tmp_path):
    config = tmp_path / "log.properties"
    config.write_text("kcore.log=WARN\nkcore.controller=INFO\n")
    args = _parse(["--log-level", "kcore.controller=DEBUG", "--log-level", "ERROR",
                   "--log-config", str(config), "--log-format", "json"])  # fmt: skip
    assert log_config.levels_from_args(args, "INFO") == {
        ROOT: logging.ERROR,
        "kcore.log": logging.WARNING,
        "kcore.controller": logging.DEBUG,
    }
    assert args.log_format == "json"
    assert log_config.levels_from_args(_parse([]), "INFO") == {ROOT: logging.INFO}
    assert not log_config.logging_requested(_parse([]))


def test_argparse_refuses_a_bad_level_at_start_up(capsys):
    with pytest.raises(SystemExit) as exited:
        _parse(["--log-level", "kcore.controller=VERBOSE"])
    assert exited.value.code == 2
    assert "unknown log level 'VERBOSE'" in capsys.readouterr().err


def test_a_missing_file_is_refused_naming_it(tmp_path):
    with pytest.raises(LogConfigError, match=r"cannot read log config .*nope\.properties"):
        log_config.levels_from_args(
            _parse(["--log-config", str(tmp_path / "nope.properties")]), "INFO"
        )


def test_a_json_line_has_time_level_logger_message_and_the_exception():
    try:
        raise RuntimeError("disk gone")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "zkstub.server", logging.ERROR, __file__, 1, "snapshot %s failed", ("7",), exc_info
    )
    record.created = 1714555800.123
    line = JsonLineFormatter(lambda r: {"server": "zk1"}).format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert list(parsed) == ["time", "level", "logger", "server", "message", "exception"]
    assert parsed["time"] == "2024-05-01T09:30:00.123Z"
    assert parsed["level"] == "ERROR"
    assert parsed["logger"] == "zkstub.server"
    assert parsed["message"] == "snapshot 7 failed"
    assert parsed["exception"].startswith("Traceback (most recent call last):")
    assert parsed["exception"].endswith("RuntimeError: disk gone")
