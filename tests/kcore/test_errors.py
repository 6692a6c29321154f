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
