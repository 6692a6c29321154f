"""When a leader announces its ISR changes to the controller (IsrChangePropagation): once
the changes have been quiet for `linger_ms`, or at the latest `max_delay_ms` after the
previous announcement. (The leader's conditional ISR write itself is KafkaZkClient's:
tests/kcore/test_zk_client.py.)"""

from kcore.common import TopicPartition
from kcore.server.isr_updates import IsrChangePropagation

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def test_nothing_is_due_without_changes():
    assert IsrChangePropagation().take_due(1_000_000) == []


def test_changes_are_announced_together_once_quiet_for_the_linger_time():
    propagation = IsrChangePropagation(linger_ms=5000, max_delay_ms=60000)
    propagation.record(B, 1_000)
    propagation.record(A, 3_000)
    assert propagation.take_due(8_000) == []  # the last change is 5 s old, not older
    assert propagation.take_due(8_001) == [A, B]
    assert propagation.take_due(50_000) == []  # announced once


def test_a_steady_stream_of_changes_is_announced_after_the_max_delay():
    propagation = IsrChangePropagation(linger_ms=5000, max_delay_ms=60000)
    for now_ms in range(0, 60_001, 1000):  # never quiet for 5 s
        propagation.record(A, now_ms)
        assert propagation.take_due(now_ms) == []
    propagation.record(B, 60_001)
    assert propagation.take_due(60_001) == [A, B]
