import pytest

from kcore.log import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)


@pytest.mark.parametrize(
    "name",
    [REPLICATION_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT],
)
def test_offset_checkpoint_format(tmp_path, name):
    checkpoint = OffsetCheckpointFile(tmp_path / name)
    assert checkpoint.read() == {}
    checkpoint.write({("orders", 1): 42, ("events", 0): 7, ("orders", 0): 0})
    assert (tmp_path / name).read_bytes() == b"0\n3\nevents 0 7\norders 0 0\norders 1 42\n"
    assert OffsetCheckpointFile(tmp_path / name).read() == {
        ("events", 0): 7,
        ("orders", 0): 0,
        ("orders", 1): 42,
    }
    checkpoint.write({})
    assert (tmp_path / name).read_bytes() == b"0\n0\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [name]


def test_malformed_offset_checkpoint(tmp_path):
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    path.write_text("0\n1\norders 1\n")
    with pytest.raises(ValueError, match="line 3"):
        OffsetCheckpointFile(path).read()
