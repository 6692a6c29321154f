"""The checks a broker makes before it obeys a control request (KafkaApis): an earlier
incarnation's broker epoch, or an older controller's epoch, is refused with Kafka's errors."""

from __future__ import annotations

from kcore.errors import StaleBrokerEpochError, StaleControllerEpochError

UNKNOWN_BROKER_EPOCH = -1  # sent by controllers that predate broker epochs (KIP-380)


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
    """The error code to answer with, or 0 when the request may be applied."""
    if is_broker_epoch_stale(broker_epoch_in_request, current_broker_epoch):
        return StaleBrokerEpochError.code
    if controller_epoch_in_request < current_controller_epoch:
        return StaleControllerEpochError.code
    return 0
