import attrs
import pytest
import trio

from actors.testing import poll_until


@attrs.frozen
class State:
    """A ControllerState stand-in: a name and an optional timer name."""

    name: str
    rate_and_time_metric_name: str | None = None


IDLE = State("Idle", None)
TOPIC_CHANGE = State("TopicChange", "TopicChangeRateAndTimeMs")
ISR_CHANGE = State("IsrChange", "IsrChangeRateAndTimeMs")


@attrs.frozen
class Event:
    name: str
    state: State = TOPIC_CHANGE


@attrs.define
class RecordingProcessor:
    """Records what was processed and preempted, and on which task; `gate`, when set,
    holds every `process` until it is opened; `work` runs inside `process`."""

    processed: list = attrs.field(factory=list)
    preempted: list = attrs.field(factory=list)
    preempt_tasks: list = attrs.field(factory=list)
    gate: trio.Event | None = None
    work: object = None

    async def process(self, event):
        if self.gate is not None:
            await self.gate.wait()
        if self.work is not None:
            await self.work(event)
        self.processed.append(event)

    def preempt(self, event):
        self.preempted.append(event)
        self.preempt_tasks.append(trio.lowlevel.current_task())


@pytest.fixture
def states():
    return {"idle": IDLE, "topic_change": TOPIC_CHANGE, "isr_change": ISR_CHANGE}


@pytest.fixture
def make_event():
    return Event


@pytest.fixture
def processor():
    return RecordingProcessor()


@pytest.fixture
def until():
    return poll_until
