"""Writing a transaction's marker on the partitions this broker leads (WriteTxnMarkers' work).

A marker is appended as a control batch and answered once the ISR has it, as Kafka appends markers with
acks=all; min.insync.replicas applies. On a ``__consumer_offsets`` partition the group coordinator then
makes the transaction's offset commits visible, or drops them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epochlog.protocol.control_records import ControlType, marker_batch
from epochlog.protocol.errors import Err
from epochlog.trace.events import TxnMarker
from epochlog.transactions.state import TopicPartition, partitions_by_topic

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.partition import Partition

log = logging.getLogger("epochlog.transactions.markers")


@dataclass(frozen=True)
class MarkerRequest:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]

    def to_kio(self) -> Any:
        from kio.schema.types import ProducerId
        from kio.schema.write_txn_markers.v1.request import (
            WritableTxnMarker,
            WritableTxnMarkerTopic,
            WriteTxnMarkersRequest,
        )
        from kio.static.primitive import i16, i32

        by_topic = partitions_by_topic(self.partitions)
        marker = WritableTxnMarker(
            producer_id=ProducerId(self.producer_id),
            producer_epoch=i16(self.producer_epoch),
            transaction_result=self.commit,
            topics=tuple(
                WritableTxnMarkerTopic(name=t, partition_indexes=tuple(i32(p) for p in ps))  # type: ignore[arg-type]
                for t, ps in by_topic.items()
            ),
            coordinator_epoch=i32(self.coordinator_epoch),
        )
        return WriteTxnMarkersRequest(markers=(marker,))


def err_of(code: int) -> Err:
    try:
        return Err(code)
    except ValueError:
        return Err.UNKNOWN_SERVER_ERROR


async def write_markers(broker: Broker, req: MarkerRequest) -> dict[TopicPartition, Err]:
    from epochlog.clock import now_ms
    from epochlog.server.internal_topics import OFFSETS_TOPIC

    out: dict[TopicPartition, Err] = {}
    waits: list[tuple[TopicPartition, Partition, int]] = []
    kind = ControlType.COMMIT if req.commit else ControlType.ABORT
    for tp in req.partitions:
        part = broker.partition(*tp)
        if part is None:
            out[tp] = Err.NOT_LEADER_OR_FOLLOWER if tp in broker.image.states else Err.UNKNOWN_TOPIC_OR_PARTITION
            continue
        batch = marker_batch(req.producer_id, req.producer_epoch, kind, req.coordinator_epoch, now_ms())
        try:
            result = part.append(batch, now_ms(), acks=-1)
        except Exception as e:
            code = getattr(e, "error_code", None)
            if code is None:
                log.exception("marker for %s-%d failed", *tp)
            out[tp] = err_of(code) if code is not None else Err.UNKNOWN_SERVER_ERROR
            continue
        if result.error:
            out[tp] = err_of(result.error)
            continue
        if part.replica.tracer.enabled:
            marker = TxnMarker(*tp, part.leader_epoch, req.producer_id, req.commit, result.last_offset)
            part.replica.tracer.emit(marker)
        waits.append((tp, part, result.wait_offset))
    timeout = broker.config.request_timeout_ms / 1000
    futs = [part.wait_committed(last) for _tp, part, last in waits]
    if futs:
        done, _ = await asyncio.wait(futs, timeout=timeout)
    for (tp, _part, _last), fut in zip(waits, futs, strict=True):
        if fut in done:
            out[tp] = err_of(fut.result())
        else:
            fut.cancel()
            out[tp] = Err.REQUEST_TIMED_OUT
        if out[tp] == Err.NONE and tp[0] == OFFSETS_TOPIC and broker.groups is not None:
            broker.groups.complete_txn(tp[1], req.producer_id, req.commit)
    return out
