"""The checkers, named as Jepsen names them, over a History; and the availability the writers saw.

- lost: an acknowledged value the final read does not hold.
- duplicate: a value at more than one offset (in any read, or acknowledged at one offset and read at another).
- inconsistent: one offset of a partition with two values (two reads, or an acknowledgement and a read).
- nonmonotonic: a consumer handed an offset of a partition at or below one it was handed before.
- poll_skip: a consumer went from offset a to b of a partition while the final read holds a record between.
The `txn` workload's (its reads are read_committed):
- aborted_read (G1a): a value of a transaction its producer aborted was read.
- torn_transaction: the final read holds some but not all of a transaction's values.
- lost: a transaction whose commit was acknowledged has none of its values in the final read.
The `groups` workload's:
- group_reprocessed: a member handed a record below an offset the group had committed (acknowledged) before.
Each anomaly keeps the records around it (from the final read) as evidence.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from epochlog.chaos.history import History, Read, Txn

KINDS = (
    "lost",
    "duplicate",
    "inconsistent",
    "nonmonotonic",
    "poll_skip",
    "aborted_read",
    "torn_transaction",
    "group_reprocessed",
    "trace_violation",
)
CONTEXT = 3  # records shown either side of an anomaly
EXAMPLES = 20  # anomalies of one kind kept with their evidence


@dataclass
class Anomaly:
    kind: str
    partition: int
    offset: int
    detail: str
    around: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "partition": self.partition,
            "offset": self.offset,
            "detail": self.detail,
            "around": self.around,
        }


@dataclass
class Verdict:
    counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    examples: list[Anomaly] = field(default_factory=list)
    acked: int = 0
    attempted: int = 0
    failed: int = 0
    unknown: int = 0
    read_final: int = 0
    failed_write_share: float = 0.0
    longest_unavailable_s: float = 0.0
    longest_unavailable_from_s: float = 0.0
    # Per isolation of a broker that led partitions: the slowest of its partitions to take writes again
    # (None: one never did before the run ended).
    leader_isolation_resume_s: list[float | None] = field(default_factory=list)
    # Of those, the ones whose partitions all took writes again while the leader was still cut off (a
    # shorter cut heals first, and the partitions come back with it).
    leader_isolation_before_heal: int = 0

    @property
    def anomalies(self) -> int:
        return sum(self.counts.values())

    def add(self, a: Anomaly) -> None:
        self.counts[a.kind] += 1
        if sum(1 for e in self.examples if e.kind == a.kind) < EXAMPLES:
            self.examples.append(a)


def _row(r: Read, mark: bool = False) -> dict[str, Any]:
    return {"partition": r.partition, "offset": r.offset, "value": r.value, "at_s": round(r.t, 3), "here": mark}


class _Log:
    """The final read by partition, sorted by offset, to show the records around an offset."""

    def __init__(self, final: list[Read]) -> None:
        self.by_partition: dict[int, list[Read]] = defaultdict(list)
        for r in final:
            self.by_partition[r.partition].append(r)
        for rows in self.by_partition.values():
            rows.sort(key=lambda r: r.offset)
        self.offsets = {p: [r.offset for r in rows] for p, rows in self.by_partition.items()}

    def around(self, partition: int, offset: int) -> list[dict[str, Any]]:
        rows = self.by_partition.get(partition, [])
        offs = self.offsets.get(partition, [])
        if offset is None:  # acknowledged without an offset: show the partition's end
            offset = offs[-1] + 1 if offs else 0
        i = bisect.bisect_left(offs, offset)
        if i < len(offs) and offs[i] == offset:
            return [_row(r, r.offset == offset) for r in rows[max(0, i - CONTEXT) : i + CONTEXT + 1]]
        # Nothing at that offset in the final read: show the gap where it should be.
        gap = {"partition": partition, "offset": offset, "value": "(nothing here in the final read)", "at_s": None}
        before = [_row(r) for r in rows[max(0, i - CONTEXT) : i]]
        return [*before, {**gap, "here": True}, *(_row(r) for r in rows[i : i + CONTEXT])]

    def any_between(self, partition: int, lo: int, hi: int) -> int | None:
        """The first offset of the final read strictly between lo and hi, or None."""
        offs = self.offsets.get(partition, [])
        i = bisect.bisect_right(offs, lo)
        return offs[i] if i < len(offs) and offs[i] < hi else None


def check_queue(h: History, v: Verdict) -> None:
    log = _Log(h.final)
    at: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)  # (p, offset) -> value -> who said so
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)  # value -> (p, offset) it was seen at
    for s in h.sends:
        # An acknowledgement that came without an offset (the client reports none) places nothing; the value
        # is still judged lost or not by the final read.
        if s.ok and s.offset is not None and s.offset >= 0:
            at[(s.partition, s.offset)].setdefault(s.value, f"acknowledged to {s.producer}")
            where[s.value].add((s.partition, s.offset))
    for consumer, reads in [*h.reads.items(), ("final", h.final)]:
        for r in reads:
            at[(r.partition, r.offset)].setdefault(r.value, f"read by {consumer}")
            where[r.value].add((r.partition, r.offset))

    final_values = {r.value for r in h.final}
    if h.final_complete:
        for s in h.sends:
            if s.ok and s.value not in final_values:
                v.add(
                    Anomaly(
                        "lost",
                        s.partition,
                        s.offset,
                        f"{s.value} acknowledged at {s.partition}/{s.offset} ({s.t_done:.2f} s) is not in the final "
                        "read",
                        log.around(s.partition, s.offset),
                    )
                )
    for value, places in where.items():
        if len(places) > 1:
            p, o = sorted(places)[1]
            v.add(
                Anomaly(
                    "duplicate",
                    p,
                    o,
                    f"{value} is at {len(places)} offsets: {', '.join(f'{a}/{b}' for a, b in sorted(places))}",
                    log.around(p, o),
                )
            )
    for (p, o), values in sorted(at.items()):
        if len(values) > 1:
            said = "; ".join(f"{val} ({who})" for val, who in values.items())
            v.add(Anomaly("inconsistent", p, o, f"offset {p}/{o} holds two values: {said}", log.around(p, o)))

    for consumer, reads in h.reads.items():
        last: dict[int, Read] = {}
        for r in reads:
            prev = last.get(r.partition)
            if prev is not None and r.offset <= prev.offset:
                v.add(
                    Anomaly(
                        "nonmonotonic",
                        r.partition,
                        r.offset,
                        f"{consumer} was handed {r.partition}/{r.offset} at {r.t:.2f} s after {prev.offset} "
                        f"at {prev.t:.2f} s",
                        log.around(r.partition, r.offset),
                    )
                )
            elif h.final_complete:
                lo = prev.offset if prev is not None else -1
                skipped = log.any_between(r.partition, lo, r.offset)
                if skipped is not None:
                    v.add(
                        Anomaly(
                            "poll_skip",
                            r.partition,
                            skipped,
                            f"{consumer} went from {r.partition}/{lo} to {r.offset} at {r.t:.2f} s; the log holds "
                            f"{r.partition}/{skipped} between",
                            log.around(r.partition, skipped),
                        )
                    )
            last[r.partition] = r


def check_txn(h: History, v: Verdict) -> None:
    """The transactions' checkers, and the queue's (duplicate, inconsistent, nonmonotonic, poll skip) on their
    topic; ``h`` is the txn workload's own history."""
    check_queue(h, v)
    log = _Log(h.final)
    of: dict[str, Txn] = {value: t for t in h.txns for _p, value in t.values}
    seen_aborted: set[tuple[str, int]] = set()
    for consumer, reads in [*h.reads.items(), ("final", h.final)]:
        for r in reads:
            t = of.get(r.value)
            if t is not None and t.outcome == "aborted" and (t.producer, t.n) not in seen_aborted:
                seen_aborted.add((t.producer, t.n))
                v.add(
                    Anomaly(
                        "aborted_read",
                        r.partition,
                        r.offset,
                        f"{consumer} read {r.value} at {r.partition}/{r.offset} ({r.t:.2f} s): transaction "
                        f"{t.producer} #{t.n} was aborted ({t.error or 'on purpose'})",
                        log.around(r.partition, r.offset),
                    )
                )
    if not h.final_complete:
        return
    final: dict[str, Read] = {r.value: r for r in h.final}
    for t in h.txns:
        present = [final[value] for _p, value in t.values if value in final]
        if present and len(present) < len(t.values):
            first = present[0]
            missing = [value for _p, value in t.values if value not in final]
            v.add(
                Anomaly(
                    "torn_transaction",
                    first.partition,
                    first.offset,
                    f"transaction {t.producer} #{t.n} ({t.outcome}) is partly visible: "
                    f"{len(present)} of {len(t.values)} values; missing {', '.join(missing)}",
                    log.around(first.partition, first.offset),
                )
            )
        elif not present and t.outcome == "committed":
            p, value = t.values[0]
            v.add(
                Anomaly(
                    "lost",
                    p,
                    -1,
                    f"transaction {t.producer} #{t.n} was committed ({t.t_end or 0:.2f} s); none of its "
                    f"{len(t.values)} values is in the final read (e.g. {value})",
                    [],
                )
            )


def check_groups(h: History, v: Verdict, queue_final: list[Read]) -> None:
    """``h`` is the groups workload's history (its reads and acknowledged commits); ``queue_final`` the queue
    topic's final read, for the records around an anomaly."""
    log = _Log(queue_final)
    events: list[tuple[float, int, Any]] = [(t, 0, (p, o)) for t, _m, p, o in h.commits]
    events += [(r.t, 1, r) for reads in h.reads.values() for r in reads]
    committed: dict[int, tuple[int, float]] = {}
    for _t, kind, e in sorted(events, key=lambda x: (x[0], x[1])):
        if kind == 0:
            p, o = e
            if o > committed.get(p, (-1, 0.0))[0]:
                committed[p] = (o, _t)
            continue
        r: Read = e
        below = committed.get(r.partition)
        if below is not None and r.offset < below[0]:
            v.add(
                Anomaly(
                    "group_reprocessed",
                    r.partition,
                    r.offset,
                    f"{r.consumer} was handed {r.partition}/{r.offset} at {r.t:.2f} s; the group had committed "
                    f"offset {below[0]} of that partition at {below[1]:.2f} s",
                    log.around(r.partition, r.offset),
                )
            )


def check_availability(h: History, v: Verdict) -> None:
    v.attempted = len(h.sends)
    v.acked = sum(1 for s in h.sends if s.ok)
    v.unknown = sum(1 for s in h.sends if s.ok is None)
    v.failed = v.attempted - v.acked
    v.failed_write_share = v.failed / v.attempted if v.attempted else 0.0
    acks = sorted(s.t_done for s in h.sends if s.ok and s.t_done is not None)
    first_send = min((s.t_sent for s in h.sends), default=0.0)
    edges = [first_send, *acks, max(h.workload_end_s, acks[-1] if acks else first_send)]
    gap, start = 0.0, first_send
    for a, b in itertools.pairwise(edges):
        if b - a > gap:
            gap, start = b - a, a
    v.longest_unavailable_s, v.longest_unavailable_from_s = gap, start
    for f in h.faults:
        i = bisect.bisect_right(acks, f.at_s)
        f.first_ack_after_s = acks[i] - f.at_s if i < len(acks) else None
    _leader_isolations(h, v)


def _leader_isolations(h: History, v: Verdict) -> None:
    """For each partition fault on a broker that led partitions of the queue topic when it was cut: how long
    until a write to each of them, sent after the cut, was acknowledged (by whichever broker leads it then)."""
    by_p: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for s in h.sends:
        if s.ok and s.t_done is not None:
            by_p[s.partition].append((s.t_sent, s.t_done))
    # Per partition, sends in order of sending with the earliest acknowledgement among those sent at or after.
    sent: dict[int, list[float]] = {}
    earliest: dict[int, list[float]] = {}
    for p, rows in by_p.items():
        rows.sort()
        sent[p] = [t for t, _ in rows]
        suffix, low = [], float("inf")
        for _, done in reversed(rows):
            low = min(low, done)
            suffix.append(low)
        earliest[p] = suffix[::-1]
    leaders: dict[int, int] = {}
    obs = sorted((o for o in h.observations if o.what == "leader"), key=lambda o: o.t)
    k = 0
    for f in sorted(h.faults, key=lambda f: f.at_s):
        while k < len(obs) and obs[k].t <= f.at_s:
            leaders[obs[k].partition] = obs[k].node
            k += 1
        if f.kind != "partition" or not f.target.startswith("broker-"):
            continue
        node = int(f.target.removeprefix("broker-"))
        for p in sorted(p for p, n in leaders.items() if n == node):
            i = bisect.bisect_left(sent.get(p, []), f.at_s)
            f.led_resume_s[p] = earliest[p][i] - f.at_s if i < len(sent.get(p, [])) else None
        if f.led_resume_s:
            times = list(f.led_resume_s.values())
            slowest = None if None in times else max(t for t in times if t is not None)
            v.leader_isolation_resume_s.append(slowest)
            if slowest is not None and f.healed_s is not None and f.at_s + slowest < f.healed_s:
                v.leader_isolation_before_heal += 1


def check(h: History) -> Verdict:
    """The queue workload's verdict on its history."""
    v = Verdict()
    check_queue(h, v)
    check_availability(h, v)
    v.read_final = len(h.final)
    return v
