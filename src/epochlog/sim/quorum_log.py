"""A metadata log on a simulated disk for the quorum simulator: what was not flushed is lost on a crash.

Each entry carries a chained hash of everything before it, so two logs that agree on an entry's
hash agree on the whole prefix (log matching checks one comparison). Snapshots hold the committed
values below their end offset; the epoch logic is the real LeaderEpochCache.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

from epochlog.raft.messages import KRaftVersionRecord, LeaderChange, SnapshotId, VotersRecord
from epochlog.raft.voters import Endpoint, Voter, VoterSet
from epochlog.storage.epoch_cache import LeaderEpochCache

VOTERS = "V:"  # a Voters control record's value: V: and the set as JSON


class QEntry(NamedTuple):
    epoch: int
    value: str
    chain: bytes  # hash of (previous chain, epoch, value)


def value_of(record: Any) -> str:
    if isinstance(record, LeaderChange):
        return f"LC:{record.leader_id}"
    if isinstance(record, KRaftVersionRecord):
        return f"KV:{record.kraft_version}"
    if isinstance(record, VotersRecord):
        doc = [
            [v.node_id, v.directory_id, [[e.listener, e.host, e.port] for e in v.endpoints]]
            for v in record.voters.voters
        ]
        return VOTERS + json.dumps(doc)
    return str(record)


def voters_of(value: str) -> VoterSet | None:
    """The voter set a Voters record's value holds; None for any other value."""
    if not value.startswith(VOTERS):
        return None
    doc = json.loads(value[len(VOTERS) :])
    return VoterSet.of(*(Voter(n, d, tuple(Endpoint(*e) for e in eps)) for n, d, eps in doc))


def chain(prev: bytes, epoch: int, value: str) -> bytes:
    return hashlib.blake2b(prev + f"{epoch}:{value}".encode(), digest_size=8).digest()


class SimQuorumLog:
    def __init__(self) -> None:
        self.start = 0  # offset of entries[0]; everything below is in the snapshot the log starts at
        self.start_chain = b""
        self.entries: list[QEntry] = []
        self.flushed = 0  # entries[:flushed] are on the simulated disk
        self.cache = LeaderEpochCache()
        self.snapshots: dict[SnapshotId, bytes] = {}
        self.snapshot_chains: dict[SnapshotId, bytes] = {}
        self.partial: dict[SnapshotId, bytearray] = {}
        self.base_snapshot: SnapshotId | None = None  # the snapshot the log starts at, if any

    # -- RaftLog ---------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self.start + len(self.entries)

    @property
    def log_start_offset(self) -> int:
        return self.start

    def latest_epoch(self) -> int:
        if not self.entries and self.base_snapshot is not None:
            return self.base_snapshot.epoch  # an empty log continues from its snapshot
        return self.cache.latest_epoch()

    def _truncate_cache(self) -> None:
        self.cache.truncate_from_end(self.log_end_offset)
        if self.base_snapshot is not None and len(self.cache) == 0:
            self.cache.assign(self.base_snapshot.epoch, self.start)

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.log_end_offset)

    def _append(self, epoch: int, value: str) -> None:
        prev = self.entries[-1].chain if self.entries else self.start_chain
        if epoch > self.cache.latest_epoch():
            self.cache.assign(epoch, self.log_end_offset)
        self.entries.append(QEntry(epoch, value, chain(prev, epoch, value)))

    def append_as_leader(self, records: list[Any], epoch: int, now_ms: int) -> tuple[int, int]:
        first = self.log_end_offset
        for r in records:
            self._append(epoch, value_of(r))
        return first, self.log_end_offset - 1

    def append_as_follower(self, batches: Any) -> None:
        for offset, entry in batches:
            if offset != self.log_end_offset:
                continue
            self._append(entry.epoch, entry.value)

    def truncate_to(self, offset: int) -> None:
        keep = max(0, offset - self.start)
        if keep < len(self.entries):
            del self.entries[keep:]
        self.flushed = min(self.flushed, len(self.entries))
        self._truncate_cache()

    def flush(self) -> None:
        self.flushed = len(self.entries)

    def voter_sets(self, start: int) -> list[tuple[int, VoterSet]]:
        found: list[tuple[int, VoterSet]] = []
        if self.base_snapshot is not None and start < self.start:
            values = json.loads(self.snapshots[self.base_snapshot])["values"]
            last = [(o, vs) for o, v in enumerate(values) if (vs := voters_of(v)) is not None][-1:]
            found += [(o, vs) for o, vs in last if o >= start]
        for o in range(max(start, self.start), self.log_end_offset):
            if (vs := voters_of(self.entries[o - self.start].value)) is not None:
                found.append((o, vs))
        return found

    def latest_snapshot(self) -> SnapshotId | None:
        return max(self.snapshots) if self.snapshots else None

    def snapshot_size(self, snapshot: SnapshotId) -> int:
        data = self.snapshots.get(snapshot)
        return -1 if data is None else len(data)

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot][position : position + max_bytes]

    def write_snapshot_part(self, snapshot: SnapshotId, position: int, chunk: bytes) -> None:
        part = self.partial.setdefault(snapshot, bytearray())
        del part[position:]
        part += chunk

    def install_snapshot(self, snapshot: SnapshotId) -> bool:
        data = bytes(self.partial.pop(snapshot))
        try:
            doc = json.loads(data)
            values, chain = doc["values"], bytes.fromhex(doc["chain"])
        except (ValueError, KeyError, TypeError):
            return False
        if not isinstance(values, list) or len(values) != snapshot.end_offset:
            return False
        self.snapshots[snapshot] = data
        self.snapshot_chains[snapshot] = chain
        self.entries, self.flushed = [], 0
        self.start, self.start_chain = snapshot.end_offset, chain
        self.base_snapshot = snapshot
        self.cache.clear()
        self.cache.assign(snapshot.epoch, snapshot.end_offset)
        return True

    def trim_to_snapshot(self, snapshot: SnapshotId) -> None:
        cut = snapshot.end_offset - self.start
        if cut <= 0 or cut > self.flushed:
            return
        self.start_chain = self.entries[cut - 1].chain
        del self.entries[:cut]
        self.flushed -= cut
        self.start = snapshot.end_offset
        self.base_snapshot = snapshot
        self.cache.truncate_from_start(snapshot.end_offset)

    # -- the simulator's side ----------------------------------------------------------------
    def entry(self, offset: int) -> QEntry | None:
        i = offset - self.start
        return self.entries[i] if 0 <= i < len(self.entries) else None

    def chain_at(self, offset: int) -> bytes | None:
        """The chain hash of the entry at ``offset``, through the snapshot the log starts at."""
        if offset == self.start - 1:
            return self.start_chain
        e = self.entry(offset)
        return None if e is None else e.chain

    def read(self, offset: int, max_records: int) -> list[tuple[int, QEntry]]:
        end = min(self.log_end_offset, offset + max_records)
        return [(o, self.entries[o - self.start]) for o in range(max(offset, self.start), end)]

    def take_snapshot(self, values: list[str], end_offset: int) -> SnapshotId | None:
        """The state machine's snapshot of the committed values below ``end_offset``."""
        e = self.entry(end_offset - 1)
        if e is None:
            return None
        snap = SnapshotId(end_offset, e.epoch)
        self.snapshots[snap] = json.dumps({"values": values[:end_offset], "chain": e.chain.hex()}).encode()
        self.snapshot_chains[snap] = e.chain
        return snap

    def crash(self) -> int:
        """Lose what was not flushed; returns how many entries were lost."""
        lost = len(self.entries) - self.flushed
        del self.entries[self.flushed :]
        self.partial.clear()
        self._truncate_cache()
        return lost
