"""The workloads. `queue`: idempotent acks=all producers writing unique values, consumers assigned to every
partition reading live, and a final read of everything from the beginning.

Each producer writes ``<name>-<seq>`` to partition seq % partitions at a steady rate and records every send's
outcome from its delivery report (partition and offset, or the error). A producer whose instance went fatal
(librdkafka gives up on an idempotent producer after some errors) is replaced by a new one: the history says so.
`txn`: transactional producers writing one value to every partition per transaction, read live and at the end
by read_committed consumers (the same LiveConsumer and final_read on a topic of its own). `groups`: members of
one consumer group reading the queue topic, committing what they processed, through rebalances.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from epochlog.chaos.history import History, Read, Send, Txn

log = logging.getLogger("epochlog.chaos.workload")
# librdkafka's connection errors are expected under faults: to the log file, not the terminal.
QUIET = {"logger": logging.getLogger("epochlog.chaos.librdkafka")}


class QueueProducer:
    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        history: History,
        delivery_timeout_s: float = 120.0,
    ) -> None:
        self.name, self.bootstrap, self.topic, self.partitions = name, bootstrap, topic, partitions
        self.rate, self.history, self.delivery_timeout_s = rate, history, delivery_timeout_s
        self.seq = 0
        self.replaced = 0
        self._fatal = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{name}", daemon=True)
        self._producer = self._new()

    def _new(self) -> Any:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                # A send not acknowledged within this is reported failed (the failed-write share counts them).
                # When one times out in flight, librdkafka bumps the producer epoch and sends what it still
                # holds under new sequence numbers, which the broker cannot tell from new records: whatever
                # of it was already written is written twice (librdkafka's INTRODUCTION.md, "Message timeout
                # considerations", advises a large timeout). Kafka's default is 120 s.
                "message.timeout.ms": int(self.delivery_timeout_s * 1000),
                "request.timeout.ms": 5000,
                "socket.timeout.ms": 5000,
                **QUIET,
            }
        )

    def _on_delivery(self, send: Send, err: Any, msg: Any) -> None:
        send.t_done = self.history.now()
        if err is None:
            send.ok, send.offset, send.partition = True, msg.offset(), msg.partition()
        else:
            send.ok, send.error = False, err.name() if hasattr(err, "name") else str(err)
            if hasattr(err, "fatal") and err.fatal():
                self._fatal = True

    def _run(self) -> None:
        period = 1.0 / self.rate
        next_t = time.monotonic()
        while not self._stop.is_set():
            if self._fatal:
                self._replace()
            value = f"{self.name}-{self.seq}"
            send = Send(self.name, value, self.seq % self.partitions, self.history.now())
            try:
                self._producer.produce(
                    self.topic,
                    value=value.encode(),
                    partition=send.partition,
                    on_delivery=lambda err, msg, s=send: self._on_delivery(s, err, msg),
                )
            except BufferError:
                self._producer.poll(0.1)
                continue
            except Exception as e:  # a fatal producer refuses new sends
                send.ok, send.error, send.t_done = False, f"refused: {e}", self.history.now()
                self._fatal = True
            self.history.add_send(send)
            self.seq += 1
            try:
                self._producer.poll(0)
            except KafkaException as e:  # a fatal error surfaces here too; the sends it holds fail on flush
                self.history.note(f"{self.name}: {e}")
                self._fatal = True
            next_t += period
            delay = next_t - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_t = time.monotonic()

    def _replace(self) -> None:
        self.history.note(f"{self.name}: the idempotent producer went fatal; a new one takes over")
        try:
            self._producer.flush(5)
        except Exception:
            pass
        self._producer = self._new()
        self.replaced += 1
        self._fatal = False

    def start(self) -> None:
        self._thread.start()

    def stop(self, flush_timeout: float = 60.0) -> int:
        """Stop sending and wait for the outcome of every send; returns how many are still unknown."""
        self._stop.set()
        self._thread.join(10)
        if self._producer is None:
            return 0
        try:
            left = int(self._producer.flush(flush_timeout))
        except KafkaException as e:  # went fatal at the very end: its unreported sends stay unknown
            self.history.note(f"{self.name}: {e}")
            left = 0
        self._producer = None  # librdkafka's handle goes with the last reference: no reconnecting after the run
        return left


def _consumer(bootstrap: str, name: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-{name}",  # never joined: partitions are assigned, offsets never committed
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
            "socket.timeout.ms": 5000,
            **QUIET,
        }
    )


class LiveConsumer:
    """Assigned every partition from the beginning, polling until stopped; records each record handed to it."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, history: History) -> None:
        self.name, self.history = name, history
        self.errors: dict[str, int] = {}
        self._c = _consumer(bootstrap, name)
        self._c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{name}", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    msgs = self._c.consume(500, 0.2)
                except KafkaException as e:  # reading goes on: a consumer has no fatal errors of its own here
                    code = e.args[0].name() if e.args else repr(e)
                    self.errors[code] = self.errors.get(code, 0) + 1
                    continue
                for msg in msgs:
                    if msg.error() is not None:
                        code = msg.error().name()
                        self.errors[code] = self.errors.get(code, 0) + 1
                        continue
                    self.history.add_read(
                        Read(self.name, msg.partition(), msg.offset(), msg.value().decode(), self.history.now())
                    )
        finally:
            self._c.close()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def final_read(bootstrap: str, topic: str, partitions: int, history: History, timeout: float) -> bool:
    """Every record from the beginning to each partition's high watermark, into history.final; True when all."""
    c = _consumer(bootstrap, "final")
    try:
        ends: dict[int, int] = {}
        deadline = time.monotonic() + timeout
        for p in range(partitions):
            while p not in ends and time.monotonic() < deadline:
                try:
                    ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                except Exception as e:  # KafkaException while a leader is elected
                    log.debug("watermarks of %d: %r", p, e)
                    time.sleep(0.5)
        if len(ends) < partitions:
            return False
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        done = {p for p, end in ends.items() if end == 0}
        positions: dict[int, int] = {}
        while len(done) < partitions and time.monotonic() < deadline:
            for msg in c.consume(1000, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        history.note(f"final read: {err.name()}")
                    continue
                p = msg.partition()
                history.final.append(Read("final", p, msg.offset(), msg.value().decode(), history.now()))
                positions[p] = msg.offset() + 1
                if positions[p] >= ends[p]:
                    done.add(p)
            # Control records (none in this workload) or a gap at the end leave the position short of the end.
            for p in range(partitions):
                if p not in done:
                    try:
                        pos = c.position([TopicPartition(topic, p)])[0].offset
                    except Exception:
                        continue
                    if pos >= ends[p]:
                        done.add(p)
        return len(done) == partitions
    finally:
        c.close()


class TxnProducer:
    """The `txn` workload's writer: transactions of one value per partition, most committed, some aborted on
    purpose; each one's outcome recorded as the producer learnt it (committed, aborted, or unknown when the
    commit's answer was lost or the producer went fatal mid-way)."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, partitions: int, rate: float, history: History, seed: int
    ) -> None:
        self.name, self.bootstrap, self.topic, self.partitions = name, bootstrap, topic, partitions
        self.rate, self.history = rate, history
        self.rng = random.Random(seed)
        self.n = 0
        self.replaced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{name}", daemon=True)
        self._producer: Any = None

    def _new(self) -> Any:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": f"chaos-{self.name}",
                "transaction.timeout.ms": 30000,
                "message.timeout.ms": 20000,
                "request.timeout.ms": 5000,
                "socket.timeout.ms": 5000,
                "linger.ms": 5,
                **QUIET,
            }
        )
        p.init_transactions(30)  # fences an earlier instance and settles its open transaction
        return p

    def _one(self) -> None:
        values = [(p, f"{self.name}-{self.n}-{p}") for p in range(self.partitions)]
        txn = Txn(self.name, self.n, values, "abort" if self.rng.random() < 0.2 else "commit", self.history.now())
        self.n += 1
        self.history.add_txn(txn)
        p = self._producer
        try:
            p.begin_transaction()
            for part, value in values:
                p.produce(self.topic, value=value.encode(), partition=part)
            if txn.intent == "commit":
                p.commit_transaction(30)
                txn.outcome = "committed"
            else:
                p.abort_transaction(30)
                txn.outcome = "aborted"
        except (KafkaException, BufferError) as e:
            err = e.args[0] if isinstance(e, KafkaException) and e.args else None
            txn.error = err.name() if err is not None and hasattr(err, "name") else repr(e)
            if err is not None and hasattr(err, "fatal") and err.fatal():
                self._producer = None  # the next transaction starts a new instance, fencing this one
                return
            try:
                p.abort_transaction(30)
                txn.outcome = "aborted"
            except KafkaException as e2:
                txn.error += f"; abort: {e2}"
                self._producer = None
        finally:
            txn.t_end = self.history.now()

    def _run(self) -> None:
        period = 1.0 / self.rate
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                if self._producer is None:
                    if self.n:
                        self.replaced += 1
                        self.history.note(f"{self.name}: a new transactional producer takes over")
                    self._producer = self._new()
                self._one()
            except KafkaException as e:  # init_transactions failed (no coordinator yet): try again
                self.history.note(f"{self.name}: {e}")
                self._producer = None
                self._stop.wait(1.0)
            self._stop.wait(max(0.0, period - (time.monotonic() - t)))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(70)
        self._producer = None


class GroupMembers:
    """The `groups` workload: consumers of one group subscribed to the queue topic, committing the offsets
    they have processed after each batch, while members leave and join (each change a rebalance). Every
    record handed out and every acknowledged commit goes into the history."""

    def __init__(self, bootstrap: str, topic: str, history: History, members: int, churn_s: float, seed: int) -> None:
        self.bootstrap, self.topic, self.history, self.members = bootstrap, topic, history, members
        self.churn_s = churn_s
        self.rng = random.Random(seed)
        self.joined = 0
        self.errors: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads: dict[str, tuple[threading.Thread, threading.Event]] = {}
        self._churn = threading.Thread(target=self._run, name="chaos-group", daemon=True)

    def _member(self, name: str, leave: threading.Event) -> None:
        c: Any = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "chaos-group",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
                "socket.timeout.ms": 5000,
                **QUIET,
            }
        )
        c.subscribe([self.topic])
        try:
            while not (leave.is_set() or self._stop.is_set()):
                try:
                    msgs = c.consume(200, 0.5)
                except KafkaException as e:
                    self._count(e)
                    continue
                done: dict[int, int] = {}
                for msg in msgs:
                    if msg.error() is not None:
                        continue
                    r = Read(name, msg.partition(), msg.offset(), msg.value().decode(), self.history.now())
                    self.history.add_read(r)
                    done[r.partition] = max(done.get(r.partition, -1), r.offset + 1)
                if not done:
                    continue
                try:
                    c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in done.items()], asynchronous=False)
                except KafkaException as e:  # not committed (a rebalance took the partition, or a fault)
                    self._count(e)
                    continue
                t = self.history.now()
                for p, o in done.items():
                    self.history.add_commit(t, name, p, o)
        finally:
            c.close()  # leaves the group: a rebalance

    def _count(self, e: KafkaException) -> None:
        code = e.args[0].name() if e.args and hasattr(e.args[0], "name") else repr(e)
        self.errors[code] = self.errors.get(code, 0) + 1

    def _join(self) -> None:
        self.joined += 1
        name = f"member-{self.joined}"
        leave = threading.Event()
        t = threading.Thread(target=self._member, args=(name, leave), name=f"chaos-{name}", daemon=True)
        self._threads[name] = (t, leave)
        t.start()

    def _run(self) -> None:
        for _ in range(self.members):
            self._join()
        while not self._stop.wait(self.rng.uniform(0.5, 1.5) * self.churn_s):
            name = self.rng.choice(sorted(self._threads))
            t, leave = self._threads.pop(name)
            leave.set()
            t.join(30)
            self._join()

    def start(self) -> None:
        self._churn.start()

    def stop(self) -> None:
        self._stop.set()
        self._churn.join(40)
        for t, leave in self._threads.values():
            leave.set()
            t.join(30)
