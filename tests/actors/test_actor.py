"""Actors: tell / ask, errors to the asker, and what happens when an actor is gone."""

import pytest
import trio

from actors import Actor, ActorStoppedError, AskTimeoutError


class Counter(Actor):
    async def on_start(self):
        self.total = 0
        self.starts = getattr(self, "starts", 0) + 1

    async def handle(self, message):
        match message:
            case ("add", n):
                self.total += n
                return self.total
            case "total":
                return self.total
            case "boom":
                raise ValueError("boom")
            case ("slow", seconds):
                await trio.sleep(seconds)
                return "done"


async def test_tell_then_ask_sees_messages_in_order(nursery):
    counter = Counter()
    await nursery.start(counter.run)
    for n in range(1, 5):
        counter.tell(("add", n))
    assert await counter.ask("total") == 10


async def test_handler_error_reaches_the_asker_and_crashes_the_actor():
    counter = Counter()
    with pytest.raises(ExceptionGroup) as crashed:
        async with trio.open_nursery() as nursery:
            await nursery.start(counter.run)
            with pytest.raises(ValueError, match="boom"):
                await counter.ask("boom")
    assert crashed.group_contains(ValueError, match="boom")


async def test_ask_times_out(autojump_clock, nursery):
    counter = Counter()
    await nursery.start(counter.run)
    with pytest.raises(AskTimeoutError, match="Counter"):
        await counter.ask(("slow", 10), timeout=1)


async def test_stopped_actor_refuses_messages_and_fails_pending_asks(autojump_clock, nursery):
    counter = Counter(name="counter-1")
    # Not running yet: the ask waits in the mailbox until the actor is stopped.
    outcome = []

    async def ask():
        try:
            await counter.ask("total")
        except ActorStoppedError as error:
            outcome.append(str(error))

    nursery.start_soon(ask)
    await trio.testing.wait_all_tasks_blocked()
    assert counter.mailbox_size == 1
    counter.stop()
    await trio.testing.wait_all_tasks_blocked()
    assert outcome == ["actor counter-1 stopped before answering"]
    with pytest.raises(ActorStoppedError, match="counter-1"):
        counter.tell("total")
    with pytest.raises(ActorStoppedError):
        await counter.ask("total")


async def test_run_ends_when_stopped(nursery):
    counter = Counter()
    ended = trio.Event()

    async def run():
        await counter.run()
        ended.set()

    nursery.start_soon(run)
    await trio.testing.wait_all_tasks_blocked()
    await counter.aclose()
    await ended.wait()
