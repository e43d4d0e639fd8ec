"""What a quorum leader keeps about its replicas: fetch positions, the high watermark, check-quorum."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.raft.messages import FetchRequest


@dataclass
class ReplicaProgress:
    end_offset: int = -1  # the offset it last fetched from: everything below is on its disk
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    hw_sent: int = -1  # the high watermark its last answer carried


@dataclass
class ParkedFetch:
    request: FetchRequest
    deadline_ms: int


class LeaderState:
    def __init__(self, node_id: int, voters: tuple[int, ...], epoch_start_offset: int, now_ms: int) -> None:
        self.node_id = node_id
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        # Every voter counts as heard from when the epoch starts, so check-quorum gives them a full timeout.
        self.voter_progress = {v: ReplicaProgress(last_fetch_ms=now_ms) for v in voters if v != node_id}
        self.observer_progress: dict[int, ReplicaProgress] = {}
        self.unacked_begin = {v for v in voters if v != node_id}
        self.begin_resend_ms = now_ms
        self.parked: list[ParkedFetch] = []

    def progress(self, replica: int, observer: bool = False) -> ReplicaProgress:
        if replica in self.voter_progress and not observer:
            return self.voter_progress[replica]
        return self.observer_progress.setdefault(replica, ReplicaProgress())

    def record_fetch(self, replica: int, fetch_offset: int, log_end_offset: int, now_ms: int, observer: bool) -> None:
        p = self.progress(replica, observer)
        p.end_offset = fetch_offset
        p.last_fetch_ms = now_ms
        if fetch_offset >= log_end_offset:
            p.last_caught_up_ms = now_ms
        if not observer:
            self.unacked_begin.discard(replica)  # fetching from us at our epoch is as good as the ack

    def set_voters(self, voters: tuple[int, ...], now_ms: int) -> None:
        """The voter set changed (KIP-853): a new voter keeps what we knew of it as an observer, and gets a full
        check-quorum timeout; a removed one becomes an observer. The leader itself may be among neither."""
        for v in voters:
            if v != self.node_id and v not in self.voter_progress:
                p = self.observer_progress.pop(v, None) or ReplicaProgress()
                p.last_fetch_ms = max(p.last_fetch_ms, now_ms)
                self.voter_progress[v] = p
        for v in [v for v in self.voter_progress if v not in voters]:
            self.observer_progress[v] = self.voter_progress.pop(v)
            self.unacked_begin.discard(v)
        self.voters = voters

    def _counts_self(self) -> int:
        return 1 if self.node_id in self.voters else 0

    def majority_offset(self, own_end_offset: int) -> int:
        """The largest offset that a majority of the current voters hold (this leader only if it is one of them)."""
        ends = [own_end_offset] * self._counts_self() + [p.end_offset for p in self.voter_progress.values()]
        ends.sort(reverse=True)
        return ends[len(self.voters) // 2]

    def heard_from_majority(self, now_ms: int, timeout_ms: int) -> bool:
        live = self._counts_self() + sum(
            1 for p in self.voter_progress.values() if now_ms - p.last_fetch_ms < timeout_ms
        )
        return live > len(self.voters) // 2

    def caught_up(self, replica: int, high_watermark: int, now_ms: int, within_ms: int) -> bool:
        """Whether an observer to be added has fetched lately and up to the high watermark (AddRaftVoter)."""
        p = self.observer_progress.get(replica)
        return p is not None and p.end_offset >= high_watermark and now_ms - p.last_fetch_ms < within_ms

    def park(self, req: FetchRequest, deadline_ms: int) -> None:
        """Hold a fetch that has nothing new until ``deadline_ms``; a replica's later fetch replaces it."""
        self.parked = [p for p in self.parked if (p.request.sender, p.request.observer) != (req.sender, req.observer)]
        self.parked.append(ParkedFetch(req, deadline_ms))

    def take_parked(self, now_ms: int, everyone: bool) -> list[FetchRequest]:
        """The parked fetches to answer now: all of them, or those whose wait is over."""
        due = [p.request for p in self.parked if everyone or now_ms >= p.deadline_ms]
        self.parked = [p for p in self.parked if not (everyone or now_ms >= p.deadline_ms)]
        return due

    def successors(self) -> tuple[int, ...]:
        """Other voters, the most caught up first (EndQuorumEpoch's preferred successors)."""
        return tuple(sorted(self.voter_progress, key=lambda v: (-self.voter_progress[v].end_offset, v)))
