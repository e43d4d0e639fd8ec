"""Which log directories have failed (Kafka's LogDirFailureChannel).

Any I/O error on a log directory takes the whole directory offline, once, until the process restarts:
after a failed write or fsync nothing on that disk can be trusted (Linux may already have dropped the
dirty pages a later fsync would claim to have written), so its partitions stop serving rather than risk
acknowledging or exposing data that is not there.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from epochlog.storage.errors import KafkaStorageError

log = logging.getLogger("epochlog.storage")


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: dict[str, str] = {}
        self._listeners: list[Callable[[str], None]] = []

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """``listener(dir)`` runs once per directory, right after it goes offline."""
        self._listeners.append(listener)

    def is_offline(self, log_dir: Path | str) -> bool:
        return str(log_dir) in self._offline

    @property
    def offline_dirs(self) -> list[str]:
        return list(self._offline)

    @property
    def offline_count(self) -> int:
        """kafka.log:type=LogManager,name=OfflineLogDirectoryCount."""
        return len(self._offline)

    def mark_offline(self, log_dir: Path | str, reason: str) -> None:
        key = str(log_dir)
        if key in self._offline:
            return
        self._offline[key] = reason
        log.error("log directory %s is offline: %s", key, reason)
        for listener in list(self._listeners):
            try:
                listener(key)
            except Exception:
                log.exception("handling the failure of log directory %s", key)

    def check(self, log_dir: Path | str, what: str) -> None:
        if str(log_dir) in self._offline:
            raise KafkaStorageError(f"{what}: log directory {log_dir} is offline")

    @contextmanager
    def guard(self, log_dir: Path | str, what: str) -> Iterator[None]:
        """Run an operation on ``log_dir``: refused if it is offline; an OSError takes it offline."""
        self.check(log_dir, what)
        try:
            yield
        except OSError as e:
            self.mark_offline(log_dir, f"{what}: {e}")
            raise KafkaStorageError(f"{what} failed on log directory {log_dir}: {e}") from e


class OnLogDir(Protocol):
    """A partition's storage in one log directory (PartitionLog)."""

    failures: LogDirFailureChannel
    log_dir: str
    topic: str
    partition: int


_L = TypeVar("_L", bound=OnLogDir)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def io_guard(fn: Callable[Concatenate[_L, _P], _R]) -> Callable[Concatenate[_L, _P], _R]:
    """Kafka's maybeHandleIOException: refused while the log directory is offline, and an OSError takes
    it offline (once, for every partition in it) and surfaces as KAFKA_STORAGE_ERROR."""

    def guarded(self: _L, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        failures = self.failures
        if failures.offline_count and failures.is_offline(self.log_dir):
            raise KafkaStorageError(f"{self.topic}-{self.partition}: log directory {self.log_dir} is offline")
        try:
            return fn(self, *args, **kwargs)
        except OSError as e:
            failures.mark_offline(self.log_dir, f"{fn.__name__} on {self.topic}-{self.partition}: {e}")
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {fn.__name__} failed: {e}") from e

    # update_wrapper rather than @functools.wraps: the same wrapper, and it keeps guarded's precise type.
    functools.update_wrapper(guarded, fn)
    return guarded
