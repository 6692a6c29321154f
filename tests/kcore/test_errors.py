import pytest

import kcore.errors as errors
from kcore.errors import (
    FencedLeaderEpochError,
    KafkaError,
    NotEnoughReplicasError,
    StaleBrokerEpochError,
    error_for_code,
    raise_for_code,
)


@pytest.mark.parametrize(
    "name, code, retriable",
    [
        ("NotLeaderOrFollowerError", 6, True),
        ("NotEnoughReplicasError", 19, True),
        ("NotEnoughReplicasAfterAppendError", 20, True),
        ("StaleControllerEpochError", 11, False),
        ("NotControllerError", 41, True),
        ("FencedLeaderEpochError", 74, True),
        ("StaleBrokerEpochError", 77, False),
        ("InvalidReplicationFactorError", 38, False),
        ("UnknownServerError", -1, False),
        ("OffsetOutOfRangeError", 1, False),
        ("UnknownTopicOrPartitionError", 3, True),
        ("LeaderNotAvailableError", 5, True),
        ("RequestTimedOutError", 7, True),
        ("ReplicaNotAvailableError", 9, True),
        ("InvalidTopicError", 17, False),
        ("TopicAlreadyExistsError", 36, False),
        ("InvalidPartitionsError", 37, False),
        ("InvalidRequestError", 42, False),
        ("ConcurrentTransactionsError", 51, True),
        ("KafkaStorageError", 56, True),
        ("UnknownLeaderEpochError", 75, True),
        ("PreferredLeaderNotAvailableError", 80, True),
        ("NewLeaderElectedError", 108, False),
        ("UnsupportedAssignorError", 112, False),
    ],
)
def test_errors_carry_kafkas_codes_and_retriability(name, code, retriable):
    cls = getattr(errors, name)
    assert issubclass(cls, KafkaError)
    assert (cls.code, cls.retriable) == (code, retriable)
    assert name in errors.__all__


def test_codes_map_back_to_their_class():
    error = error_for_code(19, "only 1 of 3 replicas in sync")
    assert isinstance(error, NotEnoughReplicasError)
    assert str(error) == "only 1 of 3 replicas in sync"
    with pytest.raises(FencedLeaderEpochError):
        raise_for_code(74)
    raise_for_code(0)
    assert str(error_for_code(9999)) == "unknown Kafka error code 9999"
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(0)


def test_every_code_is_unique():
    codes = [cls.code for cls in errors.ERROR_CLASSES.values()]
    assert len(codes) == len(set(codes))
    assert StaleBrokerEpochError.name == "STALE_BROKER_EPOCH"


def test_every_kafka_3_5_code_up_to_112_is_defined():
    assert set(errors.ERROR_CLASSES) == {-1, *range(1, 113)}
    for code, cls in errors.ERROR_CLASSES.items():
        assert errors.ERROR_CODES[cls.name] == code
        assert errors.ERROR_NAMES[code] == cls.name
        assert cls.__name__.endswith("Error")
    assert errors.ERROR_CODES["NONE"] == 0
