"""Fixtures for the Kafka clients nobody here wrote (confluent-kafka and kcat, both
librdkafka; kafka-python; aiokafka), against a kcore cluster of OS processes.

The clients are synchronous (or run their own asyncio loop), so these tests are plain
functions, and the cluster a module-scoped fixture: starting it costs seconds."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator

import pytest

from ._cluster import KafkaCluster, start_cluster


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory, require_external) -> Iterator[KafkaCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("kafka-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kcat(require_external) -> str:
    path = shutil.which("kcat")
    require_external("kcat", path is not None, "Debian: apt-get install kcat (./dev test does)")
    return path  # type: ignore[return-value]


@pytest.fixture(scope="session")
def require_client(require_external):
    """`require_client(module)`: that Kafka client library is installed (the
    `kafka-clients` extra), else skip — or fail under CI."""

    def require(module: str) -> None:
        require_external(
            module,
            importlib.util.find_spec(module) is not None,
            "pip install -e '.[kafka-clients]' (./dev test does)",
        )

    return require


@pytest.fixture
def confluent_kafka(require_client):
    """The confluent_kafka module (librdkafka), required as `require_client` says."""
    require_client("confluent_kafka")
    import confluent_kafka

    return confluent_kafka
