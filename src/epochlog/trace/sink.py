"""Where traced events go outside the cores: a JSON-lines file per node and component, or straight to a
checker (the simulator); and reading a set of files back as one stream, merged by wall clock.

A file is appended to across restarts; each start writes a ``Start`` event first, so the checker knows
where a node's memory began again. Each line is written whole with one write call (line buffering), so a
killed process leaves at most its last line cut short, which reading skips.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TextIO

from epochlog.clock import now_ms
from epochlog.trace.check import TraceChecker
from epochlog.trace.events import Event, Stamped, Start, Tracer, decode, encode

log = logging.getLogger("epochlog.trace")
FILE_PREFIX = "trace-"
FILE_SUFFIX = ".jsonl"


def trace_path(directory: Path, src: str) -> Path:
    return Path(directory) / f"{FILE_PREFIX}{src}{FILE_SUFFIX}"


def wall_ms() -> int:
    return now_ms()


class FileSink:
    """A Tracer that appends each event as one JSON line to ``trace-<src>.jsonl`` in ``directory``."""

    def __init__(self, directory: Path, node: int, src: str, clock: Callable[[], int] = wall_ms) -> None:
        self.node, self.src, self.clock = node, src, clock
        self.path = trace_path(directory, src)
        self.seq = 0
        self._file: TextIO | None = None
        try:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", buffering=1, encoding="utf-8")
        except OSError as e:
            log.error("trace: cannot open %s (%s); tracing is off for this node", self.path, e)
        self.emit(Start(os.getpid()))

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def emit(self, event: Event) -> None:
        if self._file is None:
            return
        line = encode(Stamped(self.node, self.src, self.seq, self.clock(), event))
        self.seq += 1
        try:
            self._file.write(line + "\n")
        except (OSError, ValueError) as e:
            # A failed log directory must not take the replication core down with it: the trace stops.
            log.error("trace: writing %s failed (%s); tracing is off for this node", self.path, e)
            self._file = None

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


class CallbackTracer:
    """A Tracer that hands each event, stamped, to ``sink`` (the simulator's checker), with its clock."""

    enabled = True

    def __init__(self, sink: Callable[[Stamped], None], node: int, src: str, clock: Callable[[], int]) -> None:
        self.sink, self.node, self.src, self.clock = sink, node, src, clock
        self.seq = 0

    def emit(self, event: Event) -> None:
        self.sink(Stamped(self.node, self.src, self.seq, self.clock(), event))
        self.seq += 1


class ReadyTracer:
    """Holds a quorum core's events until its driver has carried out the quorum-state write of the Ready
    they belong to (``release``), or drops them when the node crashed before that write (``drop``): an
    epoch or a vote the node never persisted never happened as far as anyone else can tell."""

    def __init__(self, inner: Tracer) -> None:
        self.inner = inner
        self.held: list[Event] = []

    @property
    def enabled(self) -> bool:
        return self.inner.enabled

    def emit(self, event: Event) -> None:
        if self.inner.enabled:
            self.held.append(event)

    def release(self) -> None:
        held, self.held = self.held, []
        for event in held:
            self.inner.emit(event)

    def drop(self) -> None:
        self.held = []


def find_traces(roots: Iterable[Path]) -> list[Path]:
    """The trace files in these directories and in their subdirectories one level down (a node's data
    directory, or a cluster's directory of node directories)."""
    out: set[Path] = set()
    pattern = f"{FILE_PREFIX}*{FILE_SUFFIX}"
    for root in roots:
        root = Path(root)
        if root.is_dir():
            out.update(root.glob(pattern))
            out.update(root.glob(f"*/{pattern}"))
    return sorted(out)


def read_trace(path: Path) -> list[Stamped]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [st for st in (decode(line) for line in text.splitlines() if line.strip()) if st is not None]


def merge(streams: Iterable[list[Stamped]]) -> Iterator[Stamped]:
    """One stream, by wall clock; each file's own order is kept as written."""
    return heapq.merge(*streams, key=lambda st: st.ms)


def read_merged(paths: Iterable[Path]) -> list[Stamped]:
    return list(merge(read_trace(p) for p in paths))


def close(tracer: Tracer) -> None:
    if isinstance(tracer, FileSink):
        tracer.close()


def check_directory(directory: Path) -> tuple[TraceChecker, list[Stamped]]:
    """Judge every trace under ``directory`` (a node's, or a cluster's of nodes) as one merged stream."""
    stream = read_merged(find_traces([directory]))
    return TraceChecker().feed_all(stream).finish(), stream
