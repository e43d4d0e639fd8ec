"""A reassignment survives the active controller's kill -9: the state is in the metadata log (adding and
removing replicas on the partition records), so the next active controller lists it and completes it
once the joining replica catches up. Three controllers and three brokers, real processes on 127.0.0.1."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import partition_info, wait_until
from tests.integration.helpers import produce

pytestmark = pytest.mark.timeout(240)


def test_new_active_controller_continues_a_reassignment(quorum_cluster: LocalCluster) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30000)
    try:
        a.create_topics({"kept-moving": {"assignments": {0: [1, 2]}}})
        wait_until(lambda: partition_info(bs, "kept-moving")[2] == [1, 2], 20, "the topic in sync")
        produce(bs, "kept-moving", [b"v%d" % i for i in range(500)], {"acks": "all"})
        lc.stop_node("broker-3")  # the joining replica is down: the move cannot complete yet
        tp = KTP("kept-moving", 0)
        assert a.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
        expected = {tp: {"replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}}
        assert a.list_partition_reassignments() == expected
        active = lc.active_controller()
        lc.kill9(active.name)
        wait_until(lambda: lc.active_controller().node_id != active.node_id, 30, "a new active controller")
        wait_until(lambda: a.list_partition_reassignments() == expected, 30, "the new controller to list it")
        lc.start_node("broker-3")
        wait_until(lambda: a.list_partition_reassignments() == {}, 60, "the new controller to complete it")
    finally:
        a.close()
    wait_until(lambda: partition_info(bs, "kept-moving")[1] == [2, 3], 15, "replicas [2, 3] in Metadata")
    assert partition_info(bs, "kept-moving")[0] == 2  # the leader (1) left
    wait_until(lambda: not (lc.data_dir / "broker-1" / "kept-moving-0").exists(), 15, "broker 1 to drop its log")
