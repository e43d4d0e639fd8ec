"""Broker CPU per GB read, consume 100 B and 1 KiB, A/B: another checkout's broker against this one's, with
sendfile on and off (epochlog.fetch.sendfile.enable).

  PYTHONPATH=src .venv/bin/python bench/sendfile_ab.py --old-src /work/main/src [--rounds 3] [--scale 1.0]

Each round starts one single-node broker per variant (in an order that alternates between rounds), produces the
same records into it, then times one confluent-kafka consumer reading them all; the broker's CPU (user + system,
bench/proc_cpu.py) is taken around the consume only. The machine is shared: compare the paired ratios (new / old,
same round), not the absolute numbers; the load average is recorded with each run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import produce_consume
from brokers import start
from proc_cpu import cpu_seconds
from results_file import write_results

HERE_SRC = str(Path(__file__).resolve().parent.parent / "src")


def variants(old_src: str) -> list[tuple[str, str, dict[str, str]]]:
    return [
        ("old", old_src, {}),
        ("new", HERE_SRC, {}),
        ("new-off", HERE_SRC, {"epochlog.fetch.sendfile.enable": "false"}),
    ]


def one(src: str, extra: dict[str, str], size: int, count: int) -> dict[str, Any]:
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src  # the broker process imports epochlog from here
    try:
        b = start("epochlog", extra)
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    try:
        p = produce_consume.produce_throughput(b.bootstrap, size, count, "1")
        load = os.getloadavg()[0]
        cpu0 = cpu_seconds(b.pid())
        c = produce_consume.consume_throughput(b.bootstrap, p["topic"], p["msgs"], size)
        cpu = cpu_seconds(b.pid()) - cpu0
    finally:
        b.stop()
    gb = c["msgs"] * size / 1e9
    return {
        "msgs": c["msgs"],
        "msgs_per_s": c["msgs_per_s"],
        "mb_per_s": c["mb_per_s"],
        "broker_cpu_s": cpu,
        "cpu_s_per_gb": cpu / gb if gb else float("nan"),
        "load1": load,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-src", default="/work/main/src")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    cases = {"consume_100B": (100, int(500_000 * args.scale)), "consume_1KiB": (1024, int(150_000 * args.scale))}
    vs = variants(args.old_src)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {c: {v[0]: [] for v in vs} for c in cases}
    for r in range(args.rounds):
        order = vs if r % 2 == 0 else list(reversed(vs))
        for case, (size, count) in cases.items():
            for name, src, extra in order:
                res = one(src, extra, size, count)
                runs[case][name].append(res)
                print(
                    f"round {r} {case} {name}: {res['msgs_per_s']:,.0f} msg/s, broker {res['broker_cpu_s']:.2f} s CPU"
                    f" = {res['cpu_s_per_gb']:.2f} s/GB (load {res['load1']:.1f})",
                    file=sys.stderr,
                    flush=True,
                )
    summary: dict[str, Any] = {}
    for case in cases:
        per = runs[case]
        row: dict[str, Any] = {}
        for name in per:
            row[name] = {
                "cpu_s_per_gb_median": statistics.median(x["cpu_s_per_gb"] for x in per[name]),
                "msgs_per_s_median": statistics.median(x["msgs_per_s"] for x in per[name]),
            }
        for name in ("new", "new-off"):
            row[f"{name}/old cpu_per_gb paired"] = [
                n["cpu_s_per_gb"] / o["cpu_s_per_gb"] for n, o in zip(per[name], per["old"], strict=True)
            ]
            row[f"{name}/old msgs_per_s paired"] = [
                n["msgs_per_s"] / o["msgs_per_s"] for n, o in zip(per[name], per["old"], strict=True)
            ]
        summary[case] = row
    for case, row in summary.items():
        print(case)
        for k, v in row.items():
            print(f"  {k}: {v}")
    write_results("sendfile-ab", {"args": vars(args), "when": time.time(), "runs": runs, "summary": summary})


if __name__ == "__main__":
    main()
