"""Kafka's binary protocol, sans-IO: request and response frames <-> plain Python values.

The schemas are Kafka's own (`common/message/*.json`), read from the dataclasses the `kio`
package generates from them; `codec` compiles and caches one encoder / decoder per API
key, version and direction. Bodies are plain dicts keyed by the snake_case of Kafka's field
names: ints, bools, floats, str, bytes, `uuid.UUID`, lists, dicts, None for null, bytes for
`records`. See `codec` for the wire rules and `schema` for how kio's classes are read.
"""

from __future__ import annotations

from kcore.protocol.kafka.codec import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    is_flexible,
)
from kcore.protocol.kafka.schema import (
    ArraySchema,
    FieldSchema,
    KafkaCodecError,
    MessageSchema,
    StructSchema,
    UnsupportedVersionError,
    known_api_keys,
    known_versions,
    message_schema,
)

__all__ = [
    "ArraySchema",
    "FieldSchema",
    "KafkaCodecError",
    "MessageSchema",
    "RequestHeader",
    "StructSchema",
    "UnsupportedVersionError",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "is_flexible",
    "known_api_keys",
    "known_versions",
    "message_schema",
]
