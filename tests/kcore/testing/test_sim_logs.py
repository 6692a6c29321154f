"""What a campaign shows of its seeds' logs: each line tagged with its seed, and the lines
the injected faults cause in a healthy cluster counted instead of shown."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from kcore.sim import LogLine, LogView, SeedOutcome, Shape, main, shape_of
from kcore.testing.sim import expected_under_faults

# Lines a passing campaign logged (seeds and ids vary).
EXPECTED = [
    (
        "kcore.client.producer",
        "producer-1: 1 record(s) for sim-0 failed: The size of the current ISR [2] is "
        "insufficient to satisfy the min.isr requirement of 2 for partition sim-0 "
        "(delivery_timeout_ms=20000 passed after 7 attempt(s))",
    ),
    (
        "kcore.client.producer",
        "producer-1: 1 record(s) for sim-1 failed: PRODUCE to broker-2:9092: could not "
        "connect, the request was not sent: could not connect to broker-2:9092: connection "
        "refused by broker-2:9092 (nothing listens there) (delivery_timeout_ms=20000 passed "
        "after 13 attempt(s))",
    ),
    (
        "kcore.client.producer",
        "producer-2: metadata refresh failed: no broker answered a metadata request "
        "(broker-1:9092: METADATA to broker-1:9092: could not connect, the request was not sent",
    ),
    (
        "kcore.state.change",
        "Failed to elect leader for partition sim-0 under strategy "
        "OfflinePartitionLeaderElectionStrategy: no eligible replica (ISR [1], live replicas [])",
    ),
    (
        "kcore.server.broker",
        "Broker 3: controlled shutdown request failed: ConnectError('could not connect to "
        "broker-1:9092 within 30.0s: no attempt finished in time')",
    ),
    ("kcore.server.broker", "Broker 1: proceeding to an unclean shutdown"),
    (
        "kcore.server.replica_manager",
        "Failed to write the ISR of sim-1: SessionExpiredError('session 0x1 has expired')",
    ),
    (
        "kcore.server.replica_manager",
        "Failed to propagate ISR changes of [TopicPartition(topic='sim', partition=0)]: "
        "ConnectionLossError('connection lost')",
    ),
    ("kcore.server.apis", "Broker 3 refuses UpdateMetadata from controller 2 epoch 4 (error 77)"),
    ("kcore.server.apis", "Broker 2 refuses LeaderAndIsr from controller 1 epoch 1 (error 11)"),
    (
        "kcore.controller.channel",
        "Controller 1 epoch fails to send request STOP_REPLICA to broker 3: "
        "ConnectionClosedError('connection to broker-3 lost: connection closed by broker-3'); "
        "retrying",
    ),
]

# Lines that would be worth a look in any campaign.
UNEXPECTED = [
    ("kcore.client.producer", "producer-1: 1 record(s) for sim-0 failed: Unknown server error"),
    ("kcore.server.replica_manager", "Failed to write the ISR of sim-1: KeyError('isr')"),
    ("kcore.server.apis", "Broker 2 refuses LeaderAndIsr from controller 1 epoch 1 (error 87)"),
    ("kcore.controller.channel", "Callback for LEADER_AND_ISR to broker 2 failed"),
    (
        "kcore.controller.channel",
        "Controller 1 epoch fails to send request STOP_REPLICA to broker 3: "
        "FrameDecodeError('bad frame'); retrying",
    ),
    ("kcore.state.change", "Error while moving partitions ['sim-0'] to OnlinePartition: ..."),
]


@pytest.mark.parametrize(("logger_name", "message"), EXPECTED)
def test_what_the_injected_faults_cause_is_expected(logger_name, message):
    assert expected_under_faults(logger_name, message) is not None


@pytest.mark.parametrize(("logger_name", "message"), UNEXPECTED)
def test_anything_else_is_worth_a_look(logger_name, message):
    assert expected_under_faults(logger_name, message) is None


def _outcome(seed: int, *lines: LogLine) -> SeedOutcome:
    name = f"seed {seed} (3 brokers, 2 partitions)"
    return SeedOutcome(seed, name, True, f"{name}: ok", 0.1, lines)


def test_the_view_tags_lines_with_their_seed_and_counts_the_expected_ones():
    refused = LogLine(logging.WARNING, "kcore.client.producer", "refused", "min.insync")
    odd = LogLine(logging.ERROR, "kcore.server.apis", "something odd", None)
    view = LogView()
    assert view.lines(_outcome(7, refused, odd, refused)) == [
        "seed 7 (3 brokers, 2 partitions): ERROR kcore.server.apis something odd"
    ]
    assert view.lines(_outcome(8, refused)) == []
    summary = view.summary()
    assert summary[0].startswith("3 WARNING/ERROR line(s) expected under the injected faults")
    assert summary[1:] == ["       3  kcore.client.producer: min.insync"]
    verbose = LogView(show_expected=True)
    assert verbose.lines(_outcome(8, refused)) == [
        "seed 8 (3 brokers, 2 partitions): WARNING kcore.client.producer refused"
    ]


def test_shapes_are_a_function_of_the_seed():
    shapes = (Shape.parse("3x2"), Shape.parse("5x8"))
    assert [shape_of(seed, shapes) for seed in range(4)] == [
        Shape(3, 2), Shape(5, 8), Shape(3, 2), Shape(5, 8),
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"BROKERSxPARTITIONS \(e\.g\. 5x8\), not '5'"):
        Shape.parse("5")


def test_a_bad_shape_is_named(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--shapes", "3x2,five"])
    assert exit_.value.code == 2
    assert "not 'five'" in capsys.readouterr().err


def test_a_campaign_tags_every_log_line_with_its_seed(tmp_path):
    """What a user runs: every WARNING / ERROR line names its seed (here the expected ones
    shown too, as at --log-level INFO), and the summary counts them per logger."""
    command = [sys.executable, "-m", "kcore.sim", "--seeds", "2", "--shapes", "3x2,5x8"]
    command += ["--chaos-seconds", "15", "--log-level", "INFO"]
    command += ["--failures", str(tmp_path / "failures.txt")]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=240, env=dict(os.environ), check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "2 seeds (shapes 3x2, 5x8), 0 failed"
    logged = [
        line
        for line in done.stderr.splitlines()
        if " WARNING " in line or " ERROR " in line or " INFO " in line
    ]
    assert logged
    for line in logged:
        assert line.startswith(
            ("seed 0 (3 brokers, 2 partitions): ", "seed 1 (5 brokers, 8 partitions): ")
        ), line
