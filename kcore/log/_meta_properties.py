"""`meta.properties` in each log dir: which broker and which cluster the data belongs to.
Created on first start, checked on every later one (Kafka's BrokerMetadataCheckpoint)."""

from __future__ import annotations

import pathlib

from kcore.errors import InconsistentClusterIdError
from kcore.log._checkpoint import write_atomically
from kcore.log._errors import InconsistentBrokerIdError

FILE_NAME = "meta.properties"

__all__ = ["InconsistentBrokerIdError", "InconsistentClusterIdError", "check_meta_properties"]


def _read_properties(path: pathlib.Path) -> dict[str, str]:
    values = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def check_meta_properties(log_dir: pathlib.Path, broker_id: int, cluster_id: str) -> None:
    """Creates `meta.properties` on first start; refuses to start on a log dir written by
    another broker or another cluster."""
    log_dir = pathlib.Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / FILE_NAME
    if not path.exists():
        write_atomically(path, f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
        return
    values = _read_properties(path)
    if values.get("broker.id") != str(broker_id):
        raise InconsistentBrokerIdError(
            f"Configured broker.id {broker_id} doesn't match stored broker.id "
            f"{values.get('broker.id')} in meta.properties in {log_dir}"
        )
    if values.get("cluster.id") != cluster_id:
        raise InconsistentClusterIdError(
            f"The Cluster ID {cluster_id} doesn't match stored clusterId "
            f"{values.get('cluster.id')} in meta.properties in {log_dir}. The broker is trying "
            "to join the wrong cluster. Configured zookeeper.connect may be wrong."
        )
