"""`epochlog groups`' layouts and offset-reset rules without a cluster: kafka-consumer-groups.sh's columns,
'-' for what is not known, lag as log end minus committed offset, the notices before a group's rows, and
the reset plan's clamping, time lookups and refusals."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import pytest

from epochlog.cli import groups_format as fmt
from epochlog.cli.groups_reset import ResetError, Scenario, parse_datetime, parse_duration, parse_topic, plan
from epochlog.client.groups import Coordinator, GroupDescription, GroupListing, Member

pytestmark = pytest.mark.unit

TP = tuple[str, int]


def _consumer_group(state: str = "Stable") -> GroupDescription:
    members = (
        Member("m-big", None, "c1", "/10.0.0.1", (("t", 0), ("t", 2)), 5, (("t", 0), ("t", 2))),
        Member("m-small", "inst-2", "c2", "/10.0.0.2", (("t", 1),), 4, (("t", 1), ("u", 0))),
        Member("m-none", None, "c3", "/10.0.0.3", (), 5, ()),
    )
    return GroupDescription("g", "consumer", state, "uniform", Coordinator(1, "b1", 9092), members, 6, 5)


def _columns(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_list_shows_ids_or_the_type_and_state_columns() -> None:
    groups = [GroupListing("a", "classic", "Stable"), GroupListing("a-much-longer-group-id", "consumer", "Empty")]
    assert fmt.list_output(groups, False, False) == "a\na-much-longer-group-id"
    lines = fmt.list_output(groups, True, True).splitlines()
    assert _columns("\n".join(lines)) == [["GROUP", "TYPE", "STATE"], ["a", "Classic", "Stable"],
                                          ["a-much-longer-group-id", "Consumer", "Empty"]]  # fmt: skip
    # Kafka's widths: the longest id + 10, then 20 for each column.
    assert lines[1].index("Classic") == len("a-much-longer-group-id") + 10 + 1
    assert lines[1].index("Stable") == lines[1].index("Classic") + 21
    assert _columns(fmt.list_output(groups, False, True))[0] == ["GROUP", "STATE"]
    assert fmt.show_type("share") == "Share" and fmt.show_type("") == "Unknown"


def test_offset_rows_put_the_biggest_member_first_then_unowned_committed_partitions() -> None:
    d = _consumer_group()
    committed = {("t", 0): 4, ("t", 1): 9, ("t", 2): 10, ("old", 0): 3}
    ends: Mapping[TP, int | None] = {("t", 0): 10, ("t", 1): 9, ("t", 2): None, ("old", 0): 8}
    rows = fmt.offset_rows(d, {k: v for k, v in committed.items() if k != ("t", 2)}, ends)
    assert [(r.topic, r.partition, r.consumer_id) for r in rows] == [
        ("t", 0, "m-big"),
        ("t", 2, "m-big"),
        ("t", 1, "m-small"),
        ("old", 0, "-"),
    ]
    # No committed offset, or no log end: the lag is unknown ('-'), never a guess.
    assert [r.lag for r in rows] == [6, None, 0, 5]
    table = _columns(fmt.offsets_table(rows))
    assert table[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                        "HOST", "CLIENT-ID"]  # fmt: skip
    assert table[2] == ["g", "t", "2", "-", "-", "-", "m-big", "/10.0.0.1", "c1"]
    assert table[4] == ["g", "old", "0", "3", "8", "5", "-", "-", "-"]


def test_members_of_a_consumer_group_show_epochs_and_both_assignments_when_verbose() -> None:
    d = _consumer_group()
    plain = _columns(fmt.members_table(d, False))
    # A member with a group.instance.id adds Kafka's GROUP-INSTANCE-ID column.
    assert plain[0] == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert plain[2] == ["g", "m-small", "inst-2", "/10.0.0.2", "c2", "1"]
    verbose = fmt.members_table(d, True).splitlines()
    assert verbose[0].split()[-4:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    assert verbose[1].split()[-5:] == ["2", "5", "t(0,2)", "5", "t(0,2)"]
    # Still catching up: its target (at the group's assignment epoch) differs from what it owns.
    assert verbose[2].split()[-6:] == ["1", "4", "t(1)", "5", "t(1),", "u(0)"]
    assert verbose[3].split()[-4:] == ["5", "-", "5", "-"]
    classic = GroupDescription("c", "classic", "Stable", "range", None, (Member("m", None, "ci", "/h", (("t", 0),)),))
    assert _columns(fmt.members_table(classic, True)) == [
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
        ["c", "m", "/h", "ci", "1", "t(0)"],
    ]


def test_state_shows_the_coordinator_and_for_a_consumer_group_its_epochs() -> None:
    rows = _columns(fmt.state_table(_consumer_group(), True))
    assert rows == [
        ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS", "GROUP-EPOCH",
         "TARGET-ASSIGNMENT-EPOCH"],
        ["g", "b1:9092", "(1)", "uniform", "Stable", "3", "6", "5"],
    ]  # fmt: skip
    classic = GroupDescription("c", "classic", "Empty", "", Coordinator(2, "b2", 9093))
    assert _columns(fmt.state_table(classic, True))[0][-1] == "#MEMBERS"


@pytest.mark.parametrize(
    ("state", "rows", "expected"),
    [
        ("Dead", 0, ("Consumer group 'g' does not exist.", True, False)),
        ("Empty", 2, ("Consumer group 'g' has no active members.", False, True)),
        ("Empty", 0, ("Consumer group 'g' has no active members.", False, False)),
        ("Reconciling", 3, ("Warning: Consumer group 'g' is rebalancing.", False, True)),
        ("PreparingRebalance", 1, ("Warning: Consumer group 'g' is rebalancing.", False, True)),
        ("Stable", 3, (None, False, True)),
        ("Stable", 0, (None, False, False)),
    ],
)
def test_notices_before_a_groups_rows(state: str, rows: int, expected: tuple[str | None, bool, bool]) -> None:
    assert fmt.notice(_consumer_group(state), rows) == expected


def test_reset_and_delete_offsets_tables() -> None:
    assert fmt.reset_table({}) == ""
    rows = _columns(fmt.reset_table({"g": {("t", 1): 5, ("t", 0): 0}}))
    assert rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["g", "t", "0", "0"], ["g", "t", "1", "5"]]
    rows = _columns(fmt.delete_offsets_table({("t", 0): None, ("t", 1): "GROUP_SUBSCRIBED_TO_TOPIC"}))
    assert rows == [["TOPIC", "PARTITION", "STATUS"], ["t", "0", "Successful"],
                    ["t", "1", "Error:", "GROUP_SUBSCRIBED_TO_TOPIC"]]  # fmt: skip


class _Log:
    """Each partition's log: start 2, end 10, and a record at offset 5 from t=1000 ms on."""

    def __init__(self) -> None:
        self.asked: list[tuple[list[TP], str | int]] = []

    def log_offsets(self, tps: list[TP], spec: str | int) -> dict[TP, int | None]:
        self.asked.append((list(tps), spec))
        if spec == "earliest":
            return dict.fromkeys(tps, 2)
        if spec == "latest":
            return dict.fromkeys(tps, 10)
        return dict.fromkeys(tps, 5 if int(spec) <= 1000 else -1)


def test_reset_plans_clamp_shift_and_look_up_times() -> None:
    tps = [("t", 0), ("t", 1)]
    committed = {("t", 0): 4, ("t", 1): 9}
    log = _Log()
    assert plan(log, tps, Scenario("to-earliest"), committed) == {("t", 0): 2, ("t", 1): 2}
    assert plan(log, tps, Scenario("to-latest"), committed) == {("t", 0): 10, ("t", 1): 10}
    # Explicit offsets are clamped into the log: past the end to the end, before the start to the start.
    assert plan(log, tps, Scenario("to-offset", "99"), committed) == {("t", 0): 10, ("t", 1): 10}
    assert plan(log, tps, Scenario("shift-by", "-3"), committed) == {("t", 0): 2, ("t", 1): 6}
    assert plan(log, tps, Scenario("to-current"), {("t", 0): 4}) == {("t", 0): 4, ("t", 1): 10}
    # A time with no record that late falls back to the log end.
    assert plan(log, tps, Scenario("by-duration", "PT1S"), committed, now_ms=2000) == {("t", 0): 5, ("t", 1): 5}
    assert plan(log, tps, Scenario("by-duration", "PT0.5S"), committed, now_ms=2000) == {("t", 0): 10, ("t", 1): 10}
    with pytest.raises(ResetError, match="no current committed offset"):
        plan(log, tps, Scenario("shift-by", "1"), {("t", 0): 4})


def test_reset_inputs_parse_as_kafkas_tool_reads_them() -> None:
    assert parse_topic("orders") == ("orders", None)
    assert parse_topic("orders:0,2") == ("orders", [0, 2])
    with pytest.raises(ResetError):
        parse_topic("orders:x")
    assert parse_datetime("2024-01-02T03:04:05.678Z") == 1704164645678
    assert parse_datetime("2024-01-02T03:04:05.678+01:00") == 1704164645678 - 3_600_000
    local = datetime.datetime(2024, 1, 2, 3, 4, 5).astimezone()
    assert parse_datetime("2024-01-02T03:04:05") == int(local.timestamp() * 1000)
    assert parse_duration("P1DT2H3M4.5S") == ((24 + 2) * 60 + 3) * 60_000 + 4500
    assert parse_duration("PT15M") == 900_000
    for bad in ("P", "15M", "PTXS"):
        with pytest.raises(ResetError):
            parse_duration(bad)
