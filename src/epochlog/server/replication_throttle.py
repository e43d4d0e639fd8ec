"""Replication throttles (Kafka's ReplicationQuotaManager): a cap in bytes per second on what a broker sends
as a leader (``leader.replication.throttled.rate``) or fetches as a follower
(``follower.replication.throttled.rate``) for the replicas its topics name as throttled
(``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``).

As in Kafka, only replicas out of the ISR are throttled (a reassignment's joining replicas, a follower
catching up), so the HW and acks=all writes never wait on a throttle; the rate is measured over a sliding
window of one-second samples, and while it is above the cap the throttled partitions are left out of the
next fetch (follower) or answered without records (leader). Bytes count whatever their compression.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epochlog.config_defs import LONG_MAX, parse_throttled_replicas

# Kafka's replication.quota.window.num and replication.quota.window.size.seconds defaults.
WINDOW_SAMPLES = 11
SAMPLE_MS = 1000


class RateMeter:
    """Bytes per second over the last ``samples`` whole-second samples (the current one included, counted
    from the first sample's start, so a burst right after a quiet spell is not divided by the whole window)."""

    def __init__(self, samples: int = WINDOW_SAMPLES, sample_ms: int = SAMPLE_MS) -> None:
        self.samples = samples
        self.sample_ms = sample_ms
        self.buckets: dict[int, int] = {}  # sample index -> bytes

    def _trim(self, now_ms: int) -> int:
        current = now_ms // self.sample_ms
        for k in [k for k in self.buckets if k <= current - self.samples]:
            del self.buckets[k]
        return current

    def record(self, n: int, now_ms: int) -> None:
        current = self._trim(now_ms)
        self.buckets[current] = self.buckets.get(current, 0) + n

    def rate(self, now_ms: int) -> float:
        self._trim(now_ms)
        if not self.buckets:
            return 0.0
        first = min(self.buckets)
        elapsed_ms = max(now_ms - first * self.sample_ms, self.sample_ms)
        return sum(self.buckets.values()) * 1000 / elapsed_ms


@dataclass
class Throttle:
    """One side's throttle on one broker: its rate cap and which replicas of which topics it applies to."""

    broker_id: int
    config_name: str  # the topic config naming the throttled replicas
    limit: int = LONG_MAX
    meter: RateMeter = field(default_factory=RateMeter)

    def applies(self, topic_configs: dict[str, str], partition: int) -> bool:
        """The topic names this broker's replica of ``partition`` as throttled, and a cap is set."""
        if self.limit >= LONG_MAX:
            return False
        value = topic_configs.get(self.config_name)
        if not value:
            return False
        pairs = parse_throttled_replicas(value)
        return pairs is None or (partition, self.broker_id) in pairs

    def exceeded(self, now_ms: int) -> bool:
        return self.meter.rate(now_ms) > self.limit

    def record(self, n: int, now_ms: int) -> None:
        self.meter.record(n, now_ms)


class ReplicationThrottles:
    """The leader-side and follower-side throttles of one broker; the rates follow its dynamic configs."""

    def __init__(self, broker_id: int) -> None:
        self.leader = Throttle(broker_id, "leader.replication.throttled.replicas")
        self.follower = Throttle(broker_id, "follower.replication.throttled.replicas")

    def reconfigure(self, own: dict[str, str], default: dict[str, str], static: dict[str, str]) -> None:
        """Rates from this broker's dynamic config, else the cluster-wide default, else server.properties."""
        for throttle, name in (
            (self.leader, "leader.replication.throttled.rate"),
            (self.follower, "follower.replication.throttled.rate"),
        ):
            raw = own.get(name) or default.get(name) or static.get(name)
            try:
                throttle.limit = int(raw) if raw else LONG_MAX
            except ValueError:
                throttle.limit = LONG_MAX
