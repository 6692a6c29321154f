"""Kafka's `sasl.jaas.config` grammar: one login module, a control flag, options with
bare or quoted values, `;` at the end; a malformed value is refused without quoting it."""

import re

import pytest

from kcore.config import ConfigError, KafkaConfig
from kcore.security.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config
from kcore.security.sasl import BrokerSasl


def test_a_plain_entry_gives_the_brokers_own_credentials_and_its_users():
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="alice;secret \\"quoted\\"";'
    )
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.control_flag == "required"
    assert (entry.username, entry.password) == ("admin", "admin-secret")
    assert entry.plain_users() == {"admin": "admin-secret", "alice": 'alice;secret "quoted"'}


def test_bare_values_and_a_scram_entry():
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED username=admin "
        "password=pw;"
    )
    assert entry.control_flag == "required"
    assert dict(entry.options) == {"username": "admin", "password": "pw"}


@pytest.mark.parametrize(
    "text",
    [
        'Module required username="admin" password="s3cret"',  # no ';'
        'Module always username="admin" password="s3cret";',  # bad control flag
        'Module required password "s3cret";',  # no '='
        'Module required password="s3cret;',  # unclosed quote
        'A required password="s3cret"; B required password="s3cret";',  # two modules
        "",
    ],
)
def test_malformed_values_are_refused_naming_the_setting_but_not_the_secret(text):
    setting = "listener.name.sasl.plain.sasl.jaas.config"
    with pytest.raises(ConfigError, match=re.escape(setting)) as info:
        parse_jaas_config(text, setting=setting)
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    ("mechanisms", "why"),
    [(None, "Kerberos is not implemented"), ("PLAIN,OAUTHBEARER", "OAUTHBEARER is not")],
)
def test_a_sasl_listener_with_a_mechanism_kcore_lacks_is_refused_at_start_up(mechanisms, why):
    """Kafka's default sasl.enabled.mechanisms is GSSAPI (Kerberos): a SASL listener left at
    the default, or naming a mechanism kcore lacks, stops the broker with the reason."""
    values = {"listeners": "SASL_PLAINTEXT://:9094"}
    if mechanisms is not None:
        values["sasl.enabled.mechanisms"] = mechanisms
    config = KafkaConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/tmp/k", **values}
    )
    with pytest.raises(ConfigError, match=why):
        BrokerSasl.from_config(config.values)
