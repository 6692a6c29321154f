"""The partition log and what lives beside it in a log dir: segments with a sparse offset
index, Kafka's v2 record batches (CRC32C, DefaultRecord encoding, every codec), the leader
epoch cache, the offset checkpoint files and `meta.properties`. Synchronous and clock-free:
the broker passes `now_ms` in and group-commits `flush()`."""

from kcore.log._batch import (
    HEADER_SIZE,
    BatchHeader,
    Record,
    build_batch,
    check_produced_batch,
    iter_batch_records,
    iter_records,
    parse_header,
    split_batches,
    split_valid_batches,
    validate_batch,
    with_base_offset,
    with_log_append_time,
    with_partition_leader_epoch,
)
from kcore.log._checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kcore.log._compression import COMPRESSION_TYPES
from kcore.log._epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from kcore.log._errors import (
    CorruptRecordError,
    InconsistentBrokerIdError,
    UnexpectedAppendOffsetError,
)
from kcore.log._meta_properties import InconsistentClusterIdError, check_meta_properties
from kcore.log._partition_log import MemoryPartitionLog, PartitionLog
from kcore.log._timestamps import TimestampAndOffset, first_at_or_after, max_timestamp

__all__ = [
    "COMPRESSION_TYPES",
    "HEADER_SIZE",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "BatchHeader",
    "CorruptRecordError",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "LeaderEpochCache",
    "MemoryPartitionLog",
    "OffsetCheckpointFile",
    "PartitionLog",
    "Record",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
    "build_batch",
    "check_meta_properties",
    "check_produced_batch",
    "first_at_or_after",
    "iter_batch_records",
    "iter_records",
    "max_timestamp",
    "parse_header",
    "split_batches",
    "split_valid_batches",
    "validate_batch",
    "with_base_offset",
    "with_log_append_time",
    "with_partition_leader_epoch",
]
