"""Opening a partition log: the directory's leftovers, the segments (recovered past the recovery point after an
unclean shutdown), the epoch cache, the transaction indexes and the producer state."""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

from epochlog.clock import now_ms as _now_ms
from epochlog.protocol.control_records import Marker, read_marker
from epochlog.protocol.record_batch import BatchHeader
from epochlog.storage import checkpoints, fileops
from epochlog.storage.cleaner import swap
from epochlog.storage.epoch_cache import LeaderEpochCache
from epochlog.storage.segment import Segment
from epochlog.storage.transaction_index import TransactionIndexCorrupt

if TYPE_CHECKING:
    from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.storage")

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"


def parse_dir_name(name: str) -> tuple[str, int] | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def _encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def open_log(
    plog: PartitionLog,
    recover: bool,
    topic_id: uuid.UUID | None,
    recovery_point: int,
    log_start_offset: int,
    high_watermark: int,
) -> None:
    directory, config = plog.dir, plog.config
    if not directory.exists():
        fileops.ops().mkdir(directory)
        plog._dir_durable = False  # synced before the first write (make_dir_durable)
    _load_topic_id(plog, topic_id)
    strays = list(directory.glob("*.tmp")) + list(directory.glob("*.deleted"))
    for stray in strays:
        fileops.ops().unlink(stray)
    if strays:
        fileops.ops().fsync_dir(directory)
    # A cleaner's swap that a crash interrupted is completed or rolled back before the segments are
    # listed (storage/cleaner/swap.py says which, and why neither loses nor duplicates a record).
    swap.recover_swaps(directory)
    bases = sorted(int(p.name[:-4]) for p in directory.glob("*.log") if p.name[:-4].isdigit())
    now = _now_ms()
    plog.segments = [Segment(directory, b, config.index_interval_bytes, now) for b in bases]
    plog._bases = bases
    plog.recovery_point = recovery_point
    _load_segments(plog, recover)
    if not plog.segments:
        plog._new_segment(max(log_start_offset, 0), now)
    plog.log_start_offset = max(plog.segments[0].base_offset, log_start_offset)
    if plog.log_start_offset > plog.log_end_offset:
        plog.log_start_offset = plog.log_end_offset
    plog.recovery_point = min(max(recovery_point, 0), plog.log_end_offset) if not recover else plog.log_end_offset
    plog._hw = min(max(high_watermark, plog.log_start_offset), plog.log_end_offset)
    try:
        entries = checkpoints.read_epochs(directory / EPOCH_CHECKPOINT)
    except (checkpoints.CheckpointError, ValueError) as e:
        log.error("%s: leader-epoch-checkpoint unreadable (%s); rebuilding it from the batches", plog, e)
        entries = _epochs_from_batches(plog)
    plog.epoch_cache = LeaderEpochCache(entries, on_change=plog._save_epochs)
    # KIP-101 "Unclean Shutdown": the checkpoint may be ahead of the log.
    plog.epoch_cache.truncate_from_end(plog.log_end_offset)
    plog.epoch_cache.truncate_from_start(plog.log_start_offset)
    if recover:
        # Appends write the data before its epoch entry (so an entry is never ahead of the data after
        # an error); a crash in between leaves batches whose epoch the checkpoint lacks. Kafka's
        # segment recovery assigns the epochs of the batches it re-reads; so do we, past the
        # recovery point.
        latest = plog.epoch_cache.latest_entry()
        start = max(recovery_point, plog.log_start_offset, latest.start_offset if latest else 0)
        for h in plog.read_headers(start):
            if h.partition_leader_epoch > plog.epoch_cache.latest_epoch():
                plog.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
    _check_txn_indexes(plog)
    load_producer_state(plog)


def _load_topic_id(plog: PartitionLog, topic_id: uuid.UUID | None) -> None:
    path = plog.dir / PARTITION_METADATA
    if path.exists():
        try:
            fields = dict(line.split(":", 1) for line in path.read_text().splitlines() if ":" in line)
            plog.topic_id = _decode_topic_id(fields["topic_id"].strip())
        except (KeyError, ValueError) as e:
            log.error("%s: unreadable %s: %s", plog.dir, PARTITION_METADATA, e)
    if topic_id is not None and plog.topic_id != topic_id:
        plog.topic_id = topic_id
        checkpoints.write_atomically(
            path, f"version: 0\ntopic_id: {_encode_topic_id(topic_id)}\n", sync_dir=plog._dir_durable
        )


def _load_segments(plog: PartitionLog, recover: bool) -> None:
    kept: list[Segment] = []
    for i, seg in enumerate(plog.segments):
        needs_scan = recover and (i + 1 >= len(plog.segments) or plog.segments[i + 1].base_offset > plog.recovery_point)
        if not needs_scan and seg.load_indexes():
            kept.append(seg)
            continue
        following = plog.segments[i + 1].base_offset if i + 1 < len(plog.segments) else None
        result = seg.scan(validate_crc=needs_scan or recover, before_offset=following)
        if result.error is not None:
            log.warning(
                "%s-%d: recovery truncates segment %d at byte %d of %d (offset %d): %s",
                plog.topic,
                plog.partition,
                seg.base_offset,
                result.valid_bytes,
                seg.size,
                result.next_offset,
                result.error,
            )
            seg.truncate_to_position(result.valid_bytes)
            kept.append(seg)
            for later in plog.segments[i + 1 :]:
                log.warning(
                    "%s-%d: recovery drops segment %d after the corruption",
                    plog.topic,
                    plog.partition,
                    later.base_offset,
                )
                later.delete()
            break
        kept.append(seg)
    # An empty trailing segment after a crash is fine; an empty segment in the middle is not kept.
    plog.segments = [s for j, s in enumerate(kept) if s.size > 0 or j == len(kept) - 1]
    for s in kept:
        if s not in plog.segments:
            s.delete()
    plog._bases = [s.base_offset for s in plog.segments]


def _epochs_from_batches(plog: PartitionLog) -> list[tuple[int, int]]:
    entries: list[tuple[int, int]] = []
    for h in plog.read_headers(plog.log_start_offset):
        if h.partition_leader_epoch >= 0 and (not entries or h.partition_leader_epoch > entries[-1][0]):
            entries.append((h.partition_leader_epoch, h.base_offset))
    return entries


def _marker_of(plog: PartitionLog, h: BatchHeader) -> Marker | None:
    i = plog._segment_index(h.base_offset)
    seg = plog.segments[i]
    found = seg.find_position(h.base_offset)
    if found is None:
        return None
    return read_marker(seg.read(found[0], found[1].size))


def load_producer_state(plog: PartitionLog) -> None:
    # The replay asks for a control batch's marker right after reading its header: take it from the read
    # that found the header, or read it where that header was found. Looking each one up through the
    # offset index again cost tens of header reads per marker, seconds per transactional partition at
    # start-up after an unclean shutdown (and far more through a slow file system).
    last: list[tuple[Segment, int, BatchHeader, memoryview | None]] = []

    def headers(from_offset: int) -> Iterator[BatchHeader]:
        for found in plog.read_headers_at(from_offset):
            last[:] = [found]
            yield found[2]

    def marker(h: BatchHeader) -> Marker | None:
        if last and last[0][2] is h:
            seg, pos, _, batch = last[0]
            return read_marker(batch if batch is not None else seg.read(pos, h.size))
        return _marker_of(plog, h)

    plog.producer_state.load(plog.log_start_offset, plog.log_end_offset, headers, marker, plog._index_completed)


def _check_txn_indexes(plog: PartitionLog) -> None:
    """Entries past the log end (recovery cut the log) go; an unreadable index is rebuilt from the
    markers, by replaying the whole log into the producer state."""
    rebuild = False
    for seg in plog.segments:
        try:
            seg.txn_index.truncate_to(plog.log_end_offset)
        except TransactionIndexCorrupt as e:
            log.error("%s: %s; rebuilding the transaction index from the log", plog, e)
            seg.txn_index.rewrite([])
            rebuild = True
    if rebuild:
        plog.producer_state.delete_snapshots_above(-1)
