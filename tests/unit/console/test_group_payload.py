"""The console's group payloads: a group's type as listed, and what ConsumerGroupDescribe adds to a
consumer-protocol group's page (epochs, assignor, each member's target beside what it owns)."""

from __future__ import annotations

import pytest

from epochlog.client.groups import Coordinator, GroupDescription, Member
from epochlog.console.payload import consumer_group_fields, group_kind

pytestmark = pytest.mark.unit


def test_group_kind_prefers_the_brokers_type() -> None:
    assert group_kind("consumer", False) == "consumer"
    assert group_kind("share", False) == "share"
    assert group_kind("classic", True) == "classic"
    # ListGroups before v5 says no type: a group without a protocol type stores offsets only.
    assert group_kind("", True) == "simple"
    assert group_kind("", False) == "classic"


def test_consumer_group_fields_carry_epochs_and_targets() -> None:
    m = Member("m1", None, "c1", "/10.0.0.1", (("t", 0),), 7, (("t", 0), ("t", 1)))
    d = GroupDescription("g", "consumer", "Reconciling", "uniform", Coordinator(1, "h", 9092), (m,), 8, 8)
    f = consumer_group_fields(d)
    assert (f["type"], f["state"], f["protocol"], f["group_epoch"], f["assignment_epoch"]) == (
        "consumer", "Reconciling", "uniform", 8, 8)  # fmt: skip
    [member] = f["members"]
    assert member["member_epoch"] == 7
    assert member["assignment"] == [{"topic": "t", "partition": 0}]
    assert member["target_assignment"] == [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]
