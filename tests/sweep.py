"""How many random seeds or cases a long sweep runs (the simulator's random schedules, the recovery fuzz): all
of them in the long tier (`scripts/test --long`, EPOCHLOG_LONG=1), half by default (CI and `scripts/test`, to
keep the default run within its time), a fifth under `scripts/test --quick` (EPOCHLOG_QUICK=1). The named
scenarios and the tests that show each checker can fail run in full either way."""

from __future__ import annotations

import os


def seeds(full: int, env: str | None = None) -> int:
    """``full`` in the long tier, half of it by default, a fifth in the quick tier; an explicit ``env``
    variable overrides them all."""
    if env and os.environ.get(env):
        return int(os.environ[env])
    if os.environ.get("EPOCHLOG_LONG"):
        return full
    if os.environ.get("EPOCHLOG_QUICK") == "1":
        return max(1, full // 5)
    return max(1, full // 2)
