"""kafka-reassign-partitions.sh's JSON files and its rack-unaware placement, as `epochlog reassign-partitions`
reads, checks and proposes them."""

from __future__ import annotations

import json

import pytest

from epochlog.client.reassignments import (
    ReassignError,
    format_assignment,
    generate,
    parse_reassignment,
    parse_topics_to_move,
    place_replicas,
)


def test_reassignment_json_round_trips() -> None:
    text = '{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}'
    parsed = parse_reassignment(text)
    assert parsed == {("foo", 1): [2, 3]}
    assert json.loads(format_assignment(parsed)) == json.loads(text)


@pytest.mark.parametrize(
    "rows",
    [
        [{"topic": "a", "partition": 0, "replicas": [1, 1]}],
        [{"topic": "a", "partition": 0, "replicas": []}],
        [{"topic": "a", "partition": 0, "replicas": [1]}, {"topic": "a", "partition": 0, "replicas": [2]}],
        [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}],
        [{"topic": "a", "replicas": [1]}],
        [],
    ],
)
def test_bad_reassignment_json_is_refused(rows: list[dict[str, object]]) -> None:
    with pytest.raises(ReassignError):
        parse_reassignment(json.dumps({"version": 1, "partitions": rows}))


def test_topics_to_move() -> None:
    assert parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == ["a", "b"]
    with pytest.raises(ReassignError):
        parse_topics_to_move('{"topics":[]}')


def test_placement_spreads_leaders_and_followers() -> None:
    placed = place_replicas(6, 2, [1, 2, 3], start=0, shift=0)
    assert [r[0] for r in placed] == [1, 2, 3, 1, 2, 3]  # leaders round-robin
    assert all(len(set(r)) == 2 for r in placed)
    assert placed[0][1] != placed[3][1]  # the follower shifts after a full round
    with pytest.raises(ReassignError):
        place_replicas(1, 4, [1, 2, 3])


def test_generate_keeps_each_topics_replication_factor() -> None:
    current = {("a", 0): [1, 2], ("a", 1): [2, 3], ("b", 0): [1]}
    proposed = generate(current, ["a"], [3, 4])
    assert set(proposed) == {("a", 0), ("a", 1)}
    assert all(sorted(r) == [3, 4] for r in proposed.values())
    with pytest.raises(ReassignError):
        generate(current, ["nope"], [1])
