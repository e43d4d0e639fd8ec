"""A follower catching up from the leader's snapshot (KIP-630's FetchSnapshot), both ends of it, for RaftNode."""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.raft.log import RaftLog
from epochlog.raft.messages import FetchRequest, FetchSnapshotRequest, FetchSnapshotResponse, SnapshotId
from epochlog.raft.messaging import Messenger
from epochlog.raft.roles import Role


class SnapshotTransfer(Messenger):
    log: RaftLog
    role: Role
    snapshot_fetch: tuple[SnapshotId, int] | None  # (snapshot, next position)

    # RaftNode's, which these handlers share with its fetch handling.
    def _observe(self, epoch: int, leader_id: int, now_ms: int) -> bool:
        raise NotImplementedError

    def _heard_from_leader(self, now_ms: int) -> None:
        raise NotImplementedError

    def _raise_hw(self, hw: int) -> bool:
        raise NotImplementedError

    def _send_fetch(self, now_ms: int) -> None:
        raise NotImplementedError

    def _snapshot_installed(self, now_ms: int) -> None:
        raise NotImplementedError

    def _fetch_error(self, req: FetchRequest | FetchSnapshotRequest) -> int:
        error = self._request_error(req, voters_only=False)
        if error != Err.NONE:
            return error
        if req.epoch > self.epoch:
            return Err.UNKNOWN_LEADER_EPOCH
        if self.role is not Role.LEADER:
            return Err.NOT_LEADER_OR_FOLLOWER
        return Err.NONE

    def _on_fetch_snapshot(self, req: FetchSnapshotRequest, now_ms: int) -> None:
        error = self._fetch_error(req)
        size = self.log.snapshot_size(req.snapshot_id) if error == Err.NONE else -1
        if error == Err.NONE and size < 0:
            error = Err.SNAPSHOT_NOT_FOUND
        if error == Err.NONE and not 0 <= req.position <= size:
            error = Err.POSITION_OUT_OF_RANGE
        if error != Err.NONE:
            self._respond(req, FetchSnapshotResponse, error)
            return
        chunk = self.log.read_snapshot(req.snapshot_id, req.position, req.max_bytes)
        self._answer_as_leader(req, FetchSnapshotResponse, req.snapshot_id, size, req.position, chunk)

    def _on_fetch_snapshot_response(self, resp: FetchSnapshotResponse, now_ms: int) -> None:
        if not self._answered(resp.sender, resp.request_id):
            self._observe(resp.epoch, resp.leader_id, now_ms)
            return
        if not self._observe(resp.epoch, resp.leader_id, now_ms) or self.snapshot_fetch is None:
            return
        snap, position = self.snapshot_fetch
        if resp.error != Err.NONE or resp.snapshot_id != snap or resp.position != position:
            self.snapshot_fetch = None  # start over: the next fetch names the leader's current snapshot
            self._back_off(now_ms)
            return
        self._heard_from_leader(now_ms)
        self.log.write_snapshot_part(snap, position, resp.chunk)
        position += len(resp.chunk)
        if position >= resp.size:
            self.snapshot_fetch = None
            if not self.log.install_snapshot(snap):
                # A snapshot that does not read back is refused whole; the next fetch starts over.
                self._back_off(now_ms)
                return
            self._ready.flush = True
            self._ready.load_snapshot = snap
            self._raise_hw(snap.end_offset)
            self._snapshot_installed(now_ms)
        else:
            self.snapshot_fetch = (snap, position)
        self._send_fetch(now_ms)
