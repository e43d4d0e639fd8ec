"""The plumbing of the quorum's messages, which every handler of RaftNode shares: fresh request ids, the one
request in flight per destination with its deadline, and the fields every request and response carries
(cluster, sender, request id, epoch; a response's error and the leader it knows of)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochlog.codes import Err
from epochlog.raft.config import QuorumConfig
from epochlog.raft.messages import Message, Outbound, Ready, Request, Response


class Messenger:
    """RaftNode's sending and answering; what the node is and knows it sets itself."""

    node_id: int
    voters: tuple[int, ...]
    cluster_id: str
    config: QuorumConfig
    epoch: int
    leader_id: int

    def __init__(self) -> None:
        self.inflight: dict[int, tuple[int, int]] = {}  # destination -> (request id, deadline)
        self.retry_at = 0  # when a follower with nothing in flight fetches again
        self._next_request_id = 0
        self._ready = Ready()
        # A dynamic quorum (KIP-853): a sender may be a voter of a newer voter set than the one our log has
        # reached, so only the receiver's own place among the voters is checked.
        self.voter_set_changes = False

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    # -- requests -----------------------------------------------------------------------------
    def _request_id(self) -> int:
        self._next_request_id += 1
        return self._next_request_id

    def _request(self, request: Callable[..., Request], *fields: Any, **named: Any) -> Request:
        """A request from us in our epoch with a fresh request id, then the request's own ``fields``."""
        return request(self.cluster_id, self.node_id, self._request_id(), self.epoch, *fields, **named)

    def _send(self, to: int, message: Message) -> None:
        self._ready.messages.append(Outbound(to, message))

    def _send_tracked(self, to: int, request: Request, now_ms: int) -> None:
        """Send a request whose answer we wait for: one in flight per destination, until its deadline."""
        self.inflight[to] = (request.request_id, now_ms + self.config.request_timeout_ms)
        self._send(to, request)

    def _answered(self, sender: int, request_id: int) -> bool:
        """Whether this is the answer to our request in flight to ``sender``, which is then no longer in flight."""
        if self.inflight.get(sender, (None, 0))[0] != request_id:
            return False
        del self.inflight[sender]
        return True

    def _expire_inflight(self, now_ms: int, grace_ms: int) -> list[int]:
        """Give up on the requests unanswered ``grace_ms`` past their deadline; returns their destinations."""
        expired = [to for to, (_, deadline) in self.inflight.items() if now_ms >= deadline + grace_ms]
        for to in expired:
            del self.inflight[to]
        return expired

    def _back_off(self, now_ms: int) -> None:
        self.retry_at = now_ms + self.config.retry_backoff_ms

    # -- answers ------------------------------------------------------------------------------
    def _request_error(self, req: Request, voters_only: bool) -> int:
        """A request from another cluster, from or to a non-voter where only voters speak, or of an old epoch."""
        if req.cluster_id and self.cluster_id and req.cluster_id != self.cluster_id:
            return Err.INCONSISTENT_CLUSTER_ID
        if voters_only and (not self.is_voter or (req.sender not in self.voters and not self.voter_set_changes)):
            return Err.INCONSISTENT_VOTER_SET
        if req.epoch < self.epoch:
            return Err.FENCED_LEADER_EPOCH
        return Err.NONE

    def _respond(self, req: Request, response: Callable[..., Response], error: int, *fields: Any) -> None:
        """Answer ``req`` with ``error``, our epoch and the leader we know, then the response's own ``fields``."""
        self._send(req.sender, response(self.node_id, req.request_id, error, self.epoch, self.leader_id, *fields))

    def _answer_as_leader(self, req: Request, response: Callable[..., Response], *fields: Any, **named: Any) -> None:
        self._send(
            req.sender, response(self.node_id, req.request_id, Err.NONE, self.epoch, self.node_id, *fields, **named)
        )
