"""actors.testing: the poller tests and simulations wait with."""

import pytest
import trio

from actors.testing import DEFAULT_POLL_TIMEOUT, poll_until


async def test_poll_until_returns_at_the_first_look_that_finds_the_condition(autojump_clock):
    start = trio.current_time()
    await poll_until(lambda: trio.current_time() - start >= 1.2, every=0.5)
    assert trio.current_time() - start == pytest.approx(1.5)


async def test_poll_until_gives_up_after_a_finite_default_timeout(autojump_clock):
    start = trio.current_time()
    with pytest.raises(trio.TooSlowError):
        await poll_until(lambda: False)
    assert trio.current_time() - start == pytest.approx(DEFAULT_POLL_TIMEOUT)
