"""Sending COMMIT/ABORT markers to the leaders of a transaction's partitions until each has written one.

A marker is retried (leaders move, brokers restart) until it is written, the partition's topic is gone,
or the coordinator that asked is no longer the coordinator: its successor sends the markers again from
the PrepareCommit/PrepareAbort record it loads. Writing a marker twice is harmless; the partition treats
the second as an empty transaction. The leader here is written to directly, the others over
WriteTxnMarkers.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from epochlog.protocol.errors import Err
from epochlog.server.cluster.peer import PeerError
from epochlog.server.transactions.partition_markers import MarkerRequest, err_of, write_markers
from epochlog.transactions.coordinator import SendMarkers
from epochlog.transactions.state import TopicPartition

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker
    from epochlog.server.transactions.coordinators import TxnCoordinators

log = logging.getLogger("epochlog.transactions.markers")

RETRY_BACKOFF_S = 0.1
# Errors after which the marker is not sent again: the producer or coordinator moved on, so this
# marker can never be written, and the newer state has markers of its own.
_GIVE_UP = frozenset({Err.INVALID_PRODUCER_EPOCH, Err.TRANSACTION_COORDINATOR_FENCED})


class MarkerSender:
    def __init__(self, broker: ClusterBroker, coordinators: TxnCoordinators) -> None:
        self.broker = broker
        self.coordinators = coordinators
        self._tasks: set[asyncio.Future[Any]] = set()

    def send(self, p: int, sm: SendMarkers) -> None:
        fut = asyncio.ensure_future(self._send(p, sm))
        self._tasks.add(fut)
        fut.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()

    async def _send(self, p: int, sm: SendMarkers) -> None:
        todo = set(sm.partitions)
        while todo:
            core = self.coordinators.cores.get(p)
            if core is None or core.coordinator_epoch != sm.coordinator_epoch:
                return  # deposed: the next coordinator resends from the log
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(todo):
                if tp[0] not in self.broker.image.topics:
                    todo.discard(tp)  # the topic was deleted: nothing left to mark
                    continue
                st = self.broker.image.states.get(tp)
                if st is not None and st.leader >= 0:
                    by_leader[st.leader].append(tp)
            results = await asyncio.gather(*(self._to(leader, sm, tps) for leader, tps in by_leader.items()))
            for answer in results:
                for tp, code in answer.items():
                    if code == Err.NONE or code in _GIVE_UP:
                        if code != Err.NONE:
                            log.warning("marker for %s-%d of %r refused: %s", *tp, sm.transactional_id, code.name)
                        todo.discard(tp)
            if todo:
                await asyncio.sleep(RETRY_BACKOFF_S)
        self.coordinators.markers_done(p, sm)

    async def _to(self, leader: int, sm: SendMarkers, tps: list[TopicPartition]) -> dict[TopicPartition, Err]:
        req = MarkerRequest(sm.producer_id, sm.producer_epoch, sm.commit, sm.coordinator_epoch, tuple(tps))
        if leader == self.broker.config.node_id:
            return await write_markers(self.broker, req)
        try:
            resp = await self.coordinators.peers.request(leader, req.to_kio())
        except PeerError as e:
            log.info("markers to broker %d: %s", leader, e)
            return {}
        out: dict[TopicPartition, Err] = {}
        for m in resp.markers:
            for t in m.topics:
                for row in t.partitions:
                    out[(str(t.name), int(row.partition_index))] = err_of(row.error_code)
        return out
