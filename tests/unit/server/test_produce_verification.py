"""KIP-890 part 1 on the leader (server/handlers/produce.py): a transaction's first write to a partition is
appended only if the coordinator says the partition is in the producer's ongoing transaction, and only if
no marker for the producer landed while the leader asked."""

from __future__ import annotations

import asyncio
import io
import uuid
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.serial import entity_reader, entity_writer

from epochlog.controller.image import ClusterImage
from epochlog.protocol.codec import RequestHeader
from epochlog.protocol.control_records import ControlType, marker_batch
from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import PartitionState
from epochlog.server.handlers.produce import handle_produce
from epochlog.server.metrics import BrokerMetrics
from epochlog.server.partition import Partition
from epochlog.server.quota_enforcement import ClientQuotas
from epochlog.server.responses import Waiting
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog

pytestmark = pytest.mark.unit

PID, EPOCH = 4000, 3


class _Coordinator:
    """verify_anywhere answers ``answer``; ``during`` runs while the leader waits for it."""

    def __init__(self, answer: Err, during: Any = None) -> None:
        self.answer, self.during, self.asked = answer, during, 0

    async def verify_anywhere(self, tid: str, pid: int, epoch: int, tps: list[tuple[str, int]]) -> dict[Any, Err]:
        self.asked += 1
        await asyncio.sleep(0)
        if self.during is not None:
            self.during()
        return dict.fromkeys(tps, self.answer)


def _broker(tmp: Path, coordinator: _Coordinator) -> tuple[Any, Partition]:
    plog = PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(), recover=False)
    core = PartitionReplica(1, "t", 0, PartitionReplicaLog(plog), min_insync_replicas=1)
    core.apply_state(PartitionState(1, 0, frozenset({1}), (1,), 0), 0)
    part = Partition("t", 0, uuid.uuid4(), plog, core)
    metrics = BrokerMetrics()
    broker = SimpleNamespace(
        partition=lambda name, i: part if (name, i) == ("t", 0) else None,
        topic_name_for_id=lambda _id: None,
        config=SimpleNamespace(transaction_partition_verification_enable=True),
        txn=coordinator,
        metrics=metrics,
        image=SimpleNamespace(states={}, brokers={}),
        client_quotas=ClientQuotas({}, ClusterImage),
        authorizer=None,
    )
    return broker, part


def _request(seq: int = 0) -> tuple[RequestHeader, memoryview]:
    batch = build_batch(
        [(None, b"in-txn")], producer_id=PID, producer_epoch=EPOCH, base_sequence=seq, is_transactional=True
    )
    req = ProduceRequest(
        transactional_id="tx",  # type: ignore[arg-type]
        acks=1,  # type: ignore[arg-type]
        timeout=timedelta(seconds=5),
        topic_data=(TopicProduceData(name="t", partition_data=(PartitionProduceData(index=0, records=batch),)),),  # type: ignore[arg-type]
    )
    out = io.BytesIO()
    entity_writer(ProduceRequest)(out, req)
    header = RequestHeader(api_key=0, api_version=9, correlation_id=1, client_id="c", size=0)
    return header, memoryview(out.getvalue())


def _produce(broker: Any) -> int:
    """The partition's error code in the produce response."""
    header, frame = _request()
    result = handle_produce(broker, header, frame)

    async def run() -> Any:
        out = await result if asyncio.iscoroutine(result) else result
        return await out.coro if isinstance(out, Waiting) else out

    raw = bytes(asyncio.run(run()))
    pos = 4 + 4 + 1  # frame size, correlation id, the flexible header's empty tagged fields
    resp, _ = entity_reader(ProduceResponse)(raw[pos:], 0)
    return int(resp.responses[0].partition_responses[0].error_code)


def test_a_verified_first_write_is_appended(tmp_path: Path) -> None:
    coordinator = _Coordinator(Err.NONE)
    broker, part = _broker(tmp_path, coordinator)
    assert _produce(broker) == Err.NONE
    assert coordinator.asked == 1 and part.log.log_end_offset == 1
    assert part.log.last_stable_offset == 0  # the transaction is open


def test_a_partition_the_transaction_never_added_is_refused(tmp_path: Path) -> None:
    broker, part = _broker(tmp_path, _Coordinator(Err.INVALID_TXN_STATE))
    assert _produce(broker) == Err.INVALID_TXN_STATE
    assert part.log.log_end_offset == 0


def test_a_coordinator_that_cannot_answer_now_gets_a_retriable_error(tmp_path: Path) -> None:
    broker, part = _broker(tmp_path, _Coordinator(Err.NOT_COORDINATOR))
    assert _produce(broker) == Err.NOT_ENOUGH_REPLICAS
    assert part.log.log_end_offset == 0


def test_a_marker_that_lands_while_the_leader_asks_voids_the_answer(tmp_path: Path) -> None:
    """Without the guard, the write would open a transaction its coordinator already closed: a hanging
    transaction that holds every read_committed reader at its offset for good."""
    holder: dict[str, Partition] = {}

    def abort_meanwhile() -> None:
        part = holder["part"]
        part.log.append_as_leader(marker_batch(PID, EPOCH, ControlType.ABORT, 0, 0), 0, 0)

    broker, part = _broker(tmp_path, _Coordinator(Err.NONE, during=abort_meanwhile))
    holder["part"] = part
    assert _produce(broker) == Err.INVALID_TXN_STATE
    assert part.log.log_end_offset == 1  # the marker only
    assert part.log.producer_state.first_unstable_offset(part.log.log_end_offset) is None
