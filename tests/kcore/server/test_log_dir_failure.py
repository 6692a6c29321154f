"""A log dir's I/O failure: reported once, waited for, and answered KAFKA_STORAGE_ERROR."""

import errno

import pytest
import trio

from kcore import errors
from kcore.server.log_dir_failure import LogDirFailureChannel


async def test_the_first_failure_wins_and_wakes_the_waiter():
    channel = LogDirFailureChannel()
    first, later = OSError(errno.EIO, "first"), OSError(errno.EIO, "later")
    reported = []
    async with trio.open_nursery() as nursery:

        async def wait():
            reported.append(await channel.wait())

        nursery.start_soon(wait)
        assert channel.failure is None
        channel.fail("/data/a", first)
        channel.fail("/data/b", later)
    assert reported == [("/data/a", first)]
    assert channel.failure == ("/data/a", first)


def test_an_io_error_on_a_log_becomes_kafka_storage_error_and_takes_its_dir_offline():
    channel = LogDirFailureChannel()
    with pytest.raises(errors.KafkaStorageError) as raised:
        with channel.handling_io_errors("/data/a", "append to", "t-0"):
            raise OSError(errno.EIO, "Input/output error")
    assert raised.value.code == 56
    assert "append to t-0" in str(raised.value)
    assert channel.is_offline("/data/a") and not channel.is_offline("/data/b")
    with pytest.raises(errors.KafkaStorageError):
        with channel.handling_io_errors("/data/a", "read", "t-1"):
            pytest.fail("an offline dir is not touched")
    with channel.handling_io_errors("/data/b", "read", "u-0"):
        pass


def test_other_errors_pass_through_and_report_nothing():
    channel = LogDirFailureChannel()
    with pytest.raises(errors.NotLeaderOrFollowerError):
        with channel.handling_io_errors("/data/a", "append to", "t-0"):
            raise errors.NotLeaderOrFollowerError()
    assert channel.failure is None
