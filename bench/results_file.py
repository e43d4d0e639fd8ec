"""Where every benchmark writes its JSON: bench/results/<kind>-<time>.json.

The directory is ignored by git so that runs do not pile up; a result that docs/benchmarks.md cites is
committed with `git add -f` (every figure there names its file).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write_results(kind: str, data: Any, out: Path = RESULTS) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(data, indent=1))
    print(f"wrote {path}")
    return path
