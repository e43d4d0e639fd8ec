"""The trace checker catches, from a real cluster's trace files alone, the rule KIP-101 replaced.

KIP-101 Scenario 1, on real processes: a follower has replicated committed records beyond the HW it has on disk
(the HW checkpoint is periodic, and a kill -9 leaves the last one), restarts, and, under the pre-KIP-101 rule,
truncates to that HW on becoming a follower: it drops records a leader had committed, which is what lets the old
rule lose them once that follower leads. The same run under the leader-epoch rule keeps every invariant.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.server.cluster.local import LocalCluster
from epochlog.trace import events as ev
from epochlog.trace.sink import find_traces, read_merged
from tests import trace_harness
from tests.integration.cluster_helpers import create_topic, new_cluster, partition_info, wait_until
from tests.integration.helpers import produce, topic_name

RECORDS = 5


def _truncations(lc: LocalCluster, broker: int) -> list[ev.Truncate]:
    files = find_traces([lc.data_dir / f"broker-{broker}"])
    return [st.event for st in read_merged(files) if isinstance(st.event, ev.Truncate)]


def _follower_restarts_with_a_stale_hw(lc: LocalCluster, topic: str) -> int:
    """Commit records on both replicas, kill -9 the follower and start it again; returns the follower's id."""
    create_topic(lc.bootstrap, topic, 1, 2, {"min.insync.replicas": "1"})
    leader, _replicas, _isr = wait_until(
        lambda: (info := partition_info(lc.bootstrap, topic)) and len(info[2]) == 2 and info, 30, "both in the ISR"
    )
    follower = 1 if leader == 2 else 2
    produce(lc.bootstrap, topic, [b"m%d" % i for i in range(RECORDS)], {"acks": "all", "linger.ms": 0})
    # Acknowledged with acks=all while both were in the ISR: the follower holds every record, and its HW on disk
    # is the one of the broker's start (the next HW checkpoint is a minute away).
    lc.kill9(f"broker-{follower}")
    lc.start_node(f"broker-{follower}")
    # Its return as a follower: the epoch rule truncates nothing here; the HW rule truncates to its HW, 0.
    wait_until(
        lambda: (info := partition_info(lc.bootstrap, topic)) and follower in info[1] and leader == info[0],
        30,
        "the follower back in the metadata",
    )
    return follower


@pytest.mark.parametrize("rule", ["leader-epoch", "high-watermark"])
def test_kip101_scenario1_is_caught_from_the_traces_alone(tmp_path: Path, rule: str) -> None:
    lc = new_cluster(tmp_path, 2, replication_truncation_mode=rule, replica_lag_time_max_ms="3000").start()
    unsafe = rule == "high-watermark"
    if unsafe:
        trace_harness.expect_violations(lc.data_dir)  # this test judges them itself
    try:
        topic = topic_name("kip101")
        follower = _follower_restarts_with_a_stale_hw(lc, topic)
        if unsafe:
            wait_until(lambda: _truncations(lc, follower), 30, "the follower's truncation to its HW")
        else:
            # It fetches again from where it is: its log end comes back as the leader's HW moves on.
            produce(lc.bootstrap, topic, [b"after"], {"acks": "all", "linger.ms": 0})
    finally:
        lc.stop()
    checker, reports = trace_harness.judge(lc.data_dir)
    assert checker.checks > 0
    if not unsafe:
        assert not checker.violations, "\n\n".join(reports)
        assert not [t for t in _truncations(lc, follower) if t.to < RECORDS]
        return
    assert {v.invariant for v in checker.violations} == {"truncate-below-committed"}, "\n\n".join(reports)
    dropped = [t for t in _truncations(lc, follower) if t.reason == "high-watermark rule"]
    assert dropped and dropped[0].to == 0 and dropped[0].from_leo >= RECORDS
    assert f"broker {follower} truncated" in checker.violations[0].detail
    assert "UNSAFE replication.truncation.mode=high-watermark" in lc.broker(follower).log.read_text()
