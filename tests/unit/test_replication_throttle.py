"""The replication throttle's pieces: the throttled-replicas config (Kafka's validator and parse), the
windowed rate meter, and which replicas a throttle applies to."""

from __future__ import annotations

from epochlog.config_defs import LONG_MAX, TOPIC_CONFIGS, parse_throttled_replicas, validate_value
from epochlog.server.replication_throttle import RateMeter, ReplicationThrottles


def test_throttled_replicas_values_are_checked_as_kafka_does() -> None:
    d = TOPIC_CONFIGS["leader.replication.throttled.replicas"]
    for good in ("", "*", "0:1", "0:1,1:2, 2:3"):
        assert validate_value(d, good) is None, good
    for bad in ("x", "0-1", "0:", "*,0:1", ":1"):
        assert validate_value(d, bad) is not None, bad
    assert parse_throttled_replicas("*") is None
    assert parse_throttled_replicas("0:1,1:2") == {(0, 1), (1, 2)}


def test_rate_meter_measures_bytes_per_second_over_its_window() -> None:
    m = RateMeter(samples=3, sample_ms=1000)
    m.record(1000, 0)
    assert m.rate(500) == 1000  # at least one whole sample counts as the elapsed time
    m.record(1000, 1500)
    assert m.rate(2000) == 1000
    assert m.rate(10_000) == 0  # the old samples left the window


def test_a_throttle_applies_to_named_replicas_only_once_a_rate_is_set() -> None:
    t = ReplicationThrottles(broker_id=2)
    configs = {"leader.replication.throttled.replicas": "0:2,1:3"}
    assert not t.leader.applies(configs, 0)  # no rate: nothing is throttled
    t.reconfigure({"leader.replication.throttled.rate": "100"}, {}, {})
    assert t.leader.limit == 100 and t.follower.limit == LONG_MAX
    assert t.leader.applies(configs, 0) and not t.leader.applies(configs, 1)
    assert t.leader.applies({"leader.replication.throttled.replicas": "*"}, 7)
    t.leader.record(1000, 0)
    assert t.leader.exceeded(10) and not t.leader.exceeded(60_000)
    t.reconfigure({}, {"leader.replication.throttled.rate": "5"}, {"leader.replication.throttled.rate": "9"})
    assert t.leader.limit == 5  # the cluster-wide dynamic default beats server.properties
