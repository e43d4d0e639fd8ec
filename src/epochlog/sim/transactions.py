"""Transactions in the simulator: a transactional producer, the last stable offset of a simulated log,
and the read_committed invariant, so markers and the LSO are checked through crashes and leader changes.

Values spell the transaction out: ``x<t>.<i>`` is record i of transaction t, ``C<t>`` and ``A<t>`` its
COMMIT and ABORT markers. As the real coordinator does, the producer ends a transaction only once every
record is acknowledged (acks=all), and resends a marker until it is acknowledged; an unacknowledged record
makes it abort. The LSO rule is the one the real partition uses (storage/producer_state.py): the first
offset of a transaction without a marker, or whose marker is not yet below the high watermark. A record of
a transaction appearing after its marker is a network duplicate the real partition refuses by sequence
number (idempotence), so it is ignored here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from epochlog.sim.world import World


class _Entry(Protocol):
    @property
    def value(self) -> str: ...


def parse(value: str) -> tuple[str, int]:
    """("rec" | "commit" | "abort" | "plain", transaction id or -1)."""
    if value.startswith("x") and "." in value:
        return "rec", int(value[1 : value.index(".")])
    if value[:1] in ("C", "A") and value[1:].isdigit():
        return ("commit" if value[0] == "C" else "abort"), int(value[1:])
    return "plain", -1


def first_unstable_offset(entries: Sequence[_Entry], high_watermark: int) -> int | None:
    first: dict[int, int] = {}
    decided: dict[int, int] = {}
    for offset, e in enumerate(entries):
        kind, t = parse(e.value)
        if kind == "rec" and t not in decided:
            first.setdefault(t, offset)
        elif kind in ("commit", "abort") and t not in decided:
            decided[t] = offset
    unstable = [f for t, f in first.items() if t not in decided or decided[t] >= high_watermark]
    return min(unstable) if unstable else None


def read_committed(entries: Sequence[_Entry], lso: int) -> list[str]:
    """What a read_committed consumer reads below ``lso``: plain records and committed transactions'
    records; aborted records and markers are filtered out (the aborted_transactions list)."""
    outcome: dict[int, str] = {}
    for e in entries:
        kind, t = parse(e.value)
        if kind in ("commit", "abort"):
            outcome.setdefault(t, kind)
    out = []
    seen_marker: set[int] = set()
    for e in entries[:lso]:
        kind, t = parse(e.value)
        if kind in ("commit", "abort"):
            seen_marker.add(t)
        elif kind == "plain" or (kind == "rec" and t not in seen_marker and outcome.get(t) == "commit"):
            out.append(e.value)
    return out


class TxnProducer:
    """One transactional producer (begins, writes up to three records, then commits or aborts) and a plain
    producer writing beside it."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.next_txn = 0
        self.current: int | None = None
        self.records: list[str] = []
        self.started_at = 0
        self.marker: str | None = None
        self.marker_sent_at = -1
        self.decided: dict[int, str] = {}  # transaction -> "commit" | "abort", once its marker is acknowledged

    def next_value(self) -> str | None:
        w = self.w
        if w.rng.random() < 0.3:
            # Another, non-transactional producer writes between and inside transactions: what it writes
            # after an undecided transaction's first record is what the LSO must hold back.
            return f"p{w.next_value}"
        acked = set(w.acked.values())
        if self.marker is not None:
            if self.marker in acked:
                kind, t = parse(self.marker)
                self.decided[t] = kind
                self.current, self.marker, self.records = None, None, []
            elif w.now - self.marker_sent_at >= 300:
                self.marker_sent_at = w.now
                return self.marker  # the coordinator retries until the marker is written
            else:
                return None
        if self.current is None:
            self.current, self.started_at, self.records = self.next_txn, w.now, []
            self.next_txn += 1
        t = self.current
        if len(self.records) < 3 and w.rng.random() < 0.6:
            value = f"x{t}.{len(self.records)}"
            self.records.append(value)
            return value
        if all(r in acked for r in self.records):
            commit = w.rng.random() < 0.7
        elif w.now - self.started_at > 600:
            commit = False  # a write failed: the producer aborts
        else:
            return None
        self.marker = f"{'C' if commit else 'A'}{t}"
        self.marker_sent_at = w.now
        return self.marker


class ReadCommittedChecker:
    """Every read_committed view a serving leader offers extends, or is a prefix of, every earlier one: a
    reader never sees a record and later finds another before it (a transaction decided behind it) or
    finds it gone."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.longest: list[str] = []

    def check(self, bid: int) -> None:
        b = self.w.brokers[bid]
        view = read_committed(b.log.entries, b.replica.last_stable_offset())
        short, long = (view, self.longest) if len(view) <= len(self.longest) else (self.longest, view)
        if long[: len(short)] != short:
            first = next(i for i, (x, y) in enumerate(zip(short, long, strict=False)) if x != y)
            earlier = self.longest[first] if first < len(self.longest) else "nothing"
            detail = (
                f"leader {bid} offers a read_committed view that differs from an earlier one at record {first}: "
                f"{view[first] if first < len(view) else 'nothing'} vs {earlier}"
            )
            if earlier != "nothing" and self.w.checker.lost_everywhere(earlier):
                self.w.checker._fail("read-committed", detail + " after every replica crashed", permitted=True)
                self.longest = view  # the history restarts from what survived
                return
            self.w.checker._fail("read-committed", detail)
        if len(view) > len(self.longest):
            self.longest = view
