"""Exponential backoff with a cap and jitter, the shape of Kafka's retry.backoff.ms / retry.backoff.max.ms
(and reconnect.backoff.ms / reconnect.backoff.max.ms): a peer that keeps refusing is asked less and less
often, and brokers refused together do not retry in lockstep."""

from __future__ import annotations

import random

# Kafka's client defaults: retry.backoff.ms=100, retry.backoff.max.ms=1000, 20% jitter.
INITIAL_S = 0.1
MAX_S = 1.0
JITTER = 0.2


class ExponentialBackoff:
    def __init__(
        self,
        initial_s: float = INITIAL_S,
        max_s: float = MAX_S,
        multiplier: float = 2.0,
        jitter: float = JITTER,
        rng: random.Random | None = None,
    ) -> None:
        if initial_s <= 0 or max_s < initial_s or multiplier < 1 or not 0 <= jitter < 1:
            raise ValueError("backoff needs 0 < initial <= max, multiplier >= 1 and 0 <= jitter < 1")
        self.initial_s, self.max_s, self.multiplier, self.jitter = initial_s, max_s, multiplier, jitter
        self._rng = rng or random.Random()
        self.failures = 0

    def next(self) -> float:
        """The pause before the next try, after one more failure."""
        # The exponent stops growing once the cap is reached, so a peer refusing for days cannot overflow it.
        base = min(self.initial_s * self.multiplier**self.failures, self.max_s)
        if base < self.max_s:
            self.failures += 1
        if not self.jitter:
            return base
        return base * self._rng.uniform(1 - self.jitter, 1 + self.jitter)

    def reset(self) -> None:
        """After a success: the next failure starts again from the initial pause."""
        self.failures = 0
