"""The transaction coordinator's decisions (KIP-98, KIP-360), sans-IO.

The coordinator for a transactional id is the leader of its ``__transaction_state`` partition. Every
change of a transactional id's state is a record in that partition, and it takes effect only once the
record is durable there (acks=all): a request is answered after its write, and a coordinator that fails
over replays the partition and carries on from the last durable state. So each decision here is one of:

- ``Reply``: answer now, nothing changes (an error, or a retry of something already done);
- ``Write``: append this record; when the driver reports it durable (``written``), the state moves and the
  held request gets its ``reply``; a state of PrepareCommit or PrepareAbort also asks for the markers;
- ``SendMarkers``: write COMMIT/ABORT markers to every partition of the transaction; when all are written
  (``markers_written``) the transaction completes with one more record.

While a record of a transactional id is being written, every other request for it gets
CONCURRENT_TRANSACTIONS, as in Kafka (the client retries), so at most one transition is in flight per id.
The driver (the broker's asyncio side) appends, sends and answers; the rules live here so that unit tests
and the simulator check what users run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from epochlog.codes import Err
from epochlog.transactions.state import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    TxnState,
)

DEFAULT_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
DEFAULT_ID_EXPIRATION_MS = 604_800_000  # transactional.id.expiration.ms


@dataclass(frozen=True)
class Reply:
    error: Err
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class Write:
    record: TxnMetadata  # a DEAD record is written as a tombstone
    reply: Reply | None = None


@dataclass(frozen=True)
class SendMarkers:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    coordinator_epoch: int


Decision = Reply | Write
Effect = Reply | Write | SendMarkers


@dataclass
class TxnCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads."""

    new_producer_id: Callable[[], int]
    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    coordinator_epoch: int = 0
    txns: dict[str, TxnMetadata] = field(default_factory=dict)
    pending: dict[str, Write] = field(default_factory=dict)

    # -- loading -----------------------------------------------------------------------------
    def replay(self, transactional_id: str, record: TxnMetadata | None) -> None:
        """A record of the partition as this coordinator loads it (None: a tombstone)."""
        if record is None or record.state is TxnState.DEAD:
            self.txns.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = record

    def resume(self) -> list[SendMarkers]:
        """After loading: the transactions a previous coordinator prepared and did not complete. Their
        markers are sent again (writing a marker twice is harmless; completing twice cannot happen)."""
        return [self._markers(t) for t in self.txns.values() if t.state.is_prepare]

    # -- requests ----------------------------------------------------------------------------
    def init_producer_id(
        self, tid: str, timeout_ms: int, expected: tuple[int, int] | None, now_ms: int
    ) -> Decision:
        """InitProducerId with a transactional id. ``expected``: the (producer id, epoch) a v3+ client
        already holds, None when it holds none."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return Reply(Err.INVALID_TRANSACTION_TIMEOUT)
        if tid in self.pending:
            return Reply(Err.CONCURRENT_TRANSACTIONS)
        txn = self.txns.get(tid)
        if txn is None:
            pid = self.new_producer_id()
            record = TxnMetadata(tid, pid, 0, timeout_ms, TxnState.EMPTY, last_update_ms=now_ms)
            return self._write(record, Reply(Err.NONE, pid, 0))
        if expected is not None and expected[0] != NO_PRODUCER_ID:
            if (txn.last_producer_id, txn.last_producer_epoch) == expected and txn.state is not TxnState.ONGOING:
                # A retry of a bump that already happened (its answer was lost): the same answer again.
                return Reply(Err.NONE, txn.producer_id, txn.producer_epoch)
            if (txn.producer_id, txn.producer_epoch) != expected:
                return Reply(Err.PRODUCER_FENCED)
        if txn.state.is_prepare or txn.state is TxnState.DEAD:
            return Reply(Err.CONCURRENT_TRANSACTIONS)
        if txn.state is TxnState.ONGOING:
            # A new incarnation of the producer: fence the old one (epoch + 1, never handed out) and abort
            # its transaction first; once that is durable the client hears CONCURRENT_TRANSACTIONS, retries,
            # and gets an epoch after the fenced one.
            return self._write(self._fenced_abort(txn, now_ms), Reply(Err.CONCURRENT_TRANSACTIONS))
        pid, epoch = txn.producer_id, txn.producer_epoch + 1
        if txn.producer_epoch >= MAX_PRODUCER_EPOCH:
            pid, epoch = self.new_producer_id(), 0
        record = txn.to(
            TxnState.EMPTY,
            now_ms,
            producer_id=pid,
            producer_epoch=epoch,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            last_producer_id=txn.producer_id,
            last_producer_epoch=txn.producer_epoch,
        )
        return self._write(record, Reply(Err.NONE, pid, epoch))

    def add_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition], now_ms: int
    ) -> Decision:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's ``__consumer_offsets`` partition)."""
        txn, error = self._check(tid, producer_id, epoch)
        if txn is None:
            return Reply(error)
        if txn.state.is_prepare or txn.state is TxnState.DEAD:
            return Reply(Err.CONCURRENT_TRANSACTIONS)
        wanted = frozenset(partitions)
        if txn.state is TxnState.ONGOING and wanted <= txn.partitions:
            return Reply(Err.NONE)  # already part of the transaction: nothing to write
        start = txn.start_ms if txn.state is TxnState.ONGOING else now_ms
        record = txn.to(TxnState.ONGOING, now_ms, partitions=txn.partitions | wanted, start_ms=start)
        return self._write(record, Reply(Err.NONE))

    def verify_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Err]:
        """KIP-890 part 1: a leader asks, before a producer's first transactional write to a partition,
        whether the partition is in the producer's ongoing transaction. Changes nothing."""
        txn, error = self._check(tid, producer_id, epoch)
        out = {}
        for tp in partitions:
            if txn is None:
                out[tp] = error
            elif txn.state is TxnState.ONGOING and tp in txn.partitions:
                out[tp] = Err.NONE
            else:
                out[tp] = Err.INVALID_TXN_STATE
        return out

    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool, now_ms: int) -> Decision:
        txn, error = self._check(tid, producer_id, epoch)
        if txn is None:
            return Reply(error)
        wanted = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if txn.state is TxnState.ONGOING:
            return self._write(txn.to(preparing, now_ms), Reply(Err.NONE, txn.producer_id, txn.producer_epoch))
        if txn.state is wanted:
            return Reply(Err.NONE, txn.producer_id, txn.producer_epoch)  # a retry of a finished EndTxn
        if txn.state is preparing:
            return Reply(Err.CONCURRENT_TRANSACTIONS)  # still writing markers: the client retries
        return Reply(Err.INVALID_TXN_STATE)

    # -- the driver reports ----------------------------------------------------------------------
    def written(self, tid: str, ok: bool) -> list[Effect]:
        """The pending record of ``tid`` is durable (``ok``) or could not be written. Returns what follows:
        the held reply, and markers to send once a transaction is prepared."""
        pending = self.pending.pop(tid, None)
        if pending is None:
            return []
        if not ok:
            # Kafka answers NOT_COORDINATOR when the append fails (the partition moved, or lost min ISR):
            # the client looks the coordinator up again and retries.
            return [Reply(Err.NOT_COORDINATOR)] if pending.reply is not None else []
        record = pending.record
        if record.state is TxnState.DEAD:
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = record
        effects: list[Effect] = [pending.reply] if pending.reply is not None else []
        if record.state.is_prepare:
            effects.append(self._markers(record))
        return effects

    def markers_written(self, tid: str, producer_id: int, epoch: int, now_ms: int) -> Decision | None:
        """Every partition has the marker: the transaction completes (one more record, no reply)."""
        txn = self.txns.get(tid)
        if txn is None or not txn.state.is_prepare or (txn.producer_id, txn.producer_epoch) != (producer_id, epoch):
            return None  # a stale report: the transaction moved on (or another coordinator owns it now)
        if tid in self.pending:
            return None
        done = TxnState.COMPLETE_COMMIT if txn.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        # The start time stays, as in Kafka: DescribeTransactions shows when the last transaction began, and
        # ListTransactions' duration filter measures from it; InitProducerId clears it (Empty has none).
        return self._write(txn.to(done, now_ms, partitions=frozenset()), None)

    # -- time -----------------------------------------------------------------------------------
    def expire(self, now_ms: int) -> list[Write]:
        """Ongoing transactions older than their timeout are aborted, fencing the producer (its late
        writes are refused) as Kafka's coordinator does every
        transaction.abort.timed.out.transaction.cleanup.interval.ms."""
        out = []
        for tid, txn in list(self.txns.items()):
            if tid in self.pending or txn.state is not TxnState.ONGOING:
                continue
            if now_ms - txn.start_ms > txn.timeout_ms:
                out.append(self._write(self._fenced_abort(txn, now_ms), None))
        return out

    def expire_ids(self, now_ms: int, expiration_ms: int = DEFAULT_ID_EXPIRATION_MS) -> list[Write]:
        """Transactional ids idle (Empty or Complete*) for ``transactional.id.expiration.ms`` are removed
        with a tombstone."""
        out = []
        for tid, txn in list(self.txns.items()):
            idle = txn.state is TxnState.EMPTY or txn.state.is_complete
            if tid not in self.pending and idle and now_ms - txn.last_update_ms > expiration_ms:
                out.append(self._write(txn.to(TxnState.DEAD, now_ms), None))
        return out

    # -- helpers --------------------------------------------------------------------------------
    def _check(self, tid: str, producer_id: int, epoch: int) -> tuple[TxnMetadata | None, Err]:
        """The transaction a client's request names, or why it cannot act on it."""
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return None, Err.INVALID_PRODUCER_ID_MAPPING
        if epoch != txn.producer_epoch:
            return None, Err.PRODUCER_FENCED
        if tid in self.pending:
            return None, Err.CONCURRENT_TRANSACTIONS
        return txn, Err.NONE

    def _fenced_abort(self, txn: TxnMetadata, now_ms: int) -> TxnMetadata:
        # The bumped epoch goes on the markers, so the fenced producer's in-flight writes are refused.
        return txn.to(TxnState.PREPARE_ABORT, now_ms, producer_epoch=txn.producer_epoch + 1)

    def _write(self, record: TxnMetadata, reply: Reply | None) -> Write:
        w = Write(record, reply)
        self.pending[record.transactional_id] = w
        return w

    def _markers(self, txn: TxnMetadata) -> SendMarkers:
        return SendMarkers(
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.state is TxnState.PREPARE_COMMIT,
            txn.partitions,
            self.coordinator_epoch,
        )
