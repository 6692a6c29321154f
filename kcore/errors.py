"""One exception class per Kafka error (Kafka 3.5's `Errors`), with Kafka's numeric `code`
and whether a client may retry (`retriable`: Kafka's RetriableException subclasses).

`error_for_code(code)` builds the exception a response's error code stands for; `raise_for
_code(code)` raises it unless the code is 0 (NONE).
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every Kafka error. `code` is Kafka's error code, `name` its constant."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.name)


# (code, Kafka's constant, class name, retriable)
_ERRORS: tuple[tuple[int, str, str, bool], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", "UnknownServerError", False),
    (1, "OFFSET_OUT_OF_RANGE", "OffsetOutOfRangeError", False),
    (2, "CORRUPT_MESSAGE", "CorruptMessageError", True),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionError", True),
    (4, "INVALID_FETCH_SIZE", "InvalidFetchSizeError", False),
    (5, "LEADER_NOT_AVAILABLE", "LeaderNotAvailableError", True),
    (6, "NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerError", True),
    (7, "REQUEST_TIMED_OUT", "RequestTimedOutError", True),
    (8, "BROKER_NOT_AVAILABLE", "BrokerNotAvailableError", False),
    (9, "REPLICA_NOT_AVAILABLE", "ReplicaNotAvailableError", True),
    (10, "MESSAGE_TOO_LARGE", "MessageTooLargeError", False),
    (11, "STALE_CONTROLLER_EPOCH", "StaleControllerEpochError", False),
    (12, "OFFSET_METADATA_TOO_LARGE", "OffsetMetadataTooLargeError", False),
    (13, "NETWORK_EXCEPTION", "NetworkError", True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", "CoordinatorLoadInProgressError", True),
    (15, "COORDINATOR_NOT_AVAILABLE", "CoordinatorNotAvailableError", True),
    (16, "NOT_COORDINATOR", "NotCoordinatorError", True),
    (17, "INVALID_TOPIC_EXCEPTION", "InvalidTopicError", False),
    (18, "RECORD_LIST_TOO_LARGE", "RecordListTooLargeError", False),
    (19, "NOT_ENOUGH_REPLICAS", "NotEnoughReplicasError", True),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NotEnoughReplicasAfterAppendError", True),
    (21, "INVALID_REQUIRED_ACKS", "InvalidRequiredAcksError", False),
    (22, "ILLEGAL_GENERATION", "IllegalGenerationError", False),
    (23, "INCONSISTENT_GROUP_PROTOCOL", "InconsistentGroupProtocolError", False),
    (24, "INVALID_GROUP_ID", "InvalidGroupIdError", False),
    (25, "UNKNOWN_MEMBER_ID", "UnknownMemberIdError", False),
    (26, "INVALID_SESSION_TIMEOUT", "InvalidSessionTimeoutError", False),
    (27, "REBALANCE_IN_PROGRESS", "RebalanceInProgressError", False),
    (28, "INVALID_COMMIT_OFFSET_SIZE", "InvalidCommitOffsetSizeError", False),
    (29, "TOPIC_AUTHORIZATION_FAILED", "TopicAuthorizationFailedError", False),
    (30, "GROUP_AUTHORIZATION_FAILED", "GroupAuthorizationFailedError", False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", "ClusterAuthorizationFailedError", False),
    (32, "INVALID_TIMESTAMP", "InvalidTimestampError", False),
    (33, "UNSUPPORTED_SASL_MECHANISM", "UnsupportedSaslMechanismError", False),
    (34, "ILLEGAL_SASL_STATE", "IllegalSaslStateError", False),
    (35, "UNSUPPORTED_VERSION", "UnsupportedVersionError", False),
    (36, "TOPIC_ALREADY_EXISTS", "TopicAlreadyExistsError", False),
    (37, "INVALID_PARTITIONS", "InvalidPartitionsError", False),
    (38, "INVALID_REPLICATION_FACTOR", "InvalidReplicationFactorError", False),
    (39, "INVALID_REPLICA_ASSIGNMENT", "InvalidReplicaAssignmentError", False),
    (40, "INVALID_CONFIG", "InvalidConfigurationError", False),
    (41, "NOT_CONTROLLER", "NotControllerError", True),
    (42, "INVALID_REQUEST", "InvalidRequestError", False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", "UnsupportedForMessageFormatError", False),
    (44, "POLICY_VIOLATION", "PolicyViolationError", False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "OutOfOrderSequenceError", False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", "DuplicateSequenceError", False),
    (47, "INVALID_PRODUCER_EPOCH", "InvalidProducerEpochError", False),
    (48, "INVALID_TXN_STATE", "InvalidTxnStateError", False),
    (49, "INVALID_PRODUCER_ID_MAPPING", "InvalidPidMappingError", False),
    (50, "INVALID_TRANSACTION_TIMEOUT", "InvalidTxnTimeoutError", False),
    (51, "CONCURRENT_TRANSACTIONS", "ConcurrentTransactionsError", True),
    (52, "TRANSACTION_COORDINATOR_FENCED", "TransactionCoordinatorFencedError", False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "TransactionalIdAuthorizationError", False),
    (54, "SECURITY_DISABLED", "SecurityDisabledError", False),
    (55, "OPERATION_NOT_ATTEMPTED", "OperationNotAttemptedError", False),
    (56, "KAFKA_STORAGE_ERROR", "KafkaStorageError", True),
    (57, "LOG_DIR_NOT_FOUND", "LogDirNotFoundError", False),
    (58, "SASL_AUTHENTICATION_FAILED", "SaslAuthenticationError", False),
    (59, "UNKNOWN_PRODUCER_ID", "UnknownProducerIdError", False),
    (60, "REASSIGNMENT_IN_PROGRESS", "ReassignmentInProgressError", False),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", "DelegationTokenDisabledError", False),
    (62, "DELEGATION_TOKEN_NOT_FOUND", "DelegationTokenNotFoundError", False),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", "DelegationTokenOwnerMismatchError", False),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "UnsupportedByAuthenticationError", False),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", "DelegationTokenAuthorizationError", False),
    (66, "DELEGATION_TOKEN_EXPIRED", "DelegationTokenExpiredError", False),
    (67, "INVALID_PRINCIPAL_TYPE", "InvalidPrincipalTypeError", False),
    (68, "NON_EMPTY_GROUP", "GroupNotEmptyError", False),
    (69, "GROUP_ID_NOT_FOUND", "GroupIdNotFoundError", False),
    (70, "FETCH_SESSION_ID_NOT_FOUND", "FetchSessionIdNotFoundError", True),
    (71, "INVALID_FETCH_SESSION_EPOCH", "InvalidFetchSessionEpochError", True),
    (72, "LISTENER_NOT_FOUND", "ListenerNotFoundError", True),
    (73, "TOPIC_DELETION_DISABLED", "TopicDeletionDisabledError", False),
    (74, "FENCED_LEADER_EPOCH", "FencedLeaderEpochError", True),
    (75, "UNKNOWN_LEADER_EPOCH", "UnknownLeaderEpochError", True),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", "UnsupportedCompressionTypeError", False),
    (77, "STALE_BROKER_EPOCH", "StaleBrokerEpochError", False),
    (78, "OFFSET_NOT_AVAILABLE", "OffsetNotAvailableError", True),
    (79, "MEMBER_ID_REQUIRED", "MemberIdRequiredError", False),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", "PreferredLeaderNotAvailableError", True),
    (81, "GROUP_MAX_SIZE_REACHED", "GroupMaxSizeReachedError", False),
    (82, "FENCED_INSTANCE_ID", "FencedInstanceIdError", False),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", "EligibleLeadersNotAvailableError", True),
    (84, "ELECTION_NOT_NEEDED", "ElectionNotNeededError", False),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", "NoReassignmentInProgressError", False),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", "GroupSubscribedToTopicError", False),
    (87, "INVALID_RECORD", "InvalidRecordError", False),
    (88, "UNSTABLE_OFFSET_COMMIT", "UnstableOffsetCommitError", True),
    (89, "THROTTLING_QUOTA_EXCEEDED", "ThrottlingQuotaExceededError", True),
    (90, "PRODUCER_FENCED", "ProducerFencedError", False),
    (91, "RESOURCE_NOT_FOUND", "ResourceNotFoundError", False),
    (92, "DUPLICATE_RESOURCE", "DuplicateResourceError", False),
    (93, "UNACCEPTABLE_CREDENTIAL", "UnacceptableCredentialError", False),
    (94, "INCONSISTENT_VOTER_SET", "InconsistentVoterSetError", False),
    (95, "INVALID_UPDATE_VERSION", "InvalidUpdateVersionError", False),
    (96, "FEATURE_UPDATE_FAILED", "FeatureUpdateFailedError", False),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", "PrincipalDeserializationError", False),
    (98, "SNAPSHOT_NOT_FOUND", "SnapshotNotFoundError", False),
    (99, "POSITION_OUT_OF_RANGE", "PositionOutOfRangeError", False),
    (100, "UNKNOWN_TOPIC_ID", "UnknownTopicIdError", True),
    (101, "DUPLICATE_BROKER_REGISTRATION", "DuplicateBrokerRegistrationError", False),
    (102, "BROKER_ID_NOT_REGISTERED", "BrokerIdNotRegisteredError", False),
    (103, "INCONSISTENT_TOPIC_ID", "InconsistentTopicIdError", True),
    (104, "INCONSISTENT_CLUSTER_ID", "InconsistentClusterIdError", False),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", "TransactionalIdNotFoundError", False),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", "FetchSessionTopicIdError", True),
    (107, "INELIGIBLE_REPLICA", "IneligibleReplicaError", False),
    (108, "NEW_LEADER_ELECTED", "NewLeaderElectedError", False),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", "OffsetMovedToTieredStorageError", False),
    (110, "FENCED_MEMBER_EPOCH", "FencedMemberEpochError", False),
    (111, "UNRELEASED_INSTANCE_ID", "UnreleasedInstanceIdError", False),
    (112, "UNSUPPORTED_ASSIGNOR", "UnsupportedAssignorError", False),
)

ERROR_CLASSES: dict[int, type[KafkaError]] = {}
ERROR_NAMES: dict[int, str] = {0: "NONE"}
ERROR_CODES: dict[str, int] = {"NONE": 0}

for _code, _name, _class_name, _retriable in _ERRORS:
    _cls = type(
        _class_name,
        (KafkaError,),
        {
            "code": _code,
            "name": _name,
            "retriable": _retriable,
            "__module__": __name__,
            "__doc__": f"Kafka's {_name} ({_code}).",
        },
    )
    globals()[_class_name] = _cls
    ERROR_CLASSES[_code] = _cls
    ERROR_NAMES[_code] = _name
    ERROR_CODES[_name] = _code
del _code, _name, _class_name, _retriable, _cls

# Static names for the errors kcore raises and tests import (the table above defines them;
# these lines let linters and readers see them).
UnknownServerError: type[KafkaError] = ERROR_CLASSES[-1]
NotLeaderOrFollowerError: type[KafkaError] = ERROR_CLASSES[6]
RequestTimedOutError: type[KafkaError] = ERROR_CLASSES[7]
StaleControllerEpochError: type[KafkaError] = ERROR_CLASSES[11]
InvalidTopicError: type[KafkaError] = ERROR_CLASSES[17]
NotEnoughReplicasError: type[KafkaError] = ERROR_CLASSES[19]
NotEnoughReplicasAfterAppendError: type[KafkaError] = ERROR_CLASSES[20]
TopicAlreadyExistsError: type[KafkaError] = ERROR_CLASSES[36]
InvalidPartitionsError: type[KafkaError] = ERROR_CLASSES[37]
InvalidReplicationFactorError: type[KafkaError] = ERROR_CLASSES[38]
InvalidConfigurationError: type[KafkaError] = ERROR_CLASSES[40]
NotControllerError: type[KafkaError] = ERROR_CLASSES[41]
InvalidRequestError: type[KafkaError] = ERROR_CLASSES[42]
FencedLeaderEpochError: type[KafkaError] = ERROR_CLASSES[74]
UnknownLeaderEpochError: type[KafkaError] = ERROR_CLASSES[75]
StaleBrokerEpochError: type[KafkaError] = ERROR_CLASSES[77]
InconsistentClusterIdError: type[KafkaError] = ERROR_CLASSES[104]

OffsetOutOfRangeError: type[KafkaError] = ERROR_CLASSES[1]
CoordinatorNotAvailableError: type[KafkaError] = ERROR_CLASSES[15]
NotCoordinatorError: type[KafkaError] = ERROR_CLASSES[16]
IllegalGenerationError: type[KafkaError] = ERROR_CLASSES[22]
UnknownMemberIdError: type[KafkaError] = ERROR_CLASSES[25]
RebalanceInProgressError: type[KafkaError] = ERROR_CLASSES[27]
FencedInstanceIdError: type[KafkaError] = ERROR_CLASSES[82]


class CommitFailedError(KafkaError):
    """Kafka's CommitFailedException (a client-side error, no code of its own): an offset
    commit the group refused because this member is no longer part of the generation it
    committed in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID): the group
    rebalanced, most likely because the consumer did not poll within max_poll_interval_ms
    or missed its session timeout, and its partitions may belong to another member now.
    `error_code` is the code the coordinator answered with."""

    name = "COMMIT_FAILED"
    retriable = False

    def __init__(self, message: str = "", *, error_code: int = -1) -> None:
        super().__init__(message)
        self.error_code = error_code


class NoOffsetForPartitionError(OffsetOutOfRangeError):  # type: ignore[misc, valid-type]
    """Kafka's NoOffsetForPartitionException: a partition has neither a committed offset
    nor a position and auto_offset_reset is "none". A subclass of OffsetOutOfRangeError
    (both are Kafka's InvalidOffsetException)."""

    def __init__(self, message: str = "", *, partitions: tuple = ()) -> None:
        super().__init__(message)
        self.partitions = partitions


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The exception for a non-zero error code; an unknown code is an UnknownServerError
    that says which code it was."""
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = ERROR_CLASSES.get(code)
    if cls is None:
        return UnknownServerError(message or f"unknown Kafka error code {code}")
    return cls(message)


def raise_for_code(code: int, message: str = "") -> None:
    if code != 0:
        raise error_for_code(code, message)


__all__ = [
    "ERROR_CLASSES",
    "ERROR_CODES",
    "ERROR_NAMES",
    "KafkaError",
    "error_for_code",
    "raise_for_code",
    "CommitFailedError",
    "NoOffsetForPartitionError",
    *(class_name for _, _, class_name, _ in _ERRORS),
]


def root_cause(error: BaseException) -> BaseException:
    """What went wrong first, under the groups a nursery wraps errors in and a
    supervisor's RestartIntensityError (whose cause is the child's error): what a
    command-line tool reports in its one line."""
    from actors import RestartIntensityError

    while True:
        if isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
        elif isinstance(error, RestartIntensityError) and error.__cause__ is not None:
            error = error.__cause__
        else:
            return error
