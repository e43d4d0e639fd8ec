"""The leader-epoch cache against Kafka's LeaderEpochFileCache contract."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.storage import checkpoints
from epochlog.storage.epoch_cache import UNDEFINED_EPOCH, EpochEntry, LeaderEpochCache


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(entries)


def test_assign_is_monotonic_and_removes_conflicts() -> None:
    c = cache((2, 6))
    assert not c.assign(2, 10)  # same epoch, later offset: no change
    assert c.assign(3, 8)
    assert c.assign(4, 7)  # offset below epoch 3's start: epoch 3 is removed
    assert c.entries() == [EpochEntry(2, 6), EpochEntry(4, 7)]
    assert c.assign(1, 2)  # an older epoch at an older offset wipes everything after it
    assert c.entries() == [EpochEntry(1, 2)]


def test_end_offset_for_edge_cases() -> None:
    c = cache((2, 6), (4, 11), (7, 20))
    leo = 30
    assert c.end_offset_for(UNDEFINED_EPOCH, leo) == (UNDEFINED_EPOCH, -1)
    assert c.end_offset_for(7, leo) == (7, 30)  # the latest epoch ends at the log end
    assert c.end_offset_for(2, leo) == (2, 11)
    assert c.end_offset_for(3, leo) == (2, 11)  # unknown epoch between two: the floor epoch's end
    assert c.end_offset_for(1, leo) == (1, 6)  # older than all: ends where the first known starts
    assert c.end_offset_for(9, leo) == (UNDEFINED_EPOCH, -1)  # newer than all: unknown
    assert cache().end_offset_for(0, leo) == (UNDEFINED_EPOCH, -1)


def test_truncation_from_end_and_start() -> None:
    c = cache((2, 6), (4, 11), (7, 20))
    c.truncate_from_end(15)
    assert c.entries() == [EpochEntry(2, 6), EpochEntry(4, 11)]
    c.truncate_from_end(11)
    assert c.entries() == [EpochEntry(2, 6)]
    c = cache((2, 6), (4, 11), (7, 20))
    c.truncate_from_start(12)
    assert c.entries() == [EpochEntry(4, 12), EpochEntry(7, 20)]
    c.truncate_from_start(20)
    assert c.entries() == [EpochEntry(7, 20)]


def test_truncation_that_changes_nothing_saves_nothing() -> None:
    saved: list[list[EpochEntry]] = []
    c = LeaderEpochCache([EpochEntry(2, 6), EpochEntry(4, 11)], on_change=saved.append)
    c.truncate_from_start(6)  # what opening a log whose first epoch starts at the log start does
    c.truncate_from_start(3)
    c.truncate_from_end(12)
    assert saved == []
    c.truncate_from_start(7)
    assert saved == [[EpochEntry(2, 7), EpochEntry(4, 11)]]


def test_persistence_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    c = LeaderEpochCache(on_change=lambda es: checkpoints.write_epochs(path, [(e.epoch, e.start_offset) for e in es]))
    c.assign(0, 0)
    c.assign(3, 14)
    assert path.read_text() == "0\n2\n0 0\n3 14\n"
    assert LeaderEpochCache(checkpoints.read_epochs(path)).entries() == c.entries()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 100)), max_size=30), st.integers(0, 25))
def test_entries_stay_strictly_increasing_and_answers_are_consistent(ops: list[tuple[int, int]], probe: int) -> None:
    c = LeaderEpochCache()
    for epoch, offset in ops:
        c.assign(epoch, offset)
        es = c.entries()
        assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in itertools.pairwise(es))
        assert es[-1] == EpochEntry(epoch, offset) or (es[-1].epoch == epoch and es[-1].start_offset <= offset)
    leo = 200
    epoch, end = c.end_offset_for(probe, leo)
    if c.entries() and probe <= c.latest_epoch():
        assert epoch <= probe and 0 <= end <= leo
        later = [e.start_offset for e in c.entries() if e.epoch > probe]
        assert end == (later[0] if later else leo)
