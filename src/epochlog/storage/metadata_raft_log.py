"""The metadata log on disk, as the quorum core sees it (raft/log.py's RaftLog).

``__cluster_metadata-0`` is an ordinary partition log in Kafka's segment format; each batch holds
JSON metadata records, and a leader's first record of its epoch is a ``LeaderChange`` record.
Snapshots sit beside the segments as ``%020d-%010d.checkpoint`` (end offset, epoch; KIP-630's naming),
one JSON record per line; one being received is ``.checkpoint.part`` until it is whole.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from epochlog.controller import records
from epochlog.controller.records import MetadataRecord, from_json, to_json
from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import build_batch, iter_records
from epochlog.raft.messages import KRaftVersionRecord, LeaderChange, SnapshotId, VotersRecord
from epochlog.raft.voters import Endpoint, Voter, VoterSet
from epochlog.storage import fileops
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.metadata")

TOPIC = "__cluster_metadata"
# Kafka's raft batches may be 8 MiB (KafkaRaftClient.MAX_BATCH_SIZE_BYTES).
MAX_BATCH_BYTES = 8 * 1024 * 1024
SUFFIX = ".checkpoint"


def encode_record(record: MetadataRecord | LeaderChange | KRaftVersionRecord | VotersRecord) -> bytes:
    # The quorum core's own control records: a leader's first record of its epoch, and KIP-853's voter set.
    if isinstance(record, LeaderChange):
        record = records.LeaderChange(record.leader_id, record.voters, record.granting_voters)
    elif isinstance(record, KRaftVersionRecord):
        record = records.KRaftVersion(record.kraft_version)
    elif isinstance(record, VotersRecord):
        record = voters_record(record.voters)
    kind, data = to_json(record)
    return json.dumps({"kind": kind, "data": data}, sort_keys=True).encode()


def voters_record(voters: VoterSet) -> records.Voters:
    return records.Voters(
        tuple(
            (v.node_id, v.directory_id, tuple((e.listener, e.host, e.port) for e in v.endpoints))
            for v in voters.voters
        )
    )


def voter_set_of(record: records.Voters) -> VoterSet:
    return VoterSet.of(*(Voter(n, d, tuple(Endpoint(*e) for e in eps)) for n, d, eps in record.voter_set))


def decode_record(value: bytes) -> MetadataRecord:
    doc = json.loads(value)
    return from_json(doc["kind"], doc["data"])


def decode_records(data: bytes | memoryview, start: int = 0) -> Iterator[tuple[int, MetadataRecord]]:
    """(offset, record) for every record at or after ``start`` in these batches."""
    for r in iter_records(data):
        if r.offset >= start and r.value is not None:
            yield r.offset, decode_record(r.value)


def parse_snapshot(data: bytes) -> list[MetadataRecord]:
    """A snapshot file's records (one JSON record per line)."""
    return [decode_record(line) for line in data.splitlines() if line.strip()]


def snapshot_name(snap: SnapshotId) -> str:
    return f"{snap.end_offset:020d}-{snap.epoch:010d}{SUFFIX}"


def parse_snapshot_name(name: str) -> SnapshotId | None:
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    end, _, epoch = stem.partition("-")
    if not (end.isdigit() and epoch.isdigit()):
        return None
    return SnapshotId(int(end), int(epoch))


class MetadataRaftLog:
    def __init__(self, metadata_dir: Path, segment_bytes: int | None = None) -> None:
        config = LogConfig(max_message_bytes=MAX_BATCH_BYTES)
        if segment_bytes is not None:
            config.segment_bytes = segment_bytes
        self.log = PartitionLog.open(metadata_dir / f"{TOPIC}-0", TOPIC, 0, config, recover=True)
        # The quorum-state file lives in this directory and is written (a vote) before any record: the
        # directory must not vanish in a crash with the vote in it.
        self.log.make_dir_durable()
        self.dir = self.log.dir
        self.snapshots: set[SnapshotId] = set()
        for path in self.dir.iterdir():
            if path.name.endswith(SUFFIX + ".part"):
                path.unlink()  # a transfer cut short: it starts over
            elif (snap := parse_snapshot_name(path.name)) is not None:
                self.snapshots.add(snap)
        base = self.latest_snapshot()
        if base is not None and self.log.log_end_offset < base.end_offset:
            # The log ends before the snapshot (a crash between installing one and trimming): start at it.
            self.log.truncate_fully_and_start_at(base.end_offset)
            self.log.epoch_cache.assign(base.epoch, base.end_offset)
        elif base is not None and self.log.log_start_offset < base.end_offset:
            self._trim(base)

    # -- RaftLog ---------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def latest_epoch(self) -> int:
        snap = self.latest_snapshot()
        if snap is not None and self.log.log_end_offset == snap.end_offset:
            return snap.epoch  # an empty log continues from its snapshot
        return self.log.epoch_cache.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.log.epoch_cache.end_offset_for(epoch, self.log.log_end_offset)

    def append_as_leader(self, records: list[Any], epoch: int, now_ms: int) -> tuple[int, int]:
        batch = build_batch([(None, encode_record(r)) for r in records])
        result = self.log.append_as_leader(batch, epoch, now_ms)
        return result.first_offset, result.last_offset

    def append_as_follower(self, batches: Any) -> None:
        data = memoryview(bytes(batches))
        pos, end = 0, self.log.log_end_offset
        # Skip batches we hold already (an answer that crossed a retry); append from the first new one.
        while pos + 61 <= len(data):
            h = read_header(data, pos)
            if h.base_offset >= end:
                break
            pos += h.size
        if pos < len(data):
            self.log.append_as_follower(data[pos:])

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def flush(self) -> None:
        self.log.flush()

    def voter_sets(self, start: int) -> list[tuple[int, VoterSet]]:
        found: list[tuple[int, VoterSet]] = []
        base = self.latest_snapshot()
        if base is not None and start < base.end_offset <= self.log.log_start_offset:
            snap = [r for r in self.read_snapshot_records(base) if isinstance(r, records.Voters)]
            found += [(base.end_offset - 1, voter_set_of(r)) for r in snap[-1:]]
        first = max(start, self.log.log_start_offset)
        if first >= self.log.log_end_offset:
            return found
        data = b"".join(self.log.read(first, 1 << 62, max_offset=self.log.log_end_offset).chunks)
        if b'"kind": "Voters"' not in data:
            return found  # the usual case: a fetch of metadata records only, not worth decoding
        found += [(o, voter_set_of(r)) for o, r in decode_records(data, first) if isinstance(r, records.Voters)]
        return found

    def latest_snapshot(self) -> SnapshotId | None:
        return max(self.snapshots) if self.snapshots else None

    def snapshot_size(self, snapshot: SnapshotId) -> int:
        if snapshot not in self.snapshots:
            return -1
        return (self.dir / snapshot_name(snapshot)).stat().st_size

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> bytes:
        with open(self.dir / snapshot_name(snapshot), "rb") as f:
            f.seek(position)
            return f.read(max_bytes)

    def write_snapshot_part(self, snapshot: SnapshotId, position: int, chunk: bytes) -> None:
        part = self.dir / (snapshot_name(snapshot) + ".part")
        ops = fileops.ops()
        fd = ops.open(part, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            ops.truncate(fd, position, part)
            ops.pwrite(fd, chunk, position, part)
        finally:
            os.close(fd)

    def install_snapshot(self, snapshot: SnapshotId) -> bool:
        ops = fileops.ops()
        part = self.dir / (snapshot_name(snapshot) + ".part")
        try:
            parse_snapshot(part.read_bytes())
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            # The log below is dropped only for a snapshot this controller can load.
            log.warning("refusing malformed metadata snapshot %s: %s", part.name, e)
            ops.unlink(part)
            return False
        fd = ops.open(part, os.O_RDONLY)
        try:
            ops.fsync(fd, part)
        finally:
            os.close(fd)
        ops.rename(part, self.dir / snapshot_name(snapshot))
        ops.fsync_dir(self.dir)
        self.snapshots.add(snapshot)
        self.log.truncate_fully_and_start_at(snapshot.end_offset)
        self.log.epoch_cache.assign(snapshot.epoch, snapshot.end_offset)
        self._drop_older(snapshot)
        log.info("installed the leader's metadata snapshot %s", snapshot_name(snapshot))
        return True

    def trim_to_snapshot(self, snapshot: SnapshotId) -> None:
        self._trim(snapshot)

    # -- this node's own snapshots ----------------------------------------------------------
    def write_snapshot(self, snapshot: SnapshotId, snapshot_records: list[MetadataRecord]) -> None:
        body = b"".join(encode_record(r) + b"\n" for r in snapshot_records)
        tmp = self.dir / (snapshot_name(snapshot) + ".part")
        ops = fileops.ops()
        ops.write_file(tmp, body)
        ops.rename(tmp, self.dir / snapshot_name(snapshot))
        ops.fsync_dir(self.dir)
        self.snapshots.add(snapshot)

    def read_snapshot_records(self, snapshot: SnapshotId) -> list[MetadataRecord]:
        return parse_snapshot((self.dir / snapshot_name(snapshot)).read_bytes())

    def read_records(self, start: int, end: int) -> list[tuple[int, MetadataRecord]]:
        """The records at offsets [start, end), LeaderChange records included."""
        if start >= end:
            return []
        data = b"".join(self.log.read(start, 1 << 62, max_offset=end).chunks)
        return [(o, r) for o, r in decode_records(data, start) if o < end]

    def read_bytes(self, start: int, max_bytes: int, max_offset: int | None) -> bytes:
        return b"".join(self.log.read(start, max_bytes, max_offset=max_offset, min_one_batch=True).chunks)

    def _trim(self, snapshot: SnapshotId) -> None:
        self.log.high_watermark = max(self.log.high_watermark, snapshot.end_offset)
        while len(self.log.segments) > 1 and self.log.segments[1].base_offset <= snapshot.end_offset:
            seg = self.log.segments.pop(0)
            self.log._bases.pop(0)
            seg.delete()
        self.log.increment_log_start_offset(snapshot.end_offset)
        self._drop_older(snapshot)

    def _drop_older(self, keep: SnapshotId) -> None:
        for snap in sorted(self.snapshots):
            if snap < keep:
                fileops.ops().unlink(self.dir / snapshot_name(snap))
                self.snapshots.discard(snap)

    def close(self) -> None:
        self.log.close()

