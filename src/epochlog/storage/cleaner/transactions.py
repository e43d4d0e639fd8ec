"""What a cleaning knows of transactions while it walks a log in offset order (Kafka's
CleanedTransactionMetadata, with its rules).

The cleaning range ends at or below the last stable offset (cleaner.cleanable_range), so every
transaction with a batch in it is decided; the aborted ones are those the ``.txnindex`` entries name.
Walking the batches in offset order, an aborted transaction becomes "ongoing" once the walk reaches its
first offset and stops being so at its ABORT marker; a transactional batch of its producer in between
is aborted data. Any other transactional batch belongs to a committed transaction.

Markers: a marker stays while a batch of its transaction was seen before it in this walk (a batch that
is still in the log, or one this very cleaning removes: a reader that fetched it before the swap still
needs the marker). A marker with no batch of its transaction before it may go, but only after its delete
horizon (``delete.retention.ms``, KIP-534, as for tombstones), so a reader part-way through the
transaction still sees it end. An ABORT marker that stays keeps its ``.txnindex`` entry; one whose data
is all gone loses it, since there is nothing left for a read_committed reader to skip.

One instance serves one walk: the map pass over the dirty segments has its own, and the rewrite of all
the groups of a cleaning shares one (a transaction's data may be in one group and its marker in the next).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from epochlog.protocol.control_records import ControlType, Marker
from epochlog.protocol.record_batch import BatchHeader
from epochlog.storage.transaction_index import AbortedTxn


@dataclass(slots=True)
class _Aborted:
    txn: AbortedTxn
    saw_data: bool = False
    kept_any: bool = False  # a header of its data stays (a producer's last batch)


class CleanedTransactions:
    def __init__(self, aborted: Iterable[AbortedTxn], start_offset: int) -> None:
        """``aborted``: the log's aborted transactions (those ending before ``start_offset`` are ignored)."""
        self._pending = [(e.first_offset, e.last_offset, e) for e in aborted if e.last_offset >= start_offset]
        heapq.heapify(self._pending)
        self._aborted: dict[int, _Aborted] = {}  # producer id -> its aborted transaction being walked
        # producer id -> whether a batch of its committed transaction being walked is kept by this cleaning
        self._committed: dict[int, bool] = {}
        # The .txnindex entries of the ABORT markers kept since the last take_index().
        self._index: list[AbortedTxn] = []
        # A marker stays only because this cleaning removed the last of its transaction's data: the
        # next cleaning can start its delete horizon, so it should not wait for new dirt to come.
        self.revisit = False

    def _reach(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            _first, _last, txn = heapq.heappop(self._pending)
            self._aborted.setdefault(txn.producer_id, _Aborted(txn))

    def on_batch(self, h: BatchHeader) -> bool:
        """A data batch, in offset order: True when it is aborted data (to be removed)."""
        self._reach(h.last_offset)
        if not h.is_transactional:
            return False
        a = self._aborted.get(h.producer_id)
        if a is not None:
            a.saw_data = True
            return True
        self._committed.setdefault(h.producer_id, False)
        return False

    def kept(self, h: BatchHeader) -> None:
        """The transactional batch just read stays in the log (records, or only its header)."""
        if not h.is_transactional:
            return
        a = self._aborted.get(h.producer_id)
        if a is not None:
            a.kept_any = True
        elif h.producer_id in self._committed:
            self._committed[h.producer_id] = True

    def on_marker(self, h: BatchHeader, marker: Marker | None) -> bool:
        """A control batch, in offset order: True when its transaction left nothing before it, so the
        marker may go once its delete horizon has passed."""
        self._reach(h.last_offset)
        if h.record_count == 0:
            return True  # a marker already removed, its header kept (a producer's last batch)
        if marker is None:
            return False  # a control record of another kind: not the cleaner's to judge
        pid = h.producer_id
        if marker.type is ControlType.ABORT:
            a = self._aborted.pop(pid, None)
            if a is not None and a.saw_data:
                self._index.append(a.txn)
                self.revisit = self.revisit or not a.kept_any
                return False
            return True
        if pid in self._committed:
            if not self._committed.pop(pid):
                self.revisit = True
            return False
        return True

    def take_index(self) -> list[AbortedTxn]:
        """The entries gathered for the cleaned segment just written, in marker order."""
        out, self._index = self._index, []
        return out
