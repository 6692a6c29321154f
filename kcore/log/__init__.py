"""The partition log and what lives beside it in a log dir: segments with a sparse offset
index, Kafka's v2 record batches (CRC32C, DefaultRecord encoding, every codec), the leader
epoch cache, the offset checkpoint files and `meta.properties`, and log compaction's rules
(`_cleaner`: what a cleaned batch keeps; the log's `clean` swaps cleaned segments in).
Synchronous and clock-free: the broker passes `now_ms` in and group-commits `flush()`."""

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
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kcore.log._cleaner import (
    CleaningAbortedError,
    LogToClean,
    OffsetMap,
    SegmentSummary,
    check_keys_for_compaction,
    cleanable_offsets,
    filthiest,
    log_to_clean,
    max_compaction_delay,
    offset_map_capacity,
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
    "CLEANER_OFFSET_CHECKPOINT",
    "COMPRESSION_TYPES",
    "HEADER_SIZE",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "BatchHeader",
    "CleaningAbortedError",
    "CorruptRecordError",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "LeaderEpochCache",
    "LogToClean",
    "MemoryPartitionLog",
    "OffsetCheckpointFile",
    "OffsetMap",
    "PartitionLog",
    "Record",
    "SegmentSummary",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
    "build_batch",
    "check_keys_for_compaction",
    "check_meta_properties",
    "check_produced_batch",
    "cleanable_offsets",
    "filthiest",
    "first_at_or_after",
    "iter_batch_records",
    "iter_records",
    "log_to_clean",
    "max_compaction_delay",
    "max_timestamp",
    "offset_map_capacity",
    "parse_header",
    "split_batches",
    "split_valid_batches",
    "validate_batch",
    "with_base_offset",
    "with_log_append_time",
    "with_partition_leader_epoch",
]
