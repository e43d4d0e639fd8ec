"""The value a broker uses for each config, where it comes from, and what it would be without it.

Precedence, as Kafka's: a topic's override, then this broker's dynamic config, then the cluster-wide
dynamic default, then server.properties, then Kafka's default. DescribeConfigs reports the winner's
source, and with include_synonyms every layer that sets it, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epochlog.config_defs import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    ConfigType,
    in_topic_unit,
    validate_value,
)
from epochlog.security.listeners import is_sensitive
from epochlog.server.config import BrokerConfig

# DescribeConfigs config_source values (kept under their old names for callers)
SOURCE_DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG
SOURCE_STATIC_BROKER = ConfigSource.STATIC_BROKER_CONFIG
SOURCE_DEFAULT = ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True)
class DynamicBrokerConfigs:
    """The metadata's dynamic broker configs as one broker sees them (broker names, e.g. log.retention.ms)."""

    own: dict[str, str] = field(default_factory=dict)  # this broker's (resource name = its id)
    default: dict[str, str] = field(default_factory=dict)  # the cluster-wide default (empty resource name)

    @classmethod
    def of(cls, broker_configs: dict[str, dict[str, str]], node_id: int) -> DynamicBrokerConfigs:
        return cls(dict(broker_configs.get(str(node_id), {})), dict(broker_configs.get("", {})))


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    config_type: int = 0
    doc: str | None = None
    # (name, value, source) of every layer that sets it, the winner first.
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    sensitive: bool = False


def _static_layers(d: ConfigDef, raw: dict[str, str]) -> list[tuple[str, str, int, int]]:
    """(name, raw value, source, unit factor) of server.properties' settings for ``d``, best first."""
    out = []
    for name, factor in ((d.broker_name, 1), *d.static_aliases):
        if name and raw.get(name, "") != "":
            out.append((name, raw[name], int(ConfigSource.STATIC_BROKER_CONFIG), factor))
    return out


def _resolve(
    d: ConfigDef, raw: dict[str, str], dynamic: DynamicBrokerConfigs, topic_override: str | None, topic: bool
) -> ConfigEntry:
    layers: list[tuple[str, str, int, int]] = []
    if topic_override is not None:
        layers.append((d.name, topic_override, int(ConfigSource.DYNAMIC_TOPIC_CONFIG), 1))
    if d.broker_name in dynamic.own:
        layers.append((d.broker_name, dynamic.own[d.broker_name], int(ConfigSource.DYNAMIC_BROKER_CONFIG), 1))
    if d.broker_name in dynamic.default:
        layers.append(
            (d.broker_name, dynamic.default[d.broker_name], int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG), 1)
        )
    layers += _static_layers(d, raw)
    layers.append((d.broker_name or d.name, d.default, int(ConfigSource.DEFAULT_CONFIG), 1))
    _name, value, source, factor = layers[0]
    value = in_topic_unit(value, factor)
    return ConfigEntry(
        d.name if topic else d.broker_name,
        value,
        source,
        read_only=False,
        config_type=int(d.type),
        doc=d.doc or None,
        synonyms=tuple((n, v, s) for n, v, s, _f in layers),
    )


def effective_topic_config_entries(
    broker_config: BrokerConfig, overrides: dict[str, str], dynamic: DynamicBrokerConfigs | None = None
) -> list[ConfigEntry]:
    """Every topic config with its value and source, as DescribeConfigs reports them for a topic."""
    dyn = dynamic or DynamicBrokerConfigs()
    rows = [
        _resolve(d, broker_config.raw, dyn, overrides.get(name), topic=True)
        for name, d in sorted(TOPIC_CONFIGS.items())
    ]
    for name, value in sorted(overrides.items()):
        if name not in TOPIC_CONFIGS:  # written before the name was checked; shown, never hidden
            rows.append(
                ConfigEntry(name, value, int(ConfigSource.DYNAMIC_TOPIC_CONFIG), synonyms=((name, value, 1),))
            )
    return rows


def effective_topic_configs(
    broker_config: BrokerConfig, overrides: dict[str, str], dynamic: DynamicBrokerConfigs | None = None
) -> list[tuple[str, str, int]]:
    """(name, value, source) for every known topic config."""
    entries = effective_topic_config_entries(broker_config, overrides, dynamic)
    return [(e.name, e.value or "", e.source) for e in entries]


def topic_properties(
    broker_config: BrokerConfig, overrides: dict[str, str], dynamic: DynamicBrokerConfigs | None = None
) -> dict[str, str]:
    """The effective topic configs by topic name: what a partition's log and replica run with."""
    return {e.name: e.value for e in effective_topic_config_entries(broker_config, overrides, dynamic) if e.value}


def broker_config_entries(broker_config: BrokerConfig, dynamic: DynamicBrokerConfigs) -> list[ConfigEntry]:
    """A broker's configs: the dynamic ones with their winning layer, then the rest of server.properties
    (read-only: they change with a restart only)."""
    rows = [
        _resolve(d, broker_config.raw, dynamic, None, topic=False) for _n, d in sorted(DYNAMIC_BROKER_CONFIGS.items())
    ]
    for name, raw_value in sorted(broker_config.raw.items()):
        if name not in DYNAMIC_BROKER_CONFIGS:
            # Passwords, private keys and JAAS configs are reported as set, never with their value (Kafka's
            # sensitive configs; the password type).
            sensitive = is_sensitive(name)
            value = None if sensitive else raw_value
            rows.append(
                ConfigEntry(
                    name,
                    value,
                    int(ConfigSource.STATIC_BROKER_CONFIG),
                    read_only=True,
                    config_type=int(ConfigType.PASSWORD if sensitive else ConfigType.STRING),
                    synonyms=((name, value, int(ConfigSource.STATIC_BROKER_CONFIG)),),
                    sensitive=sensitive,
                )
            )
    if "broker.rack" not in broker_config.raw:
        # Kafka lists its read-only broker configs at their default too: a broker with no rack says so.
        src = int(ConfigSource.DEFAULT_CONFIG)
        rows.append(ConfigEntry("broker.rack", None, src, read_only=True, synonyms=(("broker.rack", None, src),)))
    return rows


def default_broker_config_entries(dynamic: DynamicBrokerConfigs) -> list[ConfigEntry]:
    """The cluster-wide default resource (BROKER, empty name): only what is set there, as Kafka reports it."""
    src = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    rows = []
    for name, value in sorted(dynamic.default.items()):
        d = DYNAMIC_BROKER_CONFIGS.get(name)
        rows.append(
            ConfigEntry(
                name, value, src, config_type=int(d.type) if d else 0, doc=(d.doc or None) if d else None,
                synonyms=((name, value, src),),
            )
        )
    return rows


def unknown_configs(configs: dict[str, str]) -> list[str]:
    return [k for k in configs if k not in TOPIC_CONFIGS]


def invalid_topic_configs(configs: dict[str, str]) -> str | None:
    """Why a CreateTopics config set is refused (INVALID_CONFIG), or None."""
    bad = unknown_configs(configs)
    if bad:
        return f"unknown topic config(s): {', '.join(sorted(bad))}"
    for name, value in sorted(configs.items()):
        problem = validate_value(TOPIC_CONFIGS[name], value)
        if problem:
            return problem
    return None
