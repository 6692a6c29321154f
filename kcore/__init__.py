"""kcore: Kafka's ZooKeeper-mode core on Trio (see DESIGN.md)."""

from kcore._fetcher_id import fetcher_id

__all__ = ["fetcher_id"]
