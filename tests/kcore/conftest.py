import math

import pytest
import trio


async def _wait_until(predicate, timeout=math.inf, poll=0.01):
    """Waits until predicate() holds (under virtual time this costs no real time)."""
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(poll)


@pytest.fixture
def wait_until():
    return _wait_until
