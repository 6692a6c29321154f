"""The broker's static configuration (KafkaConfig) and Kafka's dynamic-config precedence."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from kcore.config._definitions import ConfigDef, ConfigError, parse_value
from kcore.config._principals import PrincipalError, parse_super_users
from kcore.config._properties import parse_properties
from kcore.config._unsupported import check_broker_settings

_LONG_MAX = 2**63 - 1
_DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE

# Kafka 3.5 names, types, defaults and validators (KafkaConfig.configDef).
BROKER_DEFINITIONS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("broker.id", "int", None, at_least=0, required=True),
        ConfigDef("listeners", "list", ["PLAINTEXT://:9092"]),
        ConfigDef("advertised.listeners", "list", None),
        ConfigDef("listener.security.protocol.map", "string", None),
        ConfigDef("inter.broker.listener.name", "string", None),
        ConfigDef("log.dirs", "list", None),
        ConfigDef("log.dir", "list", ["/tmp/kafka-logs"]),
        ConfigDef("zookeeper.connect", "string", None, required=True),
        ConfigDef("zookeeper.session.timeout.ms", "int", 18000),
        ConfigDef("zookeeper.connection.timeout.ms", "int", None),
        ConfigDef("zookeeper.max.in.flight.requests", "int", 10, at_least=1),
        # Kafka's: create the znodes with ZkData's default ACLs (creator all, world read but
        # for sensitive paths), the creator being the identity set just below.
        ConfigDef("zookeeper.set.acl", "bool", False),
        # kcore's own (Kafka authenticates to ZooKeeper with SASL from its JAAS file): the
        # broker's ZooKeeper digest credential, user:password (ZooKeeper's addauth digest).
        ConfigDef("kcore.zookeeper.digest.credential", "password", None),
        ConfigDef("broker.rack", "string", None),
        ConfigDef("broker.id.generation.enable", "bool", True),
        ConfigDef("reserved.broker.max.id", "int", 1000, at_least=0),
        ConfigDef("replica.lag.time.max.ms", "long", 30000),
        ConfigDef("min.insync.replicas", "int", 1, at_least=1),
        ConfigDef("unclean.leader.election.enable", "bool", False),
        ConfigDef("num.replica.fetchers", "int", 1),
        ConfigDef("replica.fetch.wait.max.ms", "int", 500),
        ConfigDef("replica.fetch.min.bytes", "int", 1),
        ConfigDef("replica.fetch.max.bytes", "int", 1048576, at_least=0),
        ConfigDef("replica.fetch.response.max.bytes", "int", 10485760, at_least=0),
        ConfigDef("replica.fetch.backoff.ms", "int", 1000, at_least=0),
        # KIP-227 fetch sessions a broker keeps for Kafka-protocol consumers.
        ConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, at_least=0),
        ConfigDef("replica.socket.timeout.ms", "int", 30000),
        ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000),
        # Kafka's default is true; kcore cannot honour true yet (kcore.config._unsupported).
        ConfigDef("auto.leader.rebalance.enable", "bool", True),
        ConfigDef("leader.imbalance.per.broker.percentage", "int", 10),
        ConfigDef("leader.imbalance.check.interval.seconds", "long", 300, at_least=1),
        ConfigDef("default.replication.factor", "int", 1),
        ConfigDef("num.partitions", "int", 1, at_least=1),
        # Kafka's default is true; kcore cannot honour true yet (kcore.config._unsupported).
        ConfigDef("auto.create.topics.enable", "bool", True),
        ConfigDef("delete.topic.enable", "bool", True),
        ConfigDef("controlled.shutdown.enable", "bool", True),
        ConfigDef("controlled.shutdown.max.retries", "int", 3),
        ConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000),
        ConfigDef("controller.socket.timeout.ms", "int", 30000),
        ConfigDef("request.timeout.ms", "int", 30000, at_least=0),
        ConfigDef("log.segment.bytes", "int", 1073741824, at_least=14),
        ConfigDef("log.roll.hours", "int", 168, at_least=1),
        ConfigDef("log.roll.ms", "long", None),
        ConfigDef("log.retention.hours", "int", 168),
        ConfigDef("log.retention.minutes", "int", None),
        ConfigDef("log.retention.ms", "long", None),
        ConfigDef("log.retention.bytes", "long", -1),
        ConfigDef("log.retention.check.interval.ms", "long", 300000, at_least=1),
        ConfigDef("log.cleanup.policy", "list", ["delete"], valid_values=("compact", "delete")),
        # The log cleaner (compaction) and the defaults of its topic settings.
        ConfigDef("log.cleaner.enable", "bool", True),
        ConfigDef("log.cleaner.threads", "int", 1, at_least=0),
        ConfigDef("log.cleaner.backoff.ms", "long", 15000, at_least=0),
        ConfigDef("log.cleaner.dedupe.buffer.size", "long", 128 * 1024 * 1024),
        ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9),
        ConfigDef("log.cleaner.io.buffer.size", "int", 512 * 1024, at_least=0),
        ConfigDef("log.cleaner.io.max.bytes.per.second", "double", _DOUBLE_MAX),
        ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, at_least=0, at_most=1),
        ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000, at_least=0),
        ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, at_least=0),
        ConfigDef("log.cleaner.max.compaction.lag.ms", "long", _LONG_MAX, at_least=1),
        ConfigDef("log.flush.interval.messages", "long", _LONG_MAX, at_least=1),
        ConfigDef("log.flush.interval.ms", "long", None),
        ConfigDef("log.index.interval.bytes", "int", 4096, at_least=0),
        ConfigDef("message.max.bytes", "int", 1048588, at_least=0),
        ConfigDef(
            "log.message.timestamp.type",
            "string",
            "CreateTime",
            valid_values=("CreateTime", "LogAppendTime"),
        ),
        ConfigDef("log.message.timestamp.difference.max.ms", "long", _LONG_MAX, at_least=0),
        ConfigDef("offsets.topic.replication.factor", "short", 3, at_least=1),
        ConfigDef("offsets.topic.num.partitions", "int", 50, at_least=1),
        ConfigDef("transaction.state.log.replication.factor", "short", 3, at_least=1),
        ConfigDef("transaction.state.log.min.isr", "int", 2, at_least=1),
        ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, at_least=0),
        ConfigDef("group.min.session.timeout.ms", "int", 6000, at_least=0),
        ConfigDef("group.max.session.timeout.ms", "int", 1800000, at_least=0),
        ConfigDef("group.max.size", "int", 2**31 - 1, at_least=1),
        ConfigDef("offsets.retention.minutes", "int", 10080, at_least=1),
        ConfigDef("offsets.retention.check.interval.ms", "long", 600000, at_least=1),
        ConfigDef("offset.metadata.max.bytes", "int", 4096, at_least=0),
        ConfigDef("offsets.topic.segment.bytes", "int", 104857600, at_least=1),
        ConfigDef("offsets.commit.timeout.ms", "int", 5000, at_least=1),
        ConfigDef("num.network.threads", "int", 3, at_least=1),
        ConfigDef("num.io.threads", "int", 8, at_least=1),
        ConfigDef("num.recovery.threads.per.data.dir", "int", 1, at_least=1),
        ConfigDef("socket.send.buffer.bytes", "int", 102400),
        ConfigDef("socket.receive.buffer.bytes", "int", 102400),
        ConfigDef("socket.request.max.bytes", "int", 104857600, at_least=1),
        # Kafka's default is -1 (unbounded); kcore bounds the bytes of requests in flight by
        # default, so pipelined large produces cannot grow a broker without limit.
        ConfigDef("queued.max.request.bytes", "long", 104857600, at_least=-1),
        # kcore's own (Kafka's metrics leave through JMX and an exporter): where the broker
        # serves Prometheus' GET /metrics, `http://host:port` (port 0: any); unset is off.
        ConfigDef("http.listener", "string", None),
        ConfigDef(
            "security.inter.broker.protocol",
            "string",
            "PLAINTEXT",
            valid_values=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        ),
        # TLS (kcore.security.tls): PEM key material only; JKS / PKCS12 stores are refused
        # when a TLS listener or client is built.
        ConfigDef("ssl.protocol", "string", "TLSv1.3"),
        ConfigDef("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"]),
        ConfigDef("ssl.keystore.type", "string", "JKS"),
        ConfigDef("ssl.keystore.location", "string", None),
        ConfigDef("ssl.keystore.key", "password", None),
        ConfigDef("ssl.keystore.certificate.chain", "password", None),
        ConfigDef("ssl.truststore.type", "string", "JKS"),
        ConfigDef("ssl.truststore.location", "string", None),
        ConfigDef("ssl.truststore.certificates", "password", None),
        ConfigDef("ssl.endpoint.identification.algorithm", "string", "https"),
        ConfigDef(
            "ssl.client.auth", "string", "none", valid_values=("required", "requested", "none")
        ),
        ConfigDef("ssl.keystore.password", "password", None),
        ConfigDef("ssl.key.password", "password", None),
        ConfigDef("ssl.truststore.password", "password", None),
        # SASL (kcore.security.sasl): PLAIN and SCRAM-SHA-256/512; GSSAPI, Kafka's default
        # mechanism, is refused when a SASL listener is built.
        ConfigDef("sasl.enabled.mechanisms", "list", ["GSSAPI"]),
        ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI"),
        ConfigDef("sasl.jaas.config", "password", None),
        ConfigDef("connection.failed.authentication.delay.ms", "int", 100, at_least=0),
        # The authorizer (kcore.security.acl): Kafka's AclAuthorizer, or none (Kafka's
        # default, ""); any other class is refused (`_unsupported`).
        ConfigDef("authorizer.class.name", "string", ""),
        ConfigDef("super.users", "string", None),
        ConfigDef("allow.everyone.if.no.acl.found", "bool", False),
        # TLS to ZooKeeper (Kafka's zookeeper.ssl.*, kcore.security.tls.zookeeper_context):
        # PEM files only; what kcore cannot honour is refused (`_unsupported`).
        ConfigDef("zookeeper.ssl.client.enable", "bool", False),
        ConfigDef("zookeeper.clientCnxnSocket", "string", None),
        ConfigDef("zookeeper.ssl.keystore.location", "string", None),
        ConfigDef("zookeeper.ssl.keystore.password", "password", None),
        ConfigDef("zookeeper.ssl.keystore.type", "string", None),
        ConfigDef("zookeeper.ssl.truststore.location", "string", None),
        ConfigDef("zookeeper.ssl.truststore.password", "password", None),
        ConfigDef("zookeeper.ssl.truststore.type", "string", None),
        ConfigDef("zookeeper.ssl.protocol", "string", "TLSv1.2"),
        ConfigDef("zookeeper.ssl.enabled.protocols", "list", None),
        ConfigDef("zookeeper.ssl.cipher.suites", "list", None),
        ConfigDef("zookeeper.ssl.endpoint.identification.algorithm", "string", "HTTPS"),
        ConfigDef("zookeeper.ssl.crl.enable", "bool", False),
        ConfigDef("zookeeper.ssl.ocsp.enable", "bool", False),
    )
}


def _check_broker_id(values: Mapping[str, Any]) -> None:
    """Kafka keeps the ids above reserved.broker.max.id for generated ones, so a configured
    id may not exceed it while generation is enabled."""
    broker_id, reserved = values["broker.id"], values["reserved.broker.max.id"]
    if values["broker.id.generation.enable"] and broker_id > reserved:
        raise ConfigError(
            f"Invalid value {broker_id!r} for configuration broker.id: must be at most "
            f"reserved.broker.max.id ({reserved}) while broker.id.generation.enable is true"
        )


def _check_log_cleaner(values: Mapping[str, Any]) -> None:
    """Kafka's checks of the cleaner's settings: each cleaner thread's share of the dedupe
    buffer must exceed 1 MiB (KafkaConfig.validateValues), and, when the cleaner runs, hold
    at least one key at its load factor (Cleaner's own check); and its I/O rate must be
    positive (Kafka's cleaner would sleep forever)."""
    threads, dedupe = values["log.cleaner.threads"], values["log.cleaner.dedupe.buffer.size"]
    if threads == 0:
        raise ConfigError(
            "Invalid value 0 for configuration log.cleaner.threads: the log cleaner needs at "
            "least one thread (disable it with log.cleaner.enable=false)"
        )
    if dedupe // threads <= 1024 * 1024:
        raise ConfigError("log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
    rate = values["log.cleaner.io.max.bytes.per.second"]
    if rate <= 0:
        raise ConfigError(
            f"Invalid value {rate!r} for configuration log.cleaner.io.max.bytes.per.second: "
            "the cleaner could never read a byte; it must be positive"
        )
    slots = min(dedupe // threads, 2**31 - 1) // 24
    if values["log.cleaner.enable"] and slots * values["log.cleaner.io.buffer.load.factor"] <= 1:
        raise ConfigError(
            "offset map is too small to fit in even a single message, so log cleaning will "
            "never make progress. You can increase log.cleaner.dedupe.buffer.size or decrease "
            "log.cleaner.threads (log.cleaner.io.buffer.load.factor is "
            f"{values['log.cleaner.io.buffer.load.factor']})"
        )


def parse_http_listener(url: str) -> tuple[str, int]:
    """`http.listener`'s (host, port): `http://host:port`, an empty host for every
    interface. ConfigError naming the setting for anything else."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"Invalid value {url!r} for configuration http.listener: {why}")

    try:
        split = urlsplit(url.strip())
        port = split.port
    except ValueError as error:
        raise bad(str(error)) from None
    if split.scheme != "http":
        raise bad("expected http://host:port (only plain http is served)")
    if port is None:
        raise bad("no port (http://host:port; port 0 picks a free one)")
    if split.path not in ("", "/") or split.query or split.fragment or split.username:
        raise bad("expected http://host:port with nothing after the port")
    return split.hostname or "", port


def _check_http_listener(values: Mapping[str, Any]) -> None:
    if values["http.listener"] is not None:
        parse_http_listener(values["http.listener"])


def _check_super_users(values: Mapping[str, Any]) -> None:
    """`super.users` as Kafka's authorizer parses it (`User:a;User:b`), refused when the
    config is read rather than when the authorizer starts."""
    try:
        parse_super_users(values["super.users"])
    except PrincipalError as error:
        raise ConfigError(f"Invalid value for configuration super.users: {error}") from None


def _check_zookeeper_acls(values: Mapping[str, Any]) -> None:
    """ZooKeeper ACLs need an identity to be the creator: Kafka refuses
    `zookeeper.set.acl=true` without one (its SASL login), kcore without its digest."""
    if values["zookeeper.set.acl"] and values["kcore.zookeeper.digest.credential"] is None:
        raise ConfigError(
            "zookeeper.set.acl is true but no ZooKeeper identity is set: set "
            "kcore.zookeeper.digest.credential=user:password (kcore authenticates to "
            "ZooKeeper with digest)"
        )


def _listener_override(key: str) -> ConfigDef | None:
    """Kafka's per-listener `listener.name.<listener>.ssl.*` settings (and its
    `sasl.enabled.mechanisms` and `<mechanism>.sasl.jaas.config`): the definition of the
    setting they override, under their own name."""
    name, _, rest = key.removeprefix("listener.name.").partition(".")
    if not key.startswith("listener.name.") or not name:
        return None
    if rest.endswith(".sasl.jaas.config"):  # listener.name.<l>.<mechanism>.sasl.jaas.config
        rest = "sasl.jaas.config"
    elif rest != "sasl.enabled.mechanisms" and not rest.startswith("ssl."):
        return None
    definition = BROKER_DEFINITIONS.get(rest)
    return None if definition is None else attrs.evolve(definition, name=key, default=None)


@attrs.frozen
class KafkaConfig:
    """Parsed broker settings. `config.get("log.dirs")` by Kafka's name, or attributes by
    Python name (`config.log_dirs`); `originals` keeps what was given, for re-layering."""

    values: Mapping[str, Any]
    originals: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_dict(cls, settings: Mapping[str, Any]) -> KafkaConfig:
        values: dict[str, Any] = {}
        for key, value in settings.items():
            definition = BROKER_DEFINITIONS.get(key) or _listener_override(key)
            if definition is None:
                # The value is not quoted: a secret under a misspelt key must not be echoed.
                raise ConfigError(f"Unknown configuration {key!r}")
            values[key] = parse_value(definition, value)
        for definition in BROKER_DEFINITIONS.values():
            if values.get(definition.name) is None:
                if definition.required:
                    raise ConfigError(f"Missing required configuration {definition.name!r}")
                values[definition.name] = definition.default
        # Derived defaults as in Kafka: log.dirs falls back to log.dir, the ZooKeeper
        # connection timeout to the session timeout.
        if values["log.dirs"] is None:
            values["log.dirs"] = values["log.dir"]
        if values["zookeeper.connection.timeout.ms"] is None:
            values["zookeeper.connection.timeout.ms"] = values["zookeeper.session.timeout.ms"]
        if not values["log.dirs"]:
            raise ConfigError("Invalid value for configuration log.dirs: no log directory")
        _check_broker_id(values)
        _check_log_cleaner(values)
        _check_http_listener(values)
        _check_super_users(values)
        _check_zookeeper_acls(values)
        check_broker_settings(values)
        return cls(values, dict(settings))

    @classmethod
    def from_properties_file(cls, path: str | pathlib.Path) -> KafkaConfig:
        return cls.from_dict(parse_properties(pathlib.Path(path).read_text(encoding="utf-8")))

    def get(self, name: str) -> Any:
        if name not in self.values:
            raise ConfigError(f"Unknown configuration {name!r}")
        return self.values[name]

    @property
    def log_retention_time_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours (Kafka's precedence); -1 = forever."""
        millis = self.values["log.retention.ms"]
        if millis is None:
            minutes = self.values["log.retention.minutes"]
            if minutes is None:
                millis = self.values["log.retention.hours"] * 3_600_000
            else:
                millis = minutes * 60_000
        return -1 if millis < 0 else millis

    @property
    def http_listener_address(self) -> tuple[str, int] | None:
        """Where to serve /metrics, (host, port) from http.listener; None when unset."""
        url = self.values["http.listener"]
        return None if url is None else parse_http_listener(url)

    @property
    def log_roll_time_ms(self) -> int:
        millis = self.values["log.roll.ms"]
        return millis if millis is not None else self.values["log.roll.hours"] * 3_600_000

    def __getattr__(self, attribute: str) -> Any:
        values = object.__getattribute__(self, "values")
        name = attribute.replace("_", ".")
        if name in values:
            return values[name]
        raise AttributeError(f"KafkaConfig has no setting {name!r}")
