"""The ACL matrix: every API the broker serves (server/dispatch.py's table), what it needs, what it answers
without it, and that the refusal tells the caller nothing.

Each case names its needs; a need is one or more alternative ACLs (Cluster CREATE or Topic CREATE...) and
the error the API answers without it. For each need, the case grants every other need and checks the
refusal: the need's error among the answer's codes and nothing of the world in the answer (no secret
topic, record, committed metadata; per-case checks for offsets, configs...). Then each alternative is
granted with the rest and no authorization error may remain. With no ACL at all some authorization error
must show (APIs without a check: none).

The requests go as User:ANONYMOUS over plaintext with the raw wire client. ``acl_backend`` grants ACLs to
that principal and runs the world's set-up: by default a real node whose admin (SCRAM, a super user)
grants with CreateAcls/DeleteAcls; EPOCHLOG_ACL_MATRIX_BACKEND=in-process hands the ACLs to the
authorizer of a node in this process instead (tests/integration/authz_node.py)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from epochlog.client import describe_transactions_wire
from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.security.acl import AclBinding, Operation, ResourceType
from tests.integration.authz_node import EVERYTHING, AuthzNode, acl, controller_over_sasl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# "process" (default): a real `epochlog up` process; ACLs granted with CreateAcls/DeleteAcls by an admin
# (SCRAM over SASL_PLAINTEXT, a super user). "in-process": the authorizer of a node in this process handed
# the ACLs directly (quicker, and independent of the ACL APIs).
BACKEND = os.environ.get("EPOCHLOG_ACL_MATRIX_BACKEND", "process")

T29, G30, C31, X53 = (
    Err.TOPIC_AUTHORIZATION_FAILED,
    Err.GROUP_AUTHORIZATION_FAILED,
    Err.CLUSTER_AUTHORIZATION_FAILED,
    Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
AUTH_CODES = {int(T29), int(G30), int(C31), int(X53)}
SECRET_PAYLOAD = "SECRET-PAYLOAD"
SECRET_META = "SECRET-META"
COORDINATOR_BUSY = {14, 15, 16}


# -- the world each case runs in ----------------------------------------------------------------------


@dataclass
class World:
    """A topic with records and a committed offset, a group, a transactional id with a producer id, and a
    secret topic (records, commits) no case ever names: none of it may show in a refusal."""

    topic: str
    secret: str
    group: str
    txn: str
    new_topic: str
    node_id: int
    topic_id: Any = None
    pid: int = -1
    epoch: int = -1


Resource = tuple[str, Operation]  # ("topic" | "new" | "group" | "share" | "txn" | "cluster", operation)


def _resolve(w: World, res: Resource) -> AclBinding:
    kind, op = res
    rtype, name = {
        "topic": (ResourceType.TOPIC, w.topic),
        "new": (ResourceType.TOPIC, w.new_topic),
        "group": (ResourceType.GROUP, w.group),
        "share": (ResourceType.GROUP, w.group + "-share"),
        "txn": (ResourceType.TRANSACTIONAL_ID, w.txn),
        "cluster": (ResourceType.CLUSTER, "kafka-cluster"),
    }[kind]
    return acl(rtype, name, op)


@dataclass(frozen=True)
class Need:
    code: int
    alternatives: tuple[Resource, ...]


def need(code: int, *alternatives: Resource) -> Need:
    return Need(int(code), alternatives)


@dataclass(frozen=True)
class Case:
    id: str
    api: int
    version: int
    body: Callable[[World], dict[str, Any]]
    codes: Callable[[Any, World], list[int]]
    needs: tuple[Need, ...] = ()
    quiet: Callable[[Any, World], None] = field(default=lambda r, w: None)
    # For a response kio cannot read: (frame, correlation id) -> the response.
    decode: Callable[[bytes, int], Any] | None = None


# -- where each answer keeps its error codes ------------------------------------------------------------


def top(resp: Any, w: World) -> list[int]:
    return [int(resp.error_code)]


def nested(*path: str, code: str = "error_code", with_top: bool = False) -> Callable[[Any, World], list[int]]:
    """Codes at the end of a path of lists: nested("responses", "partition_responses")."""

    def get(resp: Any, w: World) -> list[int]:
        level = [resp]
        for attr in path:
            level = [x for obj in level for x in (getattr(obj, attr) or ())]
        out = [int(getattr(x, code)) for x in level]
        return ([int(resp.error_code)] if with_top else []) + out

    return get


def listed(getter: Callable[[Any, World], list[str]], want: Callable[[World], str], code: int) -> Any:
    """A filtering API: ``code`` stands for the wanted item missing from the listing."""

    def get(resp: Any, w: World) -> list[int]:
        return [0 if want(w) in getter(resp, w) else int(code)]

    return get


# -- per-case "learns nothing" checks ------------------------------------------------------------------


def _empty(value: Any) -> bool:
    return value in (-1, None, b"", "", (), []) or value == uuid.UUID(int=0)


def no_offsets(*path: str, fields: tuple[str, ...]) -> Callable[[Any, World], None]:
    def check(resp: Any, w: World) -> None:
        level = [resp]
        for attr in path:
            level = [x for obj in level for x in (getattr(obj, attr) or ())]
        for row in level:
            if int(row.error_code) in AUTH_CODES:
                for f in fields:
                    assert _empty(getattr(row, f)), (f, row)

    return check


def no_configs(resp: Any, w: World) -> None:
    for r in resp.results:
        if int(r.error_code) in AUTH_CODES:
            assert not r.configs


def no_members(resp: Any, w: World) -> None:
    assert not getattr(resp, "members", ()) and getattr(resp, "generation_id", -1) == -1


def no_coordinator(resp: Any, w: World) -> None:
    for c in resp.coordinators:
        if int(c.error_code) in AUTH_CODES:
            assert c.node_id == -1 and c.port == -1 and not c.host


def no_group_detail(resp: Any, w: World) -> None:
    for g in resp.groups:
        if int(g.error_code) in AUTH_CODES:
            assert not g.members and not g.protocol_type and not g.group_state


def nameless_by_id(resp: Any, w: World) -> None:
    for r in resp.responses:
        if int(r.error_code) in AUTH_CODES:
            assert r.name in (None, ""), "a topic id must not reveal the topic's name"


def no_assignment(resp: Any, w: World) -> None:
    if int(resp.error_code) in AUTH_CODES:
        assert resp.assignment is None and resp.member_epoch in (-1, 0), resp


def no_modern_group_detail(resp: Any, w: World) -> None:
    for g in resp.groups:
        if int(g.error_code) in AUTH_CODES:
            assert not g.members and g.group_epoch in (-1, 0), g


def no_share_offsets(resp: Any, w: World) -> None:
    for g in resp.groups:
        if int(g.error_code) in AUTH_CODES:
            assert not g.topics, g


def no_share_state(resp: Any, w: World) -> None:
    for t in resp.results:
        for row in t.partitions:
            if int(row.error_code) in AUTH_CODES:
                assert int(row.start_offset) == -1 and not getattr(row, "state_batches", ()), row


def share_state(w: World, group_suffix: str, **partition: Any) -> dict[str, Any]:
    """A share-state request (83-87) for partition 0 of the world's topic."""
    return {"group_id": w.group + group_suffix, "topics": [{"topic_id": w.topic_id, "partitions": [partition]}]}


def no_txn_detail(rows: Any, w: World) -> None:
    for t in rows:
        if int(t.error_code) in AUTH_CODES:
            assert t.producer_id == -1 and not t.partitions and not t.state


# -- request bodies ------------------------------------------------------------------------------------


def _records() -> bytes:
    return build_batch([(None, SECRET_PAYLOAD.encode())])


def produce(txn: bool) -> Callable[[World], dict[str, Any]]:
    def body(w: World) -> dict[str, Any]:
        return {
            "transactional_id": w.txn if txn else None,
            "acks": -1,
            "timeout": 10000,
            "topic_data": [{"name": w.topic, "partition_data": [{"index": 0, "records": _records()}]}],
        }

    return body


def fetch(replica_id: int) -> Callable[[World], dict[str, Any]]:
    def body(w: World) -> dict[str, Any]:
        return {
            "replica_id": replica_id,
            "max_wait": 0,
            "min_bytes": 0,
            "topics": [
                {"topic": w.topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
            ],
        }

    return body


def txn_topics(w: World) -> list[dict[str, Any]]:
    return [{"name": w.topic, "partitions": [0]}]


def offset_commit_topics(w: World) -> list[dict[str, Any]]:
    return [{"name": w.topic, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]


def configs_resource(rtype: int, w: World, alter: bool = False, incremental: bool = False) -> dict[str, Any]:
    name = w.topic if rtype == 2 else str(w.node_id)
    key = "retention.ms" if rtype == 2 else "log.cleaner.backoff.ms"
    out: dict[str, Any] = {"resource_type": rtype, "resource_name": name}
    if not alter:
        out["configuration_keys"] = None
    elif incremental:
        out["configs"] = [{"name": key, "config_operation": 0, "value": "100000"}]
    else:
        out["configs"] = [{"name": key, "value": "100000"}]
    return out


def consumer_heartbeat(w: World) -> dict[str, Any]:
    return {
        "group_id": w.group,
        "member_id": uuid.uuid4().hex,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": [w.topic],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }


def share_heartbeat(w: World) -> dict[str, Any]:
    return {
        "group_id": w.group + "-share",
        "member_id": uuid.uuid4().hex,
        "member_epoch": 0,
        "rack_id": None,
        "subscribed_topic_names": [w.topic],
    }


def share_fetch(w: World) -> dict[str, Any]:
    partitions = [{"partition_index": 0, "acknowledgement_batches": []}]
    return {
        "group_id": w.group + "-share",
        "member_id": uuid.uuid4().hex,
        "share_session_epoch": 0,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "topics": [{"topic_id": w.topic_id, "partitions": partitions}],
        "forgotten_topics_data": [],
    }


def share_acknowledge(w: World) -> dict[str, Any]:
    batch = {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}
    partitions = [{"partition_index": 0, "acknowledgement_batches": [batch]}]
    return {
        "group_id": w.group + "-share",
        "member_id": uuid.uuid4().hex,
        "share_session_epoch": 1,
        "topics": [{"topic_id": w.topic_id, "partitions": partitions}],
    }


def _names(*path: str) -> Callable[[Any, World], list[str]]:
    def get(resp: Any, w: World) -> list[str]:
        level = [resp]
        for attr in path[:-1]:
            level = [x for obj in level for x in (getattr(obj, attr) or ())]
        return [getattr(x, path[-1]) for x in level]

    return get


CASES: list[Case] = [
    Case(
        "produce",
        0,
        9,
        produce(False),
        nested("responses", "partition_responses"),
        (need(T29, ("topic", Operation.WRITE)),),
        no_offsets("responses", "partition_responses", fields=("base_offset", "log_start_offset")),
    ),
    Case(
        "produce-transactional",
        0,
        9,
        produce(True),
        nested("responses", "partition_responses"),
        (need(X53, ("txn", Operation.WRITE)), need(T29, ("topic", Operation.WRITE))),
        no_offsets("responses", "partition_responses", fields=("base_offset", "log_start_offset")),
    ),
    Case(
        "fetch-consumer",
        1,
        12,
        fetch(-1),
        nested("responses", "partitions"),
        (need(T29, ("topic", Operation.READ)),),
        no_offsets("responses", "partitions", fields=("high_watermark", "log_start_offset", "records")),
    ),
    Case(
        "fetch-follower",
        1,
        12,
        fetch(99),
        nested("responses", "partitions"),
        (need(T29, ("cluster", Operation.CLUSTER_ACTION)),),
        no_offsets("responses", "partitions", fields=("high_watermark", "log_start_offset", "records")),
    ),
    Case(
        "list-offsets",
        2,
        7,
        lambda w: {"topics": [{"name": w.topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        nested("topics", "partitions"),
        (need(T29, ("topic", Operation.DESCRIBE)),),
        no_offsets("topics", "partitions", fields=("offset", "leader_epoch")),
    ),
    Case(
        "metadata-named",
        3,
        12,
        lambda w: {"topics": [{"name": w.topic}], "allow_auto_topic_creation": False},
        nested("topics"),
        (need(T29, ("topic", Operation.DESCRIBE)),),
        no_offsets("topics", fields=("partitions", "topic_id")),
    ),
    Case(
        "metadata-all",
        3,
        12,
        lambda w: {"topics": None, "allow_auto_topic_creation": False},
        listed(_names("topics", "name"), lambda w: w.topic, T29),
        (need(T29, ("topic", Operation.DESCRIBE)),),
    ),
    Case(
        "describe-topic-partitions-named",
        75,
        0,
        lambda w: {"topics": [{"name": w.topic}], "response_partition_limit": 2000, "cursor": None},
        nested("topics"),
        (need(T29, ("topic", Operation.DESCRIBE)),),
        no_offsets("topics", fields=("partitions", "topic_id")),
    ),
    Case(
        "describe-topic-partitions-all",
        75,
        0,
        lambda w: {"topics": [], "response_partition_limit": 2000, "cursor": None},
        listed(_names("topics", "name"), lambda w: w.topic, T29),
        (need(T29, ("topic", Operation.DESCRIBE)),),
    ),
    Case(
        "metadata-auto-create",
        3,
        12,
        lambda w: {"topics": [{"name": w.new_topic}], "allow_auto_topic_creation": True},
        nested("topics"),
        (need(T29, ("new", Operation.DESCRIBE)), need(T29, ("cluster", Operation.CREATE), ("new", Operation.CREATE))),
        no_offsets("topics", fields=("partitions", "topic_id")),
    ),
    Case(
        "offset-commit",
        8,
        8,
        lambda w: {
            "group_id": w.group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": offset_commit_topics(w),
        },
        nested("topics", "partitions"),
        (need(G30, ("group", Operation.READ)), need(T29, ("topic", Operation.READ))),
    ),
    Case(
        "offset-fetch-named",
        9,
        8,
        lambda w: {"groups": [{"group_id": w.group, "topics": [{"name": w.topic, "partition_indexes": [0]}]}]},
        lambda r, w: nested("groups")(r, w) + nested("groups", "topics", "partitions")(r, w),
        (need(G30, ("group", Operation.DESCRIBE)), need(T29, ("topic", Operation.DESCRIBE))),
        no_offsets("groups", "topics", "partitions", fields=("committed_offset", "metadata")),
    ),
    Case(
        "offset-fetch-all",
        9,
        8,
        lambda w: {"groups": [{"group_id": w.group, "topics": None}]},
        lambda r, w: nested("groups")(r, w) + listed(_names("groups", "topics", "name"), lambda w: w.topic, T29)(r, w),
        (need(G30, ("group", Operation.DESCRIBE)), need(T29, ("topic", Operation.DESCRIBE))),
    ),
    Case(
        "find-coordinator-group",
        10,
        4,
        lambda w: {"key_type": 0, "coordinator_keys": [w.group]},
        nested("coordinators"),
        (need(G30, ("group", Operation.DESCRIBE)),),
        no_coordinator,
    ),
    Case(
        "find-coordinator-txn",
        10,
        4,
        lambda w: {"key_type": 1, "coordinator_keys": [w.txn]},
        nested("coordinators"),
        (need(X53, ("txn", Operation.DESCRIBE)),),
        no_coordinator,
    ),
    Case(
        "join-group",
        11,
        9,
        lambda w: {
            "group_id": w.group,
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        top,
        (need(G30, ("group", Operation.READ)),),
        no_members,
    ),
    Case(
        "heartbeat",
        12,
        4,
        lambda w: {"group_id": w.group, "generation_id": 1, "member_id": "m"},
        top,
        (need(G30, ("group", Operation.READ)),),
    ),
    Case(
        "leave-group",
        13,
        5,
        lambda w: {"group_id": w.group, "members": [{"member_id": "m"}]},
        top,
        (need(G30, ("group", Operation.READ)),),
    ),
    Case(
        "sync-group",
        14,
        5,
        lambda w: {
            "group_id": w.group,
            "generation_id": 1,
            "member_id": "m",
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [],
        },
        top,
        (need(G30, ("group", Operation.READ)),),
        lambda r, w: None if r.assignment in (b"", None) else pytest.fail("assignment shown"),
    ),
    Case(
        "describe-groups",
        15,
        5,
        lambda w: {"groups": [w.group]},
        nested("groups"),
        (need(G30, ("group", Operation.DESCRIBE)),),
        no_group_detail,
    ),
    Case(
        "list-groups",
        16,
        4,
        lambda w: {},
        listed(_names("groups", "group_id"), lambda w: w.group, G30),
        (need(G30, ("cluster", Operation.DESCRIBE), ("group", Operation.DESCRIBE)),),
    ),
    Case("api-versions", 18, 3, lambda w: {}, top),
    Case(
        "create-topics",
        19,
        7,
        lambda w: {"topics": [{"name": w.new_topic, "num_partitions": 1, "replication_factor": 1}], "timeout": 10000},
        nested("topics"),
        (need(T29, ("cluster", Operation.CREATE), ("new", Operation.CREATE)),),
        no_offsets("topics", fields=("topic_id", "num_partitions", "replication_factor", "configs")),
    ),
    Case(
        "delete-topics-by-name",
        20,
        6,
        lambda w: {"topics": [{"name": w.topic}], "timeout": 10000},
        nested("responses"),
        (need(T29, ("cluster", Operation.DELETE), ("topic", Operation.DELETE)),),
        no_offsets("responses", fields=("topic_id",)),
    ),
    Case(
        "delete-topics-by-id",
        20,
        6,
        lambda w: {"topics": [{"name": None, "topic_id": w.topic_id}], "timeout": 10000},
        nested("responses"),
        (need(T29, ("cluster", Operation.DELETE), ("topic", Operation.DELETE)),),
        nameless_by_id,
    ),
    Case(
        "delete-records",
        21,
        2,
        lambda w: {"topics": [{"name": w.topic, "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout": 5000},
        nested("topics", "partitions"),
        (need(T29, ("topic", Operation.DELETE)),),
        no_offsets("topics", "partitions", fields=("low_watermark",)),
    ),
    Case(
        "init-producer-id-idempotent",
        22,
        4,
        lambda w: {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
        top,
        (need(C31, ("cluster", Operation.IDEMPOTENT_WRITE), ("topic", Operation.WRITE)),),
        lambda r, w: None if r.producer_id == -1 or int(r.error_code) == 0 else pytest.fail("id given"),
    ),
    Case(
        "init-producer-id-transactional",
        22,
        4,
        lambda w: {"transactional_id": w.txn, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
        top,
        (need(X53, ("txn", Operation.WRITE)),),
        lambda r, w: None if r.producer_id == -1 or int(r.error_code) == 0 else pytest.fail("id given"),
    ),
    Case(
        "offset-for-leader-epoch",
        23,
        4,
        lambda w: {
            "replica_id": -1,
            "topics": [
                {"topic": w.topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
            ],
        },
        nested("topics", "partitions"),
        (need(T29, ("topic", Operation.DESCRIBE), ("cluster", Operation.CLUSTER_ACTION)),),
        no_offsets("topics", "partitions", fields=("end_offset", "leader_epoch")),
    ),
    Case(
        "add-partitions-to-txn-v3",
        24,
        3,
        lambda w: {
            "v3_and_below_transactional_id": w.txn,
            "v3_and_below_producer_id": w.pid,
            "v3_and_below_producer_epoch": w.epoch,
            "v3_and_below_topics": txn_topics(w),
        },
        nested("results_by_topic_v3_and_below", "results_by_partition", code="partition_error_code"),
        (need(X53, ("txn", Operation.WRITE)), need(T29, ("topic", Operation.WRITE))),
    ),
    Case(
        "add-partitions-to-txn-v4",
        24,
        4,
        lambda w: {
            "transactions": [
                {
                    "transactional_id": w.txn,
                    "producer_id": w.pid,
                    "producer_epoch": w.epoch,
                    "verify_only": True,
                    "topics": txn_topics(w),
                }
            ]
        },
        nested(
            "results_by_transaction",
            "topic_results",
            "results_by_partition",
            code="partition_error_code",
            with_top=True,
        ),
        (
            need(C31, ("cluster", Operation.CLUSTER_ACTION)),
            need(X53, ("txn", Operation.WRITE)),
            need(T29, ("topic", Operation.WRITE)),
        ),
    ),
    Case(
        "add-offsets-to-txn",
        25,
        3,
        lambda w: {"transactional_id": w.txn, "producer_id": w.pid, "producer_epoch": w.epoch, "group_id": w.group},
        top,
        (need(X53, ("txn", Operation.WRITE)), need(G30, ("group", Operation.READ))),
    ),
    Case(
        "end-txn",
        26,
        3,
        lambda w: {"transactional_id": w.txn, "producer_id": w.pid, "producer_epoch": w.epoch, "committed": False},
        top,
        (need(X53, ("txn", Operation.WRITE)),),
    ),
    Case(
        "write-txn-markers",
        27,
        1,
        lambda w: {
            "markers": [
                {
                    "producer_id": 987654,
                    "producer_epoch": 0,
                    "transaction_result": False,
                    "topics": [{"name": w.topic, "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        nested("markers", "topics", "partitions"),
        (need(C31, ("cluster", Operation.CLUSTER_ACTION), ("cluster", Operation.ALTER)),),
    ),
    Case(
        "txn-offset-commit",
        28,
        3,
        lambda w: {
            "transactional_id": w.txn,
            "group_id": w.group,
            "producer_id": w.pid,
            "producer_epoch": w.epoch,
            "generation_id": -1,
            "member_id": "",
            "topics": offset_commit_topics(w),
        },
        nested("topics", "partitions"),
        (
            need(X53, ("txn", Operation.WRITE)),
            need(G30, ("group", Operation.READ)),
            need(T29, ("topic", Operation.READ)),
        ),
    ),
    Case(
        "describe-configs-topic",
        32,
        4,
        lambda w: {"resources": [configs_resource(2, w)]},
        nested("results"),
        (need(T29, ("topic", Operation.DESCRIBE_CONFIGS)),),
        no_configs,
    ),
    Case(
        "describe-configs-broker",
        32,
        4,
        lambda w: {"resources": [configs_resource(4, w)]},
        nested("results"),
        (need(C31, ("cluster", Operation.DESCRIBE_CONFIGS)),),
        no_configs,
    ),
    Case(
        "alter-configs-topic",
        33,
        2,
        lambda w: {"resources": [configs_resource(2, w, alter=True)], "validate_only": True},
        nested("responses"),
        (need(T29, ("topic", Operation.ALTER_CONFIGS)),),
    ),
    Case(
        "describe-log-dirs",
        35,
        4,
        lambda w: {"topics": None},
        top,
        (need(C31, ("cluster", Operation.DESCRIBE)),),
        lambda r, w: None if not r.results or int(r.error_code) == 0 else pytest.fail("log dirs shown"),
    ),
    Case(
        "create-partitions",
        37,
        3,
        lambda w: {
            "topics": [{"name": w.topic, "count": 3, "assignments": None}],
            "timeout": 5000,
            "validate_only": True,
        },
        nested("results"),
        (need(T29, ("topic", Operation.ALTER)),),
    ),
    Case(
        "delete-groups",
        42,
        2,
        lambda w: {"groups_names": [w.group]},
        nested("results"),
        (need(G30, ("group", Operation.DELETE)),),
    ),
    Case(
        "elect-leaders",
        43,
        2,
        lambda w: {"election_type": 0, "topic_partitions": [{"topic": w.topic, "partitions": [0]}], "timeout": 5000},
        nested("replica_election_results", "partition_result", with_top=True),
        (need(C31, ("cluster", Operation.ALTER)),),
    ),
    Case(
        "incremental-alter-configs-topic",
        44,
        1,
        lambda w: {"resources": [configs_resource(2, w, alter=True, incremental=True)], "validate_only": True},
        nested("responses"),
        (need(T29, ("topic", Operation.ALTER_CONFIGS)),),
    ),
    Case(
        "incremental-alter-configs-broker",
        44,
        1,
        lambda w: {"resources": [configs_resource(4, w, alter=True, incremental=True)], "validate_only": True},
        nested("responses"),
        (need(C31, ("cluster", Operation.ALTER_CONFIGS)),),
    ),
    Case(
        "alter-partition-reassignments",
        45,
        0,
        lambda w: {
            "timeout": 5000,
            "topics": [{"name": w.topic, "partitions": [{"partition_index": 0, "replicas": None}]}],
        },
        nested("responses", "partitions", with_top=True),
        (need(C31, ("cluster", Operation.ALTER)),),
    ),
    Case(
        "list-partition-reassignments",
        46,
        0,
        lambda w: {"timeout": 5000, "topics": None},
        top,
        (need(C31, ("cluster", Operation.DESCRIBE)),),
    ),
    Case(
        "offset-delete",
        47,
        0,
        lambda w: {"group_id": w.group, "topics": [{"name": w.topic, "partitions": [{"partition_index": 0}]}]},
        nested("topics", "partitions", with_top=True),
        (need(G30, ("group", Operation.DELETE)), need(T29, ("topic", Operation.READ))),
    ),
    Case(
        "describe-acls",
        29,
        3,
        lambda w: {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
        top,
        (need(C31, ("cluster", Operation.DESCRIBE)),),
        lambda r, w: None if int(r.error_code) == 0 or not r.resources else pytest.fail("ACLs shown"),
    ),
    Case(
        # A MATCH pattern is never stored (INVALID_REQUEST once allowed): the matrix adds no ACL of its own.
        "create-acls",
        30,
        3,
        lambda w: {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": w.topic,
                    "resource_pattern_type": 2,
                    "principal": "User:nobody",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
        nested("results"),
        (need(C31, ("cluster", Operation.ALTER)),),
    ),
    Case(
        "delete-acls",
        31,
        3,
        lambda w: {
            "filters": [
                {
                    "resource_type_filter": 2,
                    "resource_name_filter": f"no-such-{w.topic}",
                    "pattern_type_filter": 3,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
        nested("filter_results"),
        (need(C31, ("cluster", Operation.ALTER)),),
    ),
    Case(
        "describe-client-quotas",
        48,
        1,
        lambda w: {"components": [], "strict": False},
        top,
        (need(C31, ("cluster", Operation.DESCRIBE_CONFIGS)),),
        lambda r, w: None if int(r.error_code) == 0 or not r.entries else pytest.fail("quotas shown"),
    ),
    Case(
        "alter-client-quotas",
        49,
        1,
        lambda w: {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": w.group}],
                    "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}],
                }
            ],
            "validate_only": True,
        },
        nested("entries"),
        (need(C31, ("cluster", Operation.ALTER_CONFIGS)),),
    ),
    Case(
        "describe-user-scram-credentials",
        50,
        0,
        lambda w: {"users": None},
        top,
        (need(C31, ("cluster", Operation.DESCRIBE)),),
        lambda r, w: None if int(r.error_code) == 0 or not r.results else pytest.fail("credentials shown"),
    ),
    Case(
        "alter-user-scram-credentials",
        51,
        0,
        lambda w: {"deletions": [{"name": f"nobody-{w.group}", "mechanism": 1}], "upsertions": []},
        nested("results"),
        (need(C31, ("cluster", Operation.ALTER)),),
    ),
    # On a listener without SASL they are answered ILLEGAL_SASL_STATE, whatever the ACLs.
    Case("sasl-handshake", 17, 1, lambda w: {"mechanism": "PLAIN"}, top),
    Case("sasl-authenticate", 36, 2, lambda w: {"auth_bytes": b"\0a\0b"}, top),
    Case("describe-cluster", 60, 1, lambda w: {"endpoint_type": 1}, top),
    Case(
        "describe-producers",
        61,
        0,
        lambda w: {"topics": [{"name": w.topic, "partition_indexes": [0]}]},
        nested("topics", "partitions"),
        (need(T29, ("topic", Operation.READ)),),
        no_offsets("topics", "partitions", fields=("active_producers",)),
    ),
    Case(
        "describe-transactions",
        65,
        0,
        lambda w: {"transactional_ids": [w.txn]},
        lambda rows, w: [int(t.error_code) for t in rows],
        (need(X53, ("txn", Operation.DESCRIBE)),),
        no_txn_detail,
        decode=describe_transactions_wire.decode,
    ),
    Case(
        "list-transactions",
        66,
        1,
        lambda w: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
        listed(_names("transaction_states", "transactional_id"), lambda w: w.txn, X53),
        (need(X53, ("txn", Operation.DESCRIBE)),),
    ),
    # The KIP-848 and KIP-932 APIs last: a heartbeat with every ACL granted turns the world's (empty, classic)
    # group into a consumer group, which the cases above must not see.
    Case(
        "consumer-group-heartbeat",
        68,
        1,
        consumer_heartbeat,
        top,
        (need(G30, ("group", Operation.READ)), need(T29, ("topic", Operation.DESCRIBE))),
        no_assignment,
    ),
    Case(
        "consumer-group-describe",
        69,
        1,
        lambda w: {"group_ids": [w.group], "include_authorized_operations": False},
        nested("groups"),
        (need(G30, ("group", Operation.DESCRIBE)),),
        no_modern_group_detail,
    ),
    Case(
        "share-group-heartbeat",
        76,
        1,
        share_heartbeat,
        top,
        (need(G30, ("share", Operation.READ)), need(T29, ("topic", Operation.DESCRIBE))),
        no_assignment,
    ),
    Case(
        "share-group-describe",
        77,
        1,
        lambda w: {"group_ids": [w.group + "-share"], "include_authorized_operations": False},
        nested("groups"),
        (need(G30, ("share", Operation.DESCRIBE)),),
        no_modern_group_detail,
    ),
    Case(
        "share-fetch",
        78,
        1,
        share_fetch,
        nested("responses", "partitions", with_top=True),
        (need(G30, ("share", Operation.READ)), need(T29, ("topic", Operation.READ))),
        no_offsets("responses", "partitions", fields=("records", "acquired_records")),
    ),
    Case(
        "share-acknowledge",
        79,
        1,
        share_acknowledge,
        nested("responses", "partitions", with_top=True),
        # Topic READ is checked once the share session is found, as Kafka orders it; this request names no
        # session the broker holds (SHARE_SESSION_NOT_FOUND), so only the group's READ shows here.
        (need(G30, ("share", Operation.READ)),),
    ),
    Case(
        "describe-share-group-offsets",
        90,
        1,
        lambda w: {
            "groups": [{"group_id": w.group + "-share", "topics": [{"topic_name": w.topic, "partitions": [0]}]}]
        },
        nested("groups"),
        # A topic the caller may not describe is answered as one that does not exist (nothing about it).
        (need(G30, ("share", Operation.DESCRIBE)),),
        no_share_offsets,
    ),
    # Alter and delete check the topics only for a share group that exists and is empty (the group's state is
    # checked first here); the world's share group is not known to be either, so the group's ACL is what shows.
    Case(
        "alter-share-group-offsets",
        91,
        0,
        lambda w: {
            "group_id": w.group + "-share",
            "topics": [{"topic_name": w.topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}],
        },
        nested("responses", "partitions", with_top=True),
        (need(G30, ("share", Operation.READ)),),
    ),
    Case(
        "delete-share-group-offsets",
        92,
        0,
        lambda w: {"group_id": w.group + "-share", "topics": [{"topic_name": w.topic}]},
        nested("responses", with_top=True),
        (need(G30, ("share", Operation.DELETE)),),
    ),
    # The share-state APIs are broker to broker: CLUSTER_ACTION on the cluster, as Kafka. The reads name the
    # world's share group (whose state the share-fetch case may have made), so a refusal that leaked it shows;
    # the writes name a group of their own, to leave that state as it is.
    Case(
        "read-share-group-state",
        84,
        0,
        lambda w: share_state(w, "-share", partition=0, leader_epoch=0),
        nested("results", "partitions"),
        (need(C31, ("cluster", Operation.CLUSTER_ACTION)),),
        no_share_state,
    ),
    Case(
        "read-share-group-state-summary",
        87,
        0,
        lambda w: share_state(w, "-share", partition=0, leader_epoch=0),
        nested("results", "partitions"),
        (need(C31, ("cluster", Operation.CLUSTER_ACTION)),),
        no_share_state,
    ),
    Case(
        "initialize-share-group-state",
        83,
        0,
        lambda w: share_state(w, "-state", partition=0, state_epoch=0, start_offset=0),
        nested("results", "partitions"),
        (need(C31, ("cluster", Operation.CLUSTER_ACTION)),),
    ),
    Case(
        "write-share-group-state",
        85,
        0,
        lambda w: share_state(
            w, "-state", partition=0, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[]
        ),
        nested("results", "partitions"),
        (need(C31, ("cluster", Operation.CLUSTER_ACTION)),),
    ),
    Case(
        "delete-share-group-state",
        86,
        0,
        lambda w: share_state(w, "-state", partition=0),
        nested("results", "partitions"),
        (need(C31, ("cluster", Operation.CLUSTER_ACTION)),),
    ),
]


def test_the_matrix_covers_every_api_the_broker_serves() -> None:
    from epochlog.server import dispatch

    dispatch._load()
    assert set(dispatch._TABLE) == {c.api for c in CASES}


# -- the backend: who grants, who sets the world up ------------------------------------------------------


class AclBackend(Protocol):
    def grant(self, acls: list[AclBinding]) -> None:
        """User:ANONYMOUS holds exactly these ACLs from now on (any others of it revoked)."""

    def request(self, api: int, version: int, body: dict[str, Any], decode: Any = None) -> Any:
        """As User:ANONYMOUS (``decode(frame, correlation_id)`` reads the answer when given)."""

    def admin_request(self, api: int, version: int, body: dict[str, Any]) -> Any:
        """As a principal allowed everything (the world's set-up)."""

    @property
    def node_id(self) -> int: ...


class InProcessBackend:
    """The authorizer of an in-process node handed the ACLs directly; the administrator is User:ANONYMOUS
    holding every ACL for the length of one request."""

    def __init__(self, node: AuthzNode) -> None:
        self.node = node
        self.current: list[AclBinding] = []

    def grant(self, acls: list[AclBinding]) -> None:
        self.current = list(acls)
        self.node.set_acls(self.current)

    def request(self, api: int, version: int, body: dict[str, Any], decode: Any = None) -> Any:
        return self.node.request(api, version, body, decode)

    def admin_request(self, api: int, version: int, body: dict[str, Any]) -> Any:
        self.node.set_acls(EVERYTHING)
        try:
            return self.node.request(api, version, body)
        finally:
            self.node.set_acls(self.current)

    @property
    def node_id(self) -> int:
        return int(self.node.broker_config.node_id)


ADMIN_PASSWORD = "matrix-admin-Secr3t"
ANONYMOUS = "User:ANONYMOUS"


class ProcessBackend:
    """A real node: User:ANONYMOUS on its PLAINTEXT listener is the principal under test; User:admin, a
    super user logging in with SCRAM-SHA-512 on SASL_PLAINTEXT, grants and revokes with CreateAcls and
    DeleteAcls (answered once the broker's authorizer has them). The world's set-up runs as
    User:ANONYMOUS holding every ACL for its length (the raw wire client speaks no SASL)."""

    def __init__(self, tmp: Path) -> None:
        from confluent_kafka.admin import AdminClient

        from tests.broker_process import BrokerProcess, free_port

        data = tmp / "data"
        controller = controller_over_sasl(data, free_port(), ("SCRAM-SHA-512", "admin", ADMIN_PASSWORD))
        sasl_port = free_port()
        settings = {
            **controller,
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},{controller['listeners']}",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:admin;{controller['super.users']}",
            "auto.create.topics.enable": "true",
        }
        self.process = BrokerProcess(data, settings=settings).start()
        self.admin = AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{sasl_port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "admin",
                "sasl.password": ADMIN_PASSWORD,
            }
        )
        from epochlog.client.wire import Connection

        self.conn = Connection("127.0.0.1", self.process.port, timeout=20, client_id="acl-matrix")
        self.current: list[AclBinding] = []
        self._set([])

    def _set(self, acls: list[AclBinding]) -> None:
        from confluent_kafka.admin import (
            AclBinding as CkBinding,
        )
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
        )
        from confluent_kafka.admin import (
            ResourceType as CkType,
        )

        everything = AclBindingFilter(
            CkType.ANY, None, ResourcePatternType.ANY, ANONYMOUS, None, AclOperation.ANY, AclPermissionType.ANY
        )
        for f in self.admin.delete_acls([everything], request_timeout=20).values():
            f.result()
        if not acls:
            return
        names = {ResourceType.CLUSTER: "BROKER"}
        wanted = [
            CkBinding(
                CkType[names.get(a.resource_type, a.resource_type.name)],
                a.resource_name,
                ResourcePatternType[a.pattern_type.name],
                a.principal,
                a.host,
                AclOperation[a.operation.name],
                AclPermissionType[a.permission.name],
            )
            for a in acls
        ]
        for f in self.admin.create_acls(wanted, request_timeout=20).values():
            f.result()

    def grant(self, acls: list[AclBinding]) -> None:
        if acls != self.current:
            self._set(acls)
            self.current = list(acls)

    def request(self, api: int, version: int, body: dict[str, Any], decode: Any = None) -> Any:
        from epochlog.protocol.codec import build, request_class

        req = build(request_class(api, version), body)
        return decode(*self.conn.request_frame(req)) if decode is not None else self.conn.request(req)

    def admin_request(self, api: int, version: int, body: dict[str, Any]) -> Any:
        # Not restored afterwards: every request of a case grants exactly what it needs first.
        self.grant(EVERYTHING)
        return self.request(api, version, body)

    @property
    def node_id(self) -> int:
        return 1

    def stop(self) -> None:
        self.conn.close()
        self.process.stop()


@pytest.fixture(scope="module")
def acl_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBackend]:
    tmp = Path(tmp_path_factory.mktemp("acl-matrix"))
    if BACKEND == "in-process":
        node = AuthzNode(tmp / "data").start()
        try:
            yield InProcessBackend(node)
        finally:
            node.stop()
        return
    backend = ProcessBackend(tmp)
    try:
        yield backend
    finally:
        backend.stop()


def _retry(fn: Callable[[], Any], busy: Callable[[Any], bool], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        resp = fn()
        if not busy(resp) or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def _make_world(b: AclBackend) -> World:
    u = uuid.uuid4().hex[:8]
    w = World(f"mx-{u}", f"mx-secret-{u}", f"mx-g-{u}", f"mx-tx-{u}", f"mx-new-{u}", b.node_id)
    for name in (w.topic, w.secret):
        resp = b.admin_request(19, 7, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}]})
        assert int(resp.topics[0].error_code) == 0, resp

    def leaders() -> Any:
        return b.admin_request(3, 12, {"topics": [{"name": w.topic}, {"name": w.secret}]})

    md = _retry(
        leaders, lambda r: any(p.leader_id < 0 for t in r.topics for p in t.partitions) or not r.topics[1].partitions
    )
    w.topic_id = md.topics[0].topic_id
    for name in (w.topic, w.secret):
        body = produce(False)(w)
        body["topic_data"][0]["name"] = name
        resp = b.admin_request(0, 9, body)
        assert int(resp.responses[0].partition_responses[0].error_code) == 0, resp
    commit = {
        "group_id": w.group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": n,
                "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": SECRET_META}],
            }
            for n in (w.topic, w.secret)
        ],
    }
    # FindCoordinator makes __consumer_offsets (and __transaction_state) on first use.
    b.admin_request(10, 4, {"key_type": 0, "coordinator_keys": [w.group]})
    b.admin_request(10, 4, {"key_type": 1, "coordinator_keys": [w.txn]})
    resp = _retry(
        lambda: b.admin_request(8, 8, commit),
        lambda r: int(r.topics[0].partitions[0].error_code) in COORDINATOR_BUSY,
    )
    assert all(int(p.error_code) == 0 for t in resp.topics for p in t.partitions), resp
    init = {"transactional_id": w.txn, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    resp = _retry(lambda: b.admin_request(22, 4, init), lambda r: int(r.error_code) in COORDINATOR_BUSY)
    assert int(resp.error_code) == 0, resp
    w.pid, w.epoch = resp.producer_id, resp.producer_epoch
    return w


def _learns_nothing(case: Case, resp: Any, w: World) -> None:
    text = repr(resp)
    assert w.secret not in text, f"{case.id}: the secret topic shows in a refusal"
    assert SECRET_PAYLOAD not in text and SECRET_META not in text, f"{case.id}: records or metadata show"
    case.quiet(resp, w)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_acl_matrix(acl_backend: AclBackend, case: Case) -> None:
    b = acl_backend
    w = _make_world(b)

    def run(acls: list[AclBinding]) -> tuple[Any, list[int]]:
        b.grant(acls)
        resp = b.request(case.api, case.version, case.body(w), case.decode)
        return resp, case.codes(resp, w)

    first = [_resolve(w, n.alternatives[0]) for n in case.needs]
    if not case.needs:
        resp, codes = run([])
        assert not AUTH_CODES & set(codes), f"{case.id} needs no ACL: {codes}"
        return
    resp, codes = run([])
    assert AUTH_CODES & set(codes), f"{case.id} with no ACL at all: {codes}"
    _learns_nothing(case, resp, w)
    for i, n in enumerate(case.needs):
        resp, codes = run(first[:i] + first[i + 1 :])
        assert n.code in codes, f"{case.id} without {n.alternatives}: {codes}, expected {n.code}"
        _learns_nothing(case, resp, w)
    for i, n in enumerate(case.needs):
        for alt in n.alternatives:
            resp, codes = run([*first[:i], _resolve(w, alt), *first[i + 1 :]])
            assert not AUTH_CODES & set(codes), f"{case.id} with {alt} and the rest: {codes}"
