"""Log compaction on a running `epochlog up` with confluent-kafka: concurrent producers on a compacted
topic with small segments, a history checker over what a consumer from the beginning reads, a kill -9
while the cleaner is at work, and the group coordinator's __consumer_offsets compacted too."""

from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.integration.helpers import create_topic, topic_name

pytestmark = pytest.mark.timeout(240)

CLEANER = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "500",
}
CLOCK_KEY = b"clock"
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "65536",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.2",
    "delete.retention.ms": "2000",
}


@dataclass
class History:
    """What the broker acknowledged: offset -> (key, value), and each key's last acknowledged write."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    at: dict[int, tuple[bytes, bytes | None]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def ack(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.at[msg.offset()] = (msg.key(), msg.value())

    def latest(self) -> dict[bytes, bytes | None]:
        out: dict[bytes, bytes | None] = {}
        for o in sorted(self.at):
            k, v = self.at[o]
            out[k] = v
        return out


def produce_many(
    bootstrap: str, topic: str, history: History, keys: list[bytes], n: int, seed: int, pause: float = 0.0
) -> None:
    """``pause`` seconds every 200 records, so that writing goes on while the cleaner works."""
    rnd = random.Random(seed)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
    for i in range(n):
        k = rnd.choice(keys)
        p.produce(topic, key=k, value=b"%s=%d:%d" % (k, seed, i) + b"." * rnd.randint(0, 200), on_delivery=history.ack)
        if i % 200 == 0:
            p.poll(0)
            if pause:
                time.sleep(pause)
    assert p.flush(60) == 0


async def read_aiokafka(
    bootstrap: str, topic: str, high: int, isolation: str = "read_uncommitted"
) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of partition 0 below ``high`` as aiokafka reads it from the start."""
    import aiokafka

    ac = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation)
    await ac.start()
    try:
        atp = aiokafka.TopicPartition(topic, 0)
        ac.assign([atp])
        await ac.seek_to_beginning(atp)
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 30
        while await ac.position(atp) < high and time.monotonic() < deadline:
            for msgs in (await ac.getmany(timeout_ms=500)).values():
                out += [(m.offset, m.key, m.value) for m in msgs if m.offset < high]
        return out
    finally:
        await ac.stop()


def read_all(bootstrap: str, topic: str) -> tuple[list[tuple[int, bytes, bytes | None]], int]:
    """Every record from the beginning up to the high watermark, and the high watermark."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        last = -1
        while last < high - 1 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                # Compaction may have removed the records right before the high watermark.
                pos = c.position([TopicPartition(topic, 0)])[0].offset
                if pos >= high:
                    break
                continue
            if m.error():
                continue
            out.append((m.offset(), m.key(), m.value()))
            last = m.offset()
        return out, high
    finally:
        c.close()


def check(history: History, seen: list[tuple[int, bytes, bytes | None]], deleted: set[bytes]) -> dict:
    """The history checker: offsets only increase, every record read is the one acknowledged at that
    offset, and every key's latest acknowledged value is what a reader ends with."""
    offsets = [o for o, _k, _v in seen]
    assert offsets == sorted(set(offsets)), "offsets repeat or go backwards"
    for o, k, v in seen:
        if k == CLOCK_KEY and o not in history.at:
            continue  # the slow writer's acknowledgement may arrive after a reader saw the record
        assert history.at.get(o) == (k, v), f"offset {o} holds {(k, v)!r}, acknowledged {history.at.get(o)!r}"
    final: dict[bytes, bytes | None] = {}
    for _o, k, v in seen:
        final[k] = v
    want = history.latest()
    for k, v in want.items():
        if k == CLOCK_KEY:
            continue
        if k in deleted:
            assert final.get(k) is None, f"deleted key {k!r} came back as {final.get(k)!r}"
        else:
            assert final.get(k) == v, f"key {k!r}: latest acknowledged {v!r}, read {final.get(k)!r}"
    return final


def segments_bytes(part: Path) -> int:
    return sum(p.stat().st_size for p in part.glob("*.log"))


def trickle(bootstrap: str, topic: str, history: History, stop: threading.Event) -> None:
    """A slow writer: the active segment rolls by segment.ms only when something is appended."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    i = 0
    while not stop.is_set():
        p.produce(topic, key=CLOCK_KEY, value=b"%d" % i, on_delivery=history.ack)
        p.poll(0)
        i += 1
        stop.wait(0.1)
    p.flush(30)


def children_of(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (the broker's cleaner process, its resource tracker)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def alive(pids: set[int]) -> set[int]:
    return {p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text()}


def wait_until(pred, timeout: float, what: str, interval: float = 0.5) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def _poll(pred, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``pred`` held within ``timeout`` seconds (looked at every 10 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


def _cleaning(part: Path) -> tuple[frozenset[str], bool]:
    """(the segments in place, whether a cleaned segment is being written) in a partition directory."""
    try:
        names = [f.name for f in part.iterdir()]
    except FileNotFoundError:  # a file renamed or deleted while listing
        return frozenset(), False
    return frozenset(n for n in names if n.endswith(".log")), any(n.endswith(".log.cleaned") for n in names)


def test_compaction_keeps_latest_values_and_removes_deleted_keys(broker_factory) -> None:
    from tests.broker_process import free_port
    from tests.integration.test_metrics import scrape

    metrics_port = free_port()
    b = broker_factory({**CLEANER, "metrics.port": str(metrics_port)})
    topic = topic_name("cmp")
    create_topic(b.bootstrap, topic, config=TOPIC_CONFIG)
    history = History()
    keys = [b"key-%03d" % i for i in range(300)]
    writers = [
        threading.Thread(target=produce_many, args=(b.bootstrap, topic, history, keys, 10000, s, 0.1)) for s in range(3)
    ]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
    assert not history.errors
    # The cleaner ran while the producers wrote.
    assert b.log_text().count("cleaned [") >= 2
    deleted = set(keys[:30])
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for k in sorted(deleted):
        p.produce(topic, key=k, value=None, on_delivery=history.ack)
    assert p.flush(30) == 0
    stop = threading.Event()
    clock = threading.Thread(target=trickle, args=(b.bootstrap, topic, history, stop))
    clock.start()
    part = b.data_dir / f"{topic}-0"
    total = len(history.at)
    try:
        # While compacting, and at the end, a reader sees a consistent view.
        def compacted() -> bool:
            seen, _high = read_all(b.bootstrap, topic)
            final = check(history, seen, deleted)
            return len(seen) < total / 5 and not any(k in final for k in deleted)

        wait_until(compacted, 90, "compaction and tombstone removal")
    finally:
        stop.set()
        clock.join(30)
    seen, high = read_all(b.bootstrap, topic)
    check(history, seen, deleted)
    assert high == max(history.at) + 1
    assert b"cleaned [" in b.log_text().encode()
    assert segments_bytes(part) < 30000 * 120 / 5
    m = scrape(metrics_port)
    assert m["kafka_log_logcleaner_max_clean_time_secs"] > 0
    assert 0 < m["kafka_log_logcleaner_cleaner_recopy_percent"] <= 100
    assert m["kafka_log_logcleanermanager_uncleanable_partitions_count"] == 0
    assert 0 <= m["kafka_log_logcleanermanager_time_since_last_run_ms"] < 60_000


@pytest.mark.parametrize(
    "in_process", [pytest.param(False, marks=pytest.mark.long), True], ids=["thread", "process"]
)  # the thread variant's 55 s run in the long tier
def test_kill_9_while_cleaning_then_restart_stays_consistent(broker_factory, in_process: bool) -> None:
    # A slow cleaner (io bound) so the kill lands in the middle of cleaning.
    b = broker_factory(
        {
            **CLEANER,
            "log.cleaner.io.max.bytes.per.second": "400000",
            "epochlog.log.cleaner.process": str(in_process).lower(),
        }
    )
    topic = topic_name("cmpkill")
    create_topic(b.bootstrap, topic, config={**TOPIC_CONFIG, "segment.bytes": "32768", "delete.retention.ms": "500"})
    history = History()
    keys = [b"k%04d" % i for i in range(400)]
    produce_many(b.bootstrap, topic, history, keys, 15000, 1)
    deleted = set(keys[:40])
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for k in sorted(deleted):
        p.produce(topic, key=k, value=None, on_delivery=history.ack)
    assert p.flush(30) == 0
    stop = threading.Event()
    clock = threading.Thread(target=trickle, args=(b.bootstrap, topic, history, stop))
    clock.start()
    killed_mid_clean = 0
    part = b.data_dir / f"{topic}-0"
    try:
        marks = 0
        for after_a_swap in (False, True, True):
            wait_until(lambda m=marks: b.log_text().count("cleaning (") > m, 60, "a cleaning to begin")
            # The cleaner writes each group as <base>.log.cleaned before swapping it in (in process mode, every
            # group before the first swap), so the segments seen when the first one appears are the ones this
            # cleaning started from. The first cleaning (1.9 MB at 0.4 MB/s) lasts seconds and is always caught;
            # the later ones clean only what the trickle added (tenths of a second, some seconds apart), so the
            # kill aims at them for a while and then lands anyway: what a restart must survive is a kill at any
            # moment, and the assertion below asks that at least one landed mid-cleaning.
            first = not after_a_swap and marks == 0
            aim_s = 60 if first else 20
            if _poll(lambda: _cleaning(part)[1], aim_s):
                start = _cleaning(part)[0]

                def swapped_and_cleaning(start: frozenset[str] = start) -> bool:
                    # A swap replaces segments (rolling only adds them); another group is still being written.
                    segments, cleaning = _cleaning(part)
                    return cleaning and bool(start - segments)

                if after_a_swap:
                    _poll(swapped_and_cleaning, aim_s)
            elif first:
                raise AssertionError("timed out waiting for a cleaned segment being written")
            done = b.log_text().count("cleaned [")
            assert b.proc is not None
            helpers = children_of(b.proc.pid)
            assert helpers or not in_process, "no cleaner process while a cleaning is under way"
            b.kill9()
            text = b.log_text()
            killed_mid_clean += text.count("cleaning (") > done + text.count("cleaning aborted")
            marks = text.count("cleaning (")
            # The cleaner process notices its broker is gone and exits, mid-job or idle.
            wait_until(lambda h=helpers: not alive(h), 10, f"the killed broker's helpers {helpers} to exit")
            b.start()
            seen, _high = read_all(b.bootstrap, topic)
            check(history, seen, deleted=set())  # tombstones may still be there, nothing else is lost
        assert killed_mid_clean >= 1, "no kill landed while a cleaning was under way"
        b.settings.pop("log.cleaner.io.max.bytes.per.second")
        b.kill9()
        b.start()

        def compacted() -> bool:
            seen, _high = read_all(b.bootstrap, topic)
            final = check(history, seen, set())
            return not any(k in final for k in deleted)

        wait_until(compacted, 90, "compaction after the restarts")
    finally:
        stop.set()
        clock.join(30)
    seen, _high = read_all(b.bootstrap, topic)
    check(history, seen, deleted)
    assert not [f.name for f in part.iterdir() if f.suffix in (".cleaned", ".swap", ".deleted")]


def test_consumer_offsets_are_compacted_and_survive_a_restart(broker_factory) -> None:
    b = broker_factory({**CLEANER, "offsets.topic.segment.bytes": "16384", "offsets.topic.num.partitions": "1"})
    topic = topic_name("offs")
    create_topic(b.bootstrap, topic)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g1", "enable.auto.commit": False})
    try:
        for i in range(1500):
            for attempt in range(20):
                try:
                    c.commit(offsets=[TopicPartition(topic, 0, i + 1)], asynchronous=False)
                    break
                except KafkaException:
                    if attempt == 19:
                        raise
                    time.sleep(0.2)
    finally:
        c.close()
    part = b.data_dir / "__consumer_offsets-0"
    wait_until(lambda: "__consumer_offsets-0: cleaned" in b.log_text(), 60, "__consumer_offsets to be cleaned")
    # The first cleaning may have run while the commits were still arriving: wait for the one after them.
    wait_until(lambda: segments_bytes(part) < 1500 * 100 / 2, 60, "the offset commits to be compacted")
    size_after = segments_bytes(part)
    b.kill9()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g1", "enable.auto.commit": False})
    try:
        committed = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                committed = c.committed([TopicPartition(topic, 0)], timeout=5)[0].offset
                break
            except KafkaException:
                time.sleep(0.3)
    finally:
        c.close()
    assert committed == 1500
    assert size_after < 1500 * 100 / 2, "the offset commits were not compacted"


def test_every_client_reads_a_compacted_log_with_gaps_and_header_only_batches(broker_factory, tmp_path) -> None:
    import asyncio
    import shutil
    import subprocess
    import sys

    import kafka

    b = broker_factory(CLEANER)
    topic = topic_name("cmpread")
    create_topic(b.bootstrap, topic, config={**TOPIC_CONFIG, "segment.bytes": "4096"})
    # An idempotent producer's batches that lose every record keep their header (its sequence state).
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(300):
        p.produce(topic, key=b"k%d" % (i % 5), value=b"v%d" % i)
        p.flush(10)
    plain = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    part = b.data_dir / f"{topic}-0"

    def header_only_batches() -> int:
        out = subprocess.run(
            [sys.executable, "-m", "epochlog.cli.main", "dump-log", "--json", str(part)],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        return out.count('"count": 0')

    def cleaned() -> bool:
        plain.produce(topic, key=b"other", value=b"tick")  # rolls the active segment by segment.ms
        plain.flush(10)
        return header_only_batches() > 0

    wait_until(cleaned, 60, "a compaction leaving header-only batches")
    plain.produce(topic, key=b"other", value=b"end")
    plain.flush(10)
    # Segments rolled before "end" may still be dirty, and the clients must all read one settled log: wait
    # until the cleaner has nothing left to do (the same read twice, several cleaner backoffs apart).
    settled: list[tuple[list[tuple[int, bytes, bytes | None]], int]] = [read_all(b.bootstrap, topic)]

    def log_settled() -> bool:
        time.sleep(1.0)
        settled.append(read_all(b.bootstrap, topic))
        return settled[-1] == settled[-2]

    wait_until(log_settled, 60, "the cleaner to finish with the rolled segments")
    want, high = settled[-1]  # confluent-kafka (librdkafka)
    assert want[-1][1:] == (b"other", b"end")
    latest_k = {k: v for _o, k, v in want if k != b"other"}
    assert latest_k == {b"k%d" % i: b"v%d" % (295 + i) for i in range(5)}
    assert len(want) < 300

    c = kafka.KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tp = kafka.TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [(m.offset, m.key, m.value) for m in c]
    c.close()
    assert got == want, "kafka-python"

    assert asyncio.run(read_aiokafka(b.bootstrap, topic, high)) == want, "aiokafka"

    if shutil.which("kcat"):
        r = subprocess.run(
            ["kcat", "-b", b.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %k %s\n"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.stdout.split("\n")[:-1] == [f"{o} {k.decode()} {v.decode()}" for o, k, v in want], "kcat"


def read_keyed(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of everything a consumer of ``isolation`` reads from the beginning up to the
    high watermark as it was when the read began (a writer may be appending meanwhile)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    )
    tp = TopicPartition(topic, 0)
    out: list[tuple[int, bytes, bytes | None]] = []
    try:
        _low, high = c.get_watermark_offsets(tp, timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                # The records just below the high watermark may be gone (compacted) or be markers.
                if c.position([tp])[0].offset >= high:
                    return out
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() >= high - 1:
                return out
    finally:
        c.close()
    last = out[-1][0] if out else None
    raise AssertionError(f"{isolation} reader of {topic} stopped at {last} ({len(out)} records), not at {high}")


def test_a_transactional_topic_is_compacted_and_loses_its_aborted_records(broker_factory) -> None:
    from tests.integration.cluster_helpers import dump_batches

    b = broker_factory(CLEANER)
    topic = topic_name("cmptxn")
    create_topic(
        b.bootstrap, topic, config={**TOPIC_CONFIG, "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}
    )
    p = Producer(
        {"bootstrap.servers": b.bootstrap, "transactional.id": f"cmptxn-{time.monotonic_ns()}", "linger.ms": 5}
    )
    p.init_transactions(30)
    keys = [b"key-%02d" % i for i in range(40)]
    aborted_offsets: list[int] = []
    committed: dict[bytes, bytes] = {}
    errors: list[str] = []

    def note(into: list[int] | None):  # type: ignore[no-untyped-def]
        def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))
            elif into is not None:
                into.append(msg.offset())

        return cb

    for r in range(30):
        abort = r % 3 == 1
        p.begin_transaction()
        for k in keys:
            v = b"%s=%s-%d" % (k, b"aborted" if abort else b"committed", r) + b"." * 100
            p.produce(topic, key=k, value=v, on_delivery=note(aborted_offsets if abort else None))
            if not abort:
                committed[k] = v
        if abort:
            p.produce(topic, key=b"only-aborted-%d" % r, value=b"aborted", on_delivery=note(aborted_offsets))
            assert p.flush(30) == 0  # the aborted records are in the log before the marker
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    assert not errors and len(aborted_offsets) == 10 * 41

    stop = threading.Event()
    history = History()
    clock = threading.Thread(target=trickle, args=(b.bootstrap, topic, history, stop))
    clock.start()  # segment.ms rolls the active segment only when something is appended
    try:

        def cleaned() -> bool:
            seen = read_keyed(b.bootstrap, topic, "read_uncommitted")
            data = [(k, v) for _o, k, v in seen if k != CLOCK_KEY]
            return not any(v and b"aborted" in v for _k, v in data) and len(data) == len(keys)

        wait_until(cleaned, 90, "the aborted records to go and the committed ones to be compacted")
    finally:
        stop.set()
        clock.join(30)
    # A read_committed reader sees exactly each key's latest committed value, and nothing else of ours.
    rc = [(k, v) for _o, k, v in read_keyed(b.bootstrap, topic, "read_committed") if k != CLOCK_KEY]
    assert sorted(rc) == sorted(committed.items())
    # In the files: no batch with records covers an offset an aborted record had.
    aborted = set(aborted_offsets)
    for batch in dump_batches(b.data_dir / f"{topic}-0"):
        covered = any(o in aborted for o in range(batch["base_offset"], batch["last_offset"] + 1))
        assert not (covered and batch["count"] and not batch["is_control"]), f"aborted data kept: {batch}"
    removed = [int(n) for n in re.findall(r"\((\d+) aborted records and", b.log_text())]
    assert sum(removed) >= len(aborted_offsets), removed  # the cleaner, not retention, removed them


def test_every_client_reads_a_cleaned_transactional_log_read_committed(broker_factory) -> None:
    """What the cleaner leaves of transactions: markers carrying a delete horizon (attribute 0x40, the
    horizon in the base timestamp), header-only transactional batches, gaps where aborted data was. Each
    client, read_committed, reads the same records: each key's latest committed value."""
    import asyncio

    import kafka

    from tests.integration.cluster_helpers import dump_batches

    b = broker_factory(CLEANER)
    topic = topic_name("cmptxnread")
    config = {**TOPIC_CONFIG, "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
    create_topic(b.bootstrap, topic, config={**config, "delete.retention.ms": "3600000"})
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"ctr-{time.monotonic_ns()}", "linger.ms": 0})
    p.init_transactions(30)
    keys = [b"k%d" % i for i in range(5)]
    for r in range(20):
        p.begin_transaction()
        for k in keys:
            p.produce(topic, key=k, value=b"%s-round-%d" % (k, r))
        assert p.flush(30) == 0
        if r % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, key=keys[0], value=b"one more")  # the producer's last batch: one record ...
    p.commit_transaction(30)
    plain = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    plain.produce(topic, key=keys[0], value=b"final")  # ... superseded, so only its header stays
    assert plain.flush(10) == 0
    part = b.data_dir / f"{topic}-0"

    def shaped() -> bool:
        plain.produce(topic, key=b"other", value=b"tick")  # rolls the active segment by segment.ms
        plain.flush(10)
        batches = dump_batches(part)
        horizons = [x for x in batches if x["is_control"] and x["base_timestamp"] > x["max_timestamp"]]
        header_only = [x for x in batches if x["is_transactional"] and not x["is_control"] and x["count"] == 0]
        return bool(horizons) and bool(header_only)

    wait_until(shaped, 60, "markers with a delete horizon and header-only transactional batches")
    plain.produce(topic, key=b"other", value=b"end")
    plain.flush(10)
    settled = [read_keyed(b.bootstrap, topic, "read_committed")]

    def log_settled() -> bool:
        time.sleep(1.0)
        settled.append(read_keyed(b.bootstrap, topic, "read_committed"))
        return settled[-1] == settled[-2]

    wait_until(log_settled, 60, "the cleaner to finish with the rolled segments")
    want = settled[-1]  # confluent-kafka (librdkafka)
    latest_k = {k: v for _o, k, v in want if k != b"other"}
    assert latest_k == {**{k: b"%s-round-18" % k for k in keys}, keys[0]: b"final"}  # round 19 aborted
    assert not [v for _o, _k, v in want if v and b"round-" in v and int(v.rsplit(b"-", 1)[1]) % 3 == 1]
    high = want[-1][0] + 1

    c = kafka.KafkaConsumer(
        bootstrap_servers=b.bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
        isolation_level="read_committed",
    )
    tp = kafka.TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [(m.offset, m.key, m.value) for m in c if m.offset < high]
    c.close()
    assert got == want, "kafka-python"

    assert asyncio.run(read_aiokafka(b.bootstrap, topic, high, "read_committed")) == want, "aiokafka"
