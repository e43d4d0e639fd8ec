"""The transaction tools' pure rules: ListTransactions' filters at the coordinator, and which open
transactions kafka-transactions.sh's find-hanging reports and which marker its abort sends."""

from __future__ import annotations

import pytest

from epochlog.client.transactions import (
    Description,
    OpenTxn,
    ProducerState,
    TxnAdminError,
    abort_spec,
    candidates,
    hanging,
)
from epochlog.transactions.admin import ListFilter, list_transactions, partitions_by_topic
from epochlog.transactions.state import TxnMetadata, TxnState

pytestmark = pytest.mark.unit

NOW = 1_000_000


def txn(
    tid: str, pid: int, state: TxnState, start: int = -1, parts: frozenset[tuple[str, int]] = frozenset()
) -> TxnMetadata:
    return TxnMetadata(tid, pid, 0, 60_000, state, parts, start_ms=start, last_update_ms=start)


TXNS = [
    txn("b-ongoing", 2, TxnState.ONGOING, NOW - 5_000, frozenset({("t", 1), ("t", 0), ("u", 3)})),
    txn("a-empty", 1, TxnState.EMPTY),
    txn("c-done", 3, TxnState.COMPLETE_COMMIT, NOW - 9_000),
    txn("d-young", 4, TxnState.ONGOING, NOW - 100),
    txn("e-dead", 5, TxnState.DEAD),
]


def ids(flt: ListFilter) -> list[str]:
    return [t.transactional_id for t in list_transactions(TXNS, flt, NOW)]


def test_no_filter_lists_every_id_but_the_dead_in_id_order() -> None:
    assert ids(ListFilter()) == ["a-empty", "b-ongoing", "c-done", "d-young"]


def test_state_filter_uses_kafkas_names_and_echoes_unknown_ones() -> None:
    assert ids(ListFilter(states=("Ongoing",))) == ["b-ongoing", "d-young"]
    assert ids(ListFilter(states=("CompleteCommit", "Empty"))) == ["a-empty", "c-done"]
    flt = ListFilter(states=("Ongoing", "Running", "ONGOING"))
    assert flt.unknown_states() == ["Running", "ONGOING"]
    assert ids(flt) == ["b-ongoing", "d-young"]
    # Only unknown names: nothing matches, as in Kafka (the filter is not dropped).
    assert ids(ListFilter(states=("Running",))) == []
    assert ids(ListFilter(states=("Dead",))) == []


def test_producer_id_filter() -> None:
    assert ids(ListFilter(producer_ids=frozenset({3, 4, 99}))) == ["c-done", "d-young"]
    assert ids(ListFilter(producer_ids=frozenset({99}))) == []


def test_duration_filter_lists_transactions_running_longer_than_it() -> None:
    # Measured from the start of the id's last transaction whatever its state, as Kafka does; an id that
    # never ran one since InitProducerId (Empty, no start) is not listed.
    assert ids(ListFilter(duration_ms=1_000)) == ["b-ongoing", "c-done"]
    assert ids(ListFilter(duration_ms=0)) == ["b-ongoing", "c-done", "d-young"]
    assert ids(ListFilter(duration_ms=5_000)) == ["c-done"]  # exactly as long is not longer
    assert ids(ListFilter(duration_ms=9_000)) == []
    assert ids(ListFilter(duration_ms=-1)) == ["a-empty", "b-ongoing", "c-done", "d-young"]
    # Filters combine.
    assert ids(ListFilter(states=("Ongoing",), producer_ids=frozenset({4}), duration_ms=0)) == ["d-young"]


def test_a_completed_transaction_keeps_its_start_time_until_the_next_init() -> None:
    import itertools

    from epochlog.transactions.coordinator import TxnCoordinator, Write

    c = TxnCoordinator(lambda: next(itertools.count(7)), coordinator_epoch=1)

    def durable(d: object) -> None:
        assert isinstance(d, Write)
        c.written(d.record.transactional_id, True)

    durable(c.init_producer_id("x", 60_000, None, 10))
    assert c.txns["x"].start_ms == -1
    durable(c.add_partitions("x", 7, 0, [("t", 0)], 20))
    durable(c.end_txn("x", 7, 0, True, 30))
    durable(c.markers_written("x", 7, 0, 40))
    assert (c.txns["x"].state, c.txns["x"].start_ms, c.txns["x"].partitions) == (TxnState.COMPLETE_COMMIT, 20, set())
    durable(c.add_partitions("x", 7, 0, [("t", 1)], 50))
    assert c.txns["x"].start_ms == 50  # a new transaction, a new start
    durable(c.end_txn("x", 7, 0, False, 60))
    durable(c.markers_written("x", 7, 0, 70))
    durable(c.init_producer_id("x", 60_000, None, 80))
    assert (c.txns["x"].state, c.txns["x"].start_ms) == (TxnState.EMPTY, -1)


def test_partitions_are_grouped_by_topic_in_order() -> None:
    assert partitions_by_topic(TXNS[0]) == {"t": [0, 1], "u": [3]}
    assert TxnState.PREPARE_EPOCH_FENCE.display == "PrepareEpochFence"


def producer(pid: int, start: int, last_ts: int, coord: int = 4) -> ProducerState:
    return ProducerState(pid, 7, 12, last_ts, coord, start)


def test_candidates_are_open_transactions_idle_longer_than_the_max_timeout() -> None:
    old, young, closed = producer(1, 10, NOW - 61_000), producer(2, 20, NOW - 1_000), producer(3, -1, 0)
    found = candidates({("t", 0): [old, young, closed]}, NOW, 60_000)
    assert found == [OpenTxn(("t", 0), old)]
    assert candidates({("t", 0): [old, young, closed]}, NOW, 0) == [OpenTxn(("t", 0), old), OpenTxn(("t", 0), young)]


def describe(tid: str, state: str, parts: set[tuple[str, int]]) -> Description:
    return Description(tid, 1, 0, 0, state, 60_000, NOW, frozenset(parts))


def test_hanging_when_no_coordinator_will_write_the_marker() -> None:
    orphan = OpenTxn(("t", 0), producer(1, 10, 0))  # no transactional id has producer 1
    forgotten = OpenTxn(("t", 0), producer(2, 11, 0))  # its id is gone from the coordinator
    stray = OpenTxn(("t", 1), producer(3, 12, 0))  # its id's transaction does not include t-1
    live = OpenTxn(("t", 0), producer(3, 13, 0))  # t-0 is in the ongoing transaction
    tid_of = {2: "gone", 3: "live"}
    described = {"gone": None, "live": describe("live", "Ongoing", {("t", 0)})}
    assert hanging([orphan, forgotten, stray, live], tid_of, described) == [orphan, forgotten, stray]
    # A transaction preparing its markers lists the partitions still waiting: not hanging there.
    described["live"] = describe("live", "PrepareAbort", {("t", 0), ("t", 1)})
    assert hanging([stray, live], tid_of, described) == []


def test_abort_spec_finds_the_producer_by_start_offset() -> None:
    states = [producer(1, 10, 0, coord=-1), producer(2, 42, 0, coord=6)]
    spec = abort_spec(states, ("t", 0), 42)
    assert (spec.producer_id, spec.producer_epoch, spec.coordinator_epoch) == (2, 7, 6)
    # A producer that never saw a marker: coordinator epoch 0, as Kafka's tool sends.
    assert abort_spec(states, ("t", 0), 10).coordinator_epoch == 0
    with pytest.raises(TxnAdminError, match="no open transaction starts at offset 11"):
        abort_spec(states, ("t", 0), 11)


def test_cli_table_pads_columns() -> None:
    from epochlog.cli.transactions_cmd import table

    out = table(["A", "Longer"], [["xyz", "1"], ["q", "22"]]).splitlines()
    assert out == ["A   Longer", "xyz 1", "q   22"]
    assert table(["A", "B"], []) == "A B"


def test_describe_transactions_response_round_trips_with_no_start_time() -> None:
    """The broker's encoding (kio, -1 written for "no transaction running") read back by the client's own
    reader, which kio cannot do for -1."""
    from epochlog.client.describe_transactions_wire import TxnStateRow, decode
    from epochlog.protocol.codec import encode_response
    from epochlog.server.handlers.transaction_admin import _NO_TIME, _millis

    rows = [
        {
            "error_code": 0,
            "transactional_id": "open",
            "transaction_state": "Ongoing",
            "transaction_timeout": 60_000,
            "transaction_start_time": _millis(1_700_000_000_123),
            "producer_id": 2**40,
            "producer_epoch": 3,
            "topics": [{"topic": "t", "partitions": [0, 1]}, {"topic": "u", "partitions": [7]}],
        },
        {
            "error_code": 105,
            "transactional_id": "gone",
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": _NO_TIME,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        },
    ]
    frame = encode_response(65, 0, 77, {"throttle_time": 0, "transaction_states": rows})
    assert decode(frame[4:], 77) == [
        TxnStateRow(0, "open", "Ongoing", 60_000, 1_700_000_000_123, 2**40, 3, (("t", 0), ("t", 1), ("u", 7))),
        TxnStateRow(105, "gone", "", 0, -1, -1, -1, ()),
    ]
