"""The transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (to the transaction coordinator),
TxnOffsetCommit (to the group coordinator) and WriteTxnMarkers (to a partition leader).

Each only translates: the coordinator core decides (transactions/coordinator.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms as _now_ms
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.groups.results import OffsetCommit
from epochlog.server.transactions.partition_markers import MarkerRequest, write_markers

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def client_error(code: Err, api_version: int, fenced_from: int = 2) -> Err:
    """PRODUCER_FENCED (KIP-588) is new to clients of recent versions; older ones know it as
    INVALID_PRODUCER_EPOCH."""
    if code == Err.PRODUCER_FENCED and api_version < fenced_from:
        return Err.INVALID_PRODUCER_EPOCH
    return code



# -- AddPartitionsToTxn ----------------------------------------------------------------------------
async def _add_partitions(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    if header.api_version <= 3:
        rows = await _add_one(
            broker,
            header,
            req.v3_and_below_transactional_id,
            int(req.v3_and_below_producer_id),
            int(req.v3_and_below_producer_epoch),
            req.v3_and_below_topics,
            verify_only=False,
        )
        return {"throttle_time": 0, "results_by_topic_v3_and_below": rows}
    if not authz.cluster_allowed(broker, header, Operation.CLUSTER_ACTION):
        # v4+ batches come from partition leaders (KIP-890), never from clients.
        return {"throttle_time": 0, "error_code": Err.CLUSTER_AUTHORIZATION_FAILED, "results_by_transaction": []}
    results = []
    for t in req.transactions:
        rows = await _add_one(
            broker, header, t.transactional_id, int(t.producer_id), int(t.producer_epoch), t.topics, t.verify_only
        )
        results.append({"transactional_id": t.transactional_id, "topic_results": rows})
    return {"throttle_time": 0, "error_code": Err.NONE, "results_by_transaction": results}


async def _add_one(
    broker: Broker, header: RequestHeader, tid: str, pid: int, epoch: int, topics: Any, verify_only: bool
) -> list[dict[str, Any]]:
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    codes: dict[tuple[str, int], Err] = {}
    if not authz.txn_allowed(broker, header, Operation.WRITE, tid):
        return _rows(dict.fromkeys(wanted, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    denied = authz.denied_topics(broker, header, Operation.WRITE, (t.name for t in topics))
    unknown = [tp for tp in wanted if tp not in broker.image.states]
    if denied:
        # As Kafka: one refused partition fails them all; unauthorized ones say so before whether they exist.
        for tp in wanted:
            if tp[0] in denied:
                codes[tp] = Err.TOPIC_AUTHORIZATION_FAILED
            elif tp in unknown:
                codes[tp] = Err.UNKNOWN_TOPIC_OR_PARTITION
            else:
                codes[tp] = Err.OPERATION_NOT_ATTEMPTED
    elif unknown:
        # As Kafka: nothing is added when one partition is unknown; the others are not tried.
        codes = {tp: Err.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else Err.OPERATION_NOT_ATTEMPTED for tp in wanted}
    elif verify_only:
        codes = broker.txn.verify(tid, pid, epoch, wanted)
    else:
        reply = await broker.txn.add_partitions(tid, pid, epoch, wanted, _now_ms())
        codes = dict.fromkeys(wanted, client_error(reply.error, header.api_version))
    return _rows(codes)


def _rows(codes: dict[tuple[str, int], Err]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, p), code in codes.items():
        by_topic.setdefault(name, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": n, "results_by_partition": rows} for n, rows in by_topic.items()]


def handle_add_partitions_to_txn(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _add_partitions(broker, header, decode_body(frame, header))


# -- AddOffsetsToTxn -------------------------------------------------------------------------------
async def _add_offsets(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    from epochlog.server.internal_topics import OFFSETS_TOPIC

    if broker.coordinator_for(req.group_id) < 0:
        # __consumer_offsets does not exist yet (coordinator_for asked for it): the client retries.
        return {"throttle_time": 0, "error_code": Err.COORDINATOR_NOT_AVAILABLE}
    tp = (OFFSETS_TOPIC, broker.groups.partition_for(req.group_id))
    reply = await broker.txn.add_partitions(
        req.transactional_id, int(req.producer_id), int(req.producer_epoch), [tp], _now_ms()
    )
    return {"throttle_time": 0, "error_code": client_error(reply.error, header.api_version)}


def handle_add_offsets_to_txn(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.txn_allowed(broker, header, Operation.WRITE, req.transactional_id):
        return {"throttle_time": 0, "error_code": Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return {"throttle_time": 0, "error_code": Err.GROUP_AUTHORIZATION_FAILED}
    return _add_offsets(broker, header, req)


# -- EndTxn ------------------------------------------------------------------------------------------
async def _end_txn(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    reply = await broker.txn.end_txn(
        req.transactional_id, int(req.producer_id), int(req.producer_epoch), bool(req.committed), _now_ms()
    )
    out: dict[str, Any] = {"throttle_time": 0, "error_code": client_error(reply.error, header.api_version)}
    if header.api_version >= 5:
        out.update(producer_id=reply.producer_id, producer_epoch=reply.producer_epoch)
    return out


def handle_end_txn(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.txn_allowed(broker, header, Operation.WRITE, req.transactional_id):
        code = Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    return _end_txn(broker, header, req)


# -- TxnOffsetCommit ---------------------------------------------------------------------------------
async def _txn_offset_commit(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    commits = []
    unknown: set[tuple[str, int]] = set()
    denied = authz.denied_topics(broker, header, Operation.READ, (t.name for t in req.topics))
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, int(p.partition_index))
            if t.name in denied:
                continue
            if tp not in broker.image.states:
                unknown.add(tp)
                continue
            commits.append(
                OffsetCommit(
                    t.name,
                    int(p.partition_index),
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),
                    p.committed_metadata,
                )
            )
    results = await broker.groups.commit_txn_offsets(
        req.group_id,
        int(req.producer_id),
        int(req.producer_epoch),
        int(getattr(req, "generation_id", -1)),
        getattr(req, "member_id", ""),
        getattr(req, "group_instance_id", None),
        commits,
    )
    topics = []
    for t in req.topics:
        rows = []
        for p in t.partitions:
            tp = (t.name, int(p.partition_index))
            if t.name in denied:
                code = Err.TOPIC_AUTHORIZATION_FAILED
            elif tp in unknown:
                code = Err.UNKNOWN_TOPIC_OR_PARTITION
            else:
                code = Err(results.get(tp, Err.NONE))
            rows.append({"partition_index": p.partition_index, "error_code": client_error(code, header.api_version)})
        topics.append({"name": t.name, "partitions": rows})
    return {"throttle_time": 0, "topics": topics}


def handle_txn_offset_commit(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    code = None
    if not authz.txn_allowed(broker, header, Operation.WRITE, req.transactional_id):
        code = Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        code = Err.GROUP_AUTHORIZATION_FAILED
    if code is not None:
        topics = [
            {
                "name": t.name,
                "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
            }
            for t in req.topics
        ]
        return {"throttle_time": 0, "topics": topics}
    return _txn_offset_commit(broker, header, req)


# -- WriteTxnMarkers ---------------------------------------------------------------------------------
async def _write_txn_markers(broker: Broker, req: Any) -> dict[str, Any]:
    out = []
    for m in req.markers:
        tps = tuple((t.name, int(p)) for t in m.topics for p in t.partition_indexes)
        marker = MarkerRequest(
            int(m.producer_id), int(m.producer_epoch), bool(m.transaction_result), int(m.coordinator_epoch), tps
        )
        codes = await write_markers(broker, marker)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, p), code in codes.items():
            by_topic.setdefault(name, []).append({"partition_index": p, "error_code": code})
        out.append(
            {"producer_id": m.producer_id, "topics": [{"name": n, "partitions": r} for n, r in by_topic.items()]}
        )
    return {"markers": out}


def handle_write_txn_markers(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    # Kafka accepts ALTER on the cluster as well as CLUSTER_ACTION here.
    if not authz.cluster_allowed(broker, header, Operation.ALTER) and not authz.cluster_allowed(
        broker, header, Operation.CLUSTER_ACTION
    ):
        code = Err.CLUSTER_AUTHORIZATION_FAILED
        markers = [
            {
                "producer_id": m.producer_id,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [{"partition_index": p, "error_code": code} for p in t.partition_indexes],
                    }
                    for t in m.topics
                ],
            }
            for m in req.markers
        ]
        return {"markers": markers}
    return _write_txn_markers(broker, req)
