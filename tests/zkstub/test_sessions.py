import random

import pytest

from zkstub import SessionExpiredError
from zkstub._sessions import SessionTable


def table():
    return SessionTable(tick_time=2.0, rng=random.Random(1))


def test_timeout_is_clamped_to_two_and_twenty_ticks():
    sessions = table()
    assert sessions.create(1.0, now=0.0).timeout == 4.0
    assert sessions.create(6.0, now=0.0).timeout == 6.0
    assert sessions.create(100.0, now=0.0).timeout == 40.0


def test_deadline_moves_with_touch_and_due_lists_expired_sessions():
    sessions = table()
    a = sessions.create(6.0, now=0.0)
    b = sessions.create(6.0, now=0.0)
    sessions.touch(a.session_id, now=5.0)
    assert sessions.due(5.9) == []
    assert sessions.due(6.0) == [b.session_id]
    assert sessions.due(11.0) == sorted([a.session_id, b.session_id])


def test_revalidate_needs_the_password_and_a_live_session():
    sessions = table()
    s = sessions.create(6.0, now=0.0)
    assert sessions.revalidate(s.session_id, s.password, now=1.0) is s
    with pytest.raises(SessionExpiredError):
        sessions.revalidate(s.session_id, b"wrong", now=1.0)
    sessions.remove(s.session_id)
    with pytest.raises(SessionExpiredError):
        sessions.revalidate(s.session_id, s.password, now=1.0)


def test_ids_are_unique_and_seeded():
    ids = [table().create(6.0, 0.0).session_id for _ in range(2)]
    assert ids[0] == ids[1]
    sessions = table()
    assert len({sessions.create(6.0, 0.0).session_id for _ in range(5)}) == 5
