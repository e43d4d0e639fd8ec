"""The per-API checks on a real node with StandardAuthorizer on: ACLs handed to the authorizer directly
(so these checks do not depend on the ACL APIs), requests over 127.0.0.1 as User:ANONYMOUS. Each case
grants what the API needs but one thing and checks the refusal, that the refusal tells nothing (no names,
offsets, configs, not even whether the resource exists), and that the same request succeeds once the
missing ACL is there."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.security.acl import Operation, PatternType, Permission, ResourceType
from tests.integration.authz_node import EVERYTHING, AuthzNode, acl
from tests.integration.cluster_helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
CLUSTER_NAME = "kafka-cluster"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthzNode]:
    n = AuthzNode(Path(tmp_path_factory.mktemp("authz")) / "data").start()
    try:
        yield n
    finally:
        n.stop()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(node: AuthzNode, name: str, partitions: int = 2) -> None:
    node.set_acls(EVERYTHING)
    resp = node.request(
        19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout": 15000}
    )
    assert int(resp.topics[0].error_code) == 0, resp
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = node.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        parts = md.topics[0].partitions
        if len(parts) == partitions and all(p.leader_id >= 0 for p in parts):
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} has no leaders")


def _produce(node: AuthzNode, topic: str, partitions: list[int], txn: str | None = None, values: int = 1) -> Any:
    batch = build_batch([(None, b"v%d" % i) for i in range(values)])
    return node.request(
        0,
        9,
        {
            "transactional_id": txn,
            "acks": -1,
            "timeout": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch} for p in partitions]}],
        },
    )


def _codes(rows: Any, field: str = "error_code") -> list[int]:
    return [int(getattr(r, field)) for r in rows]


# -- Produce ---------------------------------------------------------------------------------------


def test_produce_needs_topic_write_checked_before_existence(node: AuthzNode) -> None:
    topic = _name("p")
    _create(node, topic)
    node.set_acls([acl(TOPIC, topic, Operation.READ)])  # READ does not give WRITE
    resp = _produce(node, topic, [0, 1, 7])
    (row,) = resp.responses
    assert _codes(row.partition_responses) == [Err.TOPIC_AUTHORIZATION_FAILED] * 3
    assert all(r.base_offset == -1 for r in row.partition_responses)
    # A topic that does not exist answers exactly the same: existence does not leak.
    missing = _produce(node, _name("nope"), [0, 1, 7]).responses[0]
    assert _codes(missing.partition_responses) == _codes(row.partition_responses)

    node.set_acls([acl(TOPIC, topic[:3], Operation.WRITE, pattern=PatternType.PREFIXED)])
    resp = _produce(node, topic, [0, 1])
    assert _codes(resp.responses[0].partition_responses) == [0, 0]
    # A DENY wins over the prefixed ALLOW.
    node.set_acls(
        [
            acl(TOPIC, topic[:3], Operation.WRITE, pattern=PatternType.PREFIXED),
            acl(TOPIC, topic, Operation.WRITE, Permission.DENY),
        ]
    )
    assert _codes(_produce(node, topic, [0]).responses[0].partition_responses) == [Err.TOPIC_AUTHORIZATION_FAILED]


def test_transactional_produce_needs_the_transactional_id(node: AuthzNode) -> None:
    topic = _name("ptx")
    _create(node, topic)
    node.set_acls([acl(TOPIC, topic, Operation.WRITE)])
    resp = _produce(node, topic, [0, 1], txn="tx-1")
    assert _codes(resp.responses[0].partition_responses) == [Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 2


# -- Fetch -----------------------------------------------------------------------------------------


def _fetch(node: AuthzNode, topic: str, replica_id: int = -1) -> Any:
    return node.request(
        1,
        12,
        {
            "replica_id": replica_id,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
            ],
        },
    )


def test_fetch_needs_topic_read_and_followers_cluster_action(node: AuthzNode) -> None:
    topic = _name("f")
    _create(node, topic, 1)
    node.set_acls([acl(TOPIC, topic, Operation.WRITE)])
    assert _codes(_produce(node, topic, [0], values=3).responses[0].partition_responses) == [0]

    node.set_acls([acl(TOPIC, topic, Operation.DESCRIBE)])  # DESCRIBE is not READ
    (row,) = _fetch(node, topic).responses[0].partitions
    assert int(row.error_code) == Err.TOPIC_AUTHORIZATION_FAILED
    assert row.high_watermark == -1 and not row.records
    missing = _fetch(node, _name("nope")).responses[0].partitions[0]
    assert int(missing.error_code) == Err.TOPIC_AUTHORIZATION_FAILED and missing.high_watermark == -1

    node.set_acls([acl(TOPIC, topic, Operation.READ)])
    (row,) = _fetch(node, topic).responses[0].partitions
    assert int(row.error_code) == 0 and row.high_watermark == 3 and row.records

    # A follower's fetch (replica_id >= 0) needs CLUSTER_ACTION, whatever it may read as a consumer.
    node.set_acls([acl(TOPIC, "*", Operation.ALL)])
    (row,) = _fetch(node, topic, replica_id=7).responses[0].partitions
    assert int(row.error_code) == Err.TOPIC_AUTHORIZATION_FAILED and not row.records


# -- Metadata --------------------------------------------------------------------------------------


def _metadata(node: AuthzNode, names: list[str] | None, auto: bool = False) -> Any:
    topics = None if names is None else [{"name": n} for n in names]
    return node.request(3, 12, {"topics": topics, "allow_auto_topic_creation": auto})


def test_metadata_hides_topics_and_refuses_named_ones(node: AuthzNode) -> None:
    seen, hidden = _name("seen"), _name("hidden")
    _create(node, seen, 1)
    _create(node, hidden, 1)
    node.set_acls([acl(TOPIC, seen, Operation.DESCRIBE)])
    names = {t.name for t in _metadata(node, None).topics}
    assert seen in names and hidden not in names
    resp = _metadata(node, [hidden, "never-created-topic"])
    assert _codes(resp.topics) == [Err.TOPIC_AUTHORIZATION_FAILED] * 2
    assert all(not t.partitions for t in resp.topics)
    # Broken on purpose: with DESCRIBE on every topic, the hidden one shows.
    node.set_acls([acl(TOPIC, "*", Operation.DESCRIBE)])
    assert hidden in {t.name for t in _metadata(node, None).topics}


def test_metadata_auto_creation_needs_create(node: AuthzNode) -> None:
    wanted = _name("auto")
    node.set_acls([acl(TOPIC, wanted, Operation.DESCRIBE)])
    resp = _metadata(node, [wanted], auto=True)
    assert _codes(resp.topics) == [Err.TOPIC_AUTHORIZATION_FAILED]
    # Not created behind the refusal. A topic created after it is the barrier: once that one is in the
    # broker's image, a creation the refused request had set off (sent to the controller first) is too.
    _create(node, _name("after-refusal"), 1)
    assert wanted not in node.broker.image.topics

    node.set_acls([acl(TOPIC, wanted, Operation.CREATE), acl(TOPIC, wanted, Operation.DESCRIBE)])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        resp = _metadata(node, [wanted], auto=True)
        if int(resp.topics[0].error_code) == 0:
            break
        assert int(resp.topics[0].error_code) in (Err.LEADER_NOT_AVAILABLE, Err.UNKNOWN_TOPIC_OR_PARTITION)
        time.sleep(0.1)
    assert int(resp.topics[0].error_code) == 0 and resp.topics[0].partitions


def test_acl_hosts_match_the_client_address(node: AuthzNode) -> None:
    topic = _name("host")
    _create(node, topic, 1)
    node.set_acls([acl(TOPIC, topic, Operation.DESCRIBE, host="10.9.9.9")])
    assert _codes(_metadata(node, [topic]).topics) == [Err.TOPIC_AUTHORIZATION_FAILED]
    node.set_acls([acl(TOPIC, topic, Operation.DESCRIBE, host="127.0.0.1")])
    assert _codes(_metadata(node, [topic]).topics) == [0]
    # A DENY for this address wins over an ALLOW for every address.
    node.set_acls(
        [
            acl(TOPIC, topic, Operation.DESCRIBE),
            acl(TOPIC, topic, Operation.DESCRIBE, Permission.DENY, host="127.0.0.1"),
        ]
    )
    assert _codes(_metadata(node, [topic]).topics) == [Err.TOPIC_AUTHORIZATION_FAILED]


# -- Offsets ---------------------------------------------------------------------------------------


COORDINATOR_BUSY = {Err.COORDINATOR_LOAD_IN_PROGRESS, Err.COORDINATOR_NOT_AVAILABLE, Err.NOT_COORDINATOR}


def _commit(node: AuthzNode, group: str, topic: str) -> Any:
    # The first commit makes __consumer_offsets: retried until its coordinator is up.
    deadline = time.monotonic() + 20
    while True:
        resp = _commit_once(node, group, topic)
        if int(resp.topics[0].partitions[0].error_code) not in COORDINATOR_BUSY or time.monotonic() > deadline:
            return resp
        node.request(10, 3, {"key": group, "key_type": 0})
        time.sleep(0.2)


def _commit_once(node: AuthzNode, group: str, topic: str) -> Any:
    return node.request(
        8,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
        },
    )


def _offset_fetch(node: AuthzNode, group: str, topics: list[str] | None) -> Any:
    wanted = None if topics is None else [{"name": t, "partition_indexes": [0]} for t in topics]
    return node.request(9, 8, {"groups": [{"group_id": group, "topics": wanted}]}).groups[0]


def test_offset_commit_and_fetch_need_group_then_topic(node: AuthzNode) -> None:
    topic, other = _name("oc"), _name("oc-other")
    _create(node, topic, 1)
    _create(node, other, 1)
    group = _name("g")
    # Committed while everything is allowed: a second topic the principal will not be allowed to see.
    assert _codes(_commit(node, group, other).topics[0].partitions) == [0]

    node.set_acls([acl(TOPIC, topic, Operation.READ)])
    assert _codes(_commit(node, group, topic).topics[0].partitions) == [Err.GROUP_AUTHORIZATION_FAILED]
    node.set_acls([acl(GROUP, group, Operation.READ)])
    assert _codes(_commit(node, group, topic).topics[0].partitions) == [Err.TOPIC_AUTHORIZATION_FAILED]
    node.set_acls([acl(GROUP, group, Operation.READ), acl(TOPIC, topic, Operation.READ)])
    assert _codes(_commit(node, group, topic).topics[0].partitions) == [0]

    # OffsetFetch: Group DESCRIBE (READ implies it), then Topic DESCRIBE.
    node.set_acls([acl(TOPIC, "*", Operation.ALL)])
    g = _offset_fetch(node, group, [topic])
    assert int(g.error_code) == Err.GROUP_AUTHORIZATION_FAILED and not g.topics
    node.set_acls([acl(GROUP, group, Operation.READ), acl(TOPIC, topic, Operation.READ)])
    g = _offset_fetch(node, group, [topic, other])
    rows = {t.name: t.partitions[0] for t in g.topics}
    assert rows[topic].committed_offset == 5 and int(rows[topic].error_code) == 0
    assert int(rows[other].error_code) == Err.TOPIC_AUTHORIZATION_FAILED and rows[other].committed_offset == -1
    # Every committed topic: the undescribable one is left out altogether.
    g = _offset_fetch(node, group, None)
    assert [t.name for t in g.topics] == [topic]
    node.set_acls([acl(GROUP, group, Operation.READ), acl(TOPIC, "*", Operation.DESCRIBE)])
    assert sorted(t.name for t in _offset_fetch(node, group, None).topics) == sorted([topic, other])


# -- CreateTopics ----------------------------------------------------------------------------------


def test_create_topics_needs_cluster_or_topic_create(node: AuthzNode) -> None:
    allowed, refused = _name("ct-ok"), _name("ct-no")
    node.set_acls([acl(TOPIC, "ct-ok", Operation.CREATE, pattern=PatternType.PREFIXED)])
    resp = node.request(
        19,
        7,
        {
            "topics": [{"name": n, "num_partitions": 1, "replication_factor": 1} for n in (allowed, refused)],
            "timeout": 15000,
        },
    )
    rows = {t.name: t for t in resp.topics}
    assert int(rows[allowed].error_code) == 0
    # Created, but its configs are not shown without DESCRIBE_CONFIGS.
    assert int(rows[allowed].topic_config_error_code) == Err.TOPIC_AUTHORIZATION_FAILED and not rows[allowed].configs
    assert int(rows[refused].error_code) == Err.TOPIC_AUTHORIZATION_FAILED
    # Both would come in the same metadata records: once the allowed one is in the image, so would the other.
    wait_until(lambda: allowed in node.broker.image.topics, 15, f"{allowed} in the broker's image")
    assert refused not in node.broker.image.topics

    name = _name("ct-cluster")
    node.set_acls([acl(CLUSTER, CLUSTER_NAME, Operation.CREATE), acl(TOPIC, name, Operation.ALTER_CONFIGS)])
    resp = node.request(19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}]})
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS: no config error this time.
    assert int(resp.topics[0].error_code) == 0 and int(resp.topics[0].topic_config_error_code) == 0


# -- DescribeConfigs -------------------------------------------------------------------------------


def test_describe_configs_needs_describe_configs(node: AuthzNode) -> None:
    topic = _name("dc")
    _create(node, topic, 1)
    node.set_acls([acl(TOPIC, topic, Operation.ALL, Permission.DENY), acl(TOPIC, "*", Operation.DESCRIBE)])
    resources = [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": None},
        {"resource_type": 2, "resource_name": "never-created-topic", "configuration_keys": None},
        {"resource_type": 4, "resource_name": str(node.broker_config.node_id), "configuration_keys": None},
    ]
    resp = node.request(32, 4, {"resources": resources})
    assert _codes(resp.results) == [
        Err.TOPIC_AUTHORIZATION_FAILED,
        Err.TOPIC_AUTHORIZATION_FAILED,
        Err.CLUSTER_AUTHORIZATION_FAILED,
    ]
    assert all(not r.configs for r in resp.results)

    node.set_acls(
        [acl(TOPIC, topic, Operation.DESCRIBE_CONFIGS), acl(CLUSTER, CLUSTER_NAME, Operation.DESCRIBE_CONFIGS)]
    )
    resp = node.request(32, 4, {"resources": [resources[0], resources[2]]})
    assert _codes(resp.results) == [0, 0] and all(r.configs for r in resp.results)


# -- InitProducerId --------------------------------------------------------------------------------


def _init_pid(node: AuthzNode, txn: str | None = None) -> Any:
    return node.request(
        22, 4, {"transactional_id": txn, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    )


def test_init_producer_id_idempotent_and_transactional(node: AuthzNode) -> None:
    node.set_acls([acl(TOPIC, "*", Operation.READ)])
    assert int(_init_pid(node).error_code) == Err.CLUSTER_AUTHORIZATION_FAILED
    # KIP-679: WRITE on any one topic is enough...
    node.set_acls([acl(TOPIC, "some-topic", Operation.WRITE)])
    resp = _init_pid(node)
    assert int(resp.error_code) == 0 and resp.producer_id >= 0
    # ...unless a wildcard DENY covers every topic.
    node.set_acls(
        [
            acl(TOPIC, "some-topic", Operation.WRITE),
            acl(TOPIC, "", Operation.WRITE, Permission.DENY, PatternType.PREFIXED),
        ]
    )
    assert int(_init_pid(node).error_code) == Err.CLUSTER_AUTHORIZATION_FAILED
    node.set_acls([acl(CLUSTER, CLUSTER_NAME, Operation.IDEMPOTENT_WRITE)])
    assert int(_init_pid(node).error_code) == 0

    node.set_acls(
        [acl(CLUSTER, CLUSTER_NAME, Operation.ALL), acl(TXN, "tx-", Operation.DESCRIBE, pattern=PatternType.PREFIXED)]
    )
    resp = _init_pid(node, "tx-a")
    assert int(resp.error_code) == Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and resp.producer_id == -1


# -- the rest, briefly: one refusal each --------------------------------------------------------------


def test_cluster_level_apis_refused_without_cluster_acls(node: AuthzNode) -> None:
    node.set_acls([acl(TOPIC, "*", Operation.ALL), acl(GROUP, "*", Operation.ALL)])
    resp = node.request(35, 4, {"topics": None})
    assert int(resp.error_code) == Err.CLUSTER_AUTHORIZATION_FAILED and not resp.results
    resp = node.request(46, 0, {"topics": None})
    assert int(resp.error_code) == Err.CLUSTER_AUTHORIZATION_FAILED and not resp.topics
    resp = node.request(43, 2, {"election_type": 0, "topic_partitions": None})
    assert int(resp.error_code) == Err.CLUSTER_AUTHORIZATION_FAILED
    # ListGroups: without Cluster DESCRIBE, filtered by Group DESCRIBE.
    node.set_acls([acl(GROUP, "*", Operation.ALL, Permission.DENY)])
    assert not node.request(16, 4, {}).groups


def test_no_acls_at_all_deny_everything(node: AuthzNode) -> None:
    # With the authorizer on and no ACL at all (allow.everyone.if.no.acl.found=false), nothing passes.
    node.set_acls([])
    assert _codes(_metadata(node, ["anything"]).topics) == [Err.TOPIC_AUTHORIZATION_FAILED]
    assert not _metadata(node, None).topics
