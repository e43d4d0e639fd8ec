"""No module of epochlog over 600 lines: past that a module holds more than one idea and is split along its seams."""

from __future__ import annotations

from pathlib import Path

import pytest

import epochlog

pytestmark = pytest.mark.unit

MAX_LINES = 600
SRC = Path(epochlog.__file__).resolve().parent
# Generated tables may be longer (none exist yet); paths relative to src/epochlog.
GENERATED: frozenset[str] = frozenset()
PENDING_SPLIT: frozenset[str] = frozenset()


def line_counts() -> dict[str, int]:
    return {p.relative_to(SRC).as_posix(): len(p.read_text().splitlines()) for p in sorted(SRC.rglob("*.py"))}


def test_no_module_is_over_the_limit() -> None:
    counts = line_counts()
    offenders = {path: n for path, n in counts.items() if n > MAX_LINES and path not in GENERATED | PENDING_SPLIT}
    report = "\n".join(f"  {path}: {n} lines" for path, n in sorted(offenders.items(), key=lambda kv: -kv[1]))
    print(f"modules over {MAX_LINES} lines:\n{report or '  none'}")
    assert not offenders, f"modules over {MAX_LINES} lines (split them along their seams):\n{report}"


def test_the_allowlists_name_real_modules_only() -> None:
    # A stale entry would let the module that later takes its name grow unchecked.
    counts = line_counts()
    assert not (GENERATED | PENDING_SPLIT) - counts.keys()
