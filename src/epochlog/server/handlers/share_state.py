"""The share-state RPCs (KIP-932), answered by the share coordinator of this broker (server/share/state_log.py):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86)
and ReadShareGroupStateSummary (87).

Brokers send them to one another: a share-partition's leader to the leader of the key's ``__share_group_state``
partition (persister.py), so they need CLUSTER_ACTION on the cluster, as in Kafka. Every partition is answered
on its own: NOT_COORDINATOR when another broker leads its state partition, COORDINATOR_NOT_AVAILABLE while none
does, FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH from the coordinator's fencing, INVALID_REQUEST for an empty
group id, a missing topic id or a negative partition, UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata
does not have (as Kafka's coordinator checks its metadata image). A write is answered once its records are committed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from epochlog.groups.share.messages import StateWrite
from epochlog.groups.share.records import PartitionState, SharePartitionKey, StateBatch
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

_Row = dict[str, Any]
# One partition of a request: its key (valid) and the request's partition data -> its answer row.
_Serve = Callable[[SharePartitionKey, Any], Awaitable[_Row]]


def _refusal(p: Any, code: int, message: str | None = None) -> _Row:
    return {"partition": int(p.partition), "error_code": code, "error_message": message}


def _check(req: Any, topic_id: uuid.UUID | None, p: Any) -> str | None:
    if not req.group_id:
        return "the group id is empty"
    if topic_id is None or topic_id.int == 0:
        return "the topic id is missing"
    if int(p.partition) < 0:
        return f"partition {p.partition} is negative"
    return None


def _known(broker: Broker, topic_id: uuid.UUID, partition: int) -> bool:
    name = broker.topic_name_for_id(topic_id)
    return name is not None and (name, partition) in broker.image.states


def _serve(
    broker: Broker, header: RequestHeader, frame: memoryview, serve: _Serve, nothing: _Row | None = None
) -> Awaitable[dict[str, Any]]:
    """``nothing``: the fields of a refused partition beyond its code (the reads': no state)."""
    # Decoded before the coroutine runs, as every handler does: the connection answers a frame that does not
    # parse itself, and a failure inside the coroutine would be the handler's.
    return _answer(broker, header, decode_body(frame, header), serve, nothing or {})


async def _answer(broker: Broker, header: RequestHeader, req: Any, serve: _Serve, nothing: _Row) -> dict[str, Any]:
    allowed = authz.cluster_allowed(broker, header, Operation.CLUSTER_ACTION)
    results = []
    for t in req.topics:
        rows: list[Awaitable[_Row]] = []
        for p in t.partitions:
            bad = _check(req, t.topic_id, p)
            if not allowed:
                rows.append(_ready(_refusal(p, Err.CLUSTER_AUTHORIZATION_FAILED) | nothing))
            elif bad is not None:
                rows.append(_ready(_refusal(p, Err.INVALID_REQUEST, bad) | nothing))
            elif not _known(broker, t.topic_id, int(p.partition)):
                rows.append(_ready(_refusal(p, Err.UNKNOWN_TOPIC_OR_PARTITION) | nothing))
            else:
                rows.append(serve((req.group_id, str(t.topic_id), int(p.partition)), p))
        results.append({"topic_id": t.topic_id, "partitions": list(await asyncio.gather(*rows))})
    return {"results": results}


async def _ready(row: _Row) -> _Row:
    return row


def _done(p: Any, code: int) -> _Row:
    return _refusal(p, code, None if code == Err.NONE else Err(code).name)


def handle_initialize_share_group_state(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    async def serve(key: SharePartitionKey, p: Any) -> _Row:
        code = await broker.shares.state.initialize(key, int(p.state_epoch), int(p.start_offset))
        return _done(p, code)

    return _serve(broker, header, frame, serve)


NO_STATE: _Row = {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1, "state_batches": []}


def _read_row(p: Any, code: int, state: PartitionState | None) -> _Row:
    row = _done(p, code)
    st = state if state is not None else PartitionState()
    if code == Err.NONE:
        row.update(
            state_epoch=st.state_epoch,
            leader_epoch=st.leader_epoch,
            start_offset=st.start_offset,
            state_batches=[
                {
                    "first_offset": b.first_offset,
                    "last_offset": b.last_offset,
                    "delivery_state": b.delivery_state,
                    "delivery_count": b.delivery_count,
                }
                for b in st.batches
            ],
        )
    else:
        row.update(NO_STATE)
    return row


def handle_read_share_group_state(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    async def serve(key: SharePartitionKey, p: Any) -> _Row:
        code, state = broker.shares.state.read(key, int(p.leader_epoch))
        return _read_row(p, code, state)

    return _serve(broker, header, frame, serve, NO_STATE)


def handle_write_share_group_state(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    async def serve(key: SharePartitionKey, p: Any) -> _Row:
        batches = tuple(
            StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in p.state_batches
        )
        if any(b.first_offset > b.last_offset or b.first_offset < 0 for b in batches):
            return _refusal(p, Err.INVALID_REQUEST, "a state batch's offsets are out of order")
        w = StateWrite(int(p.state_epoch), int(p.leader_epoch), int(p.start_offset), batches)
        return _done(p, await broker.shares.state.write(key, w))

    return _serve(broker, header, frame, serve)


def handle_delete_share_group_state(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    async def serve(key: SharePartitionKey, p: Any) -> _Row:
        return _done(p, await broker.shares.state.delete(key))

    return _serve(broker, header, frame, serve)


def handle_read_share_group_state_summary(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    async def serve(key: SharePartitionKey, p: Any) -> _Row:
        code, state = broker.shares.state.summary(key)
        return _read_row(p, code, state)

    return _serve(broker, header, frame, serve, NO_STATE)
