"""One table of topic-config definitions (epochlog.config_defs): the controller's validation, the log config
a broker builds for a partition, and `epochlog configs` all read it, so a value one accepts the others
accept, at every bound."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import epochlog
from epochlog.cli.configs_cmd import refused
from epochlog.config_defs import (
    INT_MAX,
    NOT_ACTED_ON,
    RESOURCE_TOPIC,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigType,
    typed,
    validate_value,
)
from epochlog.storage.config import _FIELDS, ConfigError, LogConfig

SRC = Path(epochlog.__file__).parent
TABLE_MODULE = SRC / "config_defs.py"

# Kafka's bounds for the topic configs (LogConfig's validators; the documentation's "Valid Values").
KAFKA_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "compression.gzip.level": (1, 9),  # or -1
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
    "delete.retention.ms": (0, None),
    "file.delete.delay.ms": (0, None),
    "local.retention.bytes": (-2, None),
    "local.retention.ms": (-2, None),
    "flush.messages": (1, None),
    "flush.ms": (0, None),
    "index.interval.bytes": (0, None),
    "max.compaction.lag.ms": (1, None),
    "max.message.bytes": (0, None),
    "message.timestamp.after.max.ms": (0, None),
    "message.timestamp.before.max.ms": (0, None),
    "min.cleanable.dirty.ratio": (0, 1),
    "min.compaction.lag.ms": (0, None),
    "min.insync.replicas": (1, None),
    "retention.bytes": (None, None),
    "retention.ms": (-1, None),
    "segment.bytes": (14, None),
    "segment.index.bytes": (4, None),
    "segment.jitter.ms": (0, None),
    "segment.ms": (1, None),
}

# Kafka 4.2's topic configs (TopicConfig, LogConfig and QuotaConfig's throttled-replica lists): every one is
# known here, so a client that describes a topic's configs and writes them back is never refused.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}  # fmt: skip


def test_every_kafka_topic_config_is_known_with_a_valid_default() -> None:
    assert set(TOPIC_CONFIGS) == KAFKA_TOPIC_CONFIGS
    for name, d in TOPIC_CONFIGS.items():
        assert validate_value(d, d.default) is None, name
        assert d.doc, name


def test_gzip_level_takes_zlibs_default_outside_its_range() -> None:
    d = TOPIC_CONFIGS["compression.gzip.level"]
    assert validate_value(d, "-1") is None and validate_value(d, "9") is None
    assert validate_value(d, "0") == (
        "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"
    )


def test_tiered_storage_cannot_be_turned_on() -> None:
    d = TOPIC_CONFIGS["remote.storage.enable"]
    assert validate_value(d, "false") is None
    assert "Tiered Storage functionality is disabled" in (validate_value(d, "true") or "")


def test_list_configs_follow_kip_1161() -> None:
    """Kafka 4.2: an empty list is a value; an empty item or a repeated one is refused."""
    d = TOPIC_CONFIGS["cleanup.policy"]
    assert validate_value(d, "") is None and validate_value(d, " compact , delete ") is None
    assert validate_value(d, "compact,compact") == "Configuration 'cleanup.policy' values must not be duplicated."
    assert validate_value(d, "compact,") == "Configuration 'cleanup.policy' values must not be empty."
    assert validate_value(d, "compact,,delete") == "Configuration 'cleanup.policy' values must not be empty."
    assert "String must be one of: compact, delete" in (validate_value(d, "forever") or "")
    # Set by its topic name, the empty policy reaches the log: neither deleted nor compacted.
    cfg = LogConfig.from_properties({"log.cleanup.policy": "compact", "cleanup.policy": ""})
    assert cfg.cleanup_policy == "" and not cfg.compact


def test_not_acted_on_configs_say_so() -> None:
    acted = set(_FIELDS.values()) | {"min.insync.replicas", "unclean.leader.election.enable"}
    acted |= {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
    for name, d in TOPIC_CONFIGS.items():
        if name not in acted and name != "remote.storage.enable":
            assert d.doc.startswith(NOT_ACTED_ON), name


def _broker_accepts(name: str, value: str) -> bool:
    try:
        LogConfig.from_properties({name: value})
    except ConfigError:
        return False
    return True


def _probes(d: ConfigDef) -> list[str]:
    """Values at and either side of each bound, plus ones of the wrong type or out of the type's range."""
    out = ["not-a-number"]
    step = 0.5 if d.type is ConfigType.DOUBLE else 1
    for bound in (d.minimum, d.maximum):
        if bound is not None:
            out += [str(bound - step), str(bound), str(bound + step)]
    if d.type is ConfigType.INT:
        out += [str(INT_MAX), str(INT_MAX + 1)]
    if d.type is ConfigType.LONG:
        out += [str(2**63 - 1), str(2**63)]
    return out + ["nan"] * (d.type is ConfigType.DOUBLE)


def test_the_bounds_are_kafkas() -> None:
    numeric = {n: d for n, d in TOPIC_CONFIGS.items() if d.type in (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE)}
    assert {n: (d.minimum, d.maximum) for n, d in numeric.items()} == KAFKA_BOUNDS


@pytest.mark.parametrize("name", sorted(n for n, d in TOPIC_CONFIGS.items() if d.minimum is not None))
def test_every_bounded_key_refuses_what_is_out_of_bounds(name: str) -> None:
    d = TOPIC_CONFIGS[name]
    step = 0.5 if d.type is ConfigType.DOUBLE else 1
    assert d.minimum is not None
    assert validate_value(d, str(d.minimum)) is None
    assert validate_value(d, str(d.minimum - step)) is not None
    if d.maximum is not None:
        assert validate_value(d, str(d.maximum)) is None
        assert validate_value(d, str(d.maximum + step)) is not None


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_controller_broker_and_cli_agree_on_every_value(name: str) -> None:
    d = TOPIC_CONFIGS[name]
    probes = _probes(d) + [d.default] + list(d.choices) + ["neither-of-the-choices"] * bool(d.choices)
    for value in probes:
        controller = validate_value(d, value) is None
        assert (refused(RESOURCE_TOPIC, {name: value}) is None) == controller, value
        if name in _FIELDS.values():
            assert _broker_accepts(name, value) == controller, value
            if d.broker_name:  # the static server.properties name goes through the same check
                assert _broker_accepts(d.broker_name, value) == controller, value


def test_every_log_config_attribute_is_a_defined_topic_config_with_its_default() -> None:
    attrs = {f.name for f in dataclasses.fields(LogConfig)}
    assert attrs == set(_FIELDS)
    defaults = LogConfig()
    for attr, name in _FIELDS.items():
        d = TOPIC_CONFIGS[name]
        assert getattr(defaults, attr) == typed(d, d.default), name


def test_the_older_broker_spellings_are_read_in_the_topic_unit() -> None:
    assert LogConfig.from_properties({"log.retention.hours": "2"}).retention_ms == 7_200_000
    assert LogConfig.from_properties({"log.retention.minutes": "-1"}).retention_ms == -1  # no limit
    assert LogConfig.from_properties({"log.roll.hours": "1", "log.roll.ms": "5"}).segment_ms == 5
    assert LogConfig.from_properties({"segment.ms": "7", "log.roll.ms": "5"}).segment_ms == 7
    with pytest.raises(ConfigError, match=r"log\.roll\.hours"):
        LogConfig.from_properties({"log.roll.hours": "0"})


def _literal_sets(tree: ast.Module) -> list[set[str]]:
    strings = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict | ast.Tuple | ast.List | ast.Set):
            strings.append({c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and type(c.value) is str})
    return strings


def definition_tables(tree: ast.Module) -> list[str]:
    """What in a module looks like a second definition table: a ConfigDef built, or a literal naming several
    topic configs together with their broker synonyms (a name -> synonym map, as storage/config.py had)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ConfigDef":
            found.append(f"ConfigDef(...) at line {node.lineno}")
    synonyms = {d.broker_name for d in TOPIC_CONFIGS.values() if d.broker_name and d.broker_name != d.name}
    for strings in _literal_sets(tree):
        topics, brokers = strings & set(TOPIC_CONFIGS), strings & synonyms
        if len(topics) >= 3 and brokers:
            found.append(f"a literal naming {sorted(topics)[:3]}... with {sorted(brokers)[:3]}...")
    return found


def test_the_scan_finds_a_second_table() -> None:
    src = (
        'NAMES = {"a": ("segment.bytes", ("log.segment.bytes",)), "b": ("retention.ms", ()), "c": ("flush.ms", ())}\n'
        'D = ConfigDef("x", 1, "0", "")\n'
    )
    assert len(definition_tables(ast.parse(src))) == 2
    assert definition_tables(ast.parse('C = {"segment.bytes": "1", "retention.ms": "2", "flush.ms": "3"}')) == []


def test_topic_configs_are_defined_once() -> None:
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        if path != TABLE_MODULE:
            found = definition_tables(ast.parse(path.read_text(), str(path)))
            if found:
                offenders[str(path.relative_to(SRC))] = found
    assert offenders == {}, f"define configs in epochlog/config_defs.py only: {offenders}"


def test_the_table_is_a_leaf() -> None:
    tree = ast.parse(TABLE_MODULE.read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith("epochlog")]
