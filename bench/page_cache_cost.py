"""What one MiB written into the page cache costs this machine, on fresh pages and on reused ones.

  .venv/bin/python bench/page_cache_cost.py [--mib 2000] [--dir /tmp]

Writes a file of --mib MiB in 1 MiB writes, deletes it, and writes it again at once (the kernel hands
the just-freed pages back out), three times in all; reports CPU ms per MiB for each pass. On a VM whose
host backs guest memory lazily and takes freed memory back (free page reporting), the first touch of a
page costs a host fault: that is the cold figure, and every replica that writes a byte pays it.
Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from results_file import write_results
from rich.console import Console
from rich.table import Table


def write_pass(path: Path, mib: int) -> dict[str, float]:
    buf = b"x" * (1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    try:
        for _ in range(mib):
            os.write(fd, buf)
    finally:
        os.close(fd)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    path.unlink()
    return {"wall_ms_per_mib": wall * 1000 / mib, "cpu_ms_per_mib": cpu * 1000 / mib}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=2000)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="page-cache-", dir=args.dir) as d:
        passes = [write_pass(Path(d) / f"pass-{i}", args.mib) for i in range(3)]
    t = Table(title=f"page-cache writes, {args.mib} MiB per pass, 1 MiB per write")
    for col in ("pass", "pages", "CPU ms/MiB", "wall ms/MiB"):
        t.add_column(col)
    for i, p in enumerate(passes):
        kind = "fresh (first touch)" if i == 0 else "reused (freed just before)"
        t.add_row(str(i + 1), kind, f"{p['cpu_ms_per_mib']:.3f}", f"{p['wall_ms_per_mib']:.3f}")
    Console(width=120).print(t)
    write_results("page-cache", {"mib": args.mib, "passes": passes})


if __name__ == "__main__":
    main()
