"""Dynamic configs in the controller core: validation as Kafka's, the ConfigRecords a change writes, their
apply (live, replayed, in a snapshot), and unclean election turned on for a leaderless partition."""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.controller.config_changes import APPEND, DELETE, SET, SUBTRACT, ConfigChange, ConfigOp
from epochlog.controller.controller import NO_LEADER, Controller
from epochlog.controller.image import ClusterImage
from epochlog.controller.records import ConfigRecord, MetadataRecord, UncleanElection, from_json, to_json
from epochlog.replication.types import AlterIsr

TOPIC, BROKER = 2, 4


def cluster(n: int = 3) -> Controller:
    c = Controller(session_timeout_ms=1000)
    for b in range(1, n + 1):
        c.register_broker(b, 0)
    c.create_topic("t", 1, n)
    c.records.clear()
    return c


def topic(*ops: ConfigOp, name: str = "t") -> ConfigChange:
    return ConfigChange(TOPIC, name, tuple(ops))


def broker(name: str, *ops: ConfigOp) -> ConfigChange:
    return ConfigChange(BROKER, name, tuple(ops))


def test_set_writes_one_record_and_the_image_shows_it() -> None:
    c = cluster()
    [out] = c.alter_configs([topic(ConfigOp("retention.ms", "1000"))], incremental=True)
    assert out.error_code == 0
    assert c.records == [ConfigRecord(TOPIC, "t", "retention.ms", "1000")]
    assert c.topics["t"].configs == {"retention.ms": "1000"}


def test_delete_removes_the_override_and_a_no_op_writes_nothing() -> None:
    c = cluster()
    c.alter_configs([topic(ConfigOp("retention.ms", "1000"))], incremental=True)
    c.records.clear()
    c.alter_configs([topic(ConfigOp("retention.ms", "1000"))], incremental=True)
    assert c.records == []
    c.alter_configs([topic(ConfigOp("retention.ms", None, DELETE))], incremental=True)
    assert c.records == [ConfigRecord(TOPIC, "t", "retention.ms", None)]
    assert c.topics["t"].configs == {}


@pytest.mark.parametrize(
    ("op", "code"),
    [
        (ConfigOp("retention.msx", "1"), Err.INVALID_CONFIG),  # unknown name
        (ConfigOp("retention.ms", "abc"), Err.INVALID_CONFIG),  # not a number
        (ConfigOp("retention.ms", "-2"), Err.INVALID_CONFIG),  # below -1
        (ConfigOp("segment.bytes", str(2**31)), Err.INVALID_CONFIG),  # INT overflow
        (ConfigOp("min.insync.replicas", "0"), Err.INVALID_CONFIG),
        (ConfigOp("unclean.leader.election.enable", "yes"), Err.INVALID_CONFIG),
        (ConfigOp("cleanup.policy", "compact,shred"), Err.INVALID_CONFIG),
        (ConfigOp("retention.ms", "5", APPEND), Err.INVALID_CONFIG),  # not a list
        (ConfigOp("retention.ms", None, SET), Err.INVALID_REQUEST),
        (ConfigOp("retention.ms", "5", 9), Err.INVALID_REQUEST),
    ],
)
def test_a_bad_config_refuses_the_whole_resource_and_writes_nothing(op: ConfigOp, code: int) -> None:
    c = cluster()
    [out] = c.alter_configs([topic(ConfigOp("retention.bytes", "100"), op)], incremental=True)
    assert out.error_code == code, out.message
    assert out.message
    assert c.records == [] and c.topics["t"].configs == {}


def test_bad_resources_do_not_stop_good_ones_in_the_same_request() -> None:
    c = cluster()
    outs = c.alter_configs(
        [topic(ConfigOp("retention.ms", "1"), name="nope"), topic(ConfigOp("retention.ms", "7"))], incremental=True
    )
    assert [o.error_code for o in outs] == [Err.UNKNOWN_TOPIC_OR_PARTITION, 0]
    assert c.topics["t"].configs == {"retention.ms": "7"}


def test_duplicate_resources_and_duplicate_keys_are_invalid_requests() -> None:
    c = cluster()
    outs = c.alter_configs(
        [topic(ConfigOp("retention.ms", "1")), topic(ConfigOp("retention.ms", "2"))], incremental=True
    )
    assert [o.error_code for o in outs] == [Err.INVALID_REQUEST, Err.INVALID_REQUEST]
    [out] = c.alter_configs([topic(ConfigOp("retention.ms", "1"), ConfigOp("retention.ms", "2"))], incremental=True)
    assert out.error_code == Err.INVALID_REQUEST
    assert c.records == []


def test_validate_only_decides_but_records_nothing() -> None:
    c = cluster()
    [ok] = c.alter_configs([topic(ConfigOp("retention.ms", "1"))], incremental=True, validate_only=True)
    assert ok.error_code == 0 and ok.records
    assert c.records == [] and c.topics["t"].configs == {}
    [bad] = c.alter_configs([topic(ConfigOp("retention.ms", "x"))], incremental=True, validate_only=True)
    assert bad.error_code == Err.INVALID_CONFIG


def test_append_and_subtract_on_a_list_config_start_from_the_default() -> None:
    c = cluster()
    c.alter_configs([topic(ConfigOp("cleanup.policy", "compact", APPEND))], incremental=True)
    assert c.topics["t"].configs["cleanup.policy"] == "delete,compact"
    c.alter_configs([topic(ConfigOp("cleanup.policy", "compact", APPEND))], incremental=True)
    assert c.topics["t"].configs["cleanup.policy"] == "delete,compact"  # no duplicates
    c.alter_configs([topic(ConfigOp("cleanup.policy", "delete", SUBTRACT))], incremental=True)
    assert c.topics["t"].configs["cleanup.policy"] == "compact"
    # Kafka 4.2 (KIP-1161): the empty policy is a value (the log is neither deleted nor compacted).
    [out] = c.alter_configs([topic(ConfigOp("cleanup.policy", "compact", SUBTRACT))], incremental=True)
    assert out.error_code == Err.NONE and c.topics["t"].configs["cleanup.policy"] == ""
    [out] = c.alter_configs([topic(ConfigOp("cleanup.policy", "delete,delete", SET))], incremental=True)
    assert out.error_code == Err.INVALID_CONFIG and c.topics["t"].configs["cleanup.policy"] == ""


def test_alter_configs_replaces_the_whole_set() -> None:
    c = cluster()
    c.alter_configs([topic(ConfigOp("retention.ms", "1"), ConfigOp("segment.bytes", "2048"))], incremental=True)
    c.records.clear()
    c.alter_configs([topic(ConfigOp("retention.bytes", "5"))], incremental=False)
    assert c.topics["t"].configs == {"retention.bytes": "5"}
    assert set(c.records) == {
        ConfigRecord(TOPIC, "t", "retention.bytes", "5"),
        ConfigRecord(TOPIC, "t", "retention.ms", None),
        ConfigRecord(TOPIC, "t", "segment.bytes", None),
    }


def test_broker_configs_per_broker_and_cluster_default() -> None:
    c = cluster()
    outs = c.alter_configs(
        [broker("", ConfigOp("log.retention.ms", "100")), broker("2", ConfigOp("min.insync.replicas", "2"))],
        incremental=True,
    )
    assert [o.error_code for o in outs] == [0, 0]
    assert c.image.broker_configs == {"": {"log.retention.ms": "100"}, "2": {"min.insync.replicas": "2"}}


@pytest.mark.parametrize(
    ("name", "op", "code"),
    [
        # read-only and bad values: INVALID_REQUEST, as Kafka's brokers answer (KAFKA-13609)
        ("1", ConfigOp("log.dirs", "/tmp/x"), Err.INVALID_REQUEST),
        ("1", ConfigOp("node.id", "7"), Err.INVALID_REQUEST),
        ("", ConfigOp("log.segment.bytes", "3"), Err.INVALID_REQUEST),
        ("1", ConfigOp("log.retention.ms", "soon"), Err.INVALID_REQUEST),
        ("1", ConfigOp("log.retention.ms", "7", APPEND), Err.INVALID_CONFIG),  # not a list
        ("1", ConfigOp("retention.ms", "7"), Err.INVALID_CONFIG),  # unknown: a topic name is not a broker config
        ("abc", ConfigOp("log.retention.ms", "7"), Err.INVALID_REQUEST),
    ],
)
def test_broker_config_refusals(name: str, op: ConfigOp, code: int) -> None:
    c = cluster()
    [out] = c.alter_configs([broker(name, op)], incremental=True)
    assert out.error_code == code, out.message
    assert c.records == [] and c.image.broker_configs == {}


def test_unsupported_resource_type_is_an_invalid_request() -> None:
    c = cluster()
    [out] = c.alter_configs([ConfigChange(8, "x", (ConfigOp("a", "b"),))], incremental=True)
    assert out.error_code == Err.INVALID_REQUEST


def test_records_round_trip_through_json_replay_and_snapshot() -> None:
    c = cluster()
    c.alter_configs(
        [topic(ConfigOp("retention.ms", "9")), broker("", ConfigOp("log.retention.bytes", "77"))], incremental=True
    )
    for r in c.records:
        kind, data = to_json(r)
        assert from_json(kind, data) == r
    replayed = Controller.replay(_full_log(c), session_timeout_ms=1000)
    assert replayed.topics["t"].configs == {"retention.ms": "9"}
    assert replayed.image.broker_configs == {"": {"log.retention.bytes": "77"}}
    fresh = ClusterImage()
    for r in c.image.snapshot():
        fresh.apply(r)
    assert fresh.topics["t"].configs == {"retention.ms": "9"}
    assert fresh.broker_configs == {"": {"log.retention.bytes": "77"}}


def _full_log(c: Controller) -> list[MetadataRecord]:
    """The whole record history of ``cluster()`` plus what ``c`` recorded since (cluster() cleared it)."""
    base = Controller(session_timeout_ms=1000)
    for b in (1, 2, 3):
        base.register_broker(b, 0)
    base.create_topic("t", 1, 3)
    return [*base.records, *c.records]


def test_a_config_for_a_deleted_topic_applies_as_nothing() -> None:
    img = ClusterImage()
    applied = img.apply(ConfigRecord(TOPIC, "gone", "retention.ms", "1"))
    assert applied.configs == [] and "gone" not in img.topics


def _offline(c: Controller) -> None:
    """Broker 1 leads with ISR {1}; then 1 dies: the partition has no leader, 2 and 3 are out of sync."""
    st = c.topics["t"].partitions[0]
    code, _ = c.alter_partition(AlterIsr("t", 0, 1, st.leader_epoch, frozenset({1}), st.partition_epoch))
    assert code == 0
    c.heartbeat(2, 900)
    c.heartbeat(3, 900)
    c.tick(1500)  # broker 1 missed its heartbeats
    assert c.topics["t"].partitions[0].leader == NO_LEADER


def test_turning_unclean_election_on_elects_a_leaderless_partition() -> None:
    c = cluster()
    _offline(c)
    epoch = c.topics["t"].partitions[0].leader_epoch
    c.records.clear()
    c.alter_configs([topic(ConfigOp("unclean.leader.election.enable", "true"))], incremental=True)
    st = c.topics["t"].partitions[0]
    assert st.leader in (2, 3) and st.leader_epoch == epoch + 1 and st.isr == frozenset({st.leader})
    assert any(isinstance(r, UncleanElection) for r in c.records)


def test_cluster_default_unclean_elects_too_but_a_topic_override_off_wins() -> None:
    c = cluster()
    _offline(c)
    c.alter_configs([topic(ConfigOp("unclean.leader.election.enable", "false"))], incremental=True)
    c.alter_configs([broker("", ConfigOp("unclean.leader.election.enable", "true"))], incremental=True)
    assert c.topics["t"].partitions[0].leader == NO_LEADER
    c.alter_configs([topic(ConfigOp("unclean.leader.election.enable", None, DELETE))], incremental=True)
    assert c.topics["t"].partitions[0].leader in (2, 3)


def test_validate_only_unclean_does_not_elect() -> None:
    c = cluster()
    _offline(c)
    c.alter_configs([topic(ConfigOp("unclean.leader.election.enable", "true"))], incremental=True, validate_only=True)
    assert c.topics["t"].partitions[0].leader == NO_LEADER
