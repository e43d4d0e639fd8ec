"""Transactions on a three-broker cluster while the coordinator's broker and a partition leader are
killed -9, checked by a history checker: read_committed sees every committed transaction whole, no
aborted or undecided one, and each partition in the order the producer wrote it."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import create_topic, leader_epoch, wait_until
from tests.integration.kafka_wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 3


def txn_coordinator(lc: LocalCluster, tid: str) -> int:
    port = int(lc.bootstrap.split(",")[0].split(":")[1])
    w = WireClient(port)
    try:
        r = w.request(10, 3, key=tid, key_type=1)
        return int(r.node_id) if r.error_code == 0 else -1
    finally:
        w.close()


def read_committed(bootstrap: str, topic: str, timeout: float = 60) -> dict[int, list[bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:
                    at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            out[m.partition()].append(m.value())
    finally:
        c.close()
    assert len(at_end) == PARTITIONS, "read_committed did not reach the end of every partition"
    return out


def check_history(
    seen: dict[int, list[bytes]], committed: set[int], aborted: set[int], unknown: set[int], per_txn: int
) -> None:
    """Committed transactions whole and once, aborted ones absent, undecided ones all or nothing, and
    each partition in write order."""
    by_txn: dict[int, list[bytes]] = {}
    for p, vals in seen.items():
        keys = [(int(v.split(b"-")[0]), int(v.split(b"-")[1])) for v in vals]
        assert keys == sorted(keys), f"partition {p} is out of the producer's order"
        assert len(set(vals)) == len(vals), f"partition {p} holds a record twice"
        for v in vals:
            by_txn.setdefault(int(v.split(b"-")[0]), []).append(v)
    for t in committed:
        assert len(by_txn.get(t, [])) == per_txn, f"committed transaction {t} is not whole: {by_txn.get(t)}"
    for t in aborted:
        assert t not in by_txn, f"aborted transaction {t} is visible to read_committed"
    for t in unknown:
        assert len(by_txn.get(t, [])) in (0, per_txn), f"transaction {t} is visible in part"
    assert set(by_txn) <= committed | unknown


def test_transactions_through_kill9_of_the_coordinator_and_a_leader(tmp_path) -> None:
    from tests.integration.cluster_helpers import new_cluster

    lc = new_cluster(tmp_path, brokers=3)
    lc.start()
    try:
        bs = lc.bootstrap
        topic = "txn-orders"
        create_topic(bs, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
        tid = f"copier-{uuid.uuid4().hex[:6]}"
        conf = {"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 2, "transaction.timeout.ms": 20000}
        p = Producer(conf)
        p.init_transactions(60)
        committed: set[int] = set()
        aborted: set[int] = set()
        unknown: set[int] = set()
        per_txn = 6

        def one(t: int) -> None:
            nonlocal p
            try:
                p.begin_transaction()
                for i in range(per_txn):
                    p.produce(topic, value=b"%d-%d" % (t, i), partition=i % PARTITIONS)
                if t in faults:
                    p.flush(30)
                    faults.pop(t)()  # mid-transaction: its records are written, its outcome not yet decided
                p.commit_transaction(30)
                committed.add(t)
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(30)
                        aborted.add(t)
                        return
                    except KafkaException:
                        pass
                unknown.add(t)  # the outcome is the coordinator's to decide; the checker allows either
                if err.fatal() or not err.retriable():
                    p = Producer(conf)
                    p.init_transactions(60)

        victims: dict[str, int] = {}

        def kill_coordinator() -> None:
            victims["coordinator"] = txn_coordinator(lc, tid)
            lc.kill9(f"broker-{victims['coordinator']}")

        def restart_coordinator_kill_leader() -> None:
            lc.start_node(f"broker-{victims['coordinator']}")
            victims["leader"], _ = wait_until(lambda: leader_epoch(bs, topic, 0), 20, "a leader of partition 0")
            lc.kill9(f"broker-{victims['leader']}")

        faults = {15: kill_coordinator, 35: restart_coordinator_kill_leader}
        t = 0
        deadline = time.monotonic() + 120
        while t < 60 and time.monotonic() < deadline:
            one(t)
            t += 1
        lc.start_node(f"broker-{victims['leader']}")
        assert len(committed) >= 40, f"only {len(committed)} of {t} transactions committed"
        # Nothing is left hanging: a new incarnation can start and commit, and read_committed reaches the end.
        p = Producer(conf)
        p.init_transactions(60)
        one(t)
        assert t in committed
        seen = read_committed(bs, topic)
        print(
            f"killed {victims}: {len(committed)} committed, {len(aborted)} aborted, "
            f"{len(unknown)} undecided, {sum(map(len, seen.values()))} records read"
        )
        check_history(seen, committed, aborted, unknown, per_txn)
    finally:
        lc.stop()


def test_the_history_checker_catches_a_torn_or_aborted_transaction() -> None:
    """The checker above must be able to fail."""
    whole = {0: [b"1-0", b"1-3"], 1: [b"1-1", b"1-4"], 2: [b"1-2", b"1-5"]}
    check_history(whole, {1}, set(), set(), 6)
    torn = {0: [b"1-0", b"1-3"], 1: [b"1-1"], 2: [b"1-2", b"1-5"]}
    with pytest.raises(AssertionError, match="not whole"):
        check_history(torn, {1}, set(), set(), 6)
    with pytest.raises(AssertionError, match="aborted"):
        check_history(whole, set(), {1}, set(), 6)
    with pytest.raises(AssertionError, match="order"):
        check_history({0: [b"2-0", b"1-3"], 1: [], 2: []}, {1, 2}, set(), set(), 1)
    with pytest.raises(AssertionError, match="in part"):
        check_history(torn, set(), set(), {1}, 6)
