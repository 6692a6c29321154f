"""Log lines name their broker: in an embedded cluster every broker logs into the same
loggers, and each record says whose it is (`record.broker_id`, and Kafka's prefix for the
formatters: `[Broker id=N] `, `[Controller id=N epoch=E] `), while the message itself is
what the code logged."""

import json
import logging

from kcore.log_context import (
    CLI_FORMAT,
    PrefixFormatter,
    broker_logging,
    cli_formatter,
    controller_logging,
)
from kcore.testing import open_cluster


async def test_each_broker_of_a_simulated_cluster_logs_under_its_own_id(autojump_clock, caplog):
    caplog.set_level(logging.INFO, logger="kcore")
    async with open_cluster(brokers=2, seed=7, logs="memory") as cluster:
        controller_id = await cluster.wait_for_controller()
        epoch = cluster.brokers[controller_id].controller.epoch
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=2)

    started = [r for r in caplog.records if r.getMessage().endswith("] started")]
    assert sorted(r.broker_id for r in started) == [1, 2]
    for record in started:
        assert record.getMessage() == f"[KafkaServer id={record.broker_id}] started"
        assert record.log_prefix == f"[Broker id={record.broker_id}] "
    elected = [
        r for r in caplog.records if "successfully elected as the controller" in r.getMessage()
    ]
    assert [(r.broker_id, r.controller_epoch) for r in elected] == [(controller_id, epoch)]
    assert any(
        r.name == "kcore.state.change"
        and r.log_prefix == f"[Controller id={controller_id} epoch={epoch}] "
        for r in caplog.records
    )
    # The brokers' side of a state change (becoming leader or follower) names the broker,
    # though the request came from the controller.
    became = {
        r.broker_id: r.log_prefix
        for r in caplog.records
        if r.name == "kcore.state.change"
        and r.getMessage().startswith(("Leader t-", "Follower t-"))
    }
    assert became == {1: "[Broker id=1] ", 2: "[Broker id=2] "}


def _records_in_and_out_of_a_broker(logger_name: str) -> list[logging.LogRecord]:
    """The records of four lines: outside any broker, in broker 3, in its controller of
    epoch 5, and in its controller before an epoch is known."""
    logger = logging.getLogger(logger_name)
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("outside any broker")
        with broker_logging(3):
            logger.warning("session expired")
            with controller_logging(3, lambda: 5):
                logger.warning("resigning")
            with controller_logging(3, lambda: None):
                logger.warning("waiting for the election")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    return records


def test_the_cli_format_prefixes_the_broker_or_the_controller():
    formatter = PrefixFormatter(CLI_FORMAT)
    records = _records_in_and_out_of_a_broker("kcore.test_log_context")
    lines = [formatter.format(r).split(" ", 3)[3] for r in records]
    assert lines == [
        "kcore.test_log_context outside any broker",
        "kcore.test_log_context [Broker id=3] session expired",
        "kcore.test_log_context [Controller id=3 epoch=5] resigning",
        "kcore.test_log_context [Controller id=3] waiting for the election",
    ]
    assert [r.getMessage() for r in records][1] == "session expired"


def test_a_record_made_elsewhere_is_formatted_without_a_prefix():
    record = logging.LogRecord("kcore.x", logging.INFO, __file__, 1, "plain", None, None)
    assert PrefixFormatter("%(log_prefix)s%(message)s").format(record) == "plain"


def test_json_lines_carry_the_broker_and_controller_as_fields():
    formatter = cli_formatter("json")
    records = _records_in_and_out_of_a_broker("kcore.test_log_context.json")
    lines = [json.loads(formatter.format(r)) for r in records]
    context = [
        {k: v for k, v in line.items() if k not in ("time", "level", "logger")} for line in lines
    ]
    assert context == [
        {"message": "outside any broker"},
        {"broker_id": 3, "message": "session expired"},
        {"broker_id": 3, "controller_id": 3, "controller_epoch": 5, "message": "resigning"},
        {
            "broker_id": 3,
            "controller_id": 3,
            "controller_epoch": None,
            "message": "waiting for the election",
        },
    ]
    assert {line["logger"] for line in lines} == {"kcore.test_log_context.json"}
    assert {line["level"] for line in lines} == {"WARNING"}


def test_the_cli_takes_per_logger_levels_for_the_broker_tools_and_demo():
    from kcore.cli import build_parser
    from kcore.cluster import build_parser as demo_parser

    broker = build_parser().parse_args(
        ["broker", "--log-level", "kcore.controller=DEBUG", "--log-level", "WARN"]
    )
    assert broker.log_level == [("kcore.controller", logging.DEBUG), ("", logging.WARNING)]
    assert broker.log_format is None
    tool = build_parser().parse_args(
        ["topics", "--bootstrap-server", "b:9092", "--list", "--log-format", "json"]
    )
    assert tool.log_format == "json"
    demo = demo_parser().parse_args(["--log-level", "info", "--log-config", "log.properties"])
    assert (demo.log_level, demo.log_config) == ([("", logging.INFO)], "log.properties")


def test_a_bad_log_config_line_stops_the_broker_before_it_starts(tmp_path, capsys):
    from kcore.cli import main

    config = tmp_path / "log4j.properties"
    config.write_text("log4j.rootLogger=INFO, stdout\nlog4j.logger.kcore.controller=TRCE\n")
    assert main(["broker", "--log-config", str(config), "--config", "missing.properties"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kcore broker: {config}:2: ")
    assert "unknown log level 'TRCE'" in err
