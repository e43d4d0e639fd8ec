"""Every real process the tests start writes a trace (epochlog.trace.enable); at the end of each test the traces
of the processes it started are merged and judged by the same checker the simulator runs (trace/check.py).

The harness registers a directory when it starts a process in it (BrokerProcess, LocalCluster); the integration
conftest's autouse fixture calls ``check_registered`` at each test's teardown, which re-judges a directory whose
traces grew since it was last judged (a module's cluster grows across its tests) and fails the test with the
violating event and the events around it. ``SESSION`` adds up, per directory, the checks of its latest judgement:
the number the terminal summary prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from epochlog.server.tracing import TRACE_ENABLE
from epochlog.trace.check import TraceChecker, describe
from epochlog.trace.sink import check_directory, find_traces

TRACE_ON = {TRACE_ENABLE: "true"}
AROUND = 10  # events shown either side of a violation


@dataclass
class _Judged:
    size: int = -1
    checks: int = 0
    events: int = 0
    violations: int = 0
    expected: bool = False  # a test that breaks an invariant on purpose judges these traces itself


@dataclass
class Session:
    dirs: dict[Path, _Judged] = field(default_factory=dict)

    @property
    def checks(self) -> int:
        return sum(j.checks for j in self.dirs.values())

    @property
    def events(self) -> int:
        return sum(j.events for j in self.dirs.values())

    def summary(self) -> str:
        judged = [j for j in self.dirs.values() if j.events]
        bad = sum(1 for j in judged if j.violations and not j.expected)
        planted = sum(1 for j in judged if j.violations and j.expected)
        return (
            f"trace invariants: {self.checks} checks over {self.events} events traced by real processes "
            f"({len(judged)} node/cluster directories; {bad} with violations, {planted} broken on purpose)"
        )


SESSION = Session()


def register(directory: Path) -> None:
    SESSION.dirs.setdefault(Path(directory).resolve(), _Judged())


def expect_violations(directory: Path) -> None:
    """These traces break an invariant on purpose: the test asserts that, the teardown does not fail on it."""
    register(directory)
    SESSION.dirs[Path(directory).resolve()].expected = True


def _size(files: list[Path]) -> int:
    total = 0
    for f in files:
        try:
            total += f.stat().st_size
        except OSError:
            pass
    return total


def judge(directory: Path) -> tuple[TraceChecker, list[str]]:
    """The checker's verdict on one directory's traces, and each violation with the events around it."""
    checker, stream = check_directory(directory)
    reports = []
    for v in checker.violations[:3]:
        lo, hi = max(0, v.index - AROUND), min(len(stream), v.index + AROUND + 1)
        lines = [f"{v.invariant}: {v.detail}"]
        lines += [(">> " if i == v.index else "   ") + describe(stream[i]) for i in range(lo, hi)]
        reports.append("\n".join(lines))
    return checker, reports


def check_registered() -> list[str]:
    """Judge every registered directory whose traces changed; the reports of those that broke an invariant."""
    failures = []
    for directory, judged in SESSION.dirs.items():
        files = find_traces([directory])
        size = _size(files)
        if size == judged.size:
            continue
        checker, reports = judge(directory)
        judged.size, judged.checks, judged.events = size, checker.checks, checker.events
        if checker.violations and not judged.violations and not judged.expected:
            failures.append(f"traces in {directory}:\n" + "\n\n".join(reports))
        judged.violations = len(checker.violations)
    return failures
