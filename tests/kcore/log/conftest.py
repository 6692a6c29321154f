import pytest

from kcore.log import MemoryPartitionLog, PartitionLog, build_batch


@pytest.fixture
def make_batch():
    """A batch of `count` records with `value_size`-byte values stamped `timestamp`."""

    def make(count: int = 1, *, timestamp: int = 0, value_size: int = 10, base_offset: int = 0):
        records = [(timestamp, None, bytes([i % 256]) * value_size) for i in range(count)]
        return build_batch(records, base_offset=base_offset)

    return make


@pytest.fixture(params=["file", "memory"])
def open_log(request, tmp_path):
    """Opens a PartitionLog in a fresh directory or a MemoryPartitionLog, same settings."""
    opened = []

    def open_(**settings):
        if request.param == "file":
            log = PartitionLog(tmp_path / f"t-{len(opened)}", **settings)
        else:
            log = MemoryPartitionLog(**settings)
        opened.append(log)
        return log

    yield open_
    for log in opened:
        log.close()
