"""Rack-aware replica placement (controller/placement.py): every partition on min(RF, racks) racks, the
leaders round-robin over all brokers, Kafka's refusal of a partial rack map for --generate, and the same
placement used by CreateTopics and CreatePartitions in the controller core."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.controller import placement
from epochlog.controller.controller import Controller

pytestmark = pytest.mark.unit


def racks_problem(
    placed: list[tuple[int, ...]], racks: dict[int, str], rf: int, equal_racks: bool
) -> str | None:
    """Why ``placed`` breaks the guarantees (None if it keeps them)."""
    want = min(rf, len(set(racks.values())))
    for p, replicas in enumerate(placed):
        if len(set(replicas)) != rf or not set(replicas) <= set(racks):
            return f"partition {p}: replicas {replicas}"
        if len({racks[b] for b in replicas}) != want:
            return f"partition {p}: {replicas} on {sorted({racks[b] for b in replicas})}, wanted {want} racks"
    if equal_racks:
        leaders = Counter(r[0] for r in placed)
        counts = [leaders.get(b, 0) for b in racks]
        if max(counts) - min(counts) > 1:
            return f"leaders unbalanced: {dict(leaders)}"
    return None


@st.composite
def clusters(draw: st.DrawFn, equal: bool) -> tuple[dict[int, str], int, int, int, int, int]:
    n_racks = draw(st.integers(1, 5))
    sizes = [draw(st.integers(1, 4))] * n_racks if equal else [draw(st.integers(1, 4)) for _ in range(n_racks)]
    ids = draw(st.permutations(range(1, sum(sizes) + 1)))  # rack membership unrelated to id order
    racks: dict[int, str] = {}
    i = 0
    for r, size in enumerate(sizes):
        for _ in range(size):
            racks[ids[i]] = f"rack-{r}"
            i += 1
    rf = draw(st.integers(1, len(racks)))
    n = len(racks)
    return racks, rf, draw(st.integers(1, 40)), draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), draw(
        st.integers(0, 20)
    )


@settings(max_examples=300, deadline=None)
@given(clusters(equal=False))
def test_every_partition_spans_min_of_rf_and_racks(case: tuple[dict[int, str], int, int, int, int, int]) -> None:
    racks, rf, parts, start, shift, first = case
    placed = placement.assign(parts, rf, dict(racks), start, shift, first)
    assert racks_problem(placed, racks, rf, equal_racks=False) is None


@settings(max_examples=300, deadline=None)
@given(clusters(equal=True))
def test_leaders_balance_within_one_when_racks_are_equal(case: tuple[dict[int, str], int, int, int, int, int]) -> None:
    racks, rf, parts, start, shift, first = case
    placed = placement.assign(parts, rf, dict(racks), start, shift, first)
    assert racks_problem(placed, racks, rf, equal_racks=True) is None


def test_the_property_catches_a_rack_unaware_placer() -> None:
    """Break on purpose: the rack-unaware placement fails the property the rack-aware one keeps."""
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    unaware = placement.rack_unaware(6, 3, list(racks))
    assert racks_problem(unaware, racks, 3, equal_racks=True) is not None
    assert racks_problem(placement.assign(6, 3, dict(racks)), racks, 3, equal_racks=True) is None


def test_rack_alternated_list_is_kafkas() -> None:
    # AdminUtils' example: 0 -> rack1, 1 -> rack3, 2 -> rack3, 3 -> rack2, 4 -> rack2, 5 -> rack1
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert placement.rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    # and its documented assignment for 6 partitions, RF 3, from index 0
    assert placement.assign(7, 3, dict(racks)) == [
        (0, 3, 1), (3, 1, 5), (1, 5, 4), (5, 4, 2), (4, 2, 0), (2, 0, 3), (0, 4, 2)
    ]


def test_no_racks_is_rack_unaware_and_some_racks_is_refused() -> None:
    assert placement.assign(3, 2, {1: None, 2: None, 3: None}) == placement.rack_unaware(3, 2, [1, 2, 3])
    with pytest.raises(placement.PlacementError, match="Not all brokers have rack information"):
        placement.assign(3, 2, {1: "a", 2: None, 3: "b"})
    with pytest.raises(placement.PlacementError, match="larger than available brokers"):
        placement.assign(3, 4, {1: "a", 2: "b", 3: "b"})


def test_controller_keeps_the_rackless_layout_and_treats_a_missing_rack_as_one_more_rack() -> None:
    assert placement.controller_place(0, 4, 2, {1: None, 2: None, 3: None}) == [(1, 2), (2, 3), (3, 1), (1, 2)]
    placed = placement.controller_place(0, 6, 3, {1: "a", 2: "a", 3: None, 4: None, 5: "b", 6: "b"})
    assert racks_problem(placed, {1: "a", 2: "a", 3: "", 4: "", 5: "b", 6: "b"}, 3, equal_racks=True) is None


def six_on_three_racks() -> Controller:
    c = Controller()
    for b in range(1, 7):
        c.register_broker(b, 0, rack=f"rack-{(b - 1) % 3 + 1}")
    return c


def test_create_topics_and_create_partitions_place_on_three_racks() -> None:
    c = six_on_three_racks()
    rack = {b: c.brokers[b].rack for b in c.brokers}
    c.create_topic("t", 12, 3)
    assert c.add_partitions("t", 18) is None
    parts = c.topics["t"].partitions
    assert len(parts) == 18
    for p, s in parts.items():
        assert len({rack[b] for b in s.replicas}) == 3, (p, s.replicas)
        assert s.leader == s.replicas[0]
    assert set(Counter(s.leader for s in parts.values()).values()) == {3}  # 18 partitions over 6 leaders
