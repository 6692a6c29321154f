"""The history checker finds each kind of anomaly and accepts what the contract allows."""

from kcore.common import TopicPartition
from kcore.testing.history import Outcome, ProduceOp, check

TP = TopicPartition("t", 0)


def _op(value, outcome=Outcome.OK, offset=-1, acks=-1, idempotent=False):
    return ProduceOp("p", TP, value, acks, idempotent, outcome, offset)


def _all_durable(op):
    return op.acks == -1


def test_a_clean_history_is_valid():
    ops = [_op(b"a", offset=0), _op(b"b", offset=1), _op(b"c", Outcome.INDETERMINATE)]
    result = check(ops, {TP: [(0, b"a"), (1, b"b")]}, durable=_all_durable)
    assert result.valid, result.summary()
    assert (result.acknowledged, result.durable, result.read) == (2, 2, 2)


def test_indeterminate_writes_may_appear():
    ops = [_op(b"a", Outcome.INDETERMINATE)]
    assert check(ops, {TP: [(0, b"a")]}, durable=_all_durable).valid


def test_a_lost_durable_write_is_an_anomaly_and_a_lost_acks1_write_is_not():
    ops = [_op(b"a", offset=0), _op(b"b", offset=1, acks=1)]
    result = check(ops, {TP: []}, durable=_all_durable)
    assert [a.kind for a in result.anomalies] == ["lost"]
    assert result.anomalies[0].value == b"a"
    assert [a.value for a in result.lost_non_durable] == [b"b"]


def test_moved_phantom_and_resurrected_writes_are_anomalies():
    ops = [_op(b"a", offset=0), _op(b"f", Outcome.FAILED)]
    result = check(ops, {TP: [(0, b"x"), (1, b"a"), (2, b"f")]}, durable=_all_durable)
    assert sorted(a.kind for a in result.anomalies) == ["moved", "phantom", "resurrected"]


def test_duplicates_are_anomalies_only_for_idempotent_producers():
    plain = [_op(b"a", offset=1)]
    result = check(plain, {TP: [(0, b"a"), (1, b"a")]}, durable=_all_durable)
    assert result.valid and result.duplicates_tolerated == 1
    idempotent = [_op(b"a", offset=1, idempotent=True)]
    result = check(idempotent, {TP: [(0, b"a"), (1, b"a")]}, durable=_all_durable)
    assert [a.kind for a in result.anomalies] == ["duplicated"]
