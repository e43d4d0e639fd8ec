"""Requests pipelined on one connection take effect in the order they were sent (Kafka handles one request
per connection at a time), even when the first must wait for the transaction coordinator (KIP-890)."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from epochlog.protocol.records import build_batch
from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, topic_name
from tests.integration.kafka_wire import WireClient

pytestmark = pytest.mark.integration

RETRIABLE = {14, 15, 51}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS


def _until_ok(call: Any, error_of: Any, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        r = call()
        code = error_of(r)
        if code not in RETRIABLE or time.monotonic() > deadline:
            assert code == 0, r
            return r
        time.sleep(0.05)


def _produce_fields(tid: str, topic: str, batches: dict[int, bytes]) -> dict[str, Any]:
    from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData

    parts = tuple(PartitionProduceData(index=p, records=b) for p, b in batches.items())
    return {
        "transactional_id": tid,
        "acks": -1,
        "timeout": timedelta(seconds=10),
        "topic_data": (TopicProduceData(name=topic, partition_data=parts),),
    }


def _rows(resp: Any) -> dict[int, tuple[int, int]]:
    """partition -> (error code, base offset)."""
    return {int(r.index): (int(r.error_code), int(r.base_offset)) for r in resp.responses[0].partition_responses}


def test_a_produce_behind_a_verifying_one_waits_its_turn(broker: BrokerProcess) -> None:
    topic = topic_name("pipe")
    create_topic(broker.bootstrap, topic, partitions=2)
    P, Q = 0, 1
    tid = f"pipe-{uuid.uuid4().hex[:6]}"
    w = WireClient(broker.port)
    try:
        # The coordinator is this broker, once __transaction_state exists.
        _until_ok(lambda: w.request(10, 3, key=tid, key_type=1), lambda r: int(r.error_code))
        init = {"transactional_id": tid, "transaction_timeout": timedelta(seconds=60)}
        r = _until_ok(lambda: w.request(22, 4, **init, producer_id=-1, producer_epoch=-1), lambda r: int(r.error_code))
        pid, epoch = int(r.producer_id), int(r.producer_epoch)

        from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnTopic

        def add() -> Any:
            return w.request(
                24,
                3,
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(P, Q)),),
            )

        def add_error(r: Any) -> int:
            topics = r.results_by_topic_v3_and_below
            return max(int(p.partition_error_code) for t in topics for p in t.results_by_partition)

        _until_ok(add, add_error)

        def batch(value: bytes, seq: int) -> bytes:
            return build_batch(
                [(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
            )

        # Q's transaction is open on its leader: later writes to Q need no verification.
        first = w.request(0, 9, **_produce_fields(tid, topic, {Q: batch(b"q0", 0)}))
        assert _rows(first)[Q][0] == 0, first

        # req1's write to P is the transaction's first there: the broker asks the coordinator before
        # appending anything of req1. req2 is sent before req1 is answered and must not overtake it.
        corr1, frame1 = w.frame(0, 9, **_produce_fields(tid, topic, {P: batch(b"p0", 0), Q: batch(b"q1", 1)}))
        corr2, frame2 = w.frame(0, 9, **_produce_fields(tid, topic, {Q: batch(b"q2", 2)}))
        w.sock.sendall(frame1 + frame2)
        r1 = _rows(w.response(0, 9, corr1))
        r2 = _rows(w.response(0, 9, corr2))
    finally:
        w.close()
    assert r1[P][0] == 0 and r1[Q][0] == 0 and r2[Q][0] == 0, (r1, r2)
    q0 = _rows(first)[Q][1]
    assert (r1[Q][1], r2[Q][1]) == (q0 + 1, q0 + 2)
