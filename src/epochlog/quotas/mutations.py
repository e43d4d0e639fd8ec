"""controller_mutation_rate, sans-IO: partitions created or deleted per second (Kafka's
ControllerMutationQuotaManager), held by a token bucket per quota entity rather than a sampled rate.

The bucket holds at most quota x controller.quota.window.num x controller.quota.window.size.seconds tokens
(the burst) and refills at the quota. A mutation of n partitions takes n tokens and may take the bucket below
zero; the time to pay that debt back is the throttle time. Two modes, by request version as Kafka chooses:

- strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): an item is refused with
  THROTTLING_QUOTA_EXCEEDED while the bucket is in debt; the item that takes it into debt still goes through.
  The answer carries a throttle time only when something was refused.
- permissive (older versions, whose clients do not know the error): every item goes through and the debt is
  answered with a throttle time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from epochlog.quotas.core import DEFAULT_WINDOW_NUM, DEFAULT_WINDOW_SIZE_MS, IDLE_EXPIRY_MS, QuotaEntity, resolve

KEY = "controller_mutation_rate"
# The first request version of each API that is held strictly (api key -> version).
STRICT_SINCE = {19: 6, 20: 5, 37: 3}


def strict(api_key: int, api_version: int) -> bool:
    return api_version >= STRICT_SINCE.get(api_key, 0)


@dataclass
class TokenBucket:
    burst: float  # the most tokens it holds; a new bucket starts full
    tokens: float = field(default=-1.0)
    last_ms: int = 0

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.burst

    def level(self, rate: float, now_ms: int) -> float:
        """The tokens after refilling at ``rate`` per second up to now."""
        elapsed = max(0, now_ms - self.last_ms)
        self.tokens = min(self.burst, self.tokens + rate * elapsed / 1000.0)
        self.last_ms = max(self.last_ms, now_ms)
        return self.tokens

    def take(self, rate: float, n: float, now_ms: int) -> None:
        self.tokens = min(self.burst, self.level(rate, now_ms) - n)


def debt_ms(tokens: float, rate: float) -> int:
    """How long until a bucket at ``tokens`` is back to zero (Kafka: -tokens / quota x 1000)."""
    if tokens >= 0 or rate <= 0:
        return 0
    return round(-tokens / rate * 1000)


@dataclass(frozen=True)
class Decision:
    admitted: tuple[bool, ...]  # per item, in the request's order
    throttle_ms: int


class MutationQuotas:
    """The controller_mutation_rate of every client: quotas from the metadata image, one bucket per metric
    tags (shared as Kafka shares them: a user's quota alone is one bucket over all its client ids)."""

    def __init__(self, window_num: int = DEFAULT_WINDOW_NUM, window_size_ms: int = DEFAULT_WINDOW_SIZE_MS) -> None:
        self.window_num = max(1, window_num)
        self.window_size_ms = max(1, window_size_ms)
        self.quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self.buckets: dict[tuple[str, str], TokenBucket] = {}
        self.throttle_total_ms: dict[tuple[str, str], int] = {}
        self._last_expiry_ms = 0

    @property
    def enabled(self) -> bool:
        return any(KEY in values for values in self.quotas.values())

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """New quotas: a bucket keeps its tokens and takes the new burst on its next use."""
        self.quotas = quotas

    def _burst(self, rate: float) -> float:
        return rate * self.window_num * self.window_size_ms / 1000.0

    def _bucket(self, user: str, client_id: str, now_ms: int) -> tuple[TokenBucket, float, tuple[str, str]] | None:
        q = resolve(self.quotas, KEY, user, client_id)
        if q is None:
            return None
        tags, rate = q
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket(self._burst(rate), last_ms=now_ms)
        bucket.burst = self._burst(rate)
        return bucket, rate, tags

    def admit(self, user: str, client_id: str, partitions: Sequence[int], strict: bool, now_ms: int) -> Decision:
        """Which of a request's items (each the partitions it creates or deletes) may go ahead, and the
        throttle time of the answer."""
        self._expire(now_ms)
        found = self._bucket(user, client_id, now_ms)
        if found is None:
            return Decision(tuple(True for _ in partitions), 0)
        bucket, rate, tags = found
        admitted: list[bool] = []
        throttle = 0
        for n in partitions:
            if strict:
                level = bucket.level(rate, now_ms)
                if level < 0:
                    admitted.append(False)
                    throttle = debt_ms(level, rate)
                    continue
                bucket.take(rate, n, now_ms)
            else:
                bucket.take(rate, n, now_ms)
                throttle = max(throttle, debt_ms(bucket.tokens, rate))
            admitted.append(True)
        if throttle:
            self.throttle_total_ms[tags] = self.throttle_total_ms.get(tags, 0) + throttle
        return Decision(tuple(admitted), throttle)

    def refund(self, user: str, client_id: str, n: int, now_ms: int) -> None:
        """Give back the tokens of items the controller refused (Kafka counts only what it carries out)."""
        found = self._bucket(user, client_id, now_ms)
        if found is not None and n > 0:
            found[0].take(found[1], -n, now_ms)

    def _expire(self, now_ms: int) -> None:
        if now_ms - self._last_expiry_ms < IDLE_EXPIRY_MS // 10:
            return
        self._last_expiry_ms = now_ms
        for tags in [t for t, b in self.buckets.items() if now_ms - b.last_ms > IDLE_EXPIRY_MS]:
            del self.buckets[tags]
            self.throttle_total_ms.pop(tags, None)
