"""Where an acks=all produce's time goes on RF=3: a timeline across the leader and both followers.

  PYTHONPATH=src .venv/bin/python bench/ack_timeline.py [--seconds 5] [--runs 1]

Starts a three-broker LocalCluster whose processes load bench/ack_timeline/sitecustomize.py, runs
produce_consume.latency at 1,000 msgs/s (the targets' latency case), and reports per stage, over the
produced offsets: leader append -> answer to each follower's long poll -> the follower receives and
appends it -> its next fetch goes out -> the leader sees it -> the HW passes the offset -> the produce
answer is written. Samples show where CPU goes; latency needs this (docs/performance-profile.md, section 3).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import produce_consume

from epochlog.server.cluster.local import LocalCluster, free_base_port

HOOK = Path(__file__).resolve().parent / "ack_timeline"


def _load(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def _first(events: list[list[str]], pred, after: float) -> float | None:  # type: ignore[no-untyped-def]
    for e in events:
        if float(e[0]) >= after and pred(e):
            return float(e[0])
    return None


def analyse(trace_dir: Path) -> dict[str, list[float]]:
    """Stage name -> milliseconds, one per produced append (the first and last few left out)."""
    files = sorted(trace_dir.glob("*.tl"), key=lambda p: -p.stat().st_size)
    leader = _load(files[0])
    followers = {}
    for f in files[1:3]:
        ev = _load(f)
        rid = next((int(e[2]) for e in ev if e[1] == "Fsend"), None)
        if rid is not None:
            followers[rid] = ev
    stages: dict[str, list[float]] = {}
    appends = [e for e in leader if e[1] == "Lapp"]
    for a in appends[5:-5]:
        t_app, end = float(a[0]), int(a[2])
        t_hw = _first(leader, lambda e, n=end: e[1] == "Lhw" and int(e[2]) >= n, t_app)
        t_out = _first(leader, lambda e: e[1] == "Lpout", t_hw) if t_hw else None
        for rid, ev in followers.items():
            t_ans = _first(leader, lambda e, r=rid: e[1] == "Lfout" and e[2] == f"replica-fetcher-{r}", t_app)
            t_appended = _first(ev, lambda e, n=end: e[1] == "Fapp" and int(e[3]) >= n, t_app)
            t_recv = max((float(e[0]) for e in ev if e[1] == "Frecv" and t_appended and float(e[0]) <= t_appended),
                         default=None)  # fmt: skip
            t_sent = _first(ev, lambda e, n=end: e[1] == "Fsend" and int(e[3]) >= n, t_app)
            t_in = _first(leader, lambda e, r=rid, n=end: e[1] == "Lfin" and e[2] == str(r) and int(e[3]) >= n, t_app)
            for name, (b, a0) in (
                ("append -> answer to follower", (t_ans, t_app)),
                ("answer -> follower receives", (t_recv, t_ans)),
                ("follower receives -> appended", (t_appended, t_recv)),
                ("appended -> next fetch sent", (t_sent, t_appended)),
                ("next fetch sent -> leader reads it", (t_in, t_sent)),
            ):
                if b is not None and a0 is not None:
                    stages.setdefault(f"{name} ({rid})", []).append((b - a0) * 1000)
        if t_hw:
            stages.setdefault("append -> HW passes it", []).append((t_hw - t_app) * 1000)
        if t_hw and t_out:
            stages.setdefault("HW -> produce answer written", []).append((t_out - t_hw) * 1000)
    return stages


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ack-timeline-"))
    traces = work / "traces"
    traces.mkdir()
    os.environ["EPOCHLOG_TL"] = str(traces)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HOOK), os.environ.get("PYTHONPATH", "")])
    lc = LocalCluster(work / "cluster", 3, free_base_port(3))
    try:
        lc.start()
        time.sleep(3)  # the brokers register and the internal topics settle
        for _ in range(args.runs):
            for f in traces.glob("*.tl"):
                f.write_text("")  # emptied, not removed: the brokers append to these files (O_APPEND)
            res = produce_consume.latency(lc.bootstrap, 1000, args.seconds, "all", rf=3)
            print(f"ack p50 {res['ack_p50_ms']:.2f} p99 {res['ack_p99_ms']:.2f} ms, "
                  f"produce->consume p99 {res['e2e_p99_ms']:.2f} ms, load {os.getloadavg()[0]:.1f}")  # fmt: skip
            for name, xs in sorted(analyse(traces).items()):
                print(f"  {name:42s} n={len(xs):5d} p50 {_pct(xs, 0.5):6.2f} p90 {_pct(xs, 0.9):6.2f} "
                      f"p99 {_pct(xs, 0.99):6.2f} max {max(xs):6.2f} ms")  # fmt: skip
    finally:
        lc.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
