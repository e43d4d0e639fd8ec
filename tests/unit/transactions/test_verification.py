"""KIP-890 part 1's rules at a partition leader: which transactional writes wait for the coordinator, and
what its answer (and a marker landing meanwhile) makes of the partition's produce answer."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from epochlog.codes import Err
from epochlog.transactions.verification import (
    COORDINATOR_BUSY,
    Unverified,
    answer,
    by_producer,
    needs_verification,
    not_in_transaction,
)

pytestmark = pytest.mark.unit

V11 = 11  # knows TRANSACTION_ABORTABLE
V10 = 10


@dataclass
class Entry:
    epoch: int
    current_txn_first_offset: int = -1


def test_a_first_transactional_write_waits_for_the_coordinator() -> None:
    assert needs_verification(True, True, 3, None)  # the producer never wrote here
    assert needs_verification(True, True, 3, Entry(3, -1))  # wrote here, but no transaction is open
    assert needs_verification(True, True, 4, Entry(3, 100))  # a transaction is open, at an older epoch


def test_a_write_into_an_open_transaction_goes_straight_in() -> None:
    assert not needs_verification(True, True, 3, Entry(3, 100))
    assert not needs_verification(True, True, 3, Entry(3, 0))  # opened at offset 0: still open


def test_non_transactional_batches_are_never_held() -> None:
    assert not needs_verification(False, True, 3, None)  # idempotent only
    assert not needs_verification(True, False, 3, None)  # no producer id: validation refuses it


def test_the_coordinator_vouching_lets_the_write_in() -> None:
    assert answer(Err.NONE, 2, 2, V11) is Err.NONE


def test_a_marker_landing_while_the_coordinator_was_asked_voids_its_answer() -> None:
    # The transaction the coordinator vouched for ended meanwhile: appending would open one nobody closes.
    assert answer(Err.NONE, 2, 3, V11) is Err.TRANSACTION_ABORTABLE
    assert answer(Err.NONE, 2, 3, V10) is Err.INVALID_TXN_STATE


def test_a_fenced_producer_gets_invalid_producer_epoch() -> None:
    assert answer(Err.PRODUCER_FENCED, 0, 0, V11) is Err.INVALID_PRODUCER_EPOCH
    assert answer(Err.INVALID_PRODUCER_EPOCH, 0, 0, V10) is Err.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("code", sorted(COORDINATOR_BUSY))
def test_a_busy_coordinator_makes_the_write_retriable(code: Err) -> None:
    assert answer(code, 0, 0, V11) is Err.NOT_ENOUGH_REPLICAS
    # The coordinator's word comes first: a marker landing too changes nothing about that.
    assert answer(code, 0, 1, V11) is Err.NOT_ENOUGH_REPLICAS


def test_no_answer_from_the_coordinator_is_a_busy_one() -> None:
    assert answer(None, 0, 0, V11) is Err.NOT_ENOUGH_REPLICAS


def test_a_partition_outside_the_transaction_aborts_it_where_the_client_knows_how() -> None:
    assert answer(Err.INVALID_TXN_STATE, 0, 0, V11) is Err.TRANSACTION_ABORTABLE
    assert answer(Err.INVALID_TXN_STATE, 0, 0, V10) is Err.INVALID_TXN_STATE
    assert answer(Err.TRANSACTIONAL_ID_NOT_FOUND, 0, 0, V11) is Err.TRANSACTION_ABORTABLE


def test_not_in_transaction_by_version() -> None:
    assert not_in_transaction(12) is Err.TRANSACTION_ABORTABLE
    assert not_in_transaction(3) is Err.INVALID_TXN_STATE


def test_one_question_per_producer_and_epoch() -> None:
    held = [
        Unverified("a", 0, 7, 1, 0),
        Unverified("b", 2, 7, 1, 5),
        Unverified("a", 1, 7, 2, 0),
        Unverified("a", 3, 8, 1, 0),
    ]
    assert by_producer(held) == {(7, 1): [("a", 0), ("b", 2)], (7, 2): [("a", 1)], (8, 1): [("a", 3)]}
