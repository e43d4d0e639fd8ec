"""Deciding a dynamic config change: validation as Kafka does it, and the ConfigRecords that carry it out.

IncrementalAlterConfigs (KIP-339) changes named configs of a resource one operation at a time (SET,
DELETE, APPEND and SUBTRACT on list configs); AlterConfigs replaces the resource's whole set of dynamic
configs. Both are all-or-nothing per resource: one bad config refuses every change of that resource and
writes nothing, while the other resources of the request go ahead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.config_defs import (
    DYNAMIC_BROKER_CONFIGS,
    GROUP_BOUNDS,
    GROUP_CONFIGS,
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    STATIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigDef,
    group_configs_problem,
    is_list,
    split_list,
    validate_value,
)
from epochlog.controller.image import ClusterImage
from epochlog.controller.records import ConfigRecord

# A broker config that is read-only or has a bad value: Kafka's brokers answer INVALID_REQUEST, not
# INVALID_CONFIG, for these (KAFKA-13609 keeps it so for compatibility); topic configs get INVALID_CONFIG.
BROKER_VALIDATION_FAILED = Err.INVALID_REQUEST

# IncrementalAlterConfigs operations.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True)
class ConfigOp:
    name: str
    value: str | None
    op: int = SET


@dataclass(frozen=True)
class ConfigChange:
    """What one resource of an (Incremental)AlterConfigs request asks for."""

    resource_type: int
    resource_name: str
    ops: tuple[ConfigOp, ...]


@dataclass(frozen=True)
class ConfigOutcome:
    error_code: int = Err.NONE
    message: str | None = None
    records: tuple[ConfigRecord, ...] = ()


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def duplicates(changes: list[ConfigChange]) -> set[tuple[int, str]]:
    """Resources named more than once in one request: Kafka refuses each of them (INVALID_REQUEST)."""
    seen: set[tuple[int, str]] = set()
    dup: set[tuple[int, str]] = set()
    for c in changes:
        key = (c.resource_type, c.resource_name)
        (dup if key in seen else seen).add(key)
    return dup


def plan(
    image: ClusterImage, change: ConfigChange, incremental: bool, group_bounds: Mapping[str, int] = GROUP_BOUNDS
) -> ConfigOutcome:
    """The records that make ``change`` (nothing applied here), or why it is refused. ``group_bounds``: the
    controller's group.share.min/max.* settings, which bound a group's configs (Kafka's GroupConfig.validate)."""
    try:
        current = _current(image, change)
        target = _apply_ops(change, current, incremental)
        if change.resource_type == RESOURCE_GROUP:
            # The group's whole set is checked, as Kafka does: a session timeout must stay above the interval.
            problem = group_configs_problem(target, group_bounds)
            if problem:
                raise _Refused(Err.INVALID_CONFIG, problem)
    except _Refused as e:
        return ConfigOutcome(e.code, e.message)
    records = [
        ConfigRecord(change.resource_type, change.resource_name, name, target.get(name))
        for name in sorted(set(current) | set(target))
        if current.get(name) != target.get(name)
    ]
    return ConfigOutcome(records=tuple(records))


def _current(image: ClusterImage, change: ConfigChange) -> dict[str, str]:
    if change.resource_type == RESOURCE_TOPIC:
        if not change.resource_name:
            raise _Refused(Err.INVALID_REQUEST, "Default topic resources are not allowed.")
        topic = image.topics.get(change.resource_name)
        if topic is None:
            raise _Refused(Err.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {change.resource_name} does not exist.")
        return dict(topic.configs)
    if change.resource_type == RESOURCE_BROKER:
        name = change.resource_name
        if name and not (name.isdigit() and int(name) <= 2**31 - 1):
            raise _Refused(Err.INVALID_REQUEST, f"Unable to parse broker id {name!r}: a broker is named by its id")
        return dict(image.broker_configs.get(name, {}))
    if change.resource_type == RESOURCE_GROUP:
        if not change.resource_name:
            raise _Refused(Err.INVALID_REQUEST, "Default group resources are not allowed.")
        return dict(image.group_configs.get(change.resource_name, {}))
    raise _Refused(
        Err.INVALID_REQUEST, f"Unsupported resource type {change.resource_type}: only TOPIC, BROKER and GROUP"
    )


def _definition(change: ConfigChange, name: str) -> ConfigDef:
    if change.resource_type == RESOURCE_TOPIC:
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise _Refused(Err.INVALID_CONFIG, f"Unknown topic config name: {name}")
        return d
    if change.resource_type == RESOURCE_GROUP:
        d = GROUP_CONFIGS.get(name)
        if d is None:
            raise _Refused(Err.INVALID_CONFIG, f"Unknown group config name: {name}")
        return d
    d = DYNAMIC_BROKER_CONFIGS.get(name)
    if d is not None:
        return d
    if name in STATIC_BROKER_CONFIGS:
        raise _Refused(BROKER_VALIDATION_FAILED, f"Cannot update these configs dynamically: {name} (read-only)")
    # Kafka would keep an unknown broker name as a custom config; a typo kept and silently ignored helps
    # nobody, so it is refused as an unknown topic config is.
    raise _Refused(Err.INVALID_CONFIG, f"Unknown broker config name: {name}")


def _apply_ops(change: ConfigChange, current: dict[str, str], incremental: bool) -> dict[str, str]:
    names = [op.name for op in change.ops]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _Refused(Err.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(dup)}")
    # AlterConfigs: the request is the resource's whole dynamic set; anything it leaves out goes.
    target = dict(current) if incremental else {}
    for op in change.ops:
        d = _definition(change, op.name)
        shown = op.name  # messages name the config as the request did (broker or topic spelling)
        if op.op not in (SET, DELETE, APPEND, SUBTRACT):
            raise _Refused(Err.INVALID_REQUEST, f"Unknown config operation {op.op} for {shown}")
        if op.op == DELETE:
            target.pop(op.name, None)
            continue
        if op.value is None:
            raise _Refused(Err.INVALID_REQUEST, f"Null value not supported for : {shown}")
        if op.op in (APPEND, SUBTRACT):
            if not is_list(d):
                verb = "append" if op.op == APPEND else "subtract"
                raise _Refused(Err.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {shown}")
            # Kafka starts from the current dynamic value, else the config's default.
            items = split_list(target.get(op.name, d.default))
            given = split_list(op.value)
            if op.op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            value = ",".join(items)
        else:
            value = op.value.strip() if d.type.name != "STRING" else op.value
        if change.resource_type == RESOURCE_GROUP:
            target[op.name] = value  # the whole set is validated together (plan)
            continue
        problem = validate_value(d, value, shown)
        if problem:
            code = Err.INVALID_CONFIG if change.resource_type == RESOURCE_TOPIC else BROKER_VALIDATION_FAILED
            raise _Refused(code, problem)
        target[op.name] = value
    return target
