"""Client settings: bootstrap forms, acks spellings, clear errors naming the setting."""

import random

import pytest

import transport
from kcore.client import Admin, ClientConfigError, Consumer
from kcore.client._config import parse_acks, parse_bootstrap
from kcore.client.assignors import RebalanceProtocol


@pytest.mark.parametrize(
    "bootstrap",
    [
        "broker-1:9092,broker-2:9093",
        " broker-1:9092 , broker-2:9093 ",
        ["broker-1:9092", "broker-2:9093"],
        [("broker-1", 9092), ("broker-2", 9093)],
    ],
)
def test_bootstrap_forms(bootstrap):
    assert parse_bootstrap(bootstrap) == (("broker-1", 9092), ("broker-2", 9093))


def test_single_address_tuple():
    assert parse_bootstrap(("h", 1)) == (("h", 1),)


@pytest.mark.parametrize("bad", ["", "nohost", "h:port", [("h", "1")], 5])
def test_bad_bootstrap(bad):
    with pytest.raises(ClientConfigError, match="bootstrap"):
        parse_bootstrap(bad)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("all", -1), ("ALL", -1), (-1, -1), ("-1", -1), (0, 0), ("0", 0), (1, 1), ("1", 1)],
)
def test_acks_spellings(value, expected):
    assert parse_acks(value) == expected


@pytest.mark.parametrize("value", [2, "2", True, None, "leader"])
def test_bad_acks(value):
    with pytest.raises(ClientConfigError, match="acks"):
        parse_acks(value)


def test_admin_rejects_unknown_settings():
    with pytest.raises(ClientConfigError, match="request_timeout"):
        Admin("h:1", network=transport.SimNetwork(0), rng=random.Random(0), request_timeout=5)


def test_consumer_group_settings_are_checked():
    Consumer("127.0.0.1:9092", group_id="orders")  # a group member
    with pytest.raises(ClientConfigError, match="group_instance_id is set but group_id"):
        Consumer("127.0.0.1:9092", group_instance_id="a")
    with pytest.raises(ClientConfigError, match="group_id must be a non-empty string"):
        Consumer("127.0.0.1:9092", group_id="")
    with pytest.raises(ClientConfigError, match="heartbeat_interval_ms"):
        Consumer("h:1", group_id="g", heartbeat_interval_ms=10000, session_timeout_ms=6000)
    with pytest.raises(ClientConfigError, match="unknown partition assignor 'sticky'"):
        Consumer("h:1", group_id="g", partition_assignment_strategy="sticky")

    class CooperativeOnly:
        name = "coop-only"
        supported_protocols = (RebalanceProtocol.COOPERATIVE,)

        def assign(self, partitions_per_topic, subscriptions):
            return {}

    with pytest.raises(ClientConfigError, match="no common rebalance protocol"):
        Consumer("h:1", group_id="g", partition_assignment_strategy=["range", CooperativeOnly()])
    with pytest.raises(ClientConfigError, match="enable_auto_commit must be True or False"):
        Consumer("h:1", group_id="g", enable_auto_commit="yes")
