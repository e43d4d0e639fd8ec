"""The server lifecycle's start-up helpers."""

from __future__ import annotations

import gc

import pytest

from epochlog.server.lifecycle import settle_heap

pytestmark = pytest.mark.unit


def test_settle_heap_freezes_what_start_up_left_alive() -> None:
    # A full collection walks every tracked object; after settle_heap the ones alive at start-up are
    # out of its reach, so the pause no longer grows with the size of the start-up heap.
    keep = [{"n": i} for i in range(5000)]
    gc.unfreeze()
    try:
        settle_heap()
        assert gc.get_freeze_count() >= len(keep)
        assert len(gc.get_objects(generation=2)) < len(keep)
    finally:
        gc.unfreeze()
