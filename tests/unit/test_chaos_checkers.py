"""The chaos checkers on hand-made histories: each anomaly is found where it is and nowhere else."""

from __future__ import annotations

import pytest

from epochlog.chaos.checkers import Verdict, check, check_groups, check_txn
from epochlog.chaos.history import Fault, History, Observation, Read, Send, Txn

pytestmark = pytest.mark.unit


def _history(n: int = 6) -> History:
    """n acknowledged sends to partition 0, read live by one consumer and by the final read, all consistent."""
    h = History()
    for i in range(n):
        h.sends.append(Send("p", f"v{i}", 0, t_sent=i, t_done=i + 0.1, ok=True, offset=i))
        h.reads.setdefault("c", []).append(Read("c", 0, i, f"v{i}", i + 0.2))
        h.final.append(Read("final", 0, i, f"v{i}", 100))
    h.final_complete = True
    h.workload_end_s = n
    return h


def test_a_clean_history_has_no_anomaly() -> None:
    v = check(_history())
    assert v.anomalies == 0
    assert (v.acked, v.attempted, v.failed) == (6, 6, 0)


def test_lost_write_is_an_acknowledged_value_missing_from_the_final_read() -> None:
    h = _history()
    del h.final[3]
    v = check(h)
    assert v.counts["lost"] == 1
    lost = next(a for a in v.examples if a.kind == "lost")
    assert "v3" in lost.detail and (lost.partition, lost.offset) == (0, 3)
    # The records around where it should be, and the gap where it is not.
    assert [(r["offset"], r["here"]) for r in lost.around] == [
        (0, False),
        (1, False),
        (2, False),
        (3, True),
        (4, False),
        (5, False),
    ]


def test_lost_is_not_judged_from_an_incomplete_final_read() -> None:
    h = _history()
    del h.final[3:]
    h.final_complete = False
    assert check(h).counts["lost"] == 0


def test_duplicate_and_inconsistent_offsets() -> None:
    h = _history()
    h.final.append(Read("final", 0, 6, "v2", 100))  # v2 written twice
    h.reads["c"].append(Read("c", 0, 6, "v2", 7))
    h.reads.setdefault("d", []).append(Read("d", 0, 1, "other", 3))  # offset 1 read with another value
    v = check(h)
    assert v.counts["duplicate"] == 1
    assert v.counts["inconsistent"] == 1
    inc = next(a for a in v.examples if a.kind == "inconsistent")
    assert "v1" in inc.detail and "other" in inc.detail
    assert next(r for r in inc.around if r["here"])["offset"] == 1


def test_nonmonotonic_poll_and_poll_skip() -> None:
    h = _history()
    h.reads["c"] = [h.reads["c"][i] for i in (0, 1, 3, 4, 5, 2)]  # skips 2, then goes back to it
    v = check(h)
    assert v.counts["poll_skip"] == 1
    assert v.counts["nonmonotonic"] == 1
    skip = next(a for a in v.examples if a.kind == "poll_skip")
    assert skip.offset == 2


def test_availability_share_window_and_recovery() -> None:
    h = History()
    h.sends = [
        Send("p", "a", 0, 0.0, 0.1, True, 0),
        Send("p", "b", 0, 1.0, 6.0, False, error="_MSG_TIMED_OUT"),
        Send("p", "c", 0, 2.0, 7.0, True, 1),
        Send("p", "d", 0, 8.0, 8.1, True, 2),
    ]
    h.workload_end_s = 9.0
    h.faults = [Fault("kill", "broker-1", 1.5)]
    v = check(h)
    assert v.failed_write_share == pytest.approx(0.25)
    assert v.longest_unavailable_s == pytest.approx(6.9)  # from the ack at 0.1 s to the next at 7.0 s
    assert v.longest_unavailable_from_s == pytest.approx(0.1)
    assert h.faults[0].first_ack_after_s == pytest.approx(5.5)


def test_leader_isolation_resume_per_partition_it_led() -> None:
    """Broker 1 leads partitions 0 and 1 when cut at 10 s: each is timed to the first acknowledgement of a write
    sent after the cut; a write already in flight does not count, nor does partition 2 (led by broker 2)."""
    h = History()
    h.observations = [Observation(0.0, "leader", p, n, 0) for p, n in ((0, 1), (1, 1), (2, 2))]
    h.observations.append(Observation(13.0, "leader", 0, 2, 1))
    h.sends = [
        Send("p", "in-flight", 0, 9.9, 10.05, True, 0),  # sent before the cut
        Send("p", "a", 0, 10.5, 14.0, True, 1),
        Send("p", "b", 0, 11.0, 13.5, True, 2),  # acknowledged first, though sent later
        Send("p", "c", 1, 10.2, 16.0, True, 0),
        Send("p", "d", 2, 10.1, 10.2, True, 0),
    ]
    h.workload_end_s = 20.0
    h.faults = [
        Fault("partition", "broker-1", 10.0),
        Fault("partition", "broker-2", 17.0),
        Fault("kill", "broker-1", 1.0),
    ]
    v = check(h)
    assert h.faults[0].led_resume_s == {0: pytest.approx(3.5), 1: pytest.approx(6.0)}
    assert h.faults[1].led_resume_s == {0: None, 2: None}  # by then broker 2 leads 0 too; nothing sent after
    assert h.faults[2].led_resume_s == {}  # not an isolation
    assert v.leader_isolation_resume_s == [pytest.approx(6.0), None]
    assert v.leader_isolation_before_heal == 0  # never healed here
    h.faults[0].healed_s = 16.5
    assert check(h).leader_isolation_before_heal == 1


def _txn_history() -> History:
    """Three transactions over partitions 0 and 1: #0 committed, #1 aborted, #2 committed; the final read
    holds exactly the committed ones."""
    h = History()
    for n, outcome in enumerate(("committed", "aborted", "committed")):
        h.txns.append(Txn("t", n, [(0, f"t-{n}-0"), (1, f"t-{n}-1")], outcome[:6], n, n + 0.5, outcome))
    offset = 0
    for t in h.txns:
        if t.outcome == "committed":
            for p, value in t.values:
                h.final.append(Read("final", p, offset, value, 10))
            offset += 1
    h.final_complete = True
    return h


def test_committed_transactions_read_whole_are_clean() -> None:
    v = Verdict()
    check_txn(_txn_history(), v)
    assert v.anomalies == 0


def test_aborted_read_torn_and_lost_transactions() -> None:
    h = _txn_history()
    h.reads["c"] = [Read("c", 0, 5, "t-1-0", 3)]  # a value of the aborted transaction was read: G1a
    h.final = [r for r in h.final if r.value != "t-2-1"]  # transaction 2 only half there: torn
    h.txns.append(Txn("t", 3, [(0, "t-3-0"), (1, "t-3-1")], "commit", 4, 4.5, "committed"))  # none of it: lost
    v = Verdict()
    check_txn(h, v)
    assert (v.counts["aborted_read"], v.counts["torn_transaction"], v.counts["lost"]) == (1, 1, 1)
    torn = next(a for a in v.examples if a.kind == "torn_transaction")
    assert "t-2-1" in torn.detail and "1 of 2" in torn.detail


def test_an_unknown_outcome_may_be_all_or_nothing_but_not_half() -> None:
    h = _txn_history()
    h.txns[2].outcome = "unknown"
    v = Verdict()
    check_txn(h, v)
    assert v.anomalies == 0
    h.final = [r for r in h.final if r.value != "t-2-0"]
    v = Verdict()
    check_txn(h, v)
    assert v.counts["torn_transaction"] == 1


def test_group_reprocessed_is_a_read_below_an_acknowledged_commit() -> None:
    h = History()
    h.reads["m1"] = [Read("m1", 0, o, f"v{o}", 1 + o * 0.1) for o in range(5)]
    h.commits.append((2.0, "m1", 0, 3))  # offsets 0..2 committed at 2.0 s
    # m2 joins after a rebalance: rereading 3 and 4 (processed, never committed) is allowed; 2 is not.
    h.reads["m2"] = [Read("m2", 0, o, f"v{o}", 3 + o * 0.1) for o in (3, 4)]
    v = Verdict()
    check_groups(h, v, [])
    assert v.anomalies == 0
    h.reads["m3"] = [Read("m3", 0, 2, "v2", 4.0)]
    v = Verdict()
    check_groups(h, v, [])
    assert v.counts["group_reprocessed"] == 1
    # Before the commit was acknowledged the same read was no anomaly.
    h.reads["m3"] = [Read("m3", 0, 2, "v2", 1.9)]
    v = Verdict()
    check_groups(h, v, [])
    assert v.anomalies == 0


def test_an_acknowledgement_without_an_offset_places_nothing_but_is_still_judged() -> None:
    # librdkafka can report a delivery without an offset; the checker must neither crash sorting it
    # against real offsets nor count it at an offset, and the final read still decides whether it is lost.
    h = _history()
    h.sends.append(Send("p", "v3", 0, t_sent=7, t_done=7.1, ok=True, offset=None))  # type: ignore[arg-type]
    h.sends.append(Send("p", "gone", 0, t_sent=8, t_done=8.1, ok=True, offset=None))  # type: ignore[arg-type]
    v = check(h)
    assert v.counts["duplicate"] == 0 and v.counts["lost"] == 1
