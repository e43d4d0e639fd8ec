"""The chaos checkers on hand-made histories: each anomaly is found where it is and nowhere else."""

from __future__ import annotations

import pytest

from epochlog.chaos.checkers import check
from epochlog.chaos.history import Fault, History, Read, Send

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
    assert [r["offset"] for r in lost.around] == [0, 1, 2, 4, 5]  # the records around where it should be


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
