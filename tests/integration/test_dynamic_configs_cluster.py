"""Dynamic configs on three brokers and a quorum of three controllers, real processes on 127.0.0.1: a change
survives the active controller's kill -9 and a restart of every node, per-broker min.insync.replicas
applies on the leader at once, and turning unclean election on elects a leader for an offline partition."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

from epochlog.client.configs import TOPIC
from epochlog.client.configs import describe as wire_describe
from epochlog.client.wire import Connection
from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import create_topic, leader_epoch, partition_info, wait_until

SET, APPEND, DELETE = AlterConfigOpType.SET, AlterConfigOpType.APPEND, AlterConfigOpType.DELETE


def alter(bootstrap: str, rtype: ResourceType, name: str, ops: dict[str, tuple[AlterConfigOpType, str | None]]) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    res = ConfigResource(
        rtype, name, incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, (op, v) in ops.items()]
    )
    a.incremental_alter_configs([res], request_timeout=30)[res].result(40)


def topic_config(lc: LocalCluster, broker_id: int, topic: str) -> dict[str, tuple[str | None, str]]:
    """(value, source) per config, as one broker's own metadata image answers DescribeConfigs."""
    rows = wire_describe(f"127.0.0.1:{lc.broker(broker_id).port}", TOPIC, topic, timeout=10)
    return {r.name: (r.value, r.source) for r in rows}


def on_every_broker(lc: LocalCluster, topic: str, name: str, value: str) -> bool:
    return all(topic_config(lc, b, topic)[name][0] == value for b in lc.broker_ids() if lc.broker(b).alive)


def acks_all(bootstrap: str, topic: str) -> KafkaError | None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 5000, "retries": 0})
    errs: list[KafkaError | None] = []
    p.produce(topic, b"x", on_delivery=lambda err, _m: errs.append(err))
    p.flush(15)
    return errs[0] if errs else KafkaError(KafkaError._TIMED_OUT)


@pytest.mark.long  # 28 s of restarts; the default run keeps the cluster's other dynamic-config cases
def test_configs_survive_controller_failover_and_a_full_restart(quorum_cluster: LocalCluster) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    create_topic(bs, "kept", 1, 3, {})
    alter(bs, ResourceType.TOPIC, "kept", {"cleanup.policy": (SET, "compact"), "retention.ms": (SET, "123000")})
    wait_until(lambda: on_every_broker(lc, "kept", "retention.ms", "123000"), 10, "every broker to apply it")
    active = lc.active_controller()
    lc.kill9(active.name)
    wait_until(lambda: lc.active_controller().node_id != active.node_id, 30, "a new active controller")
    # APPEND starts from the value the new active controller holds: had it lost "compact", this would be
    # "delete" alone.
    alter(bs, ResourceType.TOPIC, "kept", {"cleanup.policy": (APPEND, "delete")})
    wait_until(lambda: on_every_broker(lc, "kept", "cleanup.policy", "compact,delete"), 10, "the appended policy")
    lc.start_node(active.name)
    for n in [*lc.controller_nodes(), *(lc.broker(b) for b in lc.broker_ids())]:
        lc.stop_node(n.name)
    for n in lc.controller_nodes():
        lc.start_node(n.name)
    for b in lc.broker_ids():
        lc.start_node(f"broker-{b}")
    for b in lc.broker_ids():
        got = topic_config(lc, b, "kept")
        assert got["retention.ms"] == ("123000", "DYNAMIC_TOPIC_CONFIG"), (b, got["retention.ms"])
        assert got["cleanup.policy"] == ("compact,delete", "DYNAMIC_TOPIC_CONFIG"), (b, got["cleanup.policy"])


def test_per_broker_min_insync_replicas_fails_acks_all_on_the_leader_without_restart(
    quorum_cluster: LocalCluster,
) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    create_topic(bs, "guarded", 1, 2, {})
    leader = wait_until(lambda: max(partition_info(bs, "guarded")[0], 0), 15, "a leader")
    wait_until(lambda: len(partition_info(bs, "guarded")[2]) == 2, 15, "both replicas in sync")
    assert acks_all(bs, "guarded") is None
    # On the leader's broker resource (confluent-kafka sends it to that broker, which forwards it).
    alter(bs, ResourceType.BROKER, str(leader), {"min.insync.replicas": (SET, "3")})
    err = acks_all(bs, "guarded")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    assert topic_config(lc, leader, "guarded")["min.insync.replicas"] == ("3", "DYNAMIC_BROKER_CONFIG")
    alter(bs, ResourceType.BROKER, str(leader), {"min.insync.replicas": (DELETE, None)})
    assert acks_all(bs, "guarded") is None
    # Another broker refuses to alter the leader's own configs, as Kafka's do: clients send them to it.
    other = next(b for b in lc.broker_ids() if b != leader)
    req = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=4,
                resource_name=str(leader),
                configs=(AlterableConfig(name="min.insync.replicas", config_operation=0, value="3"),),
            ),
        ),
        validate_only=False,
    )
    with Connection("127.0.0.1", lc.broker(other).port, timeout=10) as conn:
        row = conn.request(req).responses[0]
    assert int(row.error_code) == KafkaError.INVALID_REQUEST and "Unexpected broker id" in row.error_message
    assert acks_all(bs, "guarded") is None
    alter(bs, ResourceType.TOPIC, "guarded", {"min.insync.replicas": (SET, "3")})
    # Any broker may have taken the topic's change; the leader applies it when its metadata shows it.
    wait_until(lambda: on_every_broker(lc, "guarded", "min.insync.replicas", "3"), 10, "every broker to apply it")
    err = acks_all(bs, "guarded")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err


def test_turning_unclean_election_on_elects_a_leader_for_an_offline_partition(quorum_cluster: LocalCluster) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    create_topic(bs, "fragile", 1, 2, {})
    leader, replicas, _isr = wait_until(
        lambda: partition_info(bs, "fragile")[0] >= 0 and partition_info(bs, "fragile"), 15, "a leader"
    )
    follower = next(r for r in replicas if r != leader)
    lc.kill9(f"broker-{follower}")
    wait_until(lambda: partition_info(bs, "fragile")[2] == [leader], 20, "the follower to leave the ISR")
    lc.kill9(f"broker-{leader}")
    wait_until(lambda: leader_epoch(bs, "fragile")[0] == -1, 20, "the partition to go offline")
    epoch = leader_epoch(bs, "fragile")[1]
    lc.start_node(f"broker-{follower}")
    time.sleep(2)  # the out-of-sync follower is back, yet with unclean election off it must not lead
    assert leader_epoch(bs, "fragile")[0] == -1
    alter(bs, ResourceType.TOPIC, "fragile", {"unclean.leader.election.enable": (SET, "true")})
    _leader, new_epoch = wait_until(
        lambda: leader_epoch(bs, "fragile")[0] == follower and leader_epoch(bs, "fragile"), 15, "an unclean election"
    )
    assert new_epoch > epoch
    assert acks_all(bs, "fragile") is None
