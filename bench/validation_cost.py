"""What produce validation (protocol/log_validator.py) costs next to the append it guards.

  .venv/bin/python bench/validation_cost.py [--rounds 200]

Per 1 MiB batch of 1 KiB and of 100 B records (uncompressed, and zstd): the validator with the C record
walker, with the Python one, and PartitionLog.append_as_leader on a real file. Prints a table and writes
JSON to bench/results/. The share that matters is validation over (validation + append + the rest of a
produce), which the single-broker produce benchmark reports as a whole; this isolates the part.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import write_results
from rich.console import Console
from rich.table import Table

from epochlog.protocol import log_validator, record_walk
from epochlog.protocol.records import NONE, ZSTD, Record, build_batch
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog


def _per_batch_us(fn, rounds: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    t = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - t) / rounds * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    now = int(time.time() * 1000)
    rules = log_validator.TopicRules()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plog = PartitionLog.open(Path(tmp) / "t-0", "t", 0, LogConfig(), recover=False)
        for size in (1024, 100):
            for codec, name in ((NONE, "none"), (ZSTD, "zstd")):
                n = 1_000_000 // (size + 10)  # just under max.message.bytes
                batch = build_batch([Record(i, now, None, b"x" * size) for i in range(n)], compression=codec)
                native = record_walk.walk_native
                c_us = (
                    _per_batch_us(lambda b=batch: log_validator.validate_produce_batch(b, rules, now), args.rounds)
                    if native is not None
                    else float("nan")
                )
                log_validator.walk = record_walk.walk_py  # type: ignore[assignment]
                py_us = _per_batch_us(lambda b=batch: log_validator.validate_produce_batch(b, rules, now), 20)
                log_validator.walk = native or record_walk.walk_py  # type: ignore[assignment]
                append_us = _per_batch_us(lambda b=batch: plog.append_as_leader(b, 0, now), args.rounds)
                rows.append(
                    {
                        "record_bytes": size,
                        "codec": name,
                        "records": n,
                        "batch_bytes": len(batch),
                        "validate_c_us": round(c_us, 1),
                        "validate_python_us": round(py_us, 1),
                        "append_us": round(append_us, 1),
                        "c_share_of_append": round(c_us / append_us, 3),
                    }
                )
        plog.close()
    table = Table(title="produce validation per batch (µs)")
    for col in ("records", "codec", "validate C", "validate Python", "append", "C / append"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            f"{r['records']} x {r['record_bytes']} B",
            r["codec"],
            f"{r['validate_c_us']:.1f}",
            f"{r['validate_python_us']:.1f}",
            f"{r['append_us']:.1f}",
            f"{r['c_share_of_append']:.1%}",
        )
    Console().print(table)
    write_results("validation-cost", {"rounds": args.rounds, "rows": rows})


if __name__ == "__main__":
    main()
