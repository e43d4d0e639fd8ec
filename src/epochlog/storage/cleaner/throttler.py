"""log.cleaner.io.max.bytes.per.second: the cleaner's reads and writes together stay under a rate."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Throttler:
    """Shared by the cleaner threads. After each read or write the caller reports its bytes; when the
    bytes since the window began outrun the rate, the caller sleeps until they no longer do (Kafka's
    Throttler, checked every ``check_interval_s``)."""

    def __init__(
        self,
        bytes_per_second: float,
        check_interval_s: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = bytes_per_second
        self.check_interval_s = check_interval_s
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._window_start = clock()
        self._window_bytes = 0.0
        self.slept_s = 0.0

    def throttle(self, nbytes: int) -> None:
        if self.rate == float("inf"):
            return
        with self._lock:
            self._window_bytes += nbytes
            now = self.clock()
            elapsed = now - self._window_start
            if elapsed < self.check_interval_s and self._window_bytes < self.rate * self.check_interval_s:
                return
            wait = self._window_bytes / self.rate - elapsed
            self._window_start = now
            self._window_bytes = 0.0
        if wait > 0:
            self.slept_s += wait
            self.sleep(wait)
            with self._lock:
                self._window_start = self.clock()
