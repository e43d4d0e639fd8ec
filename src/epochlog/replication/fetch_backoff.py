"""When a follower may fetch again from its leader: Kafka's replica.fetch.backoff.ms, sans-IO.

One ``FetchBackoff`` per leader a follower fetches from. The rule:

- a partition whose answer was an error, or fenced (the leader and the follower disagree on the epoch, or
  the leader no longer leads it), sits out ``backoff_ms``; the others go on being fetched. The wait ends
  early when the partition's leader epoch changes: new metadata starts a new term, and the answer that
  caused the wait was about the old one;
- a request that failed as a whole (the connection lost, no answer in time, an answer that could not be
  read) holds back every partition at that leader for ``backoff_ms``;
- an answer without records costs nothing: the leader has already long-polled (replica.fetch.wait.max.ms);
- a round with nothing to ask (every partition waiting or throttled) waits for the first partition to be
  due, but at most ``IDLE_POLL_MS``, so that new metadata or a throttle opening is seen soon.

Times are the driver's clock in ms (the server's monotonic clock, the simulator's virtual one).
"""

from __future__ import annotations

from collections.abc import Hashable

from epochlog.replication.types import FetchOutcome

DEFAULT_BACKOFF_MS = 1000  # replica.fetch.backoff.ms
IDLE_POLL_MS = 50
_BACKS_OFF = frozenset({FetchOutcome.ERROR, FetchOutcome.FENCED})


class FetchBackoff:
    def __init__(self, backoff_ms: int = DEFAULT_BACKOFF_MS) -> None:
        self.backoff_ms = backoff_ms
        self.leader_until = 0  # after a failed request: nothing goes to the leader before this
        # partition -> (due at, the leader epoch of the answer that made it wait)
        self._waiting: dict[Hashable, tuple[int, int]] = {}

    def after_answer(self, partition: Hashable, outcome: FetchOutcome, leader_epoch: int, now_ms: int) -> None:
        """The follower handled the leader's answer for ``partition`` (at its ``leader_epoch`` now)."""
        if outcome in _BACKS_OFF:
            self._waiting[partition] = (now_ms + self.backoff_ms, leader_epoch)
        elif outcome is not FetchOutcome.STALE:
            # A stale answer says nothing about the current term: a wait it did not start stands.
            self._waiting.pop(partition, None)

    def after_failure(self, now_ms: int) -> None:
        """The request failed as a whole. (A fetch the driver abandoned on purpose is not a failure.)"""
        self.leader_until = now_ms + self.backoff_ms

    def may_fetch(self, partition: Hashable, leader_epoch: int, now_ms: int) -> bool:
        """Whether ``partition`` (at its current ``leader_epoch``) goes into the next request."""
        if now_ms < self.leader_until:
            return False
        waiting = self._waiting.get(partition)
        if waiting is None:
            return True
        due, epoch = waiting
        if now_ms >= due or epoch != leader_epoch:
            del self._waiting[partition]
            return True
        return False

    def idle_ms(self, now_ms: int) -> int:
        """How long to wait after a round that had nothing to ask."""
        dues = [due for due, _epoch in self._waiting.values()]
        if self.leader_until > now_ms:
            dues.append(self.leader_until)
        first = min(dues, default=now_ms + IDLE_POLL_MS)
        return max(1, min(first - now_ms, IDLE_POLL_MS))

    def wait_ms(self, now_ms: int) -> int:
        """How long until the leader may be asked at all (0: now)."""
        return max(0, self.leader_until - now_ms)
