"""A broker's effective config values: topic override > this broker's dynamic > cluster default > static >
Kafka's default, with the winning source and every layer as a synonym."""

from __future__ import annotations

from epochlog.config_defs import ConfigSource
from epochlog.server.config import BrokerConfig
from epochlog.server.topic_configs import (
    DynamicBrokerConfigs,
    broker_config_entries,
    effective_topic_config_entries,
    invalid_topic_configs,
    topic_properties,
)


def entry(rows, name):  # type: ignore[no-untyped-def]
    return next(e for e in rows if e.name == name)


def config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


def test_each_layer_wins_over_the_ones_below() -> None:
    static = config(log_retention_ms="5000")
    dyn_default = DynamicBrokerConfigs(default={"log.retention.ms": "4000"})
    dyn_both = DynamicBrokerConfigs(own={"log.retention.ms": "3000"}, default={"log.retention.ms": "4000"})
    cases = [
        (config(), {}, DynamicBrokerConfigs(), "604800000", ConfigSource.DEFAULT_CONFIG),
        (static, {}, DynamicBrokerConfigs(), "5000", ConfigSource.STATIC_BROKER_CONFIG),
        (static, {}, dyn_default, "4000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static, {}, dyn_both, "3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        (static, {"retention.ms": "2000"}, dyn_both, "2000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    ]
    for cfg, overrides, dyn, value, source in cases:
        e = entry(effective_topic_config_entries(cfg, overrides, dyn), "retention.ms")
        assert (e.value, e.source) == (value, source)
        assert topic_properties(cfg, overrides, dyn)["retention.ms"] == value


def test_synonyms_list_every_layer_in_order() -> None:
    cfg = config(log_retention_hours="2")
    dyn = DynamicBrokerConfigs(default={"log.retention.ms": "4000"})
    e = entry(effective_topic_config_entries(cfg, {"retention.ms": "1"}, dyn), "retention.ms")
    assert [(n, s) for n, _v, s in e.synonyms] == [
        ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", ConfigSource.DEFAULT_CONFIG),
    ]
    # a static alias is converted to the topic config's unit
    assert entry(effective_topic_config_entries(cfg, {}), "retention.ms").value == str(2 * 3_600_000)


def test_broker_entries_mark_static_only_configs_read_only() -> None:
    cfg = config(node_id="3", log_segment_bytes="2048")
    rows = broker_config_entries(cfg, DynamicBrokerConfigs(own={"log.segment.bytes": "4096"}))
    seg = entry(rows, "log.segment.bytes")
    assert (seg.value, seg.source, seg.read_only) == ("4096", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert entry(rows, "node.id").read_only


def test_create_topic_configs_are_checked_for_values_too() -> None:
    assert invalid_topic_configs({"retention.ms": "100"}) is None
    assert "retention.ms" in (invalid_topic_configs({"retention.ms": "soon"}) or "")
    assert "unknown" in (invalid_topic_configs({"nope": "1"}) or "")
