"""Transactions in the simulator: a transactional producer, the last stable offset of a simulated log,
and the read_committed invariant, so markers and the LSO are checked through crashes and leader changes.

Values spell the transaction out: ``x<t>.<i>`` is record i of transaction t, ``C<t>`` and ``A<t>`` its
COMMIT and ABORT markers. As the real coordinator does, the producer ends a transaction only once every
record is acknowledged (acks=all), and resends a marker until it is acknowledged; an unacknowledged record
makes it abort. The LSO rule is the one the real partition uses (storage/producer_state.py): the first
offset of a transaction without a marker, or whose marker is not yet below the high watermark. A record of
a transaction appearing after its marker is a network duplicate the real partition refuses by sequence
number (idempotence), so it is ignored here.

KIP-890 part 1 runs here as in the server: a leader holds a record that would open a transaction on its
partition, asks the coordinator (the producer, which knows its transaction) and appends only on the answer
of transactions/verification.py; the ``hanging-transaction`` invariant checks that no record opens a
transaction on a partition whose marker for it is already there (one nothing would ever close).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from epochlog.codes import Err

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


# The simulated producer never bumps its epoch, and its clients speak Produce v11 (TRANSACTION_ABORTABLE).
PRODUCER_EPOCH = 0
PRODUCE_VERSION = 11


@dataclass(frozen=True)
class ProducerEntry:
    epoch: int
    current_txn_first_offset: int


def producer_entry(entries: Sequence[_Entry]) -> ProducerEntry | None:
    """The partition's producer state for the transactional producer, read off the log as the real partition
    rebuilds it: a data record opens a transaction unless one is open, a marker closes it."""
    seen, first = False, -1
    for offset, e in enumerate(entries):
        kind, _t = parse(e.value)
        if kind == "rec":
            seen = True
            first = offset if first < 0 else first
        elif kind in ("commit", "abort"):
            seen, first = True, -1
    return ProducerEntry(PRODUCER_EPOCH, first) if seen else None


def markers_applied(entries: Sequence[_Entry]) -> int:
    return sum(1 for e in entries if parse(e.value)[0] in ("commit", "abort"))


def hangs(entries: Sequence[_Entry], value: str) -> bool:
    """Whether appending ``value`` would open a transaction whose marker is already in the log."""
    kind, t = parse(value)
    if kind != "rec":
        return False
    entry = producer_entry(entries)
    if entry is not None and entry.current_txn_first_offset >= 0:
        return False  # joins the open transaction
    return any(parse(e.value) in (("commit", t), ("abort", t)) for e in entries)


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

    def verify(self, value: str) -> Err:
        """The coordinator's answer to a leader asking before ``value`` opens a transaction on its partition
        (transactions/coordinator.py's verify_partitions: only an ongoing transaction vouches)."""
        _kind, t = parse(value)
        return Err.NONE if t == self.current and self.marker is None else Err.INVALID_TXN_STATE

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
