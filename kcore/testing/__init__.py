"""Testing kcore: an embedded cluster with test hooks (`open_cluster`), and for
whole-cluster simulation the history checker and the invariants checked while a simulated
cluster runs."""

from kcore.testing._cluster import (
    BROKER_PORT,
    ZK_NODE,
    ZK_PORT,
    EmbeddedCluster,
    broker_node,
    open_cluster,
)
from kcore.testing._poll import poll_until

__all__ = [
    "BROKER_PORT",
    "ZK_NODE",
    "ZK_PORT",
    "EmbeddedCluster",
    "broker_node",
    "open_cluster",
    "poll_until",
]
