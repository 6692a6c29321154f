"""Client settings: bootstrap forms, acks spellings, clear errors naming the setting."""

import random

import pytest

import transport
from kcore.client import Admin, ClientConfigError, Consumer
from kcore.client._config import parse_acks, parse_bootstrap


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


def test_consumer_refuses_a_group_it_cannot_join():
    # Accepting group_id while joining no group would let a user believe offsets are kept.
    with pytest.raises(ClientConfigError, match="group_id='orders' is not supported yet"):
        Consumer("127.0.0.1:9092", group_id="orders")
