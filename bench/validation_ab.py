"""What produce validation costs a producer: the same broker with and without it, in turns.

  .venv/bin/python bench/validation_ab.py --b-src /tmp/wt-noval/src [--rounds 3] [--count 100000]

A is this checkout. B is another source tree (``--b-src``) whose broker skips the LogValidator: make it
with a worktree of the same commit and change one call in server/handlers/produce.py, as
docs/benchmarks.md shows. Each round starts a fresh single node of each, A and B in turn (the order
alternating round by round), and times confluent-kafka producers at 1 KiB and 100 B. Throughput counts
acknowledged messages only. Prints medians and the A/B ratio; writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import start
from produce_consume import produce_throughput
from results_file import write_results
from rich.console import Console
from rich.table import Table

CASES = (("1 KiB acks=1", 1024, "1", 1), ("1 KiB acks=all", 1024, "all", 1), ("100 B acks=1", 100, "1", 5))


def one_side(src: str | None, count: int) -> dict[str, Any]:
    env_before = os.environ.get("PYTHONPATH")
    if src:
        os.environ["PYTHONPATH"] = src
    try:
        b = start("epochlog")
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    out: dict[str, Any] = {}
    try:
        for name, size, acks, mult in CASES:
            r = produce_throughput(b.bootstrap, size, count * mult, acks)
            if r["errors"]:
                raise RuntimeError(f"{name}: {r['errors']} messages were not acknowledged")
            out[name] = r["msgs_per_s"]
    finally:
        b.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--b-src", required=True, help="the src/ of the tree without validation")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=100_000, help="1 KiB messages per case (100 B: 5x)")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for i in range(args.rounds):
        order = ("A", "B") if i % 2 == 0 else ("B", "A")
        for side in order:
            r = one_side(None if side == "A" else args.b_src, args.count)
            runs[side].append(r)
            print(f"round {i + 1} {side}: " + ", ".join(f"{k} {v:,.0f}/s" for k, v in r.items()), file=sys.stderr)
    summary = {}
    table = Table(title="produce with validation (A) and without (B), msgs/s acknowledged, medians")
    for col in ("case", "A", "B", "A/B", "cost"):
        table.add_column(col, justify="right")
    for name, *_ in CASES:
        a = statistics.median(r[name] for r in runs["A"])
        b = statistics.median(r[name] for r in runs["B"])
        pairs = [ra[name] / rb[name] for ra, rb in zip(runs["A"], runs["B"], strict=True)]
        summary[name] = {"a_median": a, "b_median": b, "ratio_median_of_pairs": statistics.median(pairs)}
        table.add_row(name, f"{a:,.0f}", f"{b:,.0f}", f"{a / b:.3f}", f"{(1 - a / b) * 100:.1f}%")
    Console().print(table)
    write_results("validation-ab", {"args": vars(args), "runs": runs, "summary": summary})


if __name__ == "__main__":
    main()
