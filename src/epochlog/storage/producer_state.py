"""Idempotent-producer state per partition: the sequence checks of Kafka's ProducerStateManager.

For each producer id: its epoch and the last five batches (first/last sequence and offsets).
A batch equal to one of those five is a duplicate (answered with its original offsets); any
other batch must continue the sequence. After a restart the state comes from the newest
snapshot at or below the log end plus a replay of the batch headers after it, so a producer
keeps going across a kill -9 with neither a sequence error nor a duplicate.

Snapshots use Kafka's layout (facts of the format): version int16, crc32c int32 over the rest,
then an array of producer entries (producerId int64, epoch int16, lastSequence int32,
lastOffset int64, offsetDelta int32, timestamp int64, coordinatorEpoch int32,
currentTxnFirstOffset int64).

Transactions (KIP-98): a producer's transactional batches open a transaction at the first one's offset,
and its COMMIT or ABORT marker closes it. The partition's last stable offset (LSO) is the first offset of
the earliest transaction not yet decided, or of a decided one whose marker is not yet below the high
watermark, capped by the high watermark; read_committed consumers read up to it. An aborted transaction is
returned to the log for its segment's transaction index.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from epochlog.codes import Err
from epochlog.protocol.control_records import ControlType, Marker
from epochlog.protocol.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from epochlog.storage import fileops
from epochlog.storage.checkpoints import write_atomically

log = logging.getLogger("epochlog.storage")

MAX_CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
_SNAP_HEADER = struct.Struct(">hIi")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")


class ProducerStateError(Exception):
    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class DuplicateBatch:
    first_offset: int
    last_offset: int
    log_append_time_ms: int


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass
class ProducerEntry:
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1: no open transaction on this partition

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self, partition_dir: Path | None, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.dir = partition_dir
        self.expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self._map_end_offset = 0
        self.ongoing: dict[int, int] = {}  # first offset of an open transaction -> its producer id
        # Decided transactions whose marker may still be above the high watermark: first offset -> marker.
        self.unreplicated: dict[int, int] = {}
        # Markers applied per producer since this process opened the log: a leader that verified a
        # transactional write with the coordinator (KIP-890) appends it only if no marker landed meanwhile,
        # or the write would open a transaction the coordinator has already closed (a hanging one).
        self.markers_applied: dict[int, int] = {}

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    def last_entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    # -- checks at append ----------------------------------------------------------------
    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch == NO_PRODUCER_EPOCH:
            return None  # unknown producer: any sequence starts it (KIP-360)
        epoch, first, last = header.producer_epoch, header.base_sequence, header.last_sequence
        if epoch < entry.epoch:
            raise ProducerStateError(
                f"producer {header.producer_id} epoch {epoch} is older than the current {entry.epoch}",
                Err.INVALID_PRODUCER_EPOCH,
            )
        if first == NO_SEQUENCE:
            # A coordinator's own write (transactional offset commits carry the producer's id and epoch
            # but no sequence): only the epoch is checked, as Kafka does for appends that are not a client's.
            return None
        if epoch > entry.epoch:
            if first != 0:
                raise ProducerStateError(
                    f"producer {header.producer_id} new epoch {epoch} must start at sequence 0, got {first}",
                    Err.OUT_OF_ORDER_SEQUENCE_NUMBER,
                )
            return None
        for b in entry.batches:
            if b.first_seq == first and b.last_seq == last:
                return DuplicateBatch(b.first_offset, b.last_offset, b.timestamp)
        if entry.batches and not _in_sequence(entry.last_seq, first):
            raise ProducerStateError(
                f"producer {header.producer_id} epoch {epoch}: sequence {first} does not follow {entry.last_seq}",
                Err.OUT_OF_ORDER_SEQUENCE_NUMBER,
            )
        return None

    def update(self, header: BatchHeader, first_offset: int, last_offset: int, timestamp_ms: int) -> None:
        self._map_end_offset = max(self._map_end_offset, last_offset + 1)
        if not header.has_producer_id or header.is_control:
            return
        entry = self._entry_at_epoch(header)
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp_ms)
            )
        entry.last_timestamp = max(entry.last_timestamp, timestamp_ms)
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[first_offset] = header.producer_id

    def _entry_at_epoch(self, header: BatchHeader) -> ProducerEntry:
        """The batch's producer, moved to the batch's epoch (a new epoch starts a new sequence window)."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry()
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        return entry

    # -- transactions ----------------------------------------------------------------------
    def check_marker(self, header: BatchHeader, marker: Marker) -> None:
        """A marker from an older producer epoch or an older coordinator is refused (Kafka's checks)."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.epoch:
            raise ProducerStateError(
                f"marker for producer {header.producer_id} at epoch {header.producer_epoch}, "
                f"older than its current {entry.epoch}",
                Err.INVALID_PRODUCER_EPOCH,
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                f"marker for producer {header.producer_id} from coordinator epoch {marker.coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}",
                Err.TRANSACTION_COORDINATOR_FENCED,
            )

    def complete_txn(self, header: BatchHeader, offset: int, marker: Marker, timestamp_ms: int) -> CompletedTxn:
        """The marker at ``offset`` decides its producer's open transaction (a marker for a producer with
        nothing open on this partition decides an empty one at the marker itself, as in Kafka)."""
        self._map_end_offset = max(self._map_end_offset, offset + 1)
        self.markers_applied[header.producer_id] = self.markers_applied.get(header.producer_id, 0) + 1
        entry = self._entry_at_epoch(header)
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp_ms)
        first = entry.current_txn_first_offset
        if first >= 0:
            self.ongoing.pop(first, None)
            entry.current_txn_first_offset = -1
            self.unreplicated[first] = offset
        else:
            first = offset
        return CompletedTxn(header.producer_id, first, offset, marker.type is ControlType.ABORT)

    def stable_after(self, txn: CompletedTxn) -> int:
        """The LSO just after ``txn`` was decided, ignoring the high watermark: what Kafka records with an
        aborted transaction in the index."""
        return min(self.ongoing) if self.ongoing else txn.last_offset + 1

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a read_committed reader may not see yet, None when everything is decided.
        Decided transactions whose marker is now below the high watermark are forgotten here."""
        if not self.ongoing and not self.unreplicated:
            return None  # every fetch asks: the common case costs no allocation
        for first, marker in list(self.unreplicated.items()):
            if marker < high_watermark:
                del self.unreplicated[first]
        candidates = [*self.ongoing, *self.unreplicated]
        return min(candidates) if candidates else None

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of every open transaction, oldest first (DescribeProducers)."""
        return sorted(((pid, first) for first, pid in self.ongoing.items()), key=lambda t: t[1])

    # -- rebuilding ----------------------------------------------------------------------
    def load(
        self,
        log_start_offset: int,
        log_end_offset: int,
        read_headers: Callable[[int], Iterable[BatchHeader]],
        read_marker: Callable[[BatchHeader], Marker | None] | None = None,
        on_completed: Callable[[CompletedTxn, int], None] | None = None,
    ) -> None:
        """Newest usable snapshot at or below the log end, then a replay of the log after it.

        ``read_marker`` reads a control batch's marker; ``on_completed(txn, lso)`` hears of every
        transaction the replay sees decided (the log rebuilds its transaction index from them)."""
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = {}
        self._map_end_offset = log_start_offset
        for offset in reversed(self._snapshot_offsets()):
            if offset > log_end_offset:
                self._delete_snapshot(offset)
                continue
            if offset < log_start_offset:
                break
            if self._read_snapshot(offset):
                break
        replay_from = self._map_end_offset
        for h in read_headers(replay_from):
            if h.next_offset <= replay_from:
                continue
            if h.is_control and h.has_producer_id and read_marker is not None:
                marker = read_marker(h)
                if marker is not None:
                    txn = self.complete_txn(h, h.base_offset, marker, h.max_timestamp)
                    if on_completed is not None:
                        on_completed(txn, self.stable_after(txn))
                continue
            self.update(h, h.base_offset, h.last_offset, h.max_timestamp)
        self._map_end_offset = max(self._map_end_offset, log_end_offset)

    def _snapshot_path(self, offset: int) -> Path:
        assert self.dir is not None
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def _snapshot_offsets(self) -> list[int]:
        if self.dir is None or not self.dir.exists():
            return []
        out = []
        for p in self.dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            try:
                out.append(int(p.name[: -len(SNAPSHOT_SUFFIX)]))
            except ValueError:
                continue
        return sorted(out)

    def _read_snapshot(self, offset: int) -> bool:
        path = self._snapshot_path(offset)
        try:
            data = path.read_bytes()
            version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
            if version != 1 or crc32c.crc32c(data[6:]) != crc or len(data) != 10 + count * _SNAP_ENTRY.size:
                raise ValueError("bad version, CRC or length")
        except (OSError, ValueError, struct.error) as e:
            log.warning("ignoring producer snapshot %s: %s", path, e)
            return False
        # One entry per cached batch, oldest first, so the five-batch window survives a clean
        # restart; a reader that keeps the last entry per producer (as Kafka's does) still works.
        for pid, epoch, last_seq, last_offset, delta, ts, coord, txn in _SNAP_ENTRY.iter_unpack(data[10:]):
            entry = self.producers.get(pid)
            if entry is None or entry.epoch != epoch:
                entry = self.producers[pid] = ProducerEntry(epoch=epoch)
            entry.last_timestamp = max(entry.last_timestamp, ts)
            entry.coordinator_epoch = max(entry.coordinator_epoch, coord)
            if txn >= 0 and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = txn
                self.ongoing[txn] = pid
            if last_seq != NO_SEQUENCE:
                first_seq = (last_seq - delta) % (INT32_MAX + 1)
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
        self._map_end_offset = offset
        return True

    def take_snapshot(self) -> None:
        if self.dir is None:
            return
        entries = []
        for pid, e in self.producers.items():
            coord, txn = e.coordinator_epoch, e.current_txn_first_offset
            if not e.batches:
                entries.append(_SNAP_ENTRY.pack(pid, e.epoch, NO_SEQUENCE, -1, 0, e.last_timestamp, coord, txn))
            for b in e.batches:
                entries.append(
                    _SNAP_ENTRY.pack(
                        pid, e.epoch, b.last_seq, b.last_offset, b.last_offset - b.first_offset, b.timestamp, coord, txn
                    )
                )
        body = struct.pack(">i", len(entries)) + b"".join(entries)
        data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
        write_atomically(self._snapshot_path(self._map_end_offset), data, sync_dir=False)

    def _delete_snapshot(self, offset: int) -> None:
        fileops.ops().unlink(self._snapshot_path(offset))

    def delete_snapshots_below(self, offset: int) -> None:
        for o in self._snapshot_offsets():
            if o < offset:
                self._delete_snapshot(o)

    def delete_snapshots_above(self, offset: int) -> None:
        for o in self._snapshot_offsets():
            if o > offset:
                self._delete_snapshot(o)

    def remove_expired(self, now_ms: int) -> None:
        expired = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_timestamp > self.expiration_ms and e.current_txn_first_offset < 0
        ]
        for pid in expired:
            del self.producers[pid]
            self.markers_applied.pop(pid, None)
