"""Running a real ZooKeeper (Debian's `zookeeper` package) next to zkstub: for the
conformance suite and the zk-ops benchmark. The server listens on 127.0.0.1 only.

    async with run_real_zookeeper(tmp_path, tick_ms=200) as real:
        async with zkstub.connect(f"zookeeper://{real.connect_string}") as zk: ...
"""

from zkstub._real_server import (
    RealZooKeeper,
    RealZooKeeperThread,
    find_zookeeper_classpath,
    java_available,
    run_real_zookeeper,
)

__all__ = [
    "RealZooKeeper",
    "RealZooKeeperThread",
    "find_zookeeper_classpath",
    "java_available",
    "run_real_zookeeper",
]
