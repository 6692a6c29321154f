import pytest

from kcore.testing import poll_until


@pytest.fixture
def wait_until():
    return poll_until
