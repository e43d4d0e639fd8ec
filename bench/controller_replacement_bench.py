"""Replacing a controller host in a dynamic quorum (KIP-853) under an acks=all idempotent producer, on real
processes on 127.0.0.1: three controllers formatted with `storage format --initial-controllers`, three
brokers, a topic of RF 3 (min.insync.replicas 2). Each replacement does what an operator does:

  epochlog storage format --no-initial-controllers ...      the new host's storage
  epochlog controller -c new.properties                      start it (an observer)
  epochlog metadata-quorum ... add-controller --command-config new.properties
  (wait until DescribeQuorum shows it among the voters)
  epochlog metadata-quorum ... remove-controller --controller-id OLD --controller-directory-id DIR
  (wait until the voters are the new set with an active controller among them); stop the old process

once with a follower controller as the one replaced and once with the active controller, --rounds times,
alternating. Per replacement: the add (from the command's start to the new voter set seen committed), the
remove (likewise), the whole replacement (from formatting the new host to writes acknowledged again after
the old process stopped), the longest stretch without an acknowledgement (and, for comparison, the longest in
the 4 s of undisturbed writes just before), the producer's delivery errors;
at the end every acknowledged message is read back where it was acknowledged.

  PYTHONPATH=src .venv/bin/python bench/controller_replacement_bench.py [--rounds 1]

Prints a table and writes JSON to bench/results/controller-replacement-<time>.json.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka.admin import AdminClient
from results_file import write_results
from rich.console import Console
from rich.table import Table
from tests.integration.cluster_helpers import QUORUM, AckingProducer, create_topic, wait_until
from tests.integration.quorum_procs import CLUSTER, Proc, active_controller, directory_id, epochlog, voters_are
from tests.integration.test_cluster import consume_all

from epochlog.storage.bootstrap_voters import new_directory_id

TOPIC = "replace"
SETTLE_ACKS = 200  # acknowledgements after the old process stopped: writes are flowing again
QUIET_S = 4.0  # seconds of undisturbed writes before each replacement, for its longest gap


class TimedProducer(AckingProducer):
    """AckingProducer that also keeps when each acknowledgement arrived."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        # One small batch every 10 ms: acknowledgements every few ms while nothing stalls.
        super().__init__(bootstrap, topic, rate_sleep=0.01)
        self.ack_times: list[float] = []

    def _cb(self, err: Any, msg: Any) -> None:
        super()._cb(err, msg)
        if err is None:
            self.ack_times.append(time.monotonic())


def longest_gap(times: list[float], t0: float, t1: float) -> tuple[float, float]:
    """The longest stretch of [t0, t1] without one of ``times`` (sorted), and where it starts (seconds after
    t0); the ends count, so writes that stop and never resume are one gap to t1."""
    inside = [t0, *(t for t in times if t0 < t < t1), t1]
    gap, at = max(((b - a, a - t0) for a, b in itertools.pairwise(inside)), default=(0.0, 0.0))
    return gap, at


class Fleet:
    def __init__(self, root: Path, spares: int) -> None:
        ids = range(1, 4 + spares)
        self.ctrls = {i: Proc(root, f"controller-{i}", "controller", i, dict(QUORUM)) for i in ids}
        # Every controller that will ever run, so brokers and tools find the quorum whichever hosts are left.
        self.bootstrap_controllers = ",".join(c.address for c in self.ctrls.values())
        for c in self.ctrls.values():
            c.config.write_text(
                c.config.read_text() + f"controller.quorum.bootstrap.servers={self.bootstrap_controllers}\n"
            )
        props = {
            "controller.quorum.bootstrap.servers": self.bootstrap_controllers,
            "group.initial.rebalance.delay.ms": "0",
        }
        self.brokers = [Proc(root, f"broker-{i}", "broker", i, props) for i in (10, 11, 12)]
        self.voters = {1, 2, 3}
        self.spare = iter(range(4, 4 + spares))
        dirs = {i: new_directory_id() for i in self.voters}
        spec = ",".join(f"{i}@{self.ctrls[i].address}:{dirs[i]}" for i in sorted(self.voters))
        for i in sorted(self.voters):
            epochlog("storage", "format", "-d", str(self.ctrls[i].dir), "-t", CLUSTER, "--initial-controllers", spec,
                     "--node-id", str(i))  # fmt: skip

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def start(self) -> None:
        for i in sorted(self.voters):
            self.ctrls[i].start()
        wait_until(lambda: active_controller(self.live()) in self.voters, 60, "an active controller")
        for b in self.brokers:
            b.start()
        wait_until(
            lambda: len(AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=5).brokers) == 3,
            60,
            "three brokers registered",
        )

    def live(self) -> dict[int, Proc]:
        return {i: c for i, c in self.ctrls.items() if c.alive}

    def stop(self) -> None:
        for p in [*self.brokers, *reversed(self.ctrls.values())]:
            p.stop()

    def replace(self, prod: TimedProducer, which: str) -> dict[str, Any]:
        """Replace the active controller (``which`` "active") or a follower ("follower") with a new host."""
        active = wait_until(lambda: (a := active_controller(self.live())) in self.voters and a, 30, "a leader")
        old = active if which == "active" else min(self.voters - {active})
        new_id = next(self.spare)
        new = self.ctrls[new_id]
        errors0 = len(prod.errors)
        live_voters = ",".join(self.ctrls[i].address for i in sorted(self.voters))
        t_start = time.monotonic()
        epochlog("storage", "format", "-d", str(new.dir), "-t", CLUSTER, "--no-initial-controllers",
                 "--node-id", str(new_id))  # fmt: skip
        new.start()
        t_add = time.monotonic()
        epochlog("metadata-quorum", "--bootstrap-controller", live_voters, "add-controller",
                 "--command-config", str(new.config))  # fmt: skip
        t_add_cmd = time.monotonic()
        grown = self.voters | {new_id}
        wait_until(lambda: voters_are(self.live(), grown), 60, f"voters {sorted(grown)}", interval=0.02)
        t_added = time.monotonic()
        epochlog("metadata-quorum", "--bootstrap-controller", live_voters, "remove-controller",
                 "--controller-id", str(old), "--controller-directory-id", directory_id(self.ctrls[old]))  # fmt: skip
        t_rm_cmd = time.monotonic()
        shrunk = grown - {old}
        wait_until(
            lambda: voters_are(self.live(), shrunk) and active_controller(self.live()) in shrunk,
            60,
            f"voters {sorted(shrunk)} with an active controller among them",
            interval=0.02,
        )
        t_removed = time.monotonic()
        self.ctrls[old].stop()
        t_stopped = time.monotonic()
        self.voters = shrunk
        at = len(prod.ack_times)
        wait_until(lambda: len(prod.ack_times) > at + SETTLE_ACKS, 60, "writes after the old controller stopped")
        t_end = time.monotonic()
        gap, gap_at = longest_gap(prod.ack_times, t_start, t_end)
        return {
            "replaced": which,
            "old": old,
            "new": new_id,
            "active_before": active,
            "active_after": active_controller(self.live()),
            "format_and_start_s": t_add - t_start,
            "add_command_s": t_add_cmd - t_add,
            "add_s": t_added - t_add,
            "remove_command_s": t_rm_cmd - t_added,
            "remove_s": t_removed - t_added,
            "stop_old_s": t_stopped - t_removed,
            "total_s": t_end - t_start,
            "longest_ack_gap_ms": gap * 1000,
            "longest_ack_gap_starts_s": gap_at,
            "acks": sum(1 for t in prod.ack_times if t_start <= t <= t_end),
            "produce_errors": len(prod.errors) - errors0,
            "error_kinds": sorted(set(prod.errors[errors0:]))[:5],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1, help="replacements of each kind (a follower, the active one)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-replace-"))
    fleet = Fleet(root, 2 * args.rounds)
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "args": vars(args), "quorum": QUORUM}
    prod: TimedProducer | None = None
    try:
        fleet.start()
        create_topic(fleet.bootstrap, TOPIC, 1, 3, {"min.insync.replicas": "2"})
        prod = TimedProducer(fleet.bootstrap, TOPIC)
        prod.start()
        wait_until(lambda: len(prod.acked) > 500, 60, "writes before the first replacement")
        for _ in range(args.rounds):
            for which in ("follower", "active"):
                # The same stretch undisturbed first: what the longest gap is without a replacement.
                t_quiet = time.monotonic()
                while time.monotonic() - t_quiet < QUIET_S:
                    time.sleep(0.1)
                quiet_gap, _ = longest_gap(prod.ack_times, t_quiet, time.monotonic())
                rows.append({**fleet.replace(prod, which), "quiet_longest_ack_gap_ms": quiet_gap * 1000})
                r = rows[-1]
                gap, errs = r["longest_ack_gap_ms"], r["produce_errors"]
                print(f"  replaced {which} controller {r['old']} by {r['new']}: {r['total_s']:.1f} s, "
                      f"longest gap {gap:.0f} ms, {errs} errors", file=sys.stderr)  # fmt: skip
        prod.stop()
        seen = consume_all(fleet.bootstrap, TOPIC, len(prod.acked), timeout=180)
        lost = sum(1 for v, o in prod.acked.items() if seen.get(v) != o)
        out.update(rows=rows, acked=len(prod.acked), sent=prod.sent, errors=len(prod.errors), lost=lost)
    finally:
        if prod is not None:
            prod._stop.set()
        fleet.stop()
    write_results("controller-replacement", out, Path(args.out))
    show(out)
    shutil.rmtree(root, ignore_errors=True)


def show(out: dict[str, Any]) -> None:
    t = Table(title="controller host replacement under an acks=all idempotent producer (3 voters, 3 brokers)")
    for col in ("replaced", "old -> new", "add s (cmd)", "remove s (cmd)", "total s", "longest ack gap ms",
                "same, undisturbed", "produce errors"):  # fmt: skip
        t.add_column(col, justify="right")
    for r in out["rows"]:
        t.add_row(
            r["replaced"] + (f" ({r['active_before']} -> {r['active_after']})" if r["replaced"] == "active" else ""),
            f"{r['old']} -> {r['new']}",
            f"{r['add_s']:.2f} ({r['add_command_s']:.2f})",
            f"{r['remove_s']:.2f} ({r['remove_command_s']:.2f})",
            f"{r['total_s']:.1f}",
            f"{r['longest_ack_gap_ms']:.0f}",
            f"{r['quiet_longest_ack_gap_ms']:.0f}",
            str(r["produce_errors"]),
        )
    Console(width=200).print(t)
    print(f"acknowledged {out['acked']:,} of {out['sent']:,} sent; {out['errors']} delivery errors; "
          f"{out['lost']} acknowledged messages not read back where acknowledged")  # fmt: skip


if __name__ == "__main__":
    main()
