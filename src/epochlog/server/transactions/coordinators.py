"""The broker's transaction coordinator: it carries out what ``transactions/coordinator.py`` decides.

Each ``__transaction_state`` partition this broker leads has a core of its own, loaded by replaying the
partition when leadership arrives (its leader epoch becomes the coordinator epoch) and dropped when it
leaves. The driver appends the core's records durably, holds each request until its record is written,
hands markers to the sender, and runs the two timers (aborting expired transactions, removing idle ids).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch, iter_records
from epochlog.server import internal_log
from epochlog.server.groups.hashing import partition_for
from epochlog.server.internal_topics import TXN_TOPIC
from epochlog.transactions import log_format
from epochlog.transactions.coordinator import Reply, SendMarkers, TxnCoordinator, Write
from epochlog.transactions.state import TopicPartition, TxnMetadata, TxnState, partitions_by_topic

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker
    from epochlog.server.partition import Partition

log = logging.getLogger("epochlog.transactions")


class BrokerPeers:
    """One connection per other broker, for the coordinator's own requests (markers, verification)."""

    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self._conns: dict[int, Any] = {}

    async def request(self, broker_id: int, req: Any) -> Any:
        from epochlog.server.cluster.peer import PeerConnection, PeerError

        ep = self.broker.image.brokers.get(broker_id)
        if ep is None or ep.fenced:
            raise PeerError(f"broker {broker_id} is not live")
        conn = self._conns.get(broker_id)
        if conn is None or (conn.host, conn.port) != (ep.host, ep.port):
            if conn is not None:
                conn.close()
            conn = self._conns[broker_id] = PeerConnection(
                ep.host, ep.port, f"txn-{self.broker.config.node_id}", self.broker.peer_security
            )
        await conn.connect()
        return await conn.request(req, timeout=self.broker.config.request_timeout_ms / 1000)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()


class TxnCoordinators:
    def __init__(self, broker: ClusterBroker) -> None:
        from epochlog.server.transactions.markers import MarkerSender

        self.broker = broker
        self.cores: dict[int, TxnCoordinator] = {}
        self.replies: dict[str, asyncio.Future[Reply]] = {}
        self._pids: list[int] = []  # ids fetched ahead, so the core can take one without waiting
        self.peers = BrokerPeers(broker)
        self.markers = MarkerSender(broker, self)
        self._tasks: set[asyncio.Future[Any]] = set()
        self._timer: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._timer = asyncio.create_task(self._timers())

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.markers.close()
        self.peers.close()

    def _spawn(self, coro: Any) -> None:
        fut = asyncio.ensure_future(coro)
        self._tasks.add(fut)
        fut.add_done_callback(self._tasks.discard)

    @property
    def num_partitions(self) -> int:
        info = self.broker.image.topics.get(TXN_TOPIC)
        if info is not None and info.partitions:
            return len(info.partitions)
        return self.broker.config.transaction_state_log_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # -- leadership of __transaction_state partitions --------------------------------------------
    def follow(self, p: int, part: Partition | None) -> None:
        """Coordinate the ids of __transaction_state-p exactly while leading it, at its leader epoch."""
        from epochlog.replication.types import Role

        leading = part is not None and part.replica.role is Role.LEADER and not part.offline
        core = self.cores.get(p)
        if leading and part is not None:
            if core is not None and core.coordinator_epoch == part.leader_epoch:
                return
            self._load(p, part)
        elif core is not None:
            self._unload(p)

    def _load(self, p: int, part: Partition) -> None:
        core = TxnCoordinator(
            self._take_pid, self.broker.config.transaction_max_timeout_ms, coordinator_epoch=part.leader_epoch
        )
        loaded = 0
        for batch in internal_log.read_batches(part):
            try:
                for r in iter_records(batch):
                    if r.key is None:
                        continue
                    tid = log_format.decode_key(r.key)
                    core.replay(tid, log_format.decode_value(tid, r.value))
                    loaded += 1
            except ValueError as e:  # BadTxnRecord and a corrupt batch alike: what cannot be read is skipped
                log.error("%s-%d: skipping an unreadable record: %s", TXN_TOPIC, p, e)
        old = self.cores.get(p)
        if old is not None:
            self._fail_pending(old)
        self.cores[p] = core
        log.info(
            "%s-%d: coordinating %d transactional ids at coordinator epoch %d (%d records read)",
            TXN_TOPIC,
            p,
            len(core.txns),
            core.coordinator_epoch,
            loaded,
        )
        for sm in core.resume():
            self.markers.send(p, sm)

    def _unload(self, p: int) -> None:
        core = self.cores.pop(p, None)
        if core is not None:
            self._fail_pending(core)
            log.info("%s-%d: no longer coordinating its transactional ids", TXN_TOPIC, p)

    def _fail_pending(self, core: TxnCoordinator) -> None:
        for tid in list(core.pending):
            fut = self.replies.pop(tid, None)
            if fut is not None and not fut.done():
                fut.set_result(Reply(Err.NOT_COORDINATOR))

    def core_for(self, transactional_id: str) -> tuple[TxnCoordinator | None, Err]:
        """The core coordinating the id here, or the error a client should get."""
        if not transactional_id:
            return None, Err.INVALID_REQUEST
        info = self.broker.image.topics.get(TXN_TOPIC)
        if info is None or not info.partitions:
            return None, Err.COORDINATOR_NOT_AVAILABLE
        core = self.cores.get(self.partition_for(transactional_id))
        return (core, Err.NONE) if core is not None else (None, Err.NOT_COORDINATOR)

    def current(self, p: int, core: TxnCoordinator) -> bool:
        return self.cores.get(p) is core

    # -- producer ids ------------------------------------------------------------------------------
    def _take_pid(self) -> int:
        return self._pids.pop()

    async def _ensure_pid(self) -> None:
        if not self._pids:
            self._pids.append(await self.broker.producer_ids.allocate_async())

    # -- requests ----------------------------------------------------------------------------------
    async def init_producer_id(self, tid: str, timeout_ms: int, expected: tuple[int, int] | None, now_ms: int) -> Reply:
        core, err = self.core_for(tid)
        if core is None:
            return Reply(err)  # asked the wrong broker: no id is fetched from the controller for it
        try:
            await self._ensure_pid()
        except Exception as e:  # the controller is unreachable: the client retries
            log.info("no producer id for %r: %s", tid, e)
            return Reply(Err.COORDINATOR_NOT_AVAILABLE)
        core, err = self.core_for(tid)  # leadership may have moved while the id was fetched
        if core is None:
            return Reply(err)
        return await self._run(core, core.init_producer_id(tid, timeout_ms, expected, now_ms))

    async def add_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition], now_ms: int
    ) -> Reply:
        core, err = self.core_for(tid)
        if core is None:
            return Reply(err)
        return await self._run(core, core.add_partitions(tid, producer_id, epoch, partitions, now_ms))

    async def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool, now_ms: int) -> Reply:
        core, err = self.core_for(tid)
        if core is None:
            return Reply(err)
        return await self._run(core, core.end_txn(tid, producer_id, epoch, commit, now_ms))

    def verify(
        self, tid: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Err]:
        core, err = self.core_for(tid)
        if core is None:
            return dict.fromkeys(partitions, err)
        return core.verify_partitions(tid, producer_id, epoch, partitions)

    async def verify_anywhere(
        self, tid: str, producer_id: int, epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, Err]:
        """KIP-890 part 1 from a partition leader: asks the id's coordinator, here or on another broker
        (AddPartitionsToTxn v4 with verify_only)."""
        leader = self.broker.txn_coordinator_for(tid)
        if leader < 0:
            return dict.fromkeys(partitions, Err.COORDINATOR_NOT_AVAILABLE)
        if leader == self.broker.config.node_id:
            return self.verify(tid, producer_id, epoch, partitions)
        from kio.schema.add_partitions_to_txn.v4.request import (
            AddPartitionsToTxnRequest,
            AddPartitionsToTxnTopic,
            AddPartitionsToTxnTransaction,
        )
        from kio.static.primitive import i16, i32, i64

        by_topic = partitions_by_topic(partitions)
        req = AddPartitionsToTxnRequest(
            transactions=(
                AddPartitionsToTxnTransaction(
                    transactional_id=tid,  # type: ignore[arg-type]
                    producer_id=i64(producer_id),  # type: ignore[arg-type]
                    producer_epoch=i16(epoch),
                    verify_only=True,
                    topics=tuple(
                        AddPartitionsToTxnTopic(name=t, partitions=tuple(i32(p) for p in ps))  # type: ignore[arg-type]
                        for t, ps in by_topic.items()
                    ),
                ),
            )
        )
        from epochlog.server.cluster.peer import PeerError
        from epochlog.server.transactions.partition_markers import err_of

        try:
            resp = await self.peers.request(leader, req)
        except PeerError as e:
            log.info("verifying %r with broker %d: %s", tid, leader, e)
            return dict.fromkeys(partitions, Err.COORDINATOR_NOT_AVAILABLE)
        out: dict[TopicPartition, Err] = {}
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for row in t.results_by_partition:
                    out[(str(t.name), int(row.partition_index))] = err_of(row.partition_error_code)
        return out

    def describe(self, tid: str) -> tuple[Err, TxnMetadata | None]:
        core, err = self.core_for(tid)
        if core is None:
            return err, None
        txn = core.txns.get(tid)
        return (Err.NONE, txn) if txn is not None else (Err.TRANSACTIONAL_ID_NOT_FOUND, None)

    def all_transactions(self) -> list[TxnMetadata]:
        return [t for core in self.cores.values() for t in core.txns.values()]

    # -- carrying decisions out -------------------------------------------------------------------
    async def _run(self, core: TxnCoordinator, decision: Reply | Write) -> Reply:
        if isinstance(decision, Reply):
            return decision
        tid = decision.record.transactional_id
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.replies[tid] = fut
        self._spawn(self._write(self.partition_for(tid), core, decision))
        return await fut

    async def _write(self, p: int, core: TxnCoordinator, w: Write) -> None:
        from epochlog.clock import now_ms

        tid = w.record.transactional_id
        ok = False
        part = self.broker.partition(TXN_TOPIC, p)
        if part is not None and self.current(p, core):
            key = log_format.encode_key(tid)
            batch = build_batch([(key, log_format.encode_value(w.record))], base_timestamp=now_ms())
            try:
                await internal_log.append_durably(part, batch, self.broker.config.request_timeout_ms / 1000, now_ms())
                ok = self.current(p, core)  # leadership may have moved while the ISR replicated it
            except Exception as e:
                log.info("%s-%d: writing the state of %r failed: %s", TXN_TOPIC, p, tid, e)
        if ok and w.record.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            self.broker.metrics.txn_completed_one(w.record.state is TxnState.COMPLETE_COMMIT)
        for effect in core.written(tid, ok):
            if isinstance(effect, Reply):
                fut = self.replies.pop(tid, None)
                if fut is not None and not fut.done():
                    fut.set_result(effect)
            elif isinstance(effect, SendMarkers):
                self.markers.send(p, effect)

    def markers_done(self, p: int, sm: SendMarkers) -> None:
        """Every partition of the transaction has its marker: write the completing record."""
        from epochlog.clock import now_ms

        core = self.cores.get(p)
        if core is None or core.coordinator_epoch != sm.coordinator_epoch:
            return  # another term's coordinator finishes it
        w = core.markers_written(sm.transactional_id, sm.producer_id, sm.producer_epoch, now_ms())
        if isinstance(w, Write):
            self._spawn(self._write(p, core, w))

    # -- timers ------------------------------------------------------------------------------------
    async def _timers(self) -> None:
        from epochlog.clock import now_ms

        cfg = self.broker.config
        abort_every = cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        remove_every = cfg.transaction_remove_expired_transaction_cleanup_interval_ms / 1000
        loop = asyncio.get_running_loop()
        next_remove = loop.time() + remove_every
        while True:
            await asyncio.sleep(abort_every)
            for p, core in list(self.cores.items()):
                for w in core.expire(now_ms()):
                    log.info("%s: transaction timed out; aborting it", w.record.transactional_id)
                    self._spawn(self._write(p, core, w))
            if loop.time() >= next_remove:
                next_remove = loop.time() + remove_every
                for p, core in list(self.cores.items()):
                    for w in core.expire_ids(now_ms(), cfg.transactional_id_expiration_ms):
                        self._spawn(self._write(p, core, w))
