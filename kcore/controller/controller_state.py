"""Kafka's ControllerState: what the controller's event thread is doing, with the timer each
state reports into (`kafka.controller:type=ControllerStats,name=<...>RateAndTimeMs`)."""

from __future__ import annotations

import enum


class ControllerState(enum.Enum):
    # (value, timer name); None = no timer. Names are part of Kafka's metrics contract.
    IDLE = (0, None)
    CONTROLLER_CHANGE = (1, "ControllerChangeRateAndTimeMs")
    # Kept under its pre-ControllerState name for compatibility, as Kafka does.
    BROKER_CHANGE = (2, "LeaderElectionRateAndTimeMs")
    TOPIC_CHANGE = (3, "TopicChangeRateAndTimeMs")
    TOPIC_DELETION = (4, "TopicDeletionRateAndTimeMs")
    ALTER_PARTITION_REASSIGNMENT = (5, "PartitionReassignmentRateAndTimeMs")
    AUTO_LEADER_BALANCE = (6, "AutoLeaderBalanceRateAndTimeMs")
    MANUAL_LEADER_BALANCE = (7, "ManualLeaderBalanceRateAndTimeMs")
    CONTROLLED_SHUTDOWN = (8, "ControlledShutdownRateAndTimeMs")
    ISR_CHANGE = (9, "IsrChangeRateAndTimeMs")
    LEADER_AND_ISR_RESPONSE_RECEIVED = (10, "LeaderAndIsrResponseReceivedRateAndTimeMs")
    LOG_DIR_CHANGE = (11, "LogDirChangeRateAndTimeMs")
    CONTROLLER_SHUTDOWN = (12, "ControllerShutdownRateAndTimeMs")
    UNCLEAN_LEADER_ELECTION_ENABLE = (13, "UncleanLeaderElectionEnableRateAndTimeMs")
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = (14, "TopicUncleanLeaderElectionEnableRateAndTimeMs")
    LIST_PARTITION_REASSIGNMENTS = (15, "ListPartitionReassignmentRateAndTimeMs")
    UPDATE_METADATA_RESPONSE_RECEIVED = (16, None)
    UPDATE_FEATURES = (17, "UpdateFeaturesRateAndTimeMs")

    @property
    def value_id(self) -> int:
        """Kafka's numeric value (the ControllerState gauge reports it)."""
        return self.value[0]

    @property
    def rate_and_time_metric_name(self) -> str | None:
        return self.value[1]
