"""One clock: the server, storage and the cores read "now" from epochlog.clock only, so a test or a simulation
that installs a ManualClock controls all time. The user-facing applications (the CLI, the demo, the console, the
Spark connector, the client helpers, the chaos runner) keep the wall clock of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import epochlog
from epochlog import clock
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog

pytestmark = pytest.mark.unit

SRC = Path(epochlog.__file__).parent
APPS = ("cli", "demo", "console", "spark", "client", "chaos")
CLOCK_NAMES = {"now_ms", "_now_ms"}
# Modules allowed their own reading (none now; an entry needs a reason beside it).
PENDING: set[str] = set()


def clock_readings(tree: ast.Module) -> list[str]:
    """Module-level definitions of a now_ms function, and every use of time.time / time.time_ns (a call, or the
    function handed on as a default clock)."""
    found = [f"def {s.name}" for s in tree.body if isinstance(s, ast.FunctionDef) and s.name in CLOCK_NAMES]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("time", "time_ns")
            and isinstance(node.value, ast.Name)
            and node.value.id == "time"
        ):
            found.append(f"time.{node.attr} at line {node.lineno}")
    return found


def test_only_the_clock_module_reads_the_wall_clock() -> None:
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "clock.py" or rel.split("/")[0] in APPS or rel in PENDING:
            continue
        hits = clock_readings(ast.parse(path.read_text(), filename=rel))
        if hits:
            offenders[rel] = hits
    assert not offenders, f"read epochlog.clock.now_ms() instead: {offenders}"


def test_the_scan_finds_a_private_clock() -> None:
    tree = ast.parse("import time\n\ndef now_ms() -> int:\n    return time.time_ns() // 1_000_000\n")
    assert clock_readings(tree) == ["def now_ms", "time.time_ns at line 4"]
    handed_on = ast.parse("import time\n\ndef f(clock=time.time):\n    return clock()\n")
    assert clock_readings(handed_on) == ["time.time at line 3"]


def test_a_manual_clock_controls_the_time_storage_sees(tmp_path: Path) -> None:
    manual = clock.ManualClock(1_000_000)
    previous = clock.install(manual)
    try:
        assert clock.now_ms() == 1_000_000
        manual.advance(5)
        plog = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), recover=False)
        assert plog.last_flush_ms == 1_000_005
        plog.close()
    finally:
        clock.install(previous)
    assert clock.now_ms() != 1_000_005
    with pytest.raises(ValueError):
        manual.advance(-1)
