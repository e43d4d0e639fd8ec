"""Rebalance time when a 4th member joins a group of 3 consuming 100 partitions: classic eager, classic
cooperative and KIP-848, with confluent-kafka against one epochlog broker.

  PYTHONPATH=src .venv/bin/python bench/rebalance_bench.py [--rounds 3] [--heartbeat-ms 1000]

Per round and protocol: a new group of 3 members (one thread each, polling) reads a 100-partition topic under
steady production; once they split it 33/33/34 and read for a while, a 4th subscribes. Measured from the
4th's subscribe(): (a) until the 4th's first non-empty assignment, (b) until every partition is owned again
and the split is 25 each (the last assign/revoke callback of the rebalance), and the pause: the longest gap
between two records read by anyone in the group from the subscribe until a second after (b). The protocols
alternate within each round (rotated between rounds), since the shared machine drifts.

The heartbeat interval decides how soon the members hear of a rebalance, in both protocols: the classic
members' heartbeat.interval.ms and the broker's group.consumer.heartbeat.interval.ms are set to the same
``--heartbeat-ms``. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import start
from confluent_kafka import Consumer, Producer, TopicPartition
from produce_consume import create_topic
from results_file import write_results
from rich.console import Console
from rich.table import Table

PARTITIONS = 100
MODES: dict[str, dict[str, str]] = {
    "classic eager (range)": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "classic cooperative-sticky": {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"},
    "KIP-848 (group.protocol=consumer)": {"group.protocol": "consumer"},
}


class Member(threading.Thread):
    """One consumer in a thread of its own: its ownership from the callbacks and the times of its reads."""

    def __init__(self, name: str, conf: dict[str, Any], topic: str) -> None:
        super().__init__(daemon=True)
        self.name, self.conf, self.topic = name, conf, topic
        self.reads: list[float] = []
        self.lock = threading.Lock()
        self.owned: set[int] = set()
        self.events: list[tuple[float, str, frozenset[int]]] = []  # (time, assign|revoke, partitions)
        self.subscribed_at = 0.0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _assign(self, c: Consumer, parts: list[TopicPartition]) -> None:
        with self.lock:
            moved = frozenset(tp.partition for tp in parts)
            self.owned |= moved
            self.events.append((time.monotonic(), "assign", moved))

    def _revoke(self, c: Consumer, parts: list[TopicPartition]) -> None:
        with self.lock:
            moved = frozenset(tp.partition for tp in parts)
            self.owned -= moved
            self.events.append((time.monotonic(), "revoke", moved))

    def run(self) -> None:
        try:
            c = Consumer(self.conf)
            self.subscribed_at = time.monotonic()
            c.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
            while not self.stop.is_set():
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    self.reads.append(time.monotonic())  # list.append is atomic under the GIL
            c.close()
        except BaseException as e:  # reported by the main thread
            self.error = e

    def snapshot(self) -> tuple[set[int], list[tuple[float, str, frozenset[int]]]]:
        with self.lock:
            return set(self.owned), list(self.events)


class Load(threading.Thread):
    """Steady production: ``rate`` records a second, round-robin over the partitions."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
        self.topic, self.rate = topic, rate
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                try:
                    self.p.produce(self.topic, b"x" * 100, partition=self.sent % PARTITIONS)
                except BufferError:
                    break
                self.sent += 1
            self.p.poll(0.01)
        self.p.flush(10)


def wait_for(cond: Any, timeout: float, what: str, members: list[Member]) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        for m in members:
            if m.error is not None:
                raise RuntimeError(f"{m.name}: {m.error}")
        if time.monotonic() > deadline:
            owned = {m.name: sorted(m.snapshot()[0]) for m in members}
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}; owned: {owned}")
        time.sleep(0.01)


def split(members: list[Member], sizes: list[int]) -> bool:
    owned = [m.snapshot()[0] for m in members]
    union = set().union(*owned)
    return len(union) == PARTITIONS == sum(map(len, owned)) and sorted(map(len, owned)) == sorted(sizes)


def one_round(bootstrap: str, topic: str, mode: str, heartbeat_ms: int) -> dict[str, Any]:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"rebalance-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "latest",
        "enable.auto.commit": True,
        **MODES[mode],
    }
    if conf["group.protocol"] == "classic":
        conf["heartbeat.interval.ms"] = heartbeat_ms  # the consumer protocol takes it from the broker
    members = [Member(f"m{i}", {**conf, "client.id": f"m{i}"}, topic) for i in range(1, 5)]

    def last_read() -> float:
        return max((m.reads[-1] for m in members if m.reads), default=0.0)

    try:
        for m in members[:3]:
            m.start()
        wait_for(lambda: split(members[:3], [33, 33, 34]), 60, "3 members splitting 100 partitions", members)
        settled = time.monotonic()
        wait_for(lambda: last_read() > settled + 1.0, 20, "a second of steady reading", members)
        fourth = members[3]
        fourth.start()
        wait_for(lambda: fourth.subscribed_at > 0, 10, "the 4th's subscribe", members)
        t0 = fourth.subscribed_at
        wait_for(lambda: split(members, [25, 25, 25, 25]), 60, "4 members at 25 each", members)
        events = [(t, how, tps, m.name) for m in members for t, how, tps in m.snapshot()[1] if t >= t0]
        first = min(t for t, how, tps, name in events if name == "m4" and how == "assign" and tps)
        stable = max(t for t, *_ in events)
        end = stable + 1.0
        wait_for(lambda: last_read() > end, 20, "a second of reading after the rebalance", members)
        group_reads = sorted(t for m in members for t in list(m.reads) if t0 <= t <= end)
        # What each of the three readers went without: eager stops them all, the incremental protocols only
        # the partitions that move.
        member_pause = max(longest_gap([t for t in list(m.reads) if t0 <= t <= end]) for m in members[:3])
        return {
            "first_assignment_s": first - t0,
            "stable_s": stable - t0,
            "member_pause_s": member_pause,
            "group_pause_s": longest_gap(group_reads),
            "unowned_partition_s": unowned_time(events, t0),
            "revoked": sum(len(tps) for t, how, tps, name in events if how == "revoke"),
            "callbacks": len(events),
        }
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            if m.is_alive():
                m.join(30)


def longest_gap(times: list[float]) -> float:
    return max((b - a for a, b in itertools.pairwise(times)), default=float("nan"))


def unowned_time(events: list[tuple[float, str, frozenset[int], str]], t0: float) -> float:
    """Partition-seconds without an owner after ``t0``: from a partition's revocation to its next assignment."""
    revoked_at: dict[int, float] = {}
    total = 0.0
    for t, how, tps, _name in sorted(events, key=lambda e: (e[0], e[1] != "revoke")):
        for p in tps:
            if how == "revoke":
                revoked_at[p] = t
            elif p in revoked_at:
                total += t - revoked_at.pop(p)
    return total + sum(max(t for t, *_ in events) - t for t in revoked_at.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=2000, help="records produced a second")
    ap.add_argument("--modes", default=",".join(MODES), help="a comma-separated subset of: " + ", ".join(MODES))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    settings = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": str(args.heartbeat_ms),
    }
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "partitions": PARTITIONS,
        "heartbeat_ms": args.heartbeat_ms,
        "rate": args.rate,
        "broker_settings": settings,
        "modes": {m: [] for m in args.modes.split(",") if m},
        "stalls": [],
    }
    b = start("epochlog", settings)
    try:
        topic = "rebalance-bench"
        create_topic(b.bootstrap, topic, PARTITIONS)
        load = Load(b.bootstrap, topic, args.rate)
        load.start()
        try:
            order = [m for m in args.modes.split(",") if m]
            for r in range(args.rounds):
                for mode in order[r % len(order) :] + order[: r % len(order)]:
                    try:
                        row = one_round(b.bootstrap, topic, mode, args.heartbeat_ms)
                    except TimeoutError as e:  # a group that never settles is a result, and is kept as one
                        results["stalls"].append({"round": r + 1, "mode": mode, "what": str(e)})
                        print(f"round {r + 1} {mode}: STALLED {e}", file=sys.stderr)
                        continue
                    results["modes"][mode].append(row)
                    figures = ", ".join(f"{k} {v:.3f}" for k, v in row.items())
                    print(f"round {r + 1} {mode}: {figures}", file=sys.stderr)
        finally:
            load.stop.set()
            load.join(20)
    finally:
        b.stop()
    show(results)
    write_results("rebalance", results, Path(args.out))


def show(results: dict[str, Any]) -> None:
    table = Table(
        title=f"a 4th member joins 3 on {results['partitions']} partitions "
        f"(heartbeat {results['heartbeat_ms']} ms, {results['rate']} records/s; median of rounds, [min-max])"
    )
    cols = ("protocol", "4th's first assignment", "all stable", "a member's longest pause", "group's longest pause")
    for col in (*cols, "partition-s unowned", "partitions revoked", "stalled rounds"):
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for mode, rows in results["modes"].items():
        stalled = str(sum(1 for st in results.get("stalls", []) if st["mode"] == mode))
        if not rows:
            table.add_row(mode, *["-"] * 6, stalled)
            continue

        def cell(key: str, unit: str = "s", rows: list[dict[str, Any]] = rows) -> str:
            vals = [r[key] for r in rows]
            fmt = "{:.2f}" if unit == "s" else "{:.0f}"
            return f"{fmt.format(statistics.median(vals))} [{fmt.format(min(vals))}-{fmt.format(max(vals))}]"

        keys = ("first_assignment_s", "stable_s", "member_pause_s", "group_pause_s", "unowned_partition_s")
        table.add_row(mode, *(cell(k) for k in keys), cell("revoked", ""), stalled)
    Console(width=170).print(table)
    for st in results.get("stalls", []):
        print(f"stalled: round {st['round']} {st['mode']}: {st['what'][:300]}")


if __name__ == "__main__":
    main()
