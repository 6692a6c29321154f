"""How the controller reads a change of /brokers/ids (Kafka's processBrokerChange): which
brokers are new, which died, and which bounced (same id, a newer registration)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen
class BrokerChangeSummary:
    new: list[int]
    dead: list[int]
    bounced: list[int]

    @property
    def changed(self) -> bool:
        return bool(self.new or self.dead or self.bounced)


def classify_broker_change(
    known_epochs: Mapping[int, int], current_epochs: Mapping[int, int]
) -> BrokerChangeSummary:
    """`known_epochs`: the controller's live (or shutting down) brokers and their epochs;
    `current_epochs`: what /brokers/ids holds now (epoch = the znode's czxid). A broker whose
    registration is newer than the one the controller knows restarted in between: it is
    bounced, and must be treated as failed and started again, not as unchanged."""
    known, current = set(known_epochs), set(current_epochs)
    return BrokerChangeSummary(
        new=sorted(current - known),
        dead=sorted(known - current),
        bounced=sorted(b for b in known & current if current_epochs[b] > known_epochs[b]),
    )
