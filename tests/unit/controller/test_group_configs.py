"""Group configs (resource type GROUP, KIP-932): validation as Kafka's GroupConfig (names, values, the broker's
group.share.min/max bounds, session timeout above the heartbeat interval), the records a change writes and
their place in the image and its snapshot, and the offset a new share-partition starts from."""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.config_defs import (
    GROUP_BOUNDS,
    group_bounds,
    group_configs_problem,
    parse_iso_duration_ms,
    share_auto_offset_reset,
)
from epochlog.controller.config_changes import DELETE, ConfigChange, ConfigOp
from epochlog.controller.controller import Controller
from epochlog.controller.image import ClusterImage
from epochlog.controller.records import ConfigRecord

GROUP = 32


def group(name: str, *ops: ConfigOp) -> ConfigChange:
    return ConfigChange(GROUP, name, tuple(ops))


def test_a_group_config_is_recorded_for_a_group_that_does_not_exist_yet_and_survives_a_snapshot() -> None:
    c = Controller(session_timeout_ms=1000)
    [out] = c.alter_configs([group("g", ConfigOp("share.auto.offset.reset", "earliest"))], incremental=True)
    assert out.error_code == Err.NONE
    assert c.records == [ConfigRecord(GROUP, "g", "share.auto.offset.reset", "earliest")]
    assert c.image.group_configs == {"g": {"share.auto.offset.reset": "earliest"}}
    again = ClusterImage()
    for r in c.image.snapshot():
        again.apply(r)
    assert again.group_configs == {"g": {"share.auto.offset.reset": "earliest"}}
    c.records.clear()
    c.alter_configs([group("g", ConfigOp("share.auto.offset.reset", None, DELETE))], incremental=True)
    assert c.records == [ConfigRecord(GROUP, "g", "share.auto.offset.reset", None)]
    assert c.image.group_configs == {}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("share.auto.offset.reset", "none", "must be either 'earliest', 'latest' or of the format"),
        ("share.auto.offset.reset", "by_duration:P1X", "ISO-8601"),
        ("share.auto.offset.reset", "by_duration:-PT1H", "ISO-8601"),
        ("share.record.lock.duration.ms", "999", "Value must be at least 1000"),
        ("share.record.lock.duration.ms", "10000", "must be greater than or equal to group.share.min.record.lock"),
        ("share.record.lock.duration.ms", "60001", "must be less than or equal to group.share.max.record.lock"),
        ("share.session.timeout.ms", "44999", "must be greater than or equal to group.share.min.session.timeout.ms"),
        ("share.session.timeout.ms", "60001", "must be less than or equal to group.share.max.session.timeout.ms"),
        ("share.heartbeat.interval.ms", "15001", "less than or equal to group.share.max.heartbeat.interval.ms"),
        ("share.heartbeat.interval.ms", "abc", "Not a number of type INT"),
        ("share.isolation.levelx", "x", "Unknown group config name: share.isolation.levelx"),
        ("share.isolation.level", "READ_COMMITTED", "String must be one of: read_committed, read_uncommitted"),
        ("share.isolation.level", "", "String must be one of: read_committed, read_uncommitted"),
    ],
)
def test_bad_values_are_refused_with_invalid_config_and_nothing_is_written(name: str, value: str, message: str) -> None:
    c = Controller(session_timeout_ms=1000)
    [out] = c.alter_configs([group("g", ConfigOp(name, value))], incremental=True)
    assert out.error_code == Err.INVALID_CONFIG
    assert message in (out.message or "")
    assert c.records == [] and c.image.group_configs == {}


def test_the_session_timeout_must_stay_above_the_heartbeat_interval_set_separately() -> None:
    bounds = {**GROUP_BOUNDS, "group.share.min.heartbeat.interval.ms": 1000, "group.share.min.session.timeout.ms": 2000}
    c = Controller(session_timeout_ms=1000)
    ok = c.alter_configs([group("g", ConfigOp("share.session.timeout.ms", "6000"))], True, group_bounds=bounds)
    assert ok[0].error_code == Err.NONE
    [out] = c.alter_configs([group("g", ConfigOp("share.heartbeat.interval.ms", "6000"))], True, group_bounds=bounds)
    assert out.error_code == Err.INVALID_CONFIG
    assert out.message == "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"


def test_the_broker_bounds_come_from_the_controllers_properties() -> None:
    b = group_bounds({"group.share.min.record.lock.duration.ms": "1000", "group.share.max.session.timeout.ms": "x"})
    assert b["group.share.min.record.lock.duration.ms"] == 1000
    assert b["group.share.max.session.timeout.ms"] == 60_000  # not a number: the default
    assert group_configs_problem({"share.record.lock.duration.ms": "2000"}, b) is None
    assert group_configs_problem({"share.record.lock.duration.ms": "2000"}) is not None


def test_a_default_group_resource_is_refused() -> None:
    c = Controller(session_timeout_ms=1000)
    [out] = c.alter_configs([group("", ConfigOp("share.auto.offset.reset", "earliest"))], incremental=True)
    assert out.error_code == Err.INVALID_REQUEST


@pytest.mark.parametrize(
    ("text", "ms"),
    [("PT1H", 3_600_000), ("P1D", 86_400_000), ("PT0.5S", 500), ("P1DT2H3M4.005S", 93_784_005), ("PT-1S", -1000)],
)
def test_iso_durations_as_java_reads_them(text: str, ms: int) -> None:
    assert parse_iso_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "P1H", "PT1D", "P1DT"])
def test_what_is_not_an_iso_duration(text: str) -> None:
    assert parse_iso_duration_ms(text) is None


def test_auto_offset_reset_values() -> None:
    assert share_auto_offset_reset("Earliest") == ("earliest", 0)
    assert share_auto_offset_reset("by_duration:PT10M") == ("by_duration", 600_000)
    assert group_configs_problem({"share.auto.offset.reset": "by_duration:PT10M"}) is None


def test_isolation_level_values_are_accepted_beside_the_numeric_configs() -> None:
    for level in ("read_committed", "read_uncommitted"):
        assert group_configs_problem({"share.isolation.level": level, "share.record.lock.duration.ms": "20000"}) is None
    c = Controller(session_timeout_ms=1000)
    [out] = c.alter_configs([group("g", ConfigOp("share.isolation.level", "read_committed"))], incremental=True)
    assert out.error_code == Err.NONE
    assert c.image.group_configs == {"g": {"share.isolation.level": "read_committed"}}


def test_describe_shows_every_group_config_the_groups_own_first_else_the_broker_setting() -> None:
    from epochlog.config_defs import ConfigSource
    from epochlog.server.handlers.configs import group_config_entries

    rows = {e.name: e for e in group_config_entries({"group.share.record.lock.duration.ms": "20000"}, {
        "share.auto.offset.reset": "earliest"})}  # fmt: skip
    assert set(rows) == {
        "share.auto.offset.reset", "share.session.timeout.ms", "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms", "share.isolation.level",
    }  # fmt: skip
    assert (rows["share.auto.offset.reset"].value, rows["share.auto.offset.reset"].source) == (
        "earliest", ConfigSource.DYNAMIC_GROUP_CONFIG)  # fmt: skip
    assert (rows["share.record.lock.duration.ms"].value, rows["share.record.lock.duration.ms"].source) == (
        "20000", ConfigSource.DEFAULT_CONFIG)  # fmt: skip
    assert rows["share.session.timeout.ms"].value == "45000"
    assert (rows["share.isolation.level"].value, rows["share.isolation.level"].source) == (
        "read_uncommitted", ConfigSource.DEFAULT_CONFIG)  # fmt: skip
