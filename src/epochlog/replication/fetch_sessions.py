"""KIP-227 incremental fetch sessions: which partitions a Fetch reads, and which of them it answers.

Kafka's FetchManager and FetchSessionCache rules, with ``now`` passed in and no I/O:
- epoch 0 (INITIAL) is a full request naming every partition; its answer opens a session when the cache
  has a slot or can evict one for it, and carries the new id (0 when none was opened);
- epoch -1 (FINAL) is a full request with no session; with a session id it closes that session;
- any other epoch is incremental: the session must exist (FETCH_SESSION_ID_NOT_FOUND), be at that epoch
  (INVALID_FETCH_SESSION_EPOCH), and use topic ids exactly when the request does (v13+,
  FETCH_SESSION_TOPIC_ID_ERROR). The request adds or updates the partitions it names and forgets the
  ones it lists; the session's partitions are read; the answer leaves out each partition with no
  records, no error, no divergence, no preferred replica and the high watermark and log start offset it
  last sent. A partition that returned records moves to the end of the session, so the next reads start
  with the others. A session left with no partitions is closed and that request answered sessionless;
- the cache holds at most ``max_slots`` sessions (max.incremental.fetch.session.cache.slots). A new
  session takes the slot of the least recently used one if that was idle for more than ``eviction_ms``;
  otherwise of the smallest evictable one, if the newcomer ranks at least as high by (privileged, size):
  a session becomes evictable by anyone once older than ``eviction_ms`` at its last use, and a
  consumer's (unprivileged) session is evictable by a follower's at once.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from epochlog.codes import Err

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT_MAX = 2**31 - 1
DEFAULT_SLOTS = 1000
# Kafka's broker: MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS.
EVICTION_MS = 120_000

# A partition of a session: (topic name, or topic id from Fetch v13, partition index).
Key = tuple[Hashable, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: FINAL stays FINAL, and after 2^31-1 comes 1 (0 means a new session)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT_MAX else epoch + 1


@dataclass
class CachedPartition:
    """What the session remembers of one partition: the fetch parameters last sent (the request's own
    partition object), and what the last answer that included the partition said."""

    params: Any
    high_watermark: int = -1
    log_start_offset: int = -1


class Outcome(NamedTuple):
    """What reading one partition gave, as far as the include-or-omit rule needs it (a tuple: one is
    built per partition per fetch, a thousand for a consumer of a thousand partitions)."""

    records_size: int
    high_watermark: int
    log_start_offset: int
    error: int = 0
    diverging: bool = False
    preferred_read_replica: int = -1


@dataclass
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[Key, CachedPartition]
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)


@dataclass(frozen=True)
class SessionError:
    """Answer with this top-level error, session id 0 and no partitions."""

    error: int


@dataclass(frozen=True)
class Sessionless:
    """Read and answer exactly the partitions named; no session."""

    partitions: list[tuple[Key, Any]]


@dataclass(frozen=True)
class Full:
    """Read and answer the partitions named; the answer may open a session for them."""

    partitions: list[tuple[Key, Any]]
    privileged: bool
    uses_topic_ids: bool


@dataclass(frozen=True)
class Incremental:
    """Read every partition of the session; answer only those that changed."""

    session: FetchSession
    request_epoch: int

    @property
    def partitions(self) -> list[tuple[Key, Any]]:
        return [(k, c.params) for k, c in self.session.partitions.items()]


Context = SessionError | Sessionless | Full | Incremental


@dataclass(frozen=True)
class Answer:
    error: int
    session_id: int
    include: list[bool] = field(default_factory=list)  # per outcome, in order: is it in the answer?


class FetchSessionCache:
    """One broker's sessions (Kafka shards its cache; one shard holds the same rules)."""

    def __init__(self, max_slots: int = DEFAULT_SLOTS, eviction_ms: int = EVICTION_MS, seed: int | None = None):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self._random = random.Random(seed)

    @property
    def cached_partitions(self) -> int:
        return sum(max(s.cached_size, 0) for s in self.sessions.values())

    # -- a request arrives ------------------------------------------------------------------------------------
    def new_context(
        self,
        uses_topic_ids: bool,
        session_id: int,
        epoch: int,
        privileged: bool,
        fetch_data: Sequence[tuple[Key, Any]],
        to_forget: Sequence[Key],
        now_ms: int,
    ) -> Context:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return Sessionless(list(fetch_data))
            return Full(list(fetch_data), privileged, uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionError(Err.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionError(Err.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionError(Err.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, params in fetch_data:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = CachedPartition(params)
            else:
                cached.params = params
        for key in to_forget:
            session.partitions.pop(key, None)
        if not session.partitions:
            self.remove(session.id)
            return Sessionless(list(fetch_data))
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return Incremental(session, epoch)

    # -- its answer is built ----------------------------------------------------------------------------------
    def answer(self, ctx: Context, outcomes: Sequence[tuple[Key, Outcome]], now_ms: int) -> Answer:
        """The answer's top-level error, session id, and which of ``outcomes`` (one per partition of
        ``ctx.partitions``, in order) it includes; records the new session or the session's changes."""
        if isinstance(ctx, SessionError):
            return Answer(ctx.error, INVALID_SESSION_ID)
        if isinstance(ctx, Sessionless):
            return Answer(Err.NONE, INVALID_SESSION_ID, [True] * len(outcomes))
        if isinstance(ctx, Full):
            params = dict(ctx.partitions)
            sid = self._maybe_create(now_ms, ctx.privileged, len(outcomes), ctx.uses_topic_ids)
            if sid != INVALID_SESSION_ID:
                session = self.sessions[sid]
                for key, out in outcomes:
                    session.partitions[key] = CachedPartition(params[key], out.high_watermark, out.log_start_offset)
                self._touch(session, now_ms)
            return Answer(Err.NONE, sid, [True] * len(outcomes))
        session = ctx.session
        if session.epoch != next_epoch(ctx.request_epoch):
            # Another request of the session came in while this one waited: this one is stale.
            return Answer(Err.INVALID_FETCH_SESSION_EPOCH, session.id)
        include = []
        moved = []
        for key, out in outcomes:
            cached = session.partitions.get(key)
            if cached is None:  # forgotten meanwhile by nobody: the session changed under us
                include.append(True)
                continue
            include.append(_must_respond(cached, out))
            if out.records_size > 0:
                moved.append(key)
        for key in moved:
            session.partitions[key] = session.partitions.pop(key)
        return Answer(Err.NONE, session.id, include)

    # -- the cache -------------------------------------------------------------------------------------------
    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def _new_id(self) -> int:
        while True:
            sid = self._random.randint(1, INT_MAX)
            if sid not in self.sessions:
                return sid

    def _maybe_create(self, now_ms: int, privileged: bool, size: int, uses_topic_ids: bool) -> int:
        if len(self.sessions) >= self.max_slots and not self._try_evict(privileged, (privileged, size, 0), now_ms):
            return INVALID_SESSION_ID
        sid = self._new_id()
        epoch = next_epoch(INITIAL_EPOCH)
        self.sessions[sid] = FetchSession(sid, privileged, {}, uses_topic_ids, now_ms, now_ms, epoch)
        return sid

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            self._evict(lru)
            return True
        pool = [s for s in self.sessions.values() if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not pool:
            return False
        victim = min(pool, key=FetchSession.evictable_key)
        if key < victim.evictable_key():
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.evictions += 1

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old


def _must_respond(cached: CachedPartition, out: Outcome) -> bool:
    """Kafka's CachedPartition.maybeUpdateResponseData, updating what the session remembers."""
    must = out.records_size > 0 or out.preferred_read_replica >= 0 or out.diverging
    if cached.high_watermark != out.high_watermark:
        must = True
        cached.high_watermark = out.high_watermark
    if cached.log_start_offset != out.log_start_offset:
        must = True
        cached.log_start_offset = out.log_start_offset
    if out.error:
        cached.high_watermark = -1  # so the partition is sent again once the error is gone
        must = True
    return must
