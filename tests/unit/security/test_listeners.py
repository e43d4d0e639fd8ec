"""Listener parsing with Kafka's names: protocol map, advertised listeners, the inter-broker listener, the
per-listener property prefix, and BrokerConfig's start-up checks built on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.config_error import ConfigError
from epochlog.security.listeners import (
    Listener,
    advertised_listeners,
    inter_broker_listener,
    jaas_for,
    listener_config,
    parse_listeners,
)
from epochlog.server.cluster.controller_config import ControllerConfig
from epochlog.server.config import BrokerConfig, parse_listener
from tests.pki import make_pki


def test_default_map_and_names_upper_cased() -> None:
    got = parse_listeners({"listeners": "plaintext://h:9092,SSL://:9093,sasl_ssl://h:9094,SASL_PLAINTEXT://h:9095"})
    assert got == [
        Listener("PLAINTEXT", "h", 9092, "PLAINTEXT"),
        Listener("SSL", "0.0.0.0", 9093, "SSL"),
        Listener("SASL_SSL", "h", 9094, "SASL_SSL"),
        Listener("SASL_PLAINTEXT", "h", 9095, "SASL_PLAINTEXT"),
    ]
    assert got[1].tls and not got[1].sasl and got[2].tls and got[2].sasl


def test_bare_host_port_is_plaintext() -> None:
    assert parse_listeners({"listeners": "127.0.0.1:9092"}) == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]


def test_absent_gives_none() -> None:
    assert parse_listeners({}) == []


def test_legacy_names_plaintext_without_a_map() -> None:
    got = parse_listeners({"listeners": "BROKER://h:1,INTERNAL://h:2,EXTERNAL://h:3,CLIENT://h:4,CONTROLLER://h:5"})
    assert {lst.protocol for lst in got} == {"PLAINTEXT"}


def test_controller_names_plaintext_without_a_map() -> None:
    props = {"listeners": "PLAINTEXT://h:1,QUORUM://h:2", "controller.listener.names": "quorum"}
    assert parse_listeners(props)[1] == Listener("QUORUM", "h", 2, "PLAINTEXT")


def test_unknown_name_without_a_map_refused() -> None:
    with pytest.raises(ConfigError, match="REPLICATION has no security protocol"):
        parse_listeners({"listeners": "REPLICATION://h:1"})


def test_explicit_map() -> None:
    props = {
        "listeners": "CLIENTS://h:9092,REPLICATION://h:9093",
        "listener.security.protocol.map": "clients:sasl_ssl, REPLICATION:SSL",
    }
    assert [(lst.name, lst.protocol) for lst in parse_listeners(props)] == [
        ("CLIENTS", "SASL_SSL"),
        ("REPLICATION", "SSL"),
    ]


def test_explicit_map_must_name_every_listener() -> None:
    # With a map, even a legacy name is not implied any more.
    props = {"listeners": "SSL://h:1,BROKER://h:2", "listener.security.protocol.map": "SSL:SSL"}
    with pytest.raises(ConfigError, match=r"BROKER is not in listener\.security\.protocol\.map"):
        parse_listeners(props)


@pytest.mark.parametrize(
    "mapping",
    ["A:TLS", "A", ":SSL", "A:SSL,A:PLAINTEXT"],
)
def test_bad_maps(mapping: str) -> None:
    with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map"):
        parse_listeners({"listeners": "A://h:1", "listener.security.protocol.map": mapping})


def test_duplicates_refused() -> None:
    with pytest.raises(ConfigError, match="twice"):
        parse_listeners({"listeners": "PLAINTEXT://h:1,plaintext://h:2"})
    with pytest.raises(ConfigError, match="port 9092 twice"):
        parse_listeners({"listeners": "PLAINTEXT://a:9092,SSL://b:9092"})
    # Ephemeral ports never clash; advertised listeners may share a port (a load balancer).
    assert len(parse_listeners({"listeners": "PLAINTEXT://h:0,SSL://h:0"})) == 2
    adv = {"advertised.listeners": "PLAINTEXT://a:9092,SSL://b:9092"}
    assert len(parse_listeners(adv, "advertised.listeners")) == 2


def test_advertised_default_replaces_wildcard_and_drops_controllers() -> None:
    props = {
        "listeners": "PLAINTEXT://:9092,SSL://0.0.0.0:9093,CONTROLLER://h:9094",
        "controller.listener.names": "CONTROLLER",
    }
    listeners = parse_listeners(props)
    assert advertised_listeners(props, listeners) == [
        Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
        Listener("SSL", "127.0.0.1", 9093, "SSL"),
    ]


def test_advertised_explicit() -> None:
    props = {"listeners": "PLAINTEXT://:9092,SSL://:9093", "advertised.listeners": "SSL://broker1.example:19093"}
    assert advertised_listeners(props, parse_listeners(props)) == [Listener("SSL", "broker1.example", 19093, "SSL")]


def test_advertised_names_must_be_listeners() -> None:
    props = {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:9093"}
    with pytest.raises(ConfigError, match="SSL is not one of listeners"):
        advertised_listeners(props, parse_listeners(props))


def test_advertised_meta_address_refused() -> None:
    props = {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}
    with pytest.raises(ConfigError, match=r"0\.0\.0\.0"):
        advertised_listeners(props, parse_listeners(props))


def test_inter_broker_by_protocol_default() -> None:
    props = {"listeners": "SSL://h:1,PLAINTEXT://h:2"}
    assert inter_broker_listener(props, parse_listeners(props)).name == "PLAINTEXT"
    props["security.inter.broker.protocol"] = "ssl"
    assert inter_broker_listener(props, parse_listeners(props)).name == "SSL"


def test_inter_broker_by_name() -> None:
    props = {
        "listeners": "CLIENTS://h:1,REPL://h:2",
        "listener.security.protocol.map": "CLIENTS:SASL_SSL,REPL:SSL",
        "inter.broker.listener.name": "repl",
    }
    assert inter_broker_listener(props, parse_listeners(props)) == Listener("REPL", "h", 2, "SSL")


def test_inter_broker_both_set_refused() -> None:
    props = {"listeners": "SSL://h:1", "inter.broker.listener.name": "SSL", "security.inter.broker.protocol": "SSL"}
    with pytest.raises(ConfigError, match="both set"):
        inter_broker_listener(props, parse_listeners(props))


def test_inter_broker_named_but_missing_refused() -> None:
    props = {"listeners": "PLAINTEXT://h:1", "inter.broker.listener.name": "REPL"}
    with pytest.raises(ConfigError, match="REPL: no listener"):
        inter_broker_listener(props, parse_listeners(props))
    props = {"listeners": "PLAINTEXT://h:1", "security.inter.broker.protocol": "SSL"}
    with pytest.raises(ConfigError, match="SSL: no listener"):
        inter_broker_listener(props, parse_listeners(props))


def test_inter_broker_not_a_controller_listener() -> None:
    props = {
        "listeners": "PLAINTEXT://h:1,CONTROLLER://h:2",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "CONTROLLER",
    }
    with pytest.raises(ConfigError, match=r"controller\.listener\.names"):
        inter_broker_listener(props, parse_listeners(props))


def test_inter_broker_falls_back_to_first_non_controller_listener() -> None:
    props = {"listeners": "CONTROLLER://h:2,BROKER://h:1", "controller.listener.names": "CONTROLLER"}
    assert inter_broker_listener(props, parse_listeners(props)).name == "BROKER"


def test_listener_config_prefix_wins() -> None:
    props = {
        "ssl.keystore.location": "/global.pem",
        "ssl.client.auth": "none",
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.external.ssl.keystore.location": "/external.pem",
        "listener.name.internal.plain.sasl.jaas.config": "jaas-internal-plain",
    }
    internal = listener_config(props, "INTERNAL")
    assert internal["ssl.client.auth"] == "required"
    assert internal["ssl.keystore.location"] == "/global.pem"
    assert internal["plain.sasl.jaas.config"] == "jaas-internal-plain"
    assert not any(k.startswith("listener.name.") for k in internal)
    assert listener_config(props, "EXTERNAL")["ssl.keystore.location"] == "/external.pem"
    assert listener_config(props, "EXTERNAL")["ssl.client.auth"] == "none"


def test_jaas_for() -> None:
    props = {
        "sasl.jaas.config": "global",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "scram-on-sasl-ssl",
        "listener.name.sasl_ssl.sasl.jaas.config": "any-on-sasl-ssl",
    }
    assert jaas_for(props, "SASL_SSL", "SCRAM-SHA-256") == "scram-on-sasl-ssl"
    assert jaas_for(props, "SASL_SSL", "PLAIN") == "any-on-sasl-ssl"
    assert jaas_for(props, "SASL_PLAINTEXT", "PLAIN") == "global"
    assert jaas_for({}, "SASL_PLAINTEXT", "PLAIN") is None


# --- BrokerConfig -------------------------------------------------------------------------------------


def test_broker_config_defaults_unchanged() -> None:
    c = BrokerConfig.from_properties({})
    assert (c.host, c.port, c.advertised_host, c.advertised_port) == ("127.0.0.1", 9092, "127.0.0.1", 9092)
    assert c.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_broker_config_plaintext_as_before() -> None:
    c = BrokerConfig.from_properties({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    assert (c.host, c.port, c.advertised_host, c.advertised_port) == ("0.0.0.0", 9092, "127.0.0.1", 9092)
    c = BrokerConfig.from_properties(
        {"listeners": "BROKER://0.0.0.0:9092", "advertised.listeners": "BROKER://kafka1:19092"}
    )
    assert (c.host, c.port, c.advertised_host, c.advertised_port) == ("0.0.0.0", 9092, "kafka1", 19092)
    assert c.inter_broker_listener_name == "BROKER"


def test_broker_config_host_port_are_the_inter_broker_listeners(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    c = BrokerConfig.from_properties(
        {
            "listeners": "SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
            "advertised.listeners": "SSL://localhost:9093,PLAINTEXT://localhost:9092",
            "ssl.keystore.location": str(pki.broker_keystore),
        }
    )
    assert (c.port, c.advertised_host, c.advertised_port) == (9092, "localhost", 9092)
    assert set(c.ssl_server_contexts) == {"SSL"}
    assert [lst.name for lst in c.advertised_listeners] == ["SSL", "PLAINTEXT"]


def test_broker_config_inter_broker_must_be_advertised() -> None:
    with pytest.raises(ConfigError, match=r"must be in advertised\.listeners"):
        BrokerConfig.from_properties(
            {"listeners": "PLAINTEXT://:9092,INTERNAL://:9093", "advertised.listeners": "INTERNAL://h:9093"}
        )


def test_broker_config_ssl_listener_needs_a_keystore() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        BrokerConfig.from_properties({"listeners": "PLAINTEXT://:9092,SSL://:9093"})


def test_broker_config_bad_keystore_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"listener SSL: ssl\.keystore\.location=.*missing\.pem"):
        BrokerConfig.from_properties(
            {"listeners": "PLAINTEXT://:9092,SSL://:9093", "ssl.keystore.location": str(tmp_path / "missing.pem")}
        )


def test_broker_config_per_listener_keystore(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    c = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://:9092,SSL://:9093",
            "listener.name.ssl.ssl.keystore.location": str(pki.broker_keystore),
        }
    )
    assert "SSL" in c.ssl_server_contexts


def test_broker_config_sasl_mechanisms() -> None:
    base = {"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"}
    with pytest.raises(ConfigError, match=r"sasl\.enabled\.mechanisms.*GSSAPI"):
        BrokerConfig.from_properties(base)
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        BrokerConfig.from_properties({**base, "sasl.enabled.mechanisms": "PLAIN,GSSAPI"})
    c = BrokerConfig.from_properties({**base, "sasl.enabled.mechanisms": "plain, SCRAM-SHA-512"})
    assert c.sasl_mechanisms("SASL_PLAINTEXT") == ["PLAIN", "SCRAM-SHA-512"]
    c = BrokerConfig.from_properties({**base, "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    assert c.sasl_mechanisms("SASL_PLAINTEXT") == ["SCRAM-SHA-256"]


def test_broker_config_sasl_inter_broker_mechanism() -> None:
    base = {
        "listeners": "SASL_PLAINTEXT://:9093",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    }
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol"):
        BrokerConfig.from_properties(base)
    with pytest.raises(ConfigError, match="PLAIN is not enabled"):
        BrokerConfig.from_properties({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    c = BrokerConfig.from_properties({**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})
    assert c.sasl_mechanism_inter_broker_protocol == "SCRAM-SHA-256"
    assert c.inter_broker_listener_name == "SASL_PLAINTEXT"


def test_broker_config_principal_mapping_rules() -> None:
    assert BrokerConfig.from_properties({"ssl.principal.mapping.rules": "DEFAULT"})
    with pytest.raises(ConfigError, match="only DEFAULT"):
        BrokerConfig.from_properties({"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"})


def test_parse_listener_takes_any_name() -> None:
    assert parse_listener("SSL://h:9093") == ("h", 9093)
    assert parse_listener("h:9092") == ("h", 9092)
    with pytest.raises(ConfigError):
        parse_listener("SSL://h")


def test_controller_listener_takes_its_protocol_from_the_map() -> None:
    plain = ControllerConfig.from_properties({"listeners": "CONTROLLER://h:9093"})
    assert (plain.port, plain.listener.protocol) == (9093, "PLAINTEXT")  # KRaft: unmapped controller names
    assert ControllerConfig.from_properties({"listeners": "SSL://h:9093"}).listener.protocol == "SSL"
    mapped = ControllerConfig.from_properties(
        {"listeners": "CONTROLLER://h:9093", "listener.security.protocol.map": "CONTROLLER:SASL_SSL"}
    )
    assert mapped.listener == Listener("CONTROLLER", "h", 9093, "SASL_SSL")


def test_sensitive_configs() -> None:
    from epochlog.security.listeners import is_sensitive

    assert is_sensitive("ssl.key.password")
    assert is_sensitive("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config")
    assert is_sensitive("listener.name.ssl.ssl.keystore.key")
    assert not is_sensitive("ssl.keystore.location")
    assert not is_sensitive("listeners")


def test_broker_and_registered_listeners_put_the_inter_broker_one_first(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    c = BrokerConfig.from_properties(
        {
            "listeners": "SSL://127.0.0.1:9093,REPL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095",
            "listener.security.protocol.map": "SSL:SSL,REPL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "REPL",
            "ssl.keystore.location": str(pki.broker_keystore),
        }
    )
    assert [lst.name for lst in c.broker_listeners()] == ["REPL", "SSL"]
    assert [lst.name for lst in c.registered_listeners()] == ["REPL", "SSL"]
    assert (c.host, c.port) == ("127.0.0.1", 9094)
    assert BrokerConfig.from_properties({}).broker_listeners() == [
        Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")
    ]
