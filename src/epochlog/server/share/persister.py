"""The share-partition leader's way to its share coordinator (Kafka's share persister): ReadShareGroupState
and WriteShareGroupState for the key (group, topic id, partition), wherever its ``__share_group_state``
partition is led.

- The coordinator is the leader of the key's state partition in this broker's metadata image (what
  FindCoordinator with key type SHARE answers, without the round trip). When that is this broker the call is
  in process (state_log.py), as on a single node; otherwise the request goes over an inter-broker connection
  (one per coordinator, on the inter-broker listener, as the replica fetchers connect).
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS (the state partition moving or
  a coordinator loading), like an unreachable coordinator, are retried with a doubling backoff for up to
  ``RETRY_S``, looking the coordinator up again each time; then the last code is the answer.
- Writes for one key reach the coordinator in the order the share-partition makes them: a write waits for
  the one before it for that key when that one is still under way (remote, or being retried); when none is,
  a local write is applied at once, as before.

The group coordinator uses it too, for the share group offsets APIs (90-92) and a share group's deletion:
ReadShareGroupStateSummary (``summary``, ``group_states``) and InitializeShareGroupState under the next state
epoch (``reset``), retried the same way.

What to write is the share-partition core's decision; this module only carries it out.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.initialize_share_group_state.v0.request import InitializeShareGroupStateRequest, InitializeStateData
from kio.schema.initialize_share_group_state.v0.request import PartitionData as InitPartition
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData
from kio.schema.read_share_group_state_summary.v0.request import PartitionData as SummaryPartition
from kio.schema.read_share_group_state_summary.v0.request import ReadShareGroupStateSummaryRequest, ReadStateSummaryData
from kio.schema.write_share_group_state.v0.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v0.request import StateBatch as WireBatch
from kio.schema.write_share_group_state.v0.request import WriteShareGroupStateRequest, WriteStateData
from kio.static.primitive import i8, i16, i32, i64

from epochlog.groups.share.messages import StateWrite
from epochlog.groups.share.records import PartitionState, SharePartitionKey, StateBatch
from epochlog.protocol.errors import Err
from epochlog.server.cluster.peer import PeerConnection, PeerError
from epochlog.server.internal_topics import SHARE_STATE_TOPIC
from epochlog.server.share.state_log import ShareStateLog

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

log = logging.getLogger("epochlog.share")
_T = TypeVar("_T")

RETRIABLE = frozenset({Err.NOT_COORDINATOR, Err.COORDINATOR_NOT_AVAILABLE, Err.COORDINATOR_LOAD_IN_PROGRESS})
RETRY_S = 10.0  # how long a read or write keeps looking for its coordinator
BACKOFF_S = (0.05, 1.0)  # first and longest wait between attempts
REQUEST_TIMEOUT_S = 10.0


def _topic_id(key: SharePartitionKey) -> uuid.UUID:
    return uuid.UUID(key[1])


class SharePersister:
    def __init__(self, broker: Broker, state: ShareStateLog) -> None:
        self.broker = broker
        self.state = state
        self._conns: dict[int, tuple[tuple[str, int], PeerConnection]] = {}
        self._tails: dict[SharePartitionKey, asyncio.Future[int]] = {}

    # -- reads ----------------------------------------------------------------------------------
    async def read(self, key: SharePartitionKey, leader_epoch: int) -> tuple[int, PartitionState | None]:
        """ReadShareGroupState: the state (None: never initialized), fencing older leaders from here on."""

        async def local() -> tuple[int, PartitionState | None]:
            return self.state.read(key, leader_epoch)

        return await self._retrying(key, local, lambda node: self._remote_read(node, key, leader_epoch))

    async def _remote_read(self, node: int, key: SharePartitionKey, leader_epoch: int) -> tuple[int, Any]:
        req = ReadShareGroupStateRequest(
            group_id=key[0],
            topics=(
                ReadStateData(
                    topic_id=_topic_id(key),
                    partitions=(ReadPartition(partition=i32(key[2]), leader_epoch=i32(leader_epoch)),),
                ),
            ),
        )
        resp = await self._send(node, req)
        if resp is None:
            return Err.COORDINATOR_NOT_AVAILABLE, None
        row = _only_row(resp)
        if row is None:
            return Err.COORDINATOR_NOT_AVAILABLE, None
        if row.error_code:
            return int(row.error_code), None
        if int(row.start_offset) == -1 and int(row.state_epoch) == 0 and not row.state_batches:
            return Err.NONE, None
        # A start offset of -1 under a later state epoch is a state reset by DeleteShareGroupOffsets or a
        # group deletion: the epoch is kept, or the new core's writes would be fenced for good.
        batches = tuple(
            StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in row.state_batches
        )
        return Err.NONE, PartitionState(int(row.state_epoch), -1, int(row.start_offset), batches)

    # -- writes ---------------------------------------------------------------------------------
    def write(self, key: SharePartitionKey, w: StateWrite) -> Awaitable[int]:
        """WriteShareGroupState, after the key's earlier writes; durable once the awaitable answers NONE."""
        tail = self._tails.get(key)
        if (tail is None or tail.done()) and self._coordinator(key) == self.broker.config.node_id:
            local = self.state.write(key, w)  # applied now, in the order made
            fut = asyncio.ensure_future(self._retry_write(key, w, local))
        else:
            fut = asyncio.ensure_future(self._write_after(tail, key, w))
        self._tails[key] = fut
        fut.add_done_callback(lambda f: self._tails.pop(key, None) if self._tails.get(key) is f else None)
        return fut

    async def _write_after(self, tail: asyncio.Future[int] | None, key: SharePartitionKey, w: StateWrite) -> int:
        if tail is not None:
            await asyncio.gather(tail, return_exceptions=True)
        return await self._retry_write(key, w, None)

    async def _retry_write(self, key: SharePartitionKey, w: StateWrite, first: Awaitable[int] | None) -> int:
        deadline = time.monotonic() + RETRY_S
        backoff = BACKOFF_S[0]
        while True:
            if first is not None:
                code, first = await first, None
            else:
                code = await self._write_once(key, w)
            if code not in RETRIABLE or time.monotonic() + backoff > deadline:
                return code
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_S[1])

    async def _write_once(self, key: SharePartitionKey, w: StateWrite) -> int:
        node = self._coordinator(key)
        if node == self.broker.config.node_id:
            return await self.state.write(key, w)
        if node < 0:
            return Err.COORDINATOR_NOT_AVAILABLE
        part = WritePartition(
            partition=i32(key[2]),
            state_epoch=i32(w.state_epoch),
            leader_epoch=i32(w.leader_epoch),
            start_offset=i64(w.start_offset),
            state_batches=tuple(
                WireBatch(
                    first_offset=i64(b.first_offset),
                    last_offset=i64(b.last_offset),
                    delivery_state=i8(b.delivery_state),
                    delivery_count=i16(b.delivery_count),
                )
                for b in w.batches
            ),
        )
        req = WriteShareGroupStateRequest(
            group_id=key[0], topics=(WriteStateData(topic_id=_topic_id(key), partitions=(part,)),)
        )
        resp = await self._send(node, req)
        row = _only_row(resp) if resp is not None else None
        return Err.COORDINATOR_NOT_AVAILABLE if row is None else int(row.error_code)

    # -- the group coordinator's calls (share group offsets, share group deletion) -----------------
    async def summary(self, key: SharePartitionKey) -> tuple[int, PartitionState | None]:
        """ReadShareGroupStateSummary: the state as it is (None or start offset -1: never consumed), fencing
        no one. A remote coordinator's answer has no state batches: the RPC carries none."""
        if SHARE_STATE_TOPIC not in self.broker.image.topics:
            return Err.NONE, None  # no share group ever fetched: no state anywhere (and asking would create it)

        async def local() -> tuple[int, PartitionState | None]:
            return self.state.summary(key)

        async def remote(node: int) -> tuple[int, PartitionState | None]:
            req = ReadShareGroupStateSummaryRequest(
                group_id=key[0],
                topics=(
                    ReadStateSummaryData(
                        topic_id=_topic_id(key),
                        partitions=(SummaryPartition(partition=i32(key[2]), leader_epoch=i32(-1)),),
                    ),
                ),
            )
            resp = await self._send(node, req)
            row = _only_row(resp) if resp is not None else None
            if row is None or row.error_code:
                return (Err.COORDINATOR_NOT_AVAILABLE if row is None else int(row.error_code)), None
            return Err.NONE, PartitionState(int(row.state_epoch), int(row.leader_epoch), int(row.start_offset))

        return await self._retrying(key, local, remote)

    async def reset(self, key: SharePartitionKey, start_offset: int) -> int:
        """InitializeShareGroupState under the state epoch after the current one: the share-partition starts
        again at ``start_offset`` (-1: as never consumed) with nothing in flight, and its leader, still writing
        under the old epoch, is fenced (its next write fails, and it rebuilds its core from this state)."""
        code, cur = await self.summary(key)
        if code:
            return code
        # 1 when there is none yet: above the 0 of a core whose first write may be on its way.
        epoch = cur.state_epoch + 1 if cur is not None else 1

        async def local() -> tuple[int, None]:
            return await self.state.initialize(key, epoch, start_offset), None

        async def remote(node: int) -> tuple[int, None]:
            part = InitPartition(partition=i32(key[2]), state_epoch=i32(epoch), start_offset=i64(start_offset))
            req = InitializeShareGroupStateRequest(
                group_id=key[0], topics=(InitializeStateData(topic_id=_topic_id(key), partitions=(part,)),)
            )
            resp = await self._send(node, req)
            row = _only_row(resp) if resp is not None else None
            return (Err.COORDINATOR_NOT_AVAILABLE if row is None else int(row.error_code)), None

        return (await self._retrying(key, local, remote))[0]

    async def group_states(self, group: str) -> tuple[int, dict[tuple[str, int], PartitionState]]:
        """Every share-partition state of ``group`` by (topic id, partition) that has a start offset: from the
        state partitions led here, and, when other brokers lead some, the summary of every partition of every
        topic whose state partition they lead (the records name no group's partitions elsewhere)."""
        states, complete = self.state.group_states(group)
        out = {k: st for k, st in states.items() if st.start_offset != -1}
        if complete:
            return Err.NONE, out
        keys = [
            (group, str(info.uuid), p)
            for info in self.broker.image.topics.values()
            for p in info.partitions
            if not self.state.is_local((group, str(info.uuid), p))
        ]
        found = await asyncio.gather(*(self.summary(k) for k in keys))
        for k, (code, st) in zip(keys, found, strict=True):
            if code:
                return code, out
            if st is not None and st.start_offset != -1:
                out[(k[1], k[2])] = st
        return Err.NONE, out

    async def _retrying(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[tuple[int, _T]]],
        remote: Callable[[int], Awaitable[tuple[int, _T]]],
    ) -> tuple[int, _T | None]:
        """One call to the key's coordinator, in process or remote, retried as reads are."""
        deadline = time.monotonic() + RETRY_S
        backoff = BACKOFF_S[0]
        while True:
            node = self._coordinator(key)
            out: tuple[int, _T | None]
            if node == self.broker.config.node_id:
                out = await local()
            elif node < 0:
                out = Err.COORDINATOR_NOT_AVAILABLE, None
            else:
                out = await remote(node)
            if out[0] not in RETRIABLE or time.monotonic() + backoff > deadline:
                return out
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_S[1])

    # -- the coordinators -------------------------------------------------------------------------
    def _coordinator(self, key: SharePartitionKey) -> int:
        return self.broker.share_coordinator_for(self.state.coordinator_key(key))

    async def _send(self, node: int, req: Any) -> Any:
        """The coordinator's answer, or None when it cannot be reached (retried as COORDINATOR_NOT_AVAILABLE)."""
        ep = self.broker.image.brokers.get(node)
        if ep is None:
            return None
        known = self._conns.get(node)
        if known is None or known[0] != (ep.host, ep.port):
            if known is not None:
                known[1].close()
            conn = PeerConnection(
                ep.host, ep.port, f"share-persister-{self.broker.config.node_id}", self.broker.peer_security
            )
            self._conns[node] = ((ep.host, ep.port), conn)
        else:
            conn = known[1]
        try:
            return await conn.request(req, timeout=REQUEST_TIMEOUT_S)
        except PeerError as e:
            log.debug("share coordinator %d: %s", node, e)
            return None

    def close(self) -> None:
        for _ep, conn in self._conns.values():
            conn.close()
        self._conns.clear()


def _only_row(resp: Any) -> Any:
    """The one partition's result of a response to a one-partition request (None if it has none)."""
    for topic in resp.results:
        for row in topic.partitions:
            return row
    return None
