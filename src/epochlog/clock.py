"""The one clock of a process: wall time in milliseconds, the unit of Kafka's timestamps and timeouts.

Every part of the server and storage that needs "now" reads it here (``now_ms()``), and the cores are handed
it as an argument; nothing else reads the system clock for a decision. A test or a simulation installs a
``ManualClock`` (``install``) and then controls all time. A leaf: it imports nothing of epochlog's.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """Time that moves only when told to."""

    def __init__(self, start_ms: int = 0) -> None:
        self.ms = start_ms

    def now_ms(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self.ms += ms


_current: Clock = SystemClock()


def now_ms() -> int:
    return _current.now_ms()


def install(clock: Clock) -> Clock:
    """Make ``clock`` the process's clock; returns the one it replaces (to put back)."""
    global _current
    previous, _current = _current, clock
    return previous
