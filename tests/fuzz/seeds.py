"""The fuzzers' default seed: derived from the commit under test, so a CI run can be repeated exactly and
each new commit still explores new cases. An explicit seed (the env var each fuzzer names) wins."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path


def default_seed(env_var: str) -> int:
    if os.environ.get(env_var):
        return int(os.environ[env_var])
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return int(head[:8], 16) if head else random.SystemRandom().randrange(2**32)
