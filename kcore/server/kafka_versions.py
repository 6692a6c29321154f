"""Which Kafka APIs, at which versions, kcore's brokers serve through Kafka's protocol: the
truth that ApiVersions tells clients.

Each range is the versions the codec has a schema for (kio's, Kafka 4.x schemas whose oldest
versions were retired in 4.0) intersected with the versions the handlers implement, capped at
what Kafka 3.5 serves. An api is listed only once its handler exists.
"""

from __future__ import annotations

import functools

from kcore.protocol import kafka as codec
from kcore.protocol.api_keys import ApiKey

API_VERSIONS_KEY = 18

# api key -> (lowest, highest) version the handlers implement. Highest: Kafka 3.5's, or lower
# where a newer version needs what kcore does not have.
IMPLEMENTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (0, 15),  # 13+: topics by id; 15: ReplicaState
    ApiKey.LIST_OFFSETS: (0, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.FIND_COORDINATOR: (0, 4),
    API_VERSIONS_KEY: (0, 3),
    # SASL (kcore.server.sasl_authenticator); advertised on every listener, as Kafka does.
    # After a v0 handshake the tokens go as bare frames (kcore.server.kafka_protocol).
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    44: (0, 1),  # IncrementalAlterConfigs
    21: (0, 2),  # DeleteRecords
    60: (0, 0),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    # ACLs (kcore.security.acl_admin): Kafka 3.5 serves 0-3; v0 (no pattern types) is
    # retired from the codec's schemas.
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    # The group coordinator's (kcore/coordinator/group: the versions its core answers).
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 8),
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups
    42: (0, 2),  # DeleteGroups
}


@functools.cache
def supported_versions() -> dict[int, range]:
    """api key -> the versions served (a non-empty range), for every api served."""
    served = {}
    for api_key, (lowest, highest) in IMPLEMENTED.items():
        known = codec.known_versions(api_key)
        if known is None:
            continue
        versions = range(max(lowest, known.start), min(highest, known.stop - 1) + 1)
        if versions:
            served[int(api_key)] = versions
    return served


def api_versions_body(error_code: int = 0) -> dict:
    """ApiVersions' answer: the api keys and version ranges served."""
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": api_key, "min_version": versions.start, "max_version": versions.stop - 1}
            for api_key, versions in sorted(supported_versions().items())
        ],
        "throttle_time_ms": 0,
    }
