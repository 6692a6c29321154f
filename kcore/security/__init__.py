"""Security with Kafka's names: TLS from `ssl.*` settings and TLS principals (`tls`)."""

from kcore.security.tls import (
    ANONYMOUS,
    BrokerTls,
    client_context,
    listener_settings,
    principal,
    server_context,
    subject_name,
)

__all__ = [
    "ANONYMOUS",
    "BrokerTls",
    "client_context",
    "listener_settings",
    "principal",
    "server_context",
    "subject_name",
]
