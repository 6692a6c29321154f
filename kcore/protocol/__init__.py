"""kcore's wire messages: Kafka's API keys and request / response bodies (as attrs messages
that `kcore.wire` turns into msgpack-ready lists)."""

from kcore.protocol.api_keys import ApiKey

__all__ = ["ApiKey"]
