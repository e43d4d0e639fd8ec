"""The transaction coordinator's rules, one request at a time: KIP-98's state machine, fencing of zombie
producers (KIP-360 retries included), timeouts, and that nothing moves before its record is durable."""

from __future__ import annotations

import itertools

import pytest

from epochlog.protocol.errors import Err
from epochlog.transactions.coordinator import Reply, SendMarkers, TxnCoordinator, Write
from epochlog.transactions.log_format import BadTxnRecord, decode_key, decode_value, encode_key, encode_value
from epochlog.transactions.state import MAX_PRODUCER_EPOCH, IllegalTransition, TxnMetadata, TxnState

pytestmark = pytest.mark.unit

TID = "copier-1"
T0, T1 = ("out", 0), ("out", 1)


def coordinator() -> TxnCoordinator:
    ids = itertools.count(1000)
    return TxnCoordinator(lambda: next(ids), coordinator_epoch=3)


def commit_write(c: TxnCoordinator, d: object) -> list[object]:
    assert isinstance(d, Write), d
    return list(c.written(d.record.transactional_id, True))


def started(c: TxnCoordinator) -> tuple[int, int]:
    [reply] = commit_write(c, c.init_producer_id(TID, 60_000, None, 0))
    assert isinstance(reply, Reply) and reply.error == Err.NONE
    return reply.producer_id, reply.producer_epoch


def ongoing(c: TxnCoordinator, now: int = 10) -> tuple[int, int]:
    pid, epoch = started(c)
    assert commit_write(c, c.add_partitions(TID, pid, epoch, [T0, T1], now)) == [Reply(Err.NONE)]
    return pid, epoch


def test_a_new_id_gets_epoch_0_once_its_record_is_durable() -> None:
    c = coordinator()
    d = c.init_producer_id(TID, 60_000, None, 0)
    assert isinstance(d, Write) and d.record.state is TxnState.EMPTY and TID not in c.txns
    assert c.init_producer_id(TID, 60_000, None, 0) == Reply(Err.CONCURRENT_TRANSACTIONS)
    assert c.written(TID, True) == [Reply(Err.NONE, 1000, 0)]
    again = commit_write(c, c.init_producer_id(TID, 60_000, None, 5))
    assert again == [Reply(Err.NONE, 1000, 1)]
    assert (c.txns[TID].last_producer_id, c.txns[TID].last_producer_epoch) == (1000, 0)


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_a_timeout_outside_the_bound_is_refused(timeout: int) -> None:
    assert coordinator().init_producer_id(TID, timeout, None, 0) == Reply(Err.INVALID_TRANSACTION_TIMEOUT)


def test_add_partitions_checks_the_producer_and_writes_only_what_is_new() -> None:
    c = coordinator()
    pid, epoch = started(c)
    assert c.add_partitions("other", pid, epoch, [T0], 1) == Reply(Err.INVALID_PRODUCER_ID_MAPPING)
    assert c.add_partitions(TID, pid + 1, epoch, [T0], 1) == Reply(Err.INVALID_PRODUCER_ID_MAPPING)
    assert c.add_partitions(TID, pid, epoch - 1, [T0], 1) == Reply(Err.PRODUCER_FENCED)
    assert c.txns[TID].state is TxnState.EMPTY  # none of those changed anything
    commit_write(c, c.add_partitions(TID, pid, epoch, [T0], 7))
    assert c.txns[TID].state is TxnState.ONGOING and c.txns[TID].start_ms == 7
    assert c.add_partitions(TID, pid, epoch, [T0], 8) == Reply(Err.NONE) and TID not in c.pending
    commit_write(c, c.add_partitions(TID, pid, epoch, [T1], 9))
    assert c.txns[TID].partitions == {T0, T1} and c.txns[TID].start_ms == 7


def test_commit_prepares_sends_markers_and_completes() -> None:
    c = coordinator()
    pid, epoch = ongoing(c)
    effects = commit_write(c, c.end_txn(TID, pid, epoch, True, 20))
    assert effects == [
        Reply(Err.NONE, pid, epoch),
        SendMarkers(TID, pid, epoch, True, frozenset({T0, T1}), 3),
    ]
    assert c.txns[TID].state is TxnState.PREPARE_COMMIT
    assert c.end_txn(TID, pid, epoch, True, 21) == Reply(Err.CONCURRENT_TRANSACTIONS)
    assert c.add_partitions(TID, pid, epoch, [T0], 21) == Reply(Err.CONCURRENT_TRANSACTIONS)
    assert c.markers_written(TID, pid, epoch - 1, 22) is None  # a stale report changes nothing
    assert commit_write(c, c.markers_written(TID, pid, epoch, 22)) == []
    assert c.txns[TID].state is TxnState.COMPLETE_COMMIT and not c.txns[TID].partitions
    assert c.end_txn(TID, pid, epoch, True, 23) == Reply(Err.NONE, pid, epoch)  # a retry
    assert c.end_txn(TID, pid, epoch, False, 23) == Reply(Err.INVALID_TXN_STATE)


def test_end_txn_with_nothing_open_is_an_invalid_state() -> None:
    c = coordinator()
    pid, epoch = started(c)
    assert c.end_txn(TID, pid, epoch, True, 1) == Reply(Err.INVALID_TXN_STATE)


def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction() -> None:
    c = coordinator()
    pid, epoch = ongoing(c)
    d = c.init_producer_id(TID, 60_000, None, 30)
    assert isinstance(d, Write) and d.record.state is TxnState.PREPARE_ABORT
    assert d.record.producer_epoch == epoch + 1
    effects = c.written(TID, True)
    abort = SendMarkers(TID, pid, epoch + 1, False, frozenset({T0, T1}), 3)
    assert effects == [Reply(Err.CONCURRENT_TRANSACTIONS), abort]
    # The zombie, still at the old epoch, can neither add nor commit.
    assert c.add_partitions(TID, pid, epoch, [T0], 31) == Reply(Err.PRODUCER_FENCED)
    assert c.end_txn(TID, pid, epoch, True, 31) == Reply(Err.PRODUCER_FENCED)
    assert c.init_producer_id(TID, 60_000, None, 31) == Reply(Err.CONCURRENT_TRANSACTIONS)  # markers pending
    commit_write(c, c.markers_written(TID, pid, epoch + 1, 32))
    assert commit_write(c, c.init_producer_id(TID, 60_000, None, 33)) == [Reply(Err.NONE, pid, epoch + 2)]


def test_an_expired_transaction_is_aborted_with_the_producer_fenced() -> None:
    c = coordinator()
    pid, epoch = ongoing(c, now=100)
    assert c.expire(100 + 60_000) == []
    [w] = c.expire(100 + 60_001)
    assert w.record.state is TxnState.PREPARE_ABORT and w.record.producer_epoch == epoch + 1
    assert c.written(TID, True)[-1] == SendMarkers(TID, pid, epoch + 1, False, frozenset({T0, T1}), 3)
    assert c.end_txn(TID, pid, epoch, True, 70_000) == Reply(Err.PRODUCER_FENCED)


def test_kip_360_a_retried_init_gets_the_same_answer_and_a_stranger_is_fenced() -> None:
    c = coordinator()
    pid, epoch = started(c)
    bumped = commit_write(c, c.init_producer_id(TID, 60_000, (pid, epoch), 1))
    assert bumped == [Reply(Err.NONE, pid, epoch + 1)]
    assert c.init_producer_id(TID, 60_000, (pid, epoch), 2) == Reply(Err.NONE, pid, epoch + 1)  # no write
    assert TID not in c.pending
    assert c.init_producer_id(TID, 60_000, (pid, epoch + 7), 2) == Reply(Err.PRODUCER_FENCED)


def test_an_exhausted_epoch_gets_a_new_producer_id() -> None:
    c = coordinator()
    c.replay(TID, TxnMetadata(TID, 5, MAX_PRODUCER_EPOCH, 60_000, TxnState.COMPLETE_COMMIT))
    assert commit_write(c, c.init_producer_id(TID, 60_000, None, 0)) == [Reply(Err.NONE, 1000, 0)]


def test_a_failed_write_changes_nothing_and_says_not_coordinator() -> None:
    c = coordinator()
    pid, epoch = ongoing(c)
    before = c.txns[TID]
    c.end_txn(TID, pid, epoch, True, 5)
    assert c.written(TID, False) == [Reply(Err.NOT_COORDINATOR)]
    assert c.txns[TID] == before and TID not in c.pending


def test_a_new_coordinator_finishes_what_the_old_one_prepared() -> None:
    c = coordinator()
    c.replay(TID, TxnMetadata(TID, 9, 2, 60_000, TxnState.PREPARE_ABORT, frozenset({T0})))
    c.replay("gone", TxnMetadata("gone", 8, 0, 60_000, TxnState.EMPTY))
    c.replay("gone", None)
    assert c.resume() == [SendMarkers(TID, 9, 2, False, frozenset({T0}), 3)]
    assert "gone" not in c.txns


def test_verify_partitions_for_kip_890() -> None:
    c = coordinator()
    pid, epoch = ongoing(c)
    assert c.verify_partitions(TID, pid, epoch, [T0, ("elsewhere", 0)]) == {
        T0: Err.NONE,
        ("elsewhere", 0): Err.INVALID_TXN_STATE,
    }
    assert c.verify_partitions(TID, pid, epoch - 1, [T0]) == {T0: Err.PRODUCER_FENCED}


def test_idle_ids_expire_with_a_tombstone() -> None:
    c = coordinator()
    started(c)
    [w] = c.expire_ids(10**9, expiration_ms=1000)
    assert w.record.state is TxnState.DEAD and encode_value(w.record) is None
    c.written(TID, True)
    assert TID not in c.txns


def test_illegal_transitions_are_bugs() -> None:
    with pytest.raises(IllegalTransition):
        TxnMetadata(TID, 1, 0, 1000, TxnState.EMPTY).to(TxnState.PREPARE_COMMIT, 0)


def test_records_round_trip_in_kafkas_format() -> None:
    txn = TxnMetadata(TID, 1234, 7, 60_000, TxnState.ONGOING, frozenset({T0, T1, ("b", 3)}), 11, 12)
    key, value = encode_key(TID), encode_value(txn)
    assert key == b"\x00\x00\x00\x08copier-1"
    assert decode_key(key) == TID and decode_value(TID, value) == txn
    assert decode_value(TID, None) is None
    assert value is not None
    for bad in (value[:-1], value + b"\x00", b"\x00\x05" + value[2:], value[:20]):
        with pytest.raises(BadTxnRecord):
            decode_value(TID, bad)
    with pytest.raises(BadTxnRecord):
        decode_key(b"\x00")
