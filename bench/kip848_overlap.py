"""Hunting a partition held by two KIP-848 members at once, against a real broker under CPU load.

  PYTHONPATH=src .venv/bin/python bench/kip848_overlap.py [--rounds 20] [--partitions 12] [--hogs 2]
      [--seconds 300] [--logs DIR] [--pairs]

Two confluent-kafka members (``group.protocol=consumer``, librdkafka ``debug=cgrp``) read a topic under steady
production; each round a third joins (with ``--pairs`` a third and a fourth at once), they split the
partitions, then leave. Ownership comes from
the rebalance callbacks (tests/integration/group_watch.py): after every poll no partition may have two
owners, and at the end the members' ownership intervals of a partition may not overlap. ``--hogs`` busy
processes load the machine (the double owner was seen at load average 4 on 2 cores). The broker runs with
the tests' heartbeat interval (300 ms), which is also librdkafka's heartbeat request timeout, so a slow
``__consumer_offsets`` write makes the member give up on the answer.

Prints a summary (rounds, violations, heartbeat requests the members timed out, assignments acknowledged)
as JSON; ``--logs`` keeps each member's librdkafka log (with the time each line reached Python) and the
broker's log. The whole run is bounded by ``--seconds``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.integration.group_watch import Watched, new_watched, ownership_intervals  # noqa: E402

TOPIC = "overlap"
BROKER = {"group.consumer.heartbeat.interval.ms": "300", "group.consumer.session.timeout.ms": "6000"}


def hog(until: float) -> None:
    while time.monotonic() < until:
        pass


def member_logger(name: str, lines: list[str]) -> logging.Logger:
    """librdkafka's log lines, stamped when they reach Python (they are served from poll())."""
    log = logging.getLogger(f"overlap.{name}")
    log.propagate = False
    log.setLevel(logging.DEBUG)

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"{time.monotonic():.3f} {record.getMessage()}")

    log.addHandler(Keep())
    return log


def producing(bootstrap: str, partitions: int, stop: threading.Event) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    i = 0
    while not stop.is_set():
        p.produce(TOPIC, value=str(i).encode(), partition=i % partitions)
        i += 1
        if i % 50 == 0:
            p.poll(0)
            time.sleep(0.05)
    p.flush(10)


def overlaps(members: list[Watched]) -> list[str]:
    """Ownership intervals (from the callbacks) of one partition that overlap between two members."""
    intervals = ownership_intervals(members)
    found = []
    for tp, ivs in intervals.items():
        ivs.sort()
        for (a1, b1, n1), (a2, b2, n2) in itertools.pairwise(ivs):
            if b1 > a2 and n1 != n2:
                found.append(f"{tp}: {n1} [{a1:.3f}, {b1:.3f}] and {n2} [{a2:.3f}, {b2:.3f}]")
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.seconds
    data = Path(tempfile.mkdtemp(prefix="kip848_overlap-"))
    broker = BrokerProcess(data, settings=BROKER).start()
    hogs = [multiprocessing.Process(target=hog, args=(deadline,), daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    stop = threading.Event()
    logs: dict[str, list[str]] = {}
    members: list[Watched] = []
    summary: dict[str, Any] = {"rounds": 0, "violations": [], "load": os.getloadavg()[0]}
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
        prod = threading.Thread(target=producing, args=(broker.bootstrap, args.partitions, stop), daemon=True)
        prod.start()

        def member(name: str) -> Watched:
            lines = logs.setdefault(name, [])
            conf = {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "overlap",
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "debug": "cgrp",
                "logger": member_logger(name, lines),
            }
            w = new_watched(name, conf, [TOPIC])
            members.append(w)
            return w

        live = [member("a"), member("b")]
        everything = {(TOPIC, p) for p in range(args.partitions)}

        def poll_until(done: Any, what: str) -> bool:
            while not done():
                if time.monotonic() > deadline:
                    summary["violations"].append(f"out of time waiting for {what}")
                    return False
                for w in live:
                    w.poll(0.01)
                seen: dict[Any, str] = {}
                for w in live:
                    for tp in w.owned:
                        if tp in seen:
                            summary["violations"].append(f"{tp} owned by both {seen[tp]} and {w.name}")
                            return False
                        seen[tp] = w.name
            return True

        def split() -> bool:
            owned = [w.owned for w in live]
            return set().union(*owned) == everything and sum(map(len, owned)) == len(everything) and all(owned)

        if not poll_until(split, "the first split"):
            return summary
        for r in range(args.rounds):
            # Two join together: one may be given partitions while the other's arrival takes them away.
            new = [member(f"c{r}"), member(f"d{r}")] if args.pairs else [member(f"c{r}")]
            live.extend(new)
            if not poll_until(split, f"round {r}: {', '.join(w.name for w in new)} joined"):
                break
            for w in new:
                live.remove(w)
                w.close()
            if not poll_until(split, f"round {r}: they left"):
                break
            summary["rounds"] = r + 1
        summary["violations"] += overlaps(members)
    finally:
        stop.set()
        for w in members:
            try:
                w.close()
            except Exception:  # closing what may already be gone
                pass
        for h in hogs:
            if h.is_alive():
                h.terminate()
            h.join(5)
        broker.stop()
        all_lines = [line for lines in logs.values() for line in lines]
        summary["heartbeat_timeouts"] = sum("Timed out ConsumerGroupHeartbeat" in x for x in all_lines)
        summary["acks"] = sum("Acknowledging target assignment" in x for x in all_lines)
        summary["full_requests_after_errors"] = sum("re-querying for coordinator" in x for x in all_lines)
        if args.logs:
            out = Path(args.logs)
            out.mkdir(parents=True, exist_ok=True)
            for name, lines in logs.items():
                (out / f"{name}.log").write_text("\n".join(lines) + "\n")
            (out / "broker.log").write_text(broker.log_text())
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--logs", default=None)
    ap.add_argument("--pairs", action="store_true", help="two members join (and leave) together each round")
    print(json.dumps(run(ap.parse_args()), indent=2))


if __name__ == "__main__":
    main()
