"""Start-up recovery of the file log, and crashes of the memory log."""

import random

import pytest

from kcore.log import LEADER_EPOCH_CHECKPOINT, MemoryPartitionLog, PartitionLog, iter_batch_records


def offsets(batches):
    return [record.offset for record in iter_batch_records(batches)]


def fill(log, make_batch, batches=4, epoch=0):
    for _ in range(batches):
        log.append(make_batch(2, value_size=40), leader_epoch=epoch)


def segment_file(directory, base_offset=0, suffix=".log"):
    return directory / f"{base_offset:020d}{suffix}"


def test_reopen_keeps_everything(tmp_path, make_batch):
    log = PartitionLog(tmp_path, segment_bytes=300)
    fill(log, make_batch, batches=6)
    bases = log.segment_base_offsets()
    log.close()
    reopened = PartitionLog(tmp_path, segment_bytes=300, recovery_point=12)
    assert reopened.segment_base_offsets() == bases
    assert offsets(reopened.read(0, 100_000)) == list(range(12))
    assert reopened.append(make_batch(), leader_epoch=1) == (12, 12)


@pytest.mark.parametrize("cut", [1, 30, 100])
def test_torn_tail_is_truncated_to_last_whole_batch(tmp_path, make_batch, cut):
    log = PartitionLog(tmp_path)
    fill(log, make_batch)
    log.close()
    path = segment_file(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[:-cut])
    reopened = PartitionLog(tmp_path)
    assert reopened.log_end_offset == 6
    assert offsets(reopened.read(0, 100_000)) == list(range(6))
    assert path.stat().st_size == len(whole) * 3 // 4
    assert reopened.append(make_batch(), leader_epoch=0) == (6, 6)


def test_flipped_byte_truncates_from_the_corrupt_batch(tmp_path, make_batch):
    log = PartitionLog(tmp_path, segment_bytes=500)
    fill(log, make_batch, batches=6)
    assert log.segment_base_offsets() == [0, 6]
    log.close()
    path = segment_file(tmp_path)
    data = bytearray(path.read_bytes())
    batch_size = len(data) // 3
    data[batch_size + 70] ^= 0x01  # inside the second batch's records
    path.write_bytes(bytes(data))
    reopened = PartitionLog(tmp_path, segment_bytes=500)
    assert reopened.log_end_offset == 2
    assert reopened.segment_base_offsets() == [0]  # later segments are gone too
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [segment_file(tmp_path).name]


def test_corruption_below_recovery_point_is_trusted(tmp_path, make_batch):
    log = PartitionLog(tmp_path, segment_bytes=300)
    fill(log, make_batch, batches=6)
    log.close()
    path = segment_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[70] ^= 0x01
    path.write_bytes(bytes(data))
    assert PartitionLog(tmp_path, segment_bytes=300, recovery_point=12).log_end_offset == 12


def test_missing_index_is_rebuilt(tmp_path, make_batch):
    log = PartitionLog(tmp_path, index_interval_bytes=100)
    fill(log, make_batch, batches=8)
    log.close()
    index = segment_file(tmp_path, suffix=".index")
    original = index.read_bytes()
    assert len(original) > 8 and len(original) % 8 == 0
    index.unlink()
    reopened = PartitionLog(tmp_path, index_interval_bytes=100, recovery_point=16)
    assert index.read_bytes() == original
    assert offsets(reopened.read(9, 1)) == [8, 9]


def test_epoch_cache_is_truncated_to_recovered_end(tmp_path, make_batch):
    log = PartitionLog(tmp_path)
    fill(log, make_batch, batches=2, epoch=1)
    log.flush()
    fill(log, make_batch, batches=2, epoch=2)
    log.close()
    path = segment_file(tmp_path)
    path.write_bytes(path.read_bytes()[:-5])
    reopened = PartitionLog(tmp_path, recovery_point=4)
    assert reopened.log_end_offset == 6
    assert reopened.epoch_cache.entries() == [(1, 0), (2, 4)]
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3 * 2])
    reopened.close()
    again = PartitionLog(tmp_path, recovery_point=4)
    assert again.log_end_offset == 4
    assert again.epoch_cache.entries() == [(1, 0)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n1 0\n"


def test_log_start_offset_is_kept(tmp_path, make_batch):
    log = PartitionLog(tmp_path, segment_bytes=1)
    fill(log, make_batch, batches=3)
    log.increment_log_start_offset(3)
    assert log.segment_base_offsets() == [2, 4]
    log.close()
    reopened = PartitionLog(tmp_path, segment_bytes=1, log_start_offset=3, recovery_point=6)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 6)


@pytest.mark.parametrize("seed", range(20))
def test_memory_crash_keeps_flushed_batches_and_a_valid_prefix(make_batch, seed):
    rng = random.Random(seed)
    log = MemoryPartitionLog(segment_bytes=250)
    fill(log, make_batch, batches=3, epoch=1)
    log.flush()
    fill(log, make_batch, batches=4, epoch=2)
    log.crash(rng, torn_tail=True)
    end = log.log_end_offset
    assert 6 <= end <= 14 and end % 2 == 0
    assert offsets(log.read(0, 100_000)) == list(range(end))
    assert log.epoch_cache.entries() == ([(1, 0), (2, 6)] if end > 6 else [(1, 0)])
    assert log.append(make_batch(), leader_epoch=3) == (end, end)


def test_memory_crash_without_torn_tail_drops_all_unflushed(make_batch):
    log = MemoryPartitionLog()
    fill(log, make_batch, batches=2)
    log.flush()
    fill(log, make_batch, batches=2)
    log.crash(random.Random(0), torn_tail=False)
    assert log.log_end_offset == 4


@pytest.mark.parametrize("follower", [False, True])
def test_flush_messages_fsyncs_once_that_many_messages_are_unflushed(make_batch, follower):
    """Kafka's flush.messages: with 3, a power cut loses fewer than 3 messages."""
    source = MemoryPartitionLog()
    fill(source, make_batch, batches=5)  # batches of 2 messages
    log = MemoryPartitionLog()
    log.flush_messages = 3
    recovery_points = []
    for batch in source.read(0, 100_000):
        if follower:
            log.append_as_follower(batch)
        else:
            log.append(batch, leader_epoch=0)
        recovery_points.append(log.recovery_point)
    assert recovery_points == [0, 4, 4, 8, 8]
    log.crash(random.Random(0), torn_tail=False)
    assert log.log_end_offset == 8
