"""Share sessions (KIP-932): which partitions a member's ShareFetch covers, and the session epoch.

A share session is keyed by (group, member id), as Kafka keys it. ShareFetch with epoch 0 opens one (a new
session replaces an old one of the member), -1 closes it, and any other epoch must be the one the session
expects next (SHARE_SESSION_NOT_FOUND when there is no session, INVALID_SHARE_SESSION_EPOCH otherwise); each
request of the session moves the epoch on by one. ShareAcknowledge cannot open a session (epoch 0 is
INVALID_SHARE_SESSION_EPOCH). A request's topics join the session, its forgotten topics leave it; every
ShareFetch fetches from all of the session's partitions. At ``group.share.max.share.sessions`` the least
recently used session is evicted (Kafka refuses the newcomer with SHARE_SESSION_LIMIT_REACHED instead).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from epochlog.protocol.errors import Err

SessionKey = tuple[str, str]  # group id, member id
TopicIdPartition = tuple[uuid.UUID, int]

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    next_epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # an ordered set


class ShareSessions:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[SessionKey, ShareSession] = OrderedDict()

    def get(self, key: SessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def begin(self, key: SessionKey, epoch: int, fetch: bool) -> tuple[int, ShareSession | None]:
        """The session a request with ``epoch`` belongs to (a new one for epoch 0), or the error."""
        if epoch == OPEN_EPOCH:
            if not fetch:
                return Err.INVALID_SHARE_SESSION_EPOCH, None
            self._sessions.pop(key, None)
            while len(self._sessions) >= self.max_sessions:
                self._sessions.popitem(last=False)
            s = self._sessions[key] = ShareSession()
            return Err.NONE, s
        found = self._sessions.get(key)
        if found is None:
            return Err.SHARE_SESSION_NOT_FOUND, None
        s = found
        if epoch == CLOSE_EPOCH:
            return Err.NONE, s
        if epoch != s.next_epoch:
            return Err.INVALID_SHARE_SESSION_EPOCH, None
        s.next_epoch = next_epoch(epoch)
        self._sessions.move_to_end(key)
        return Err.NONE, s

    @staticmethod
    def update(s: ShareSession, added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition]) -> None:
        for tp in added:
            s.partitions[tp] = None
        for tp in forgotten:
            s.partitions.pop(tp, None)

    def close(self, key: SessionKey) -> ShareSession | None:
        return self._sessions.pop(key, None)

    def members(self, group_id: str) -> list[str]:
        return [m for g, m in self._sessions if g == group_id]
