"""The server assignors: uniform balances and sticks (a newcomer takes only its share, from the others,
and nothing moves between them); range hands out contiguous ranges per topic in member order."""

from __future__ import annotations

import pytest

from epochlog.groups.consumer.assignors import MemberSpec, assign, range_assign, uniform_assign
from epochlog.groups.consumer.model import NO_PARTITIONS, Assignment

pytestmark = pytest.mark.unit


def specs(topics: dict[str, tuple[str, ...]], current: dict[str, Assignment] | None = None) -> dict[str, MemberSpec]:
    current = current or {}
    return {m: MemberSpec(frozenset(ts), current.get(m, NO_PARTITIONS)) for m, ts in topics.items()}


def loads(a: dict[str, Assignment]) -> list[int]:
    return sorted(len(x) for x in a.values())


def check_partition(a: dict[str, Assignment], topics: dict[str, int]) -> None:
    every = [tp for x in a.values() for tp in x]
    assert len(every) == len(set(every)), "a partition assigned twice"
    assert set(every) == {(t, p) for t, n in topics.items() for p in range(n)}


def test_uniform_balances_a_homogeneous_group_within_one() -> None:
    topics = {"a": 7, "b": 5}
    a = uniform_assign(specs({f"m{i}": ("a", "b") for i in range(5)}), topics)
    check_partition(a, topics)
    assert loads(a) == [2, 2, 2, 3, 3]


def test_a_fourth_member_takes_a_quarter_and_nothing_moves_between_the_others() -> None:
    topics = {"a": 40, "b": 20}
    members = {f"m{i}": ("a", "b") for i in range(3)}
    before = uniform_assign(specs(members), topics)
    assert loads(before) == [20, 20, 20]
    after = uniform_assign(specs({**members, "m3": ("a", "b")}, before), topics)
    check_partition(after, topics)
    assert loads(after) == [15, 15, 15, 15]
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == 15  # a quarter of 60: exactly what the newcomer needs
    for m in before:
        assert after[m] <= before[m], f"{m} gained partitions it did not have"


def test_a_member_leaving_moves_only_its_partitions() -> None:
    topics = {"a": 12}
    members = {f"m{i}": ("a",) for i in range(4)}
    before = uniform_assign(specs(members), topics)
    del members["m3"]
    after = uniform_assign(specs(members, before), topics)
    check_partition(after, topics)
    assert loads(after) == [4, 4, 4]
    for m in members:
        assert before[m] <= after[m]


def test_uniform_respects_heterogeneous_subscriptions_and_balances_what_it_can() -> None:
    topics = {"a": 6, "b": 6, "c": 2}
    a = uniform_assign(specs({"x": ("a",), "y": ("a", "b"), "z": ("b", "c")}), topics)
    check_partition(a, topics)
    assert {t for t, _ in a["x"]} <= {"a"} and {t for t, _ in a["z"]} <= {"b", "c"}
    assert loads(a) == [4, 5, 5]


def test_uniform_drops_partitions_of_topics_no_longer_subscribed_or_gone() -> None:
    topics = {"a": 4}
    old = {"m0": frozenset({("a", 0), ("a", 1), ("gone", 0)}), "m1": frozenset({("a", 2), ("a", 3)})}
    a = uniform_assign(specs({"m0": ("a", "gone"), "m1": ("a",)}, old), topics)
    assert a == {"m0": frozenset({("a", 0), ("a", 1)}), "m1": frozenset({("a", 2), ("a", 3)})}


def test_range_gives_contiguous_ranges_the_first_members_one_more() -> None:
    topics = {"a": 7, "b": 3}
    a = range_assign(specs({"m2": ("a", "b"), "m0": ("a", "b"), "m1": ("a",)}), topics)
    check_partition(a, topics)
    assert a["m0"] == {("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)}
    assert a["m1"] == {("a", 3), ("a", 4)}
    assert a["m2"] == {("a", 5), ("a", 6), ("b", 2)}


def test_range_co_partitions_members_with_the_same_subscription() -> None:
    a = range_assign(specs({"m0": ("a", "b"), "m1": ("a", "b")}), {"a": 4, "b": 4})
    for m in a:
        assert {p for t, p in a[m] if t == "a"} == {p for t, p in a[m] if t == "b"}


def test_range_orders_static_members_by_instance_id() -> None:
    members = {
        "zzz": MemberSpec(frozenset({"a"}), NO_PARTITIONS, "i0"),
        "aaa": MemberSpec(frozenset({"a"}), NO_PARTITIONS, "i1"),
    }
    assert range_assign(members, {"a": 2}) == {"zzz": {("a", 0)}, "aaa": {("a", 1)}}


def test_assignors_are_deterministic_and_named() -> None:
    s = specs({"m0": ("a",), "m1": ("a",), "m2": ("a",)})
    assert assign("uniform", s, {"a": 10}) == assign("uniform", dict(reversed(list(s.items()))), {"a": 10})
    assert assign("range", s, {"a": 10}) == range_assign(s, {"a": 10})
    with pytest.raises(ValueError):
        assign("sticky", s, {"a": 10})
