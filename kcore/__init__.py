"""kcore: Kafka's ZooKeeper-mode core on Trio (see DESIGN.md).

What a Trio application uses: `open_broker` (one broker), `open_cluster` (ZooKeeper and
brokers 1..N in this process), and the clients `Producer`, `Consumer` and `Admin` (real TCP
and a fresh random.Random unless given; bootstrap servers as `"host:port"` strings or
`(host, port)` pairs). Tests add hooks through `kcore.testing`."""

from kcore._fetcher_id import fetcher_id
from kcore.client import Admin, Consumer, Producer
from kcore.embedded import Cluster, EmbeddedBroker, open_broker, open_cluster

__all__ = [
    "Admin",
    "Cluster",
    "Consumer",
    "EmbeddedBroker",
    "Producer",
    "fetcher_id",
    "open_broker",
    "open_cluster",
]
