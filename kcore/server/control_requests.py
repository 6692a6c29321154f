"""The checks a broker makes before it obeys a control request (KafkaApis): an earlier
incarnation's broker epoch, or an older controller's epoch, is refused with Kafka's errors.

Beyond Kafka: a controller epoch newer than the broker has verified is not taken on the
request's word. Kafka adopts any newer epoch it is sent, so one forged request carrying
2^31-1 locks the real controller out until a restart. kcore obeys a newer epoch only once
ZooKeeper confirms it (`/controller_epoch` holds it and `/controller` names the sender,
`claim_refusal`); the Trio shell that reads ZooKeeper is `kcore.server.controller_epochs`.
"""

from __future__ import annotations

import attrs

from kcore.errors import StaleBrokerEpochError, StaleControllerEpochError

UNKNOWN_BROKER_EPOCH = -1  # sent by controllers that predate broker epochs (KIP-380)
UNKNOWN_CONTROLLER_EPOCH = -1  # a broker that has verified no controller yet


def is_broker_epoch_stale(epoch_in_request: int, current_broker_epoch: int) -> bool:
    """A request addressed to an earlier registration of this broker. A newer epoch than ours
    is accepted: the controller may see our re-registration before we do."""
    if epoch_in_request == UNKNOWN_BROKER_EPOCH:
        return False
    return epoch_in_request < current_broker_epoch


def control_request_error(
    *,
    broker_epoch_in_request: int,
    current_broker_epoch: int,
    controller_epoch_in_request: int,
    current_controller_epoch: int,
) -> int:
    """The error code to answer with, or 0 when the request may be applied (as far as these
    epochs tell: a newer controller epoch is still to be verified, `VerifiedController`)."""
    if is_broker_epoch_stale(broker_epoch_in_request, current_broker_epoch):
        return StaleBrokerEpochError.code
    if controller_epoch_in_request < current_controller_epoch:
        return StaleControllerEpochError.code
    return 0


@attrs.frozen
class Claim:
    """Who a control request says sent it."""

    controller_id: int
    controller_epoch: int


class Verdict:
    """What a broker does with a claim, before reading anything."""

    OBEY = "obey"  # the epoch already verified, claimed by the controller verified at it
    REFUSE = "refuse"  # an older epoch, or the verified epoch claimed by another broker
    VERIFY = "verify"  # a newer epoch: ZooKeeper decides


@attrs.define
class VerifiedController:
    """The newest controller epoch this broker has verified, and the controller at it. It
    only moves forward, and only on ZooKeeper's word (`verified`)."""

    epoch: int = UNKNOWN_CONTROLLER_EPOCH
    controller_id: int | None = None

    def verdict(self, claim: Claim) -> str:
        if claim.controller_epoch > self.epoch:
            return Verdict.VERIFY
        if claim.controller_epoch == self.epoch and claim.controller_id == self.controller_id:
            return Verdict.OBEY
        return Verdict.REFUSE

    def verified(self, claim: Claim) -> None:
        """ZooKeeper confirmed `claim` (`claim_refusal` found nothing wrong with it)."""
        if claim.controller_epoch > self.epoch:
            self.epoch = claim.controller_epoch
            self.controller_id = claim.controller_id


def claim_refusal(
    claim: Claim, registered_controller_id: int | None, registered_epoch: int | None
) -> str | None:
    """Why ZooKeeper's `/controller` (the id registered by the election that set the epoch,
    None if none) and `/controller_epoch` (None if absent) deny `claim`; None when they
    confirm it."""
    if registered_epoch != claim.controller_epoch:
        return f"/controller_epoch holds {_or_none(registered_epoch)}"
    if registered_controller_id != claim.controller_id:
        return (
            f"/controller names broker {_or_none(registered_controller_id)} at epoch "
            f"{registered_epoch}"
        )
    return None


def zookeeper_may_lag(claim: Claim, registered_epoch: int | None) -> bool:
    """ZooKeeper's answer is older than the claim: the server the broker reads from may not
    have caught up with the election yet (a follower of an ensemble), so it is worth a
    `sync` and a second read before refusing."""
    return registered_epoch is None or registered_epoch < claim.controller_epoch


def _or_none(value: int | None) -> str:
    return "nothing" if value is None else str(value)
