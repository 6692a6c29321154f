"""Kafka's coordinators, sans-IO. `kcore.coordinator.group` is the (classic) group
coordinator: consumer group membership, rebalances and committed offsets."""
