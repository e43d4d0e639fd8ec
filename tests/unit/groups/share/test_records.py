"""The share coordinator's records: batches combine (later wins, pruned below the start offset, neighbours
merged), a snapshot every N updates, replay equals the live store, and stale writers are fenced."""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.groups.share.model import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from epochlog.groups.share.records import (
    ShareSnapshot,
    ShareStateStore,
    ShareUpdate,
    StateBatch,
    combine,
    replay,
)

pytestmark = pytest.mark.unit
KEY = ("g", "t", 3)


def test_combine_later_wins_and_merges() -> None:
    old = (StateBatch(0, 9, AVAILABLE, 1),)
    new = (StateBatch(3, 5, ACKNOWLEDGED, 1),)
    assert combine(old, new, 0) == (
        StateBatch(0, 2, AVAILABLE, 1),
        StateBatch(3, 5, ACKNOWLEDGED, 1),
        StateBatch(6, 9, AVAILABLE, 1),
    )
    # Below the start offset everything goes; the batch holding it is cut.
    assert combine(old, new, 4) == (StateBatch(4, 5, ACKNOWLEDGED, 1), StateBatch(6, 9, AVAILABLE, 1))
    # Neighbours with the same state and count merge.
    assert combine(old, (StateBatch(10, 12, AVAILABLE, 1),), 0) == (StateBatch(0, 12, AVAILABLE, 1),)
    assert combine((StateBatch(0, 9, ARCHIVED, 2),), (StateBatch(0, 9, AVAILABLE, 3),), 0) == (
        StateBatch(0, 9, AVAILABLE, 3),
    )


def test_snapshot_then_updates_then_snapshot() -> None:
    store = ShareStateStore(updates_per_snapshot=2)
    kinds = []
    written = []
    for i in range(5):
        err, recs = store.write(KEY, 0, 0, i, (StateBatch(i, i, ACKNOWLEDGED, 1),))
        assert err == Err.NONE
        kinds.append(type(recs[0]))
        written += recs
    assert kinds == [ShareSnapshot, ShareUpdate, ShareUpdate, ShareSnapshot, ShareUpdate]
    assert replay(written) == store.states
    # A compacted topic keeps the latest snapshot and what came after it: the same state.
    last_snapshot = max(i for i, r in enumerate(written) if isinstance(r, ShareSnapshot))
    assert replay(written[last_snapshot:])[KEY].batches == store.states[KEY].batches
    assert store.states[KEY].start_offset == 4


def test_update_with_minus_one_keeps_the_start_offset() -> None:
    store = ShareStateStore()
    store.write(KEY, 0, 0, 7, ())
    store.write(KEY, 0, 0, -1, (StateBatch(8, 8, AVAILABLE, 1),))
    assert store.states[KEY].start_offset == 7


def test_stale_leader_and_state_epochs_are_fenced() -> None:
    store = ShareStateStore()
    assert store.write(KEY, 3, 0, 0, ())[0] == Err.NONE
    assert store.write(KEY, 2, 0, 0, ()) == (Err.FENCED_LEADER_EPOCH, [])
    # A new leader's read fences the old one before the new one has written anything.
    assert store.read(KEY, 4)[0] == Err.NONE
    assert store.write(KEY, 3, 0, 0, ())[0] == Err.FENCED_LEADER_EPOCH
    assert store.read(KEY, 3) == (Err.FENCED_LEADER_EPOCH, None)
    # A re-initialization (offsets reset) bumps the state epoch; writes under the old one are fenced.
    assert store.initialize(KEY, 1, 100)[0] == Err.NONE
    assert store.initialize(KEY, 1, 100)[0] == Err.FENCED_STATE_EPOCH
    assert store.write(KEY, 4, 0, 100, ())[0] == Err.FENCED_STATE_EPOCH
    assert store.write(KEY, 4, 1, 100, ())[0] == Err.NONE
    assert store.states[KEY].start_offset == 100 and store.states[KEY].batches == ()


def test_delete_forgets_the_state_and_the_readers_epoch() -> None:
    store = ShareStateStore()
    assert store.write(KEY, 3, 0, 0, ())[0] == Err.NONE
    assert store.read(KEY, 5)[0] == Err.NONE
    assert store.delete(KEY) is True
    assert store.delete(KEY) is False
    # A share-partition started again after the delete begins from nothing, at any leader epoch.
    assert store.read(KEY, 0) == (Err.NONE, None)
