"""The quorum's timing settings, with Kafka's names (QuorumConfig) and defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuorumConfig:
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms, drawn in [T, 2T)
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_max_wait_ms: int = 500  # how long a leader parks a fetch that has nothing new

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that has not heard from a majority for this long resigns (1.5 x the fetch timeout)."""
        return self.fetch_timeout_ms * 3 // 2
