"""`epochlog share-groups`' layouts without a cluster: kafka-share-groups.sh's columns for start offsets and
group state, '-' for what is not known, the share group notices, the delete-offsets status table and the
command's usage rules."""

from __future__ import annotations

import pytest

from epochlog.cli import groups_format as fmt
from epochlog.cli.share_groups_cmd import run
from epochlog.client.groups import Coordinator, GroupDescription, Member

pytestmark = pytest.mark.unit


def _share_group(state: str = "Stable") -> GroupDescription:
    members = (Member("m1", None, "c1", "/10.0.0.1", (("q", 0),), 3),)
    return GroupDescription("sg", "share", state, "simple", Coordinator(1, "b1", 9092), members, 4, 3)


def _columns(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_offsets_show_leader_epoch_start_offset_and_lag_with_dashes_for_the_unknown() -> None:
    text = fmt.share_offsets_table("sg", {("q", 1): (0, 42, 8), ("q", 0): (None, None, None), ("r", 0): (2, 7, -1)})
    assert _columns(text) == [
        ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"],
        ["sg", "q", "0", "-", "-", "-"],
        ["sg", "q", "1", "0", "42", "8"],
        ["sg", "r", "0", "2", "7", "-"],
    ]
    assert text.splitlines()[0].index("TOPIC") == 16  # GROUP is %-15s and a space, as Kafka's


def test_state_of_a_share_group_has_no_assignment_strategy_and_verbose_adds_epochs() -> None:
    assert _columns(fmt.state_table(_share_group(), False)) == [
        ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"],
        ["sg", "b1:9092", "(1)", "Stable", "1"],
    ]
    assert _columns(fmt.state_table(_share_group(), True))[0][-2:] == ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
    assert _columns(fmt.state_table(_share_group(), True))[1][-2:] == ["4", "3"]


def test_notices_name_a_share_group() -> None:
    dead = GroupDescription("sg", "share", "Dead", "", None)
    assert fmt.notice(dead, None) == ("Share group 'sg' does not exist.", True, False)
    assert fmt.notice(_share_group("Empty"), 1) == ("Share group 'sg' has no active members.", False, True)


def test_delete_offsets_status_per_topic() -> None:
    assert _columns(fmt.delete_share_offsets_table({"b": "NON_EMPTY_GROUP", "a": None})) == [
        ["TOPIC", "STATUS"], ["a", "Successful"], ["b", "Error:", "NON_EMPTY_GROUP"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "exactly one action"),
        (["--list", "--describe"], "exactly one action"),
        (["--describe"], "--describe needs --group or --all-groups"),
        (["--reset-offsets", "--group", "a", "--group", "b"], "one share group at a time"),
        (["--list", "--members"], "--members and --offsets can only be used with --describe"),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        run(["--bootstrap-server", "127.0.0.1:1", *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err
