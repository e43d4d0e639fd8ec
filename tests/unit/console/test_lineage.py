"""Lineage walking against the real epoch cache's OffsetsForLeaderEpoch rule, checkpoint parsing, divergence."""

from __future__ import annotations

import pytest

from epochlog.console.lineage import EpochStart, divergence, walk_lineage
from epochlog.storage.epoch_cache import LeaderEpochCache


def _walk(entries: list[tuple[int, int]], leo: int, log_start: int = 0) -> list[tuple[int, int]]:
    cache = LeaderEpochCache(entries)
    asked: list[int] = []

    def ask(epoch: int) -> tuple[int, int]:
        asked.append(epoch)
        assert len(asked) < 100, "the walk does not stop"
        return cache.end_offset_for(epoch, leo)

    return [(e.epoch, e.start_offset) for e in walk_lineage(ask, cache.latest_epoch(), log_start)]


@pytest.mark.parametrize(
    ("entries", "leo", "log_start"),
    [
        ([(0, 0)], 5, 0),
        ([(0, 0), (1, 10), (3, 25)], 40, 0),
        ([(0, 0), (1, 10), (2, 11), (7, 30)], 30, 0),  # the newest epoch has no records yet
        ([(2, 5), (4, 20)], 30, 5),  # older epochs went with deleted segments: the cache starts at epoch 2
        ([(1, 0), (3, 25)], 40, 0),  # no epoch 0 at all
    ],
)
def test_walk_recovers_the_cache(entries: list[tuple[int, int]], leo: int, log_start: int) -> None:
    assert _walk(entries, leo, log_start) == entries


def test_walk_of_an_empty_cache() -> None:
    assert _walk([], 0) == []


def test_divergence_kip101_scenario() -> None:
    leader = [EpochStart(0, 0), EpochStart(2, 8)]
    # The old leader wrote epoch 1 from offset 8 that nobody else has: it parts at offset 8.
    assert divergence(leader, [EpochStart(0, 0), EpochStart(1, 8)]) == {"epoch": 1, "offset": 8}
    # Same epoch, other start: parts at the earlier of the two.
    assert divergence(leader, [EpochStart(0, 0), EpochStart(2, 9)]) == {"epoch": 2, "offset": 9}
    # A follower that has not yet seen epoch 2 is behind, not diverged.
    assert divergence(leader, [EpochStart(0, 0)]) is None
    assert divergence(leader, leader) is None
