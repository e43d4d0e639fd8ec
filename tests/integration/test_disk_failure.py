"""A failing disk under real brokers and real clients: nothing acknowledged is lost, nothing partial is
served, the failed log directory goes offline and the rest keeps serving.

- Real ENOSPC: the log directory is a small tmpfs we mount (we run as root; the test is skipped with the
  reason when mounting is not permitted), filled by an idempotent acks=all producer. RF=1 on `epochlog up`
  and RF=3 on a three-broker cluster with one broker's directory on the tmpfs.
- EIO on write and on fsync in a real process, switched on through storage/fileops.py's test seam
  (EPOCHLOG_TEST_FAULTS names a rule file the broker re-reads; the test arms it while the broker runs).
- Two log directories, one fails: the other keeps serving.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from epochlog.server.cluster.local import LocalCluster
from tests.broker_process import BrokerProcess, free_port
from tests.integration.cluster_helpers import create_topic, new_cluster, partition_info, wait_until
from tests.integration.kafka_wire import WireClient
from tests.integration.test_metrics import scrape

PAD = b"x" * 1000


@contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for a real ENOSPC (needs root / CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def grow(path: Path, size_mb: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_mb}m", str(path)], check=True, timeout=30)


class Writer:
    """An idempotent acks=all producer thread sending numbered ~1 KiB values; records every ack and error."""

    def __init__(self, bootstrap: str, topic: str, timeout_ms: int = 20000, **conf: Any) -> None:
        self.topic = topic
        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": timeout_ms,
                **conf,
            }
        )
        self.acked: dict[int, int] = {}  # value number -> offset
        self.ack_times: list[float] = []
        self.errors: list[KafkaError] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
            return
        n = int(msg.value()[:8])
        assert n not in self.acked, f"value {n} acknowledged twice"
        self.acked[n] = msg.offset()
        self.ack_times.append(time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.p.produce(self.topic, value=b"%08d|" % self.sent + PAD, on_delivery=self._cb)
                self.sent += 1
            except BufferError:
                self.p.poll(0.05)
            self.p.poll(0)
            if self.sent % 50 == 0:
                time.sleep(0.005)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 60) -> None:
        self._stop.set()
        self._thread.join(10)
        left = self.p.flush(flush_timeout)
        assert left == 0, f"{left} messages neither acknowledged nor failed"


def read_all(bootstrap: str, topic: str, timeout: float = 60) -> list[tuple[int, int]]:
    """(value number, offset) of every record from the start to the high watermark."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        deadline = time.monotonic() + timeout
        hw = wait_until(lambda: c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] + 1, 30, "the HW") - 1
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, int]] = []
        while (not out or out[-1][1] < hw - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((int(m.value()[:8]), m.offset()))
        return out
    finally:
        c.close()


def assert_every_ack_once(acked: dict[int, int], records: list[tuple[int, int]]) -> None:
    seen: dict[int, list[int]] = {}
    for n, off in records:
        seen.setdefault(n, []).append(off)
    missing = sorted(n for n in acked if n not in seen)
    twice = sorted(n for n, offs in seen.items() if len(offs) > 1)
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:10]}"
    assert not twice, f"records stored twice: {twice[:10]}"
    moved = [n for n, off in acked.items() if seen[n][0] != off]
    assert not moved, f"acknowledged offsets changed for {moved[:10]}"


def rules_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    rules = tmp_path / "faults"
    rules.write_text("")
    monkeypatch.setenv("EPOCHLOG_TEST_FAULTS", f"@{rules}")
    return rules


def wait_exit(b: BrokerProcess, timeout: float = 60) -> int:
    assert b.proc is not None
    return b.proc.wait(timeout)


# -- RF=1: `epochlog up` with its only log directory on a full tmpfs -------------------------------------
def test_enospc_rf1_refuses_instead_of_acking_and_loses_nothing(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", 3) as small:
        b = BrokerProcess(small, settings={"metadata.log.dir": str(tmp_path / "meta")})
        b.start()
        try:
            topic = "full"
            create_topic(b.bootstrap, topic, 1, 1, {})
            w = Writer(b.bootstrap, topic, timeout_ms=8000).start()
            assert b.proc is not None
            # The broker takes the directory offline at ENOSPC and, with no directory left, stops.
            wait_until(lambda: b.proc.poll() is not None or w.errors, 90, "the disk to fill")  # type: ignore[union-attr]
            # Room again while the producer goes on (an operator freeing space): a broker that kept the
            # directory would now append after the torn batch and acknowledge what recovery later cuts.
            grow(small, 64)
            time.sleep(3)
            w.stop()
            code = b.proc.poll()
            b.kill9()
            b.start()
            assert_every_ack_once(w.acked, read_all(b.bootstrap, topic))
            log = b.log_text()
            assert code is not None and code != 0, "the broker kept running with every log directory offline"
            assert "every log directory is offline" in log and "No space left on device" in log
            assert w.errors, "nothing failed: the disk never filled"
            assert w.acked, "nothing was acknowledged before the disk filled"
            # And the partition takes writes again.
            w2 = Writer(b.bootstrap, topic)
            w2.p.produce(topic, value=b"99999999|again")
            assert w2.p.flush(30) == 0
        finally:
            b.stop()


# -- EIO through the seam in a real broker ------------------------------------------------------------------
@pytest.mark.parametrize("op", ["write", "fsync"])
def test_eio_in_a_real_broker_takes_the_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    rules = rules_env(monkeypatch, tmp_path)
    # flush.messages=1: every append is fsynced, so an fsync fault is met on the produce path.
    settings = {"log.flush.interval.messages": "1"} if op == "fsync" else {}
    b = BrokerProcess(tmp_path / "data", settings=settings).start()
    try:
        topic = "eio"
        create_topic(b.bootstrap, topic, 1, 1, {})
        w = Writer(b.bootstrap, topic, timeout_ms=6000).start()
        wait_until(lambda: len(w.acked) > 200, 30, "acknowledged writes")
        rules.write_text(f"{op}:EIO:*/{topic}-0/*.log\n")
        code = wait_exit(b, 60)
        w.stop()
        assert code != 0
        assert "Input/output error (injected" in b.log_text()
        assert w.errors
        monkeypatch.delenv("EPOCHLOG_TEST_FAULTS")
        rules.write_text("")
        b.start()
        assert_every_ack_once(w.acked, read_all(b.bootstrap, topic))
    finally:
        b.stop()


# -- two log directories, one fails -----------------------------------------------------------------------
def test_two_dirs_one_fails_the_other_keeps_serving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = rules_env(monkeypatch, tmp_path)
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    # --data-dir is log.dirs: both directories, comma-separated.
    metrics_port = free_port()
    b = BrokerProcess(
        Path(f"{d0},{d1}"), settings={"metadata.log.dir": str(tmp_path / "meta"), "metrics.port": str(metrics_port)}
    )
    b.log_path = tmp_path / "two-dirs-broker.log"
    b.start()
    try:
        for t in ("a", "b"):
            create_topic(b.bootstrap, t, 1, 1, {})
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
        for t in ("a", "b"):
            p.produce(t, b"00000000|first")
        assert p.flush(30) == 0
        dirs = {t: next(d for d in (d0, d1) if (d / f"{t}-0").exists()) for t in ("a", "b")}
        assert dirs["a"] != dirs["b"], "partitions are spread over the directories"
        assert scrape(metrics_port)["kafka_log_logmanager_offlinelogdirectorycount"] == 0
        rules.write_text(f"write:EIO:{dirs['a']}/*\n")
        errs: list[Any] = []
        q = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "retries": 0, "message.timeout.ms": 10000})
        q.produce("a", b"00000001|lost?", on_delivery=lambda e, m: errs.append(e))
        assert q.flush(30) == 0
        assert errs and errs[0] is not None and errs[0].code() == KafkaError.KAFKA_STORAGE_ERROR, errs
        assert scrape(metrics_port)["kafka_log_logmanager_offlinelogdirectorycount"] == 1
        # The other directory serves on: produce and read back.
        for i in range(1, 21):
            p.produce("b", b"%08d|more" % i)
        assert p.flush(30) == 0
        assert [n for n, _ in read_all(b.bootstrap, "b")] == list(range(21))
        assert b.proc is not None and b.proc.poll() is None
        # ListOffsets of the failed one answers KAFKA_STORAGE_ERROR too.
        assert list_offsets_error(b.port, "a") == 56
        assert list_offsets_error(b.port, "b") == 0
        b.stop()
        monkeypatch.delenv("EPOCHLOG_TEST_FAULTS")
        rules.write_text("")
        b.start()
        assert [n for n, _ in read_all(b.bootstrap, "a")][:1] == [0]
    finally:
        b.stop()


def list_offsets_error(port: int, topic: str) -> int:
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsTopic

    c = WireClient(port)
    try:
        resp = c.request(
            2,
            7,
            replica_id=-1,
            isolation_level=0,
            topics=(ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)),),
        )
        return int(resp.topics[0].partitions[0].error_code)
    finally:
        c.close()


# -- RF=3: one broker's directory on a full tmpfs; leadership moves, writes go on ----------------------------
def offline_replicas(port: int, topic: str) -> list[int]:
    c = WireClient(port)
    try:
        from kio.schema.metadata.v12.request import MetadataRequestTopic

        resp = c.request(
            3,
            12,
            topics=(MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        return sorted(int(r) for r in resp.topics[0].partitions[0].offline_replicas)
    finally:
        c.close()


def _broker1_on(cluster: LocalCluster, dirs: str) -> None:
    """Broker 1's log directories; its trace stays in the cluster's directory, off the disk the test fills and
    unmounts (the trace checker reads it after the test)."""
    cfg = cluster.broker(1).config
    lines = [ln for ln in cfg.read_text().splitlines() if not ln.startswith("log.dirs=")]
    trace_dir = cfg.parent / "broker-1-trace"
    trace_dir.mkdir(exist_ok=True)
    cfg.write_text("\n".join([*lines, f"log.dirs={dirs}", f"epochlog.trace.dir={trace_dir}"]) + "\n")


def test_enospc_rf3_moves_leadership_and_writes_resume(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", 3) as small:
        cluster = new_cluster(tmp_path, 3, replica_lag_time_max_ms="5000", request_timeout_ms="8000")
        # Broker 1 has two directories: the full one (first, so the topic lands there) and a healthy one.
        _broker1_on(cluster, f"{small},{tmp_path / 'broker-1-ok'}")
        cluster.start()
        try:
            topic = "full3"
            create_topic(cluster.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
            assert partition_info(cluster.bootstrap, topic)[0] == 1
            w = Writer(cluster.bootstrap, topic, timeout_ms=60000).start()
            ports = {i: cluster.broker(i).port for i in (1, 2, 3)}
            wait_until(lambda: partition_info(cluster.bootstrap, topic)[0] in (2, 3), 90, "leadership to move")
            moved_at = time.monotonic()
            leader, _replicas, isr = partition_info(cluster.bootstrap, topic)
            assert 1 not in isr
            assert offline_replicas(ports[leader], topic) == [1]
            assert cluster.broker(1).alive, "broker 1 still has a healthy directory and keeps running"
            wait_until(lambda: sum(t > moved_at for t in w.ack_times) > 500, 60, "writes to resume on the new leader")
            w.stop()
            assert not w.errors, w.errors[:5]
            assert_every_ack_once(w.acked, read_all(cluster.bootstrap, topic))
            log1 = cluster.broker(1).log.read_text(errors="replace")
            assert "No space left on device" in log1 and "told the controller" in log1
            # Grown and restarted, broker 1 recovers its directory and is a healthy replica again.
            grow(small, 64)
            assert cluster.stop_node("broker-1") == 0
            cluster.start_node("broker-1")
            wait_until(lambda: 1 in partition_info(cluster.bootstrap, topic)[2], 60, "broker 1 back in the ISR")
            assert offline_replicas(ports[2], topic) == []
        finally:
            cluster.stop()
