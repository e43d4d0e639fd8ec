"""The transaction tools' client side (KIP-664), for `epochlog transactions`: ListTransactions at every
broker, DescribeTransactions at an id's coordinator, DescribeProducers at a partition's leader (or a chosen
replica), and aborting a hanging transaction with WriteTxnMarkers as kafka-transactions.sh does.

confluent-kafka's AdminClient has none of these calls, so they go through client/wire.py. Finding hanging
transactions is a pure function over the answers (``hanging``), so its rule is unit tested.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from epochlog.client.epochs import metadata_request, parse_bootstrap
from epochlog.client.wire import Connection, WireError
from epochlog.codes import Err
from epochlog.transactions.state import TopicPartition, partitions_by_topic

_RETRIABLE = {14, 15}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE


class TxnAdminError(Exception):
    """The broker refused; ``code`` is Kafka's error code (0 for a refusal of the tool itself)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Listing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True)
class Description:
    transactional_id: str
    coordinator: int
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int  # -1: no transaction running
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int  # -1: no open transaction on the partition


@dataclass(frozen=True)
class OpenTxn:
    partition: TopicPartition
    producer: ProducerState


def _err_name(code: int) -> str:
    from epochlog.protocol.errors import Err

    try:
        return Err(code).name
    except ValueError:
        return f"error {code}"


def _check(code: Any, what: str) -> None:
    if int(code):
        raise TxnAdminError(int(code), f"{what}: {_err_name(int(code))}")


class Cluster:
    """Connections to the brokers of one cluster, found from the bootstrap broker's metadata."""

    def __init__(self, bootstrap: str, timeout: float = 15.0) -> None:
        # A list of brokers (h1:p1,h2:p2) is accepted as Kafka's tools do; the first is asked.
        host, port = parse_bootstrap(bootstrap)[0]
        self.timeout = timeout
        self.bootstrap = self._open(host, port)
        self._conns: dict[int, Connection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        # topic -> partition -> (leader, replicas)
        self.topics: dict[str, dict[int, tuple[int, tuple[int, ...]]]] = {}

    def _open(self, host: str, port: int) -> Connection:
        return Connection(host, port, timeout=self.timeout, client_id="epochlog-transactions")

    def close(self) -> None:
        self.bootstrap.close()
        for c in self._conns.values():
            c.close()

    def metadata(self, topics: list[str] | None) -> None:
        """Brokers and the named topics' partitions (every topic when None)."""
        md = self.bootstrap.request(metadata_request(topics, version=12))
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in md.brokers}
        for t in md.topics:
            _check(t.error_code, f"topic {t.name}")
            self.topics[str(t.name)] = {
                int(p.partition_index): (int(p.leader_id), tuple(int(r) for r in p.replica_nodes)) for p in t.partitions
            }

    def to(self, broker_id: int) -> Connection:
        if broker_id not in self.brokers:
            self.metadata([])
        if broker_id not in self.brokers:
            raise TxnAdminError(0, f"no broker {broker_id} in the cluster")
        conn = self._conns.get(broker_id)
        if conn is None:
            conn = self._conns[broker_id] = self._open(*self.brokers[broker_id])
        return conn

    def leader(self, tp: TopicPartition, fresh: bool = False) -> int:
        if fresh or tp[1] not in self.topics.get(tp[0], {}):
            self.metadata([tp[0]])
        entry = self.topics.get(tp[0], {}).get(tp[1])
        if entry is None:
            raise TxnAdminError(3, f"{tp[0]}-{tp[1]}: UNKNOWN_TOPIC_OR_PARTITION")
        if entry[0] < 0:
            raise TxnAdminError(5, f"{tp[0]}-{tp[1]}: LEADER_NOT_AVAILABLE")
        return entry[0]


@contextmanager
def cluster(bootstrap: str, timeout: float = 15.0) -> Iterator[Cluster]:
    c = Cluster(bootstrap, timeout)
    try:
        yield c
    finally:
        c.close()


# -- ListTransactions ---------------------------------------------------------------------------------
def list_transactions(
    c: Cluster, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int | None = None
) -> list[Listing]:
    """Every broker's transactional ids (each coordinates its own share), filtered by the brokers."""
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest

    c.metadata([])
    req = ListTransactionsRequest(
        state_filters=tuple(states),
        producer_id_filters=tuple(producer_ids),  # type: ignore[arg-type]
        duration_filter=-1 if duration_ms is None else duration_ms,  # type: ignore[arg-type]
    )
    out = []
    for broker_id in sorted(c.brokers):
        resp = c.to(broker_id).request(req)
        _check(resp.error_code, f"ListTransactions at broker {broker_id}")
        for t in resp.transaction_states:
            out.append(Listing(str(t.transactional_id), broker_id, int(t.producer_id), str(t.transaction_state)))
    return out


# -- DescribeTransactions -------------------------------------------------------------------------------
def find_coordinator(c: Cluster, transactional_id: str, wait_s: float = 10.0) -> int:
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    deadline = time.monotonic() + wait_s
    while True:
        resp = c.bootstrap.request(FindCoordinatorRequest(key=transactional_id, key_type=1))  # type: ignore[arg-type]
        code = int(resp.error_code)
        if code not in _RETRIABLE or time.monotonic() > deadline:
            _check(code, f"coordinator of {transactional_id!r}")
            return int(resp.node_id)
        time.sleep(0.2)  # __transaction_state is being created, or its leader is loading


def describe_transaction(c: Cluster, transactional_id: str) -> Description:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    from epochlog.client import describe_transactions_wire

    coordinator = find_coordinator(c, transactional_id)
    req = DescribeTransactionsRequest(transactional_ids=(transactional_id,))  # type: ignore[arg-type]
    [t] = describe_transactions_wire.decode(*c.to(coordinator).request_frame(req))
    _check(t.error_code, f"transactional id {transactional_id!r}")
    return Description(
        transactional_id,
        coordinator,
        t.producer_id,
        t.producer_epoch,
        t.state,
        t.timeout_ms,
        t.start_ms,
        frozenset(t.partitions),
    )


# -- DescribeProducers ----------------------------------------------------------------------------------
def describe_producers(
    c: Cluster, partitions: Iterable[TopicPartition], broker_id: int | None = None
) -> dict[TopicPartition, list[ProducerState]]:
    """Active producers of each partition, as its leader (or replica ``broker_id``) knows them."""
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    by_broker: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        by_broker.setdefault(c.leader(tp) if broker_id is None else broker_id, []).append(tp)
    out: dict[TopicPartition, list[ProducerState]] = {}
    for target, tps in by_broker.items():
        by_topic = partitions_by_topic(tps)
        req = DescribeProducersRequest(
            topics=tuple(TopicRequest(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())  # type: ignore[arg-type]
        )
        resp = c.to(target).request(req)
        for topic in resp.topics:
            for row in topic.partitions:
                tp = (str(topic.name), int(row.partition_index))
                _check(row.error_code, f"producers of {tp[0]}-{tp[1]} at broker {target}")
                out[tp] = [
                    ProducerState(
                        int(s.producer_id),
                        int(s.producer_epoch),
                        int(s.last_sequence),
                        int(s.last_timestamp),
                        int(s.coordinator_epoch),
                        int(s.current_txn_start_offset),
                    )
                    for s in row.active_producers
                ]
    return out


# -- abort --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AbortSpec:
    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def abort_spec(producers: list[ProducerState], tp: TopicPartition, start_offset: int) -> AbortSpec:
    """The marker that closes the transaction opened at ``start_offset``. A producer that never saw a
    marker has coordinator epoch -1; Kafka's tool then sends 0, which no coordinator epoch is below."""
    for s in producers:
        if s.txn_start_offset == start_offset:
            return AbortSpec(tp, s.producer_id, s.producer_epoch, max(s.coordinator_epoch, 0))
    raise TxnAdminError(0, f"no open transaction starts at offset {start_offset} on {tp[0]}-{tp[1]}")


def abort(c: Cluster, tp: TopicPartition, start_offset: int) -> AbortSpec:
    """Write an ABORT marker for the open transaction at ``start_offset`` on the partition's leader."""
    from kio.schema.write_txn_markers.v1.request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    spec = abort_spec(describe_producers(c, [tp]).get(tp, []), tp, start_offset)
    marker = WritableTxnMarker(
        producer_id=spec.producer_id,  # type: ignore[arg-type]
        producer_epoch=spec.producer_epoch,  # type: ignore[arg-type]
        transaction_result=False,
        topics=(WritableTxnMarkerTopic(name=tp[0], partition_indexes=(tp[1],)),),  # type: ignore[arg-type]
        coordinator_epoch=spec.coordinator_epoch,  # type: ignore[arg-type]
    )
    resp = c.to(c.leader(tp, fresh=True)).request(WriteTxnMarkersRequest(markers=(marker,)))
    for m in resp.markers:
        for t in m.topics:
            for row in t.partitions:
                _check(row.error_code, f"abort marker on {t.name}-{row.partition_index}")
    return spec


# -- find-hanging ---------------------------------------------------------------------------------------
def candidates(producers: dict[TopicPartition, list[ProducerState]], now_ms: int, max_timeout_ms: int) -> list[OpenTxn]:
    """Open transactions whose producer has written nothing for longer than the longest transaction
    timeout: only those can be hanging (a younger one may still be committed), as in Kafka's tool."""
    return [
        OpenTxn(tp, s)
        for tp, states in sorted(producers.items())
        for s in states
        if s.txn_start_offset >= 0 and now_ms - s.last_timestamp > max_timeout_ms
    ]


def hanging(
    open_txns: list[OpenTxn], tid_of: dict[int, str], described: dict[str, Description | None]
) -> list[OpenTxn]:
    """The open transactions no coordinator will close: their producer id belongs to no transactional id,
    the id is unknown to its coordinator, or the coordinator's current transaction does not include the
    partition (an Ongoing transaction lists every partition it wrote, a Prepare* one those still waiting
    for their marker)."""
    out = []
    for t in open_txns:
        tid = tid_of.get(t.producer.producer_id)
        d = described.get(tid) if tid is not None else None
        if d is None or t.partition not in d.partitions:
            out.append(t)
    return out


def find_hanging(
    c: Cluster,
    broker_id: int | None,
    topic: str | None = None,
    partition: int | None = None,
    max_timeout_ms: int = 15 * 60_000,
    now_ms: int | None = None,
) -> list[OpenTxn]:
    c.metadata(None if topic is None else [topic])
    tps = [
        (t, p)
        for t, parts in sorted(c.topics.items())
        if topic is None or t == topic
        for p, (_leader, replicas) in sorted(parts.items())
        if (partition is None or p == partition) and (broker_id is None or broker_id in replicas)
    ]
    now = int(time.time() * 1000) if now_ms is None else now_ms
    found = candidates(describe_producers(c, tps, broker_id), now, max_timeout_ms) if tps else []
    if not found:
        return []
    pids = {t.producer.producer_id for t in found}
    tid_of = {row.producer_id: row.transactional_id for row in list_transactions(c, producer_ids=pids)}
    described: dict[str, Description | None] = {}
    for tid in set(tid_of.values()):
        try:
            described[tid] = describe_transaction(c, tid)
        except TxnAdminError as e:
            if e.code != Err.TRANSACTIONAL_ID_NOT_FOUND:  # removed since the listing, so hanging
                raise
            described[tid] = None
    return hanging(found, tid_of, described)


__all__ = [
    "AbortSpec",
    "Cluster",
    "Description",
    "Listing",
    "OpenTxn",
    "ProducerState",
    "TxnAdminError",
    "WireError",
    "abort",
    "abort_spec",
    "candidates",
    "cluster",
    "describe_producers",
    "describe_transaction",
    "find_hanging",
    "hanging",
    "list_transactions",
]
