"""Offset rules shared by the replication core and storage (a leaf: it imports nothing of epochlog's)."""

from __future__ import annotations


def last_stable_offset(first_unstable: int | None, high_watermark: int) -> int:
    """Where read_committed reads stop (KIP-98): the first offset of a transaction not yet decided, or decided
    by a marker not yet below the high watermark; never past the high watermark."""
    return high_watermark if first_unstable is None else min(first_unstable, high_watermark)
