"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92): a share
group's share-partition start offsets, served by its group coordinator from the share coordinator's state
(server/share/state_log.py, ``__share_group_state``).

- Describe answers each share-partition's start offset and the leader epoch that last wrote it (-1 and -1
  for one the group never consumed), and from v1 its lag: the records from the start offset to the high
  watermark that are not yet acknowledged or archived (-1 when this broker does not lead the partition).
  Without topics, every share-partition the share coordinator has a state for.
- Alter and Delete change state only while the group has no members (NON_EMPTY_GROUP, 68, otherwise, as Kafka):
  Alter starts the share-partition again at the given offset with nothing in flight; Delete makes it one the
  group never consumed, which starts at ``share.auto.offset.reset`` when next fetched. Both write the state
  under the state epoch after the current one (InitializeShareGroupState), which fences the share-partition's
  leader: its core is rebuilt from the new state.

The share coordinator may be another broker: states are read and reset through the persister
(server/share/persister.py: ReadShareGroupStateSummary and InitializeShareGroupState over the wire). The
summary carries no state batches, so the lag is -1 where another broker keeps the state.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from epochlog.groups.share.model import TERMINAL
from epochlog.groups.share.records import PartitionState
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

UNINITIALIZED = -1
NOT_REACHED = "the share coordinator of this share-partition could not be reached"


def _group_refusal(broker: Broker, group_id: str, must_be_empty: bool) -> tuple[int, str | None]:
    code, message, d = broker.groups.share_describe(group_id)
    if d is None:
        return code, message
    if must_be_empty and d.members:
        return Err.NON_EMPTY_GROUP, f"Share group {group_id} is not empty: it has {len(d.members)} member(s)."
    return Err.NONE, None


def _lag(broker: Broker, group_id: str, topic: str, p: int, state: PartitionState | None) -> int:
    part = broker.partition(topic, p)
    if state is None or state.start_offset < 0 or part is None or not part.is_leader:
        return -1
    if not broker.shares.state.is_local((group_id, str(part.topic_id), p)):
        return -1  # a remote summary has no state batches to tell the acknowledged records
    hw = part.high_watermark
    done = sum(
        max(0, min(b.last_offset, hw - 1) - max(b.first_offset, state.start_offset) + 1)
        for b in state.batches
        if b.delivery_state in TERMINAL
    )
    return max(0, hw - state.start_offset - done)


def _partition_row(broker: Broker, group_id: str, topic: str, p: int, state: PartitionState | None) -> dict[str, Any]:
    return {
        "partition_index": p,
        "start_offset": state.start_offset if state is not None else UNINITIALIZED,
        "leader_epoch": state.leader_epoch if state is not None else -1,
        "lag": _lag(broker, group_id, topic, p, state),
        "error_code": Err.NONE,
        "error_message": None,
    }


async def _describe_group(broker: Broker, header: RequestHeader, g: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"group_id": g.group_id, "topics": [], "error_code": Err.NONE, "error_message": None}
    if not authz.group_allowed(broker, header, Operation.DESCRIBE, g.group_id):
        return row | {"error_code": Err.GROUP_AUTHORIZATION_FAILED}
    code, message = _group_refusal(broker, g.group_id, must_be_empty=False)
    if code:
        return row | {"error_code": code, "error_message": message}
    by_name: dict[str, dict[int, PartitionState | None]] = {}
    if g.topics is None:
        code, states = await broker.shares.persister.group_states(g.group_id)
        if code:
            return row | {"error_code": code, "error_message": NOT_REACHED}
        for (topic_id, p), state in states.items():
            name = broker.image.topic_name_for_id(uuid.UUID(topic_id))
            if name is None or state.start_offset == UNINITIALIZED:
                continue
            if authz.topic_allowed(broker, header, Operation.DESCRIBE, name):  # the others are left out
                by_name.setdefault(name, {})[p] = state
    topics = []
    for name, parts in sorted(by_name.items()):
        info = broker.image.topics.get(name)
        rows = [_partition_row(broker, g.group_id, name, p, st) for p, st in sorted(parts.items())]
        topics.append({"topic_name": name, "topic_id": info.uuid if info else uuid.UUID(int=0), "partitions": rows})
    for t in g.topics or ():
        ps = [int(p) for p in t.partitions]
        topics.append(await _described_topic(broker, header, g.group_id, t.topic_name, ps))
    return row | {"topics": topics}


async def _described_topic(
    broker: Broker, header: RequestHeader, group_id: str, name: str, ps: list[int]
) -> dict[str, Any]:
    """The named partitions of a topic the request names, each state read where it lives."""
    info = broker.image.topics.get(name)
    if info is not None and not authz.topic_allowed(broker, header, Operation.DESCRIBE, name):
        info = None  # as a topic that does not exist: nothing about it
    if info is None:
        missing = {"error_code": Err.UNKNOWN_TOPIC_OR_PARTITION, "error_message": f"Topic {name} does not exist."}
        rows = [{"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1} | missing for p in ps]
        return {"topic_name": name, "topic_id": uuid.UUID(int=0), "partitions": rows}
    rows = []
    found = await asyncio.gather(*(broker.shares.persister.summary((group_id, str(info.uuid), p)) for p in ps))
    for p, (code, state) in zip(ps, found, strict=True):
        row = _partition_row(broker, group_id, name, p, state)
        if code:
            row |= {"error_code": code, "error_message": NOT_REACHED}
        elif p not in info.partitions:
            row |= {"error_code": Err.UNKNOWN_TOPIC_OR_PARTITION, "error_message": None}
        rows.append(row)
    return {"topic_name": name, "topic_id": info.uuid, "partitions": rows}


def handle_describe_share_group_offsets(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _describe(broker, header, decode_body(frame, header))


async def _describe(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    groups = await asyncio.gather(*(_describe_group(broker, header, g) for g in req.groups))
    return {"throttle_time": 0, "groups": list(groups)}


async def _reset(broker: Broker, group_id: str, topic: str, p: int, start_offset: int) -> int:
    """Start the share-partition again at ``start_offset`` (-1: as never consumed); its core is rebuilt."""
    info = broker.image.topics.get(topic)
    if info is None or p not in info.partitions:
        return Err.UNKNOWN_TOPIC_OR_PARTITION
    code = await broker.shares.persister.reset((group_id, str(info.uuid), p), start_offset)
    broker.shares.forget(group_id, topic, p)
    return code


async def _alter(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    top: dict[str, Any] = {"throttle_time": 0, "error_code": Err.NONE, "error_message": None, "responses": []}
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return top | {"error_code": Err.GROUP_AUTHORIZATION_FAILED}
    code, message = _group_refusal(broker, req.group_id, must_be_empty=True)
    if code:
        return top | {"error_code": code, "error_message": message}
    responses = []
    for t in req.topics:
        info = broker.image.topics.get(t.topic_name)
        allowed = authz.topic_allowed(broker, header, Operation.READ, t.topic_name)
        jobs = []
        for p in t.partitions:
            if not allowed:
                jobs.append(_answer(Err.TOPIC_AUTHORIZATION_FAILED))
            elif int(p.start_offset) < 0:
                jobs.append(_answer(Err.INVALID_REQUEST))
            else:
                jobs.append(_reset(broker, req.group_id, t.topic_name, int(p.partition_index), int(p.start_offset)))
        codes = await asyncio.gather(*jobs)
        rows = [
            {"partition_index": p.partition_index, "error_code": c, "error_message": None}
            for p, c in zip(t.partitions, codes, strict=True)
        ]
        topic_id = info.uuid if info is not None and allowed else uuid.UUID(int=0)
        responses.append({"topic_name": t.topic_name, "topic_id": topic_id, "partitions": rows})
    return top | {"responses": responses}


def handle_alter_share_group_offsets(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _alter(broker, header, decode_body(frame, header))


async def _delete(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    top: dict[str, Any] = {"throttle_time": 0, "error_code": Err.NONE, "error_message": None, "responses": []}
    if not authz.group_allowed(broker, header, Operation.DELETE, req.group_id):
        return top | {"error_code": Err.GROUP_AUTHORIZATION_FAILED}
    code, message = _group_refusal(broker, req.group_id, must_be_empty=True)
    if code:
        return top | {"error_code": code, "error_message": message}
    responses = []
    for t in req.topics:
        info = broker.image.topics.get(t.topic_name)
        row: dict[str, Any] = {"topic_name": t.topic_name, "topic_id": uuid.UUID(int=0), "error_message": None}
        if not authz.topic_allowed(broker, header, Operation.READ, t.topic_name):
            responses.append(row | {"error_code": Err.TOPIC_AUTHORIZATION_FAILED})
            continue
        if info is None:
            message = f"Topic {t.topic_name} does not exist."
            responses.append(row | {"error_code": Err.UNKNOWN_TOPIC_OR_PARTITION, "error_message": message})
            continue
        keys = [(req.group_id, str(info.uuid), p) for p in sorted(info.partitions)]
        found = await asyncio.gather(*(broker.shares.persister.summary(k) for k in keys))
        ps = [p for p, (_c, st) in zip(sorted(info.partitions), found, strict=True) if st and st.start_offset != -1]
        codes = [c for c, _st in found if c]
        codes += await asyncio.gather(*(_reset(broker, req.group_id, t.topic_name, p, UNINITIALIZED) for p in ps))
        failed = next((c for c in codes if c), Err.NONE)
        responses.append(row | {"topic_id": info.uuid, "error_code": failed})
    return top | {"responses": responses}


def handle_delete_share_group_offsets(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _delete(broker, header, decode_body(frame, header))


async def _answer(code: int) -> int:
    return code
