"""Startup of one broker with many partitions, before and after a change: the same data directory restarted
(SIGTERM, then `epochlog up` again) alternately by two source trees.

  PYTHONPATH=src .venv/bin/python bench/scaling_startup_ab.py --before-src /tmp/oldsrc/src [--partitions 3000]

The before tree is any checkout's src/ (e.g. `git archive <commit> src | tar -x -C /tmp/oldsrc`); the after
tree is this one's. The order alternates by round so that drift falls on both. Reported per restart: seconds
to the port, to a Metadata answer with every partition led, to a new producer's first acknowledgement, and
the broker's CPU seconds when every partition is led (steadier than wall time on this shared machine).
Writes JSON to bench/results/scaling-startup-ab-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scaling_bench as sb
from results_file import write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before-src", required=True)
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    variants = {"before": args.before_src, "after": str(Path(__file__).resolve().parent.parent / "src")}
    work = Path(tempfile.mkdtemp(prefix="ab-startup-"))
    data = work / "d"
    topics = [f"s{i}" for i in range(max(1, args.partitions // 1000))]
    per = args.partitions // len(topics)
    b = sb.Broker(data)
    b.wait_port()
    b.wait_metadata(None, 0)
    for name in topics:
        sb.create_topic(b.bootstrap, name, per)
        sb.seed(b.bootstrap, name, per)
    out: dict[str, Any] = {"partitions": per * len(topics), "runs": []}
    try:
        for r in range(args.rounds):
            for v, path in variants.items() if r % 2 == 0 else reversed(variants.items()):
                b.stop()
                os.environ["PYTHONPATH"] = path  # the broker's source tree
                b = sb.Broker(data, b.port)
                res: dict[str, Any] = {"variant": v, "round": r, "port_s": b.wait_port()}
                res.update(b.wait_metadata(topics, out["partitions"]))
                res["cpu_s_at_ready"] = b.cpu_s()
                res["first_ack_s"] = time.monotonic() - b.started + sb._first_ack(b.bootstrap, topics[-1])
                res["loadavg"] = os.getloadavg()[0]
                print(res, file=sys.stderr, flush=True)
                out["runs"].append(res)
    finally:
        b.stop()
        shutil.rmtree(work, ignore_errors=True)
    for v in variants:
        rs = [x for x in out["runs"] if x["variant"] == v]
        keys = ("port_s", "all_led_s", "first_ack_s", "cpu_s_at_ready")
        out[v] = {k: sorted(x[k] for x in rs)[len(rs) // 2] for k in keys}
    print(json.dumps({v: out[v] for v in variants}))
    write_results("scaling-startup-ab", out)


if __name__ == "__main__":
    main()
