"""A broker's gate on the controller epochs of the control requests it obeys (the Trio
shell over `kcore.server.control_requests`' rules): a newer epoch than it has verified is
checked against ZooKeeper once, before the request is obeyed.

Cost: one ZooKeeper read per new epoch (two reads and a sync when ZooKeeper's answer looks
older than the claim), never one per request. Verifications run one at a time, so forged
requests keep at most one read per broker in flight, and a request that waited for another
one's verification of the same epoch finds it done.

When ZooKeeper does not answer within `ZOOKEEPER_ANSWER_TIMEOUT`, the claim can be neither
obeyed nor refused: the request's connection is closed unanswered, which the controller's
channel takes as a network failure and retries on a fresh connection (an answer such as
STALE_CONTROLLER_EPOCH would be final to it, and the broker would miss the request).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs
import trio

from kcore import zkdata
from kcore.errors import StaleControllerEpochError
from kcore.server.control_requests import (
    Claim,
    Verdict,
    VerifiedController,
    claim_refusal,
    zookeeper_may_lag,
)
from kcore.zk_client import ZooKeeperError

if TYPE_CHECKING:
    import transport
    from kcore.zk_client import KafkaZkClient

logger = logging.getLogger("kcore.server.controller_epochs")

# Well under controller.socket.timeout.ms (30 s by default): the controller retries sooner
# than its own timeout would make it.
ZOOKEEPER_ANSWER_TIMEOUT = 5.0


@attrs.frozen
class _Answer:
    """What one read of ZooKeeper said: `get_elected_controller`'s pair."""

    controller_id: int | None
    epoch: int | None
    synced: bool  # read after a sync: nothing newer was committed when the read began
    read_number: int  # the reads started before it, this one included


@attrs.define(eq=False)
class ControllerEpochGate:
    """One per broker (its KafkaApis'): `check` each control request's claimed controller
    before obeying it. `verified` is the newest controller epoch ZooKeeper confirmed."""

    zk_client: KafkaZkClient
    broker_id: int
    zookeeper_answer_timeout: float = ZOOKEEPER_ANSWER_TIMEOUT
    verified: VerifiedController = attrs.field(factory=VerifiedController, init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _reads_started: int = attrs.field(default=0, init=False)
    _last_answer: _Answer | None = attrs.field(default=None, init=False)

    @property
    def epoch(self) -> int:
        """The newest controller epoch verified (-1: none yet)."""
        return self.verified.epoch

    async def check(
        self,
        api_name: str,
        controller_id: int,
        controller_epoch: int,
        connection: transport.ServerConnection,
    ) -> int:
        """0 when the request may be obeyed, STALE_CONTROLLER_EPOCH when it is refused (with
        a WARNING naming the claim and the peer). When ZooKeeper does not answer, the
        connection is closed and this never returns (the handler is cancelled with it)."""
        claim = Claim(controller_id, controller_epoch)
        verdict = self.verified.verdict(claim)
        if verdict == Verdict.VERIFY:
            reads_before_arrival = self._reads_started
            async with self._lock:
                # Another request may have verified this epoch (or a newer one) meanwhile.
                verdict = self.verified.verdict(claim)
                if verdict == Verdict.VERIFY:
                    answer = await self._answer_for(claim, reads_before_arrival, connection)
                    if answer is not None:
                        return self._judge(api_name, claim, answer, connection)
            if verdict == Verdict.VERIFY:  # ZooKeeper did not answer (the lock is released)
                await self._drop_unanswered(api_name, claim, connection)
        if verdict == Verdict.OBEY:
            return 0
        verified = self.verified
        self._refuse(
            api_name, claim, connection,
            f"the newest verified is controller {verified.controller_id} at epoch "
            f"{verified.epoch}",
        )  # fmt: skip
        return StaleControllerEpochError.code

    async def _answer_for(
        self, claim: Claim, reads_before_arrival: int, connection: transport.ServerConnection
    ) -> _Answer | None:
        """ZooKeeper's answer to judge `claim` by; None when it did not answer in time. A
        read that began after the request arrived is as fresh as one of its own would be:
        a burst of claims costs one read, not one each."""
        last = self._last_answer
        if (
            last is not None
            and last.read_number > reads_before_arrival
            and (last.synced or not zookeeper_may_lag(claim, last.epoch))
        ):
            return last
        with trio.move_on_after(self.zookeeper_answer_timeout):
            try:
                answer = await self._read(sync=False)
                if zookeeper_may_lag(claim, answer.epoch):
                    answer = await self._read(sync=True)
                return answer
            except (ZooKeeperError, zkdata.ZkDataError) as error:
                logger.warning(
                    "Broker %d: reading the controller's registration from ZooKeeper failed "
                    "(request from %s): %r", self.broker_id, connection.peer_name, error,
                )  # fmt: skip
        return None

    async def _read(self, *, sync: bool) -> _Answer:
        self._reads_started += 1
        read_number = self._reads_started
        controller_id, epoch = await self.zk_client.get_elected_controller(sync=sync)
        self._last_answer = _Answer(controller_id, epoch, sync, read_number)
        return self._last_answer

    def _judge(
        self, api_name: str, claim: Claim, answer: _Answer, connection: transport.ServerConnection
    ) -> int:
        refusal = claim_refusal(claim, answer.controller_id, answer.epoch)
        if refusal is not None:
            self._refuse(api_name, claim, connection, f"in ZooKeeper {refusal}")
            return StaleControllerEpochError.code
        self.verified.verified(claim)
        logger.info(
            "Broker %d verified controller %d at epoch %d in ZooKeeper",
            self.broker_id, claim.controller_id, claim.controller_epoch,
        )  # fmt: skip
        return 0

    def _refuse(
        self, api_name: str, claim: Claim, connection: transport.ServerConnection, why: str
    ) -> None:
        logger.warning(
            "Broker %d refuses %s from %s claiming controller %d at epoch %d: %s",
            self.broker_id, api_name, connection.peer_name, claim.controller_id,
            claim.controller_epoch, why,
        )  # fmt: skip

    async def _drop_unanswered(
        self, api_name: str, claim: Claim, connection: transport.ServerConnection
    ) -> None:
        logger.warning(
            "Broker %d cannot verify %s from %s (controller %d, epoch %d): ZooKeeper did not "
            "answer; closing the connection for the controller to retry",
            self.broker_id, api_name, connection.peer_name, claim.controller_id,
            claim.controller_epoch,
        )  # fmt: skip
        connection.close()
        # Closing cancels the connection's handlers, this one included: no answer is sent.
        await trio.sleep_forever()
