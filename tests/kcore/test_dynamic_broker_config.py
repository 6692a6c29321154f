"""Dynamic broker configs, the parts that decide: which settings change without a restart
(Kafka's list, with Kafka's refusals), the layering and its sources and synonyms, what
IncrementalAlterConfigs does to stored configs, and how the broker's dynamic config applies
an update and tells the parts it concerns."""

from __future__ import annotations

import re

import attrs
import pytest

import transport
from kcore import errors
from kcore.config import (
    ConfigError,
    ConfigSourceCode,
    DynamicConfigView,
    KafkaConfig,
    apply_incremental_broker_alterations,
    check_dynamic_update,
    describe_broker_config,
    describe_topic_config,
)
from kcore.config._dynamic import sanitize_stored
from kcore.controller.partition_election import unclean_leader_election_enabled
from kcore.protocol.api_keys import ApiKey
from kcore.server.dynamic_broker_config import (
    DynamicBrokerConfig,
    DynamicThreadPool,
    describe_broker_resource,
)
from kcore.server.kafka_apis import KafkaProtocolApis

DYNAMIC_BROKER = ConfigSourceCode.DYNAMIC_BROKER_CONFIG
DYNAMIC_DEFAULT = ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC = ConfigSourceCode.STATIC_BROKER_CONFIG
DEFAULT = ConfigSourceCode.DEFAULT_CONFIG


def static(**settings) -> KafkaConfig:
    return KafkaConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/k", **settings}
    )


# -- which settings are dynamic ------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "per_broker", "message"),
    [
        # Kafka's own refusals, in Kafka's words.
        (
            {"log.dirs": "/x", "num.partitions": "3"},
            True,
            "Cannot update these configs dynamically: Set(log.dirs, num.partitions)",
        ),
        (
            {"log.retention.hours": "1"},  # only the first synonym, log.retention.ms, is
            True,
            "Cannot update these configs dynamically: Set(log.retention.hours)",
        ),
        (
            {"ssl.keystore.location": "/k.pem"},
            True,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: Set(ssl.keystore.location)",
        ),
        (
            {"listener.name.secure.ssl.keystore.location": "/k.pem"},
            False,
            "Cannot update these configs at default cluster level, broker id must be "
            "specified: Set(listener.name.secure.ssl.keystore.location)",
        ),
        # Dynamic in Kafka, not in kcore: refused with the reason, never stored and ignored.
        ({"num.io.threads": "16"}, True, "num.io.threads cannot be updated dynamically in kcore"),
        (
            {"listener.name.secure.ssl.keystore.location": "/k.pem"},
            True,
            "listener.name.secure.ssl.keystore.location cannot be updated dynamically in kcore: "
            "a listener's TLS material is loaded when the broker starts",
        ),
        ({"no.such.setting": "1"}, True, "Unknown broker configs: Set(no.such.setting)"),
        ({"min.insync.replicas": "0"}, False, "min.insync.replicas"),
    ],
)
def test_updates_kafka_and_kcore_refuse(props, per_broker, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_dynamic_update(props, per_broker=per_broker)


def test_the_log_defaults_the_cleaner_and_the_fetcher_pool_are_dynamic():
    check_dynamic_update(
        {
            "log.retention.ms": "1000",
            "log.segment.bytes": "1048576",
            "log.cleanup.policy": "compact,delete",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "true",
            "log.cleaner.threads": "2",
            "num.replica.fetchers": "2",
        },
        per_broker=False,
    )


def test_a_setting_kcore_cannot_honour_is_refused_naming_it():
    config = DynamicBrokerConfig(static())
    with pytest.raises(ConfigError, match=r"log\.flush\.interval\.ms=1000 is not supported yet"):
        config.validate({"log.flush.interval.ms": "1000"}, per_broker=False)


def test_a_password_or_an_unknown_setting_never_shows_its_value():
    with pytest.raises(ConfigError) as raised:
        check_dynamic_update({"sasl.jaas.config": "secret-1"}, per_broker=True)
    assert "secret-1" not in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        check_dynamic_update({"listener.name.x.ssl.key.password": 7}, per_broker=True)
    assert "7" not in str(raised.value).replace("listener.name.x", "")


def test_stored_configs_that_cannot_apply_are_set_aside_with_the_reason():
    kept, ignored = sanitize_stored(
        {"log.retention.ms": "1000", "log.dirs": "/x", "min.insync.replicas": "zero"},
        per_broker=False,
    )
    assert kept == {"log.retention.ms": "1000"}
    assert sorted(ignored) == ["log.dirs", "min.insync.replicas"]
    assert "Cannot update these configs dynamically" in ignored["log.dirs"]


# -- layering, sources, synonyms -----------------------------------------------------------


def test_a_dynamic_setting_displaces_its_synonyms_below_it():
    view = DynamicConfigView(
        static(**{"log.retention.hours": 5, "min.insync.replicas": 2}),
        cluster_default={"log.retention.ms": "60000", "min.insync.replicas": "3"},
        per_broker={"min.insync.replicas": "1"},
    )
    assert view.log_retention_time_ms == 60000  # not the static 5 hours
    assert view.min_insync_replicas == 1  # per-broker > cluster default > static
    assert DynamicConfigView(static(**{"log.retention.hours": 5})).log_retention_time_ms == (
        5 * 3_600_000
    )


def test_described_broker_configs_name_their_sources_and_synonyms_as_kafka():
    view = DynamicConfigView(
        static(**{"min.insync.replicas": 2, "ssl.key.password": "s3cret"}),
        cluster_default={"min.insync.replicas": "3", "log.retention.ms": "60000"},
        per_broker={"min.insync.replicas": "1"},
    )
    entries = {e.name: e for e in describe_broker_config(view)}
    mir = entries["min.insync.replicas"]
    assert (mir.value, mir.source, mir.read_only) == ("1", DYNAMIC_BROKER, False)
    assert [(s.source, s.value) for s in mir.synonyms] == [
        (DYNAMIC_BROKER, "1"),
        (DYNAMIC_DEFAULT, "3"),
        (STATIC, "2"),
        (DEFAULT, "1"),
    ]
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source) == ("60000", DYNAMIC_DEFAULT)
    assert [(s.name, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", DYNAMIC_DEFAULT),
        ("log.retention.hours", DEFAULT),
    ]
    # Kafka's dropWhile: log.retention.hours' own entry starts at its own name.
    assert [s.name for s in entries["log.retention.hours"].synonyms] == ["log.retention.hours"]
    assert entries["log.dirs"].read_only and entries["log.dirs"].source == STATIC
    password = entries["ssl.key.password"]
    assert (password.value, password.is_sensitive) == (None, True)
    assert all(s.value is None for s in password.synonyms)

    defaults = describe_broker_config(view, per_broker=False)
    assert [(e.name, e.value, e.source) for e in defaults] == [
        ("log.retention.ms", "60000", DYNAMIC_DEFAULT),
        ("min.insync.replicas", "3", DYNAMIC_DEFAULT),
    ]
    assert [s.source for s in defaults[1].synonyms] == [DYNAMIC_DEFAULT]


def test_a_topic_config_falls_back_through_the_dynamic_layers():
    view = DynamicConfigView(
        static(**{"log.retention.hours": 5}), cluster_default={"log.retention.ms": "60000"}
    )
    entries = {e.name: e for e in describe_topic_config({"min.insync.replicas": "2"}, view)}
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "60000",
        DYNAMIC_DEFAULT,
    )
    assert [s.source for s in entries["retention.ms"].synonyms] == [
        DYNAMIC_DEFAULT,
        STATIC,
        DEFAULT,
    ]
    assert [s.source for s in entries["min.insync.replicas"].synonyms] == [
        ConfigSourceCode.DYNAMIC_TOPIC_CONFIG,
        DEFAULT,
    ]


def test_describing_another_brokers_configs_is_refused_as_kafka():
    config = DynamicBrokerConfig(static())
    with pytest.raises(errors.InvalidRequestError, match="expected 1 or empty string, but"):
        describe_broker_resource(config, "2")
    with pytest.raises(errors.InvalidRequestError, match="Broker id must be an integer"):
        describe_broker_resource(config, "one")
    assert describe_broker_resource(config, "") == []


# -- IncrementalAlterConfigs ---------------------------------------------------------------


def test_incremental_alterations_of_broker_configs():
    stored = {"log.retention.ms": "1000", "min.insync.replicas": "2"}
    altered = apply_incremental_broker_alterations(
        stored,
        [
            ("log.retention.ms", 0, "2000"),  # SET
            ("min.insync.replicas", 1, None),  # DELETE
            ("log.cleanup.policy", 2, "compact"),  # APPEND to the default, delete
        ],
    )
    assert altered == {"log.retention.ms": "2000", "log.cleanup.policy": "delete,compact"}
    assert apply_incremental_broker_alterations(altered, [("log.cleanup.policy", 3, "delete")]) == {
        "log.retention.ms": "2000",
        "log.cleanup.policy": "compact",
    }


@pytest.mark.parametrize(
    ("alterations", "error", "message"),
    [
        ([("a", 0, "1"), ("a", 1, None)], errors.InvalidRequestError, "duplicate config keys"),
        ([("a", 0, None)], errors.InvalidRequestError, "Null value not supported for : a"),
        ([("a", 9, "1")], errors.InvalidRequestError, "Unknown operations type 9"),
        (
            [("log.retention.ms", 2, "1")],
            errors.InvalidConfigurationError,
            "Config value append is not allowed for config key: log.retention.ms",
        ),
    ],
)
def test_incremental_alterations_kafka_refuses(alterations, error, message):
    with pytest.raises(error, match=re.escape(message)):
        apply_incremental_broker_alterations({}, alterations)


# -- applying an update --------------------------------------------------------------------


@attrs.define
class Recorder:
    reconfigurable_configs: frozenset[str]
    calls: list = attrs.field(factory=list)

    def validate_reconfiguration(self, current, new):
        pass

    def reconfigure(self, old, new):
        self.calls.append((old.min_insync_replicas, new.min_insync_replicas))


def test_an_update_reads_through_and_tells_only_the_parts_it_concerns():
    config = DynamicBrokerConfig(static(**{"min.insync.replicas": 2}))
    logs, cleaner = Recorder(frozenset({"min.insync.replicas"})), Recorder(frozenset({"x"}))
    config.add_reconfigurable(logs)
    config.add_reconfigurable(cleaner)
    assert config.min_insync_replicas == 2 and config.get("min.insync.replicas") == 2
    assert config.update({"min.insync.replicas": "3"}, per_broker=False)
    assert config.min_insync_replicas == 3
    assert config.update({"min.insync.replicas": "1"}, per_broker=True)
    assert config.min_insync_replicas == 1  # per-broker over the cluster default
    assert config.update({}, per_broker=True)  # deleted: back to the default
    assert (logs.calls, cleaner.calls) == ([(2, 3), (3, 1), (1, 3)], [])
    # A stored static setting is ignored; the rest applies.
    assert config.update({"log.dirs": "/x", "min.insync.replicas": "2"}, per_broker=False)
    assert config.min_insync_replicas == 2 and config.log_dirs == ["/tmp/k"]


def test_the_fetcher_pool_grows_or_shrinks_by_at_most_half_or_double():
    config = DynamicBrokerConfig(static())

    @attrs.define
    class FetcherManager:
        sizes: list = attrs.field(factory=list)

        def resize_thread_pool(self, size):
            self.sizes.append(size)

    @attrs.define
    class ReplicaManager:
        fetcher_manager: FetcherManager = attrs.field(factory=FetcherManager)

    replicas = ReplicaManager()
    config.add_reconfigurable(DynamicThreadPool(replicas))
    with pytest.raises(ConfigError, match="not be greater than double the current value 1"):
        config.validate({"num.replica.fetchers": "3"}, per_broker=True)
    config.validate({"num.replica.fetchers": "2"}, per_broker=True)
    # A stored value that fails the check is logged and not applied: the pool stays.
    assert not config.update({"num.replica.fetchers": "3"}, per_broker=True)
    assert config.num_replica_fetchers == 1 and replicas.fetcher_manager.sizes == []
    assert config.update({"num.replica.fetchers": "2"}, per_broker=True)
    assert replicas.fetcher_manager.sizes == [2]


# -- Kafka's protocol ----------------------------------------------------------------------


@attrs.define
class StubApis:
    config: DynamicBrokerConfig
    altered: list = attrs.field(factory=list)
    authorizer = None  # as KafkaApis without authorizer.class.name

    async def describe_configs(self, kind, name):
        return describe_broker_resource(self.config, name)

    async def alter_broker_config(self, name, new_configs, validate_only):
        self.altered.append((name, new_configs({"log.retention.ms": "1"}), validate_only))


def kafka_request(api_key, version, body):
    return transport.Request(api_key, version, 1, "test", body, None)


async def test_kafka_describe_configs_lists_the_synonyms_when_asked():
    config = DynamicBrokerConfig(static(**{"min.insync.replicas": 2}))
    assert config.update({"min.insync.replicas": "3"}, per_broker=False)
    apis = KafkaProtocolApis(StubApis(config))
    resource = {
        "resource_type": 4,
        "resource_name": "1",
        "configuration_keys": ["min.insync.replicas"],
    }
    for include_synonyms, expected in [
        (False, []),
        (
            True,
            [
                {"name": "min.insync.replicas", "value": "3", "source": 3},
                {"name": "min.insync.replicas", "value": "2", "source": 4},
                {"name": "min.insync.replicas", "value": "1", "source": 5},
            ],
        ),
    ]:
        body = {"resources": [resource], "include_synonyms": include_synonyms}
        response = await apis.handle_describe_configs(
            kafka_request(ApiKey.DESCRIBE_CONFIGS, 4, body)
        )
        [result] = response["results"]
        [entry] = result["configs"]
        assert (entry["value"], entry["config_source"], entry["synonyms"]) == ("3", 3, expected)


async def test_kafka_alter_configs_replaces_a_brokers_dynamic_configs():
    stub = StubApis(DynamicBrokerConfig(static()))
    apis = KafkaProtocolApis(stub)

    async def alter(configs):
        body = {
            "resources": [{"resource_type": 4, "resource_name": "", "configs": configs}],
            "validate_only": False,
        }
        [result] = (await apis.handle_alter_configs(kafka_request(ApiKey.ALTER_CONFIGS, 1, body)))[
            "responses"
        ]
        return result["error_code"], result["error_message"]

    assert await alter([{"name": "log.retention.ms", "value": "5"}]) == (0, None)
    assert stub.altered == [("", {"log.retention.ms": "5"}, False)]  # the stored "1" replaced
    assert await alter([{"name": "log.retention.ms", "value": None}]) == (
        errors.InvalidRequestError.code,
        "Null value not supported for : log.retention.ms",
    )


def test_the_controller_reads_the_effective_unclean_election_default():
    config = DynamicBrokerConfig(static())
    assert not unclean_leader_election_enabled("t", {}, config)
    assert config.update({"unclean.leader.election.enable": "true"}, per_broker=False)
    assert unclean_leader_election_enabled("t", {}, config)
    assert not unclean_leader_election_enabled(
        "t", {"unclean.leader.election.enable": "false"}, config
    )
