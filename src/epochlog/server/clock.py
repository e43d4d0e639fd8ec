"""The broker's wall clock in milliseconds, the unit of Kafka's timestamps and timeouts. A leaf: handlers,
stores and coordinators read it without importing the broker."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
