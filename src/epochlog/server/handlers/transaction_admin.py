"""The transaction tools' APIs (KIP-664): DescribeProducers (61) at a partition's replicas,
DescribeTransactions (65) and ListTransactions (66) at the transaction coordinators.

They only read: the partition's producer state (storage/producer_state.py) and the coordinator cores'
transactional ids (transactions/admin.py filters them).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms as _now_ms
from epochlog.protocol.codec import NO_TIME, RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.transactions.admin import ListFilter, list_transactions, partitions_by_topic

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

# Kafka's "no start" is -1 ms on the wire; the codec writes a negative time that way (protocol/codec.py).
_NO_TIME = NO_TIME



def _millis(ms: int) -> dt.datetime:
    return _NO_TIME if ms < 0 else dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


# -- DescribeProducers -------------------------------------------------------------------------------
def _producers_of(broker: Broker, topic: str, index: int) -> dict[str, Any]:
    """One partition's answer. As in Kafka, any replica hosting the log answers (the tools ask the leader
    unless told a broker id); a broker without it answers NOT_LEADER_OR_FOLLOWER."""
    row: dict[str, Any] = {"partition_index": index, "error_code": Err.NONE, "active_producers": []}
    part = broker.partition(topic, index)
    if part is None:
        exists = (topic, index) in broker.image.states
        row["error_code"] = Err.NOT_LEADER_OR_FOLLOWER if exists else Err.UNKNOWN_TOPIC_OR_PARTITION
        return row
    if part.offline:
        row["error_code"] = Err.KAFKA_STORAGE_ERROR
        return row
    state = part.log.producer_state
    row["active_producers"] = [
        {
            "producer_id": pid,
            "producer_epoch": e.epoch,
            "last_sequence": e.last_seq,
            "last_timestamp": e.last_timestamp,
            "coordinator_epoch": e.coordinator_epoch,
            "current_txn_start_offset": e.current_txn_first_offset,
        }
        for pid, e in sorted(state.producers.items())
    ]
    return row


def handle_describe_producers(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    denied = authz.denied_topics(broker, header, Operation.READ, (t.name for t in req.topics))
    topics = [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": int(p), "error_code": Err.TOPIC_AUTHORIZATION_FAILED, "active_producers": []}
                if t.name in denied
                else _producers_of(broker, t.name, int(p))
                for p in t.partition_indexes
            ],
        }
        for t in req.topics
    ]
    return {"throttle_time": 0, "topics": topics}


# -- DescribeTransactions -------------------------------------------------------------------------------
def _describe_one(broker: Broker, tid: str) -> dict[str, Any]:
    row = _unknown_txn_row(tid)
    # NOT_COORDINATOR when this broker does not lead the id's __transaction_state partition,
    # COORDINATOR_NOT_AVAILABLE before the topic exists, TRANSACTIONAL_ID_NOT_FOUND for an id it does not
    # know (the core is loaded synchronously when leadership arrives, so there is no load in progress).
    err, txn = broker.txn.describe(tid)
    row["error_code"] = err
    if txn is None:
        return row
    row.update(
        transaction_state=txn.state.display,
        transaction_timeout=txn.timeout_ms,
        transaction_start_time=txn.start_ms,
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch,
        topics=[{"topic": t, "partitions": ps} for t, ps in partitions_by_topic(txn).items()],
    )
    return row


def handle_describe_transactions(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    rows = []
    for t in req.transactional_ids:
        tid = str(t)
        if authz.txn_allowed(broker, header, Operation.DESCRIBE, tid):
            rows.append(_describe_one(broker, tid))
        else:
            rows.append(_txn_denied_row(tid))
    return {"throttle_time": 0, "transaction_states": rows}


def _unknown_txn_row(tid: str) -> dict[str, Any]:
    return {
        "transactional_id": tid,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }


def _txn_denied_row(tid: str) -> dict[str, Any]:
    return {**_unknown_txn_row(tid), "error_code": Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


# -- ListTransactions -----------------------------------------------------------------------------------
def handle_list_transactions(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    flt = ListFilter(
        states=tuple(str(s) for s in req.state_filters),
        producer_ids=frozenset(int(p) for p in req.producer_id_filters),
        duration_ms=int(getattr(req, "duration_filter", -1)),  # v1+ (KIP-994)
    )
    rows = [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "transaction_state": t.state.display}
        for t in list_transactions(broker.txn.all_transactions(), flt, _now_ms())
        if authz.txn_allowed(broker, header, Operation.DESCRIBE, t.transactional_id)
    ]
    return {
        "throttle_time": 0,
        "error_code": Err.NONE,
        "unknown_state_filters": flt.unknown_states(),
        "transaction_states": rows,
    }
