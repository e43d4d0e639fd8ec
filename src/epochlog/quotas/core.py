"""Client quota decisions, sans-IO: which quota applies to a (user, client id), the rate a client is measured
at over sampled windows, and how long it is throttled (Kafka's ClientQuotaManager, its default quota
callback, and the metrics library's Rate over a SampledStat).

Every call takes ``now_ms``; nothing here reads a clock, sleeps or touches a socket. The broker records
what a request cost and carries out the throttle time (puts it in the response, stops reading the
connection for that long).

The quotas are the metadata image's: entity -> {key: value}, an entity being its (type, name) pairs sorted
by type ("client-id" before "user"), a name of ``None`` the default of that type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

QuotaEntity = tuple[tuple[str, str | None], ...]
# Kafka's defaults: quota.window.num, quota.window.size.seconds.
DEFAULT_WINDOW_NUM = 11
DEFAULT_WINDOW_SIZE_MS = 1000
# A client's measurement is dropped after this long without a request (Kafka expires its sensors after an hour).
IDLE_EXPIRY_MS = 3_600_000

_DEFAULT = object()  # stands for "the default name" in the precedence table below


def _entity(user: object, client: object) -> QuotaEntity:
    parts: list[tuple[str, str | None]] = []
    if client is not None:
        parts.append(("client-id", None if client is _DEFAULT else str(client)))
    if user is not None:
        parts.append(("user", None if user is _DEFAULT else str(user)))
    return tuple(parts)


def resolve(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[tuple[str, str], float] | None:
    """The quota ``key`` of a client and the metric tags (user, client id) its rate is measured under, by
    Kafka's precedence: user+client-id, user+default client, user, default user+client-id, default
    user+default client, default user, client-id, default client. ``None``: no quota applies.

    Clients sharing tags share one measurement: a user's quota (alone) is measured over all its client
    ids, a client id's over all users."""
    order: tuple[tuple[object, object, tuple[str, str]], ...] = (
        (user, client_id, (user, client_id)),
        (user, _DEFAULT, (user, client_id)),
        (user, None, (user, "")),
        (_DEFAULT, client_id, (user, client_id)),
        (_DEFAULT, _DEFAULT, (user, client_id)),
        (_DEFAULT, None, (user, "")),
        (None, client_id, ("", client_id)),
        (None, _DEFAULT, ("", client_id)),
    )
    for u, c, tags in order:
        values = quotas.get(_entity(u, c))
        if values is not None and key in values:
            return tags, float(values[key])
    return None


@dataclass
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0


class SampledRate:
    """A rate per second over ``window_num`` windows of ``window_size_ms`` (Kafka's Rate over a WindowedSum):
    the sum of the retained samples over the time they span, counted as at least ``window_num - 1`` full
    windows so that a burst right after a quiet spell is not measured over a few milliseconds."""

    def __init__(self, window_num: int = DEFAULT_WINDOW_NUM, window_size_ms: int = DEFAULT_WINDOW_SIZE_MS) -> None:
        self.window_num = max(1, window_num)
        self.window_size_ms = max(1, window_size_ms)
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_record_ms = 0

    def _purge(self, now_ms: int) -> None:
        expire = self.window_num * self.window_size_ms
        for s in self._samples:
            if now_ms - s.last_ms >= expire:
                s.start_ms = s.last_ms = now_ms
                s.value = 0.0

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_size_ms:
            # One extra sample overlaps the measured span (it started before it), as in Kafka.
            self._current = (self._current + 1) % (self.window_num + 1)
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms, now_ms))
            sample = self._samples[self._current]
            sample.start_ms = sample.last_ms = now_ms
            sample.value = 0.0
        sample.value += value
        sample.last_ms = now_ms
        self.last_record_ms = now_ms

    def window_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_size_ms
        if full < self.window_num - 1:
            elapsed += (self.window_num - 1 - full) * self.window_size_ms
        return max(elapsed, 1)

    def peek(self, now_ms: int) -> float:
        """``measure`` without touching the samples (for a reader on another thread, a metrics scrape)."""
        expire = self.window_num * self.window_size_ms
        live = [s for s in list(self._samples) if now_ms - s.last_ms < expire]
        if not live:
            return 0.0
        elapsed = now_ms - min(s.start_ms for s in live)
        elapsed = max(elapsed, (self.window_num - 1) * self.window_size_ms, 1)
        return sum(s.value for s in live) * 1000.0 / elapsed

    def measure(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_ms(now_ms)
        return sum(s.value for s in self._samples) * 1000.0 / window

    def measure_and_window(self, now_ms: int) -> tuple[float, int]:
        """``(measure(now_ms), window_ms(now_ms))`` in one pass over the samples: every produce request of a
        client under a quota asks both (bench/quota_bench.py measured the separate passes at about 5% of a
        broker's time on small produce requests)."""
        expire = self.window_num * self.window_size_ms
        oldest, total = now_ms, 0.0
        for s in self._samples:
            if now_ms - s.last_ms >= expire:
                s.start_ms = s.last_ms = now_ms
                s.value = 0.0
                continue
            total += s.value
            if s.start_ms < oldest:
                oldest = s.start_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_size_ms
        if full < self.window_num - 1:
            elapsed += (self.window_num - 1 - full) * self.window_size_ms
        window = max(elapsed, 1)
        return total * 1000.0 / window, window


def throttle_ms(observed: float, bound: float, window_ms: int) -> int:
    """How long until the observed rate is back to ``bound`` if nothing more is recorded: O·W/(W+X) = T,
    so X = (O - T)/T·W (Kafka's QuotaUtils.throttleTime). 0 when within the bound."""
    if observed <= bound or bound <= 0:
        return 0
    return round((observed - bound) / bound * window_ms)


MAX_RESOLVED = 100_000  # (user, client id) pairs whose quota is remembered between quota changes


class QuotaManager:
    """One quota type (e.g. producer_byte_rate): the quotas from the metadata image and one rate per
    metric tags. ``record`` returns the throttle time the request earns."""

    def __init__(
        self, key: str, window_num: int = DEFAULT_WINDOW_NUM, window_size_ms: int = DEFAULT_WINDOW_SIZE_MS
    ) -> None:
        self.key = key
        self.window_num = window_num
        self.window_size_ms = window_size_ms
        self.quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self.rates: dict[tuple[str, str], SampledRate] = {}
        self.throttle_total_ms: dict[tuple[str, str], int] = {}  # per tags: throttle time handed out
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}
        self._last_expiry_ms = 0
        # Any quota of this type is set: without one nothing is measured (Kafka's quotasEnabled). Asked on
        # every request, so kept rather than computed over every entity each time.
        self.enabled = False

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """New quotas (the image changed): every client's quota is looked up again on its next request; the
        measured rates stay, so a changed quota takes effect on the next request."""
        self.quotas = quotas
        self.enabled = any(self.key in values for values in quotas.values())
        self._resolved.clear()

    def quota_of(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        if len(self._resolved) >= MAX_RESOLVED:  # clients name themselves: a churning one must not grow it
            self._resolved.clear()
        if (user, client_id) not in self._resolved:
            self._resolved[(user, client_id)] = resolve(self.quotas, self.key, user, client_id)
        return self._resolved[(user, client_id)]

    def _rate(self, tags: tuple[str, str]) -> SampledRate:
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = SampledRate(self.window_num, self.window_size_ms)
        return rate

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record what a request cost; the throttle time (ms) it earns, 0 when within quota or without one."""
        self._expire(now_ms)
        q = self.quota_of(user, client_id)
        if q is None:
            return 0
        tags, bound = q
        rate = self._rate(tags)
        rate.record(value, now_ms)
        observed, window = rate.measure_and_window(now_ms)
        return throttle_ms(observed, bound, window)

    def throttle_of(self, user: str, client_id: str, now_ms: int) -> int:
        """The throttle time the client's recorded costs earn as of now, recording nothing (a request's
        quota checked before it is handled, its cost recorded after)."""
        q = self.quota_of(user, client_id)
        rate = self.rates.get(q[0]) if q is not None else None
        if q is None or rate is None:
            return 0
        observed, window = rate.measure_and_window(now_ms)
        return throttle_ms(observed, q[1], window)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded cost (a throttled fetch is answered empty, so its bytes were never sent)."""
        q = self.quota_of(user, client_id)
        if q is not None:
            self._rate(q[0]).record(-value, now_ms)

    def throttled(self, user: str, client_id: str, ms: int) -> None:
        q = self.quota_of(user, client_id)
        if q is not None and ms > 0:
            self.throttle_total_ms[q[0]] = self.throttle_total_ms.get(q[0], 0) + ms

    def max_in_window(self, user: str, client_id: str) -> float | None:
        """The most one request may cost without earning more throttle than the whole window: a fetch's
        max bytes are capped to it (Kafka's getMaxValueInQuotaWindow). None: no quota."""
        q = self.quota_of(user, client_id)
        if q is None:
            return None
        return q[1] * (self.window_num - 1) * self.window_size_ms / 1000.0

    def _expire(self, now_ms: int) -> None:
        if now_ms - self._last_expiry_ms < IDLE_EXPIRY_MS // 10:
            return
        self._last_expiry_ms = now_ms
        for tags in [t for t, r in self.rates.items() if now_ms - r.last_record_ms > IDLE_EXPIRY_MS]:
            del self.rates[tags]
            self.throttle_total_ms.pop(tags, None)
