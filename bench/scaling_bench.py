"""How one broker's costs grow with partitions, client connections and the size of its data (issue 26, target 7).

  PYTHONPATH=src .venv/bin/python bench/scaling_bench.py [--scale 1.0] [--phases partitions,connections,startup]

One `epochlog up` (the command line of bench/brokers.py) per phase, started here so that its data directory
can outlive it and its file-descriptor limit can be checked; confluent-kafka clients, all on 127.0.0.1.

- partitions: topics of 1, 100 and 1,000 partitions on one broker. The broker's RSS (VmRSS of its process
  tree) before and after each topic is created and given one record per partition gives the memory a
  partition costs. Then, per topic, N messages of 1 KiB with acks=all twice: round robin over the partitions
  (explicit partition numbers: every partition in every request, the costly case) and keyless (librdkafka's
  sticky partitioner: a few partitions per request), and a consumer of every partition reads it all.
  Reported: msgs/s, MB/s and the broker's CPU seconds per GB of each, and from them the extra CPU per GB
  that 1,000 partitions cost against 1.
- connections: 10, then 1,000 raw TCP connections that each do ApiVersions and Metadata (kio frames through
  client/wire.py) and then stay idle; the broker's RSS per connection, its CPU while they are idle, and one
  confluent-kafka producer's throughput with them open. Then the 1,000 each send a one-record Produce a
  second while the producer measures again.
- startup: 10,000 partitions (10 topics) and about 1 GB of logs, then the time from process start to the
  port accepting, to a Metadata answer naming every partition with its leader, and to the first acknowledged
  produce, after a clean shutdown (SIGTERM) and after kill -9. The data is deleted at the end.

--scale multiplies the message counts and the startup phase's partitions and bytes (0.05 for a quick run).
Throughput counts acknowledged messages only. This 2-core machine is shared: compare ratios and per-unit
costs from one run, not absolute numbers across runs. Writes JSON to bench/results/scaling-<time>.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import epochlog_args, free_port
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from proc_cpu import cpu_seconds as _cpu_s
from results_file import write_results
from rich.console import Console
from rich.table import Table

from epochlog.client.epochs import metadata_request
from epochlog.client.wire import Connection, WireError, decode_response, encode_request
from epochlog.protocol.records import build_batch

SIZE = 1024
NOFILE_WANTED = 4096  # 1,000 client connections plus the log files of the startup phase's partitions


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < NOFILE_WANTED:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(NOFILE_WANTED, hard), hard))


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the broker runs as one process today; a child would be counted)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except OSError:
                pass
    return out


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class Broker:
    """`epochlog up` on ``data_dir``, kept when the process ends (the startup phase restarts on it)."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log = open(data_dir.parent / f"broker-{self.port}.log", "ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            epochlog_args(self.port, data_dir), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_raise_nofile,
        )  # fmt: skip

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        return sum(_cpu_s(p) for p in _tree(self.proc.pid))

    def rss_kib(self) -> int:
        return sum(_status(p, "VmRSS") for p in _tree(self.proc.pid))

    def nofile(self) -> list[int]:
        for line in Path(f"/proc/{self.proc.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return [int(x) for x in line.split()[3:5]]
        return []

    def wait_port(self, timeout: float = 600) -> float:
        """Seconds from the process start to the listener accepting a connection."""
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return time.monotonic() - self.started
            except OSError:
                time.sleep(0.005)
        raise TimeoutError(f"broker did not listen on {self.port}")

    def wait_metadata(self, topics: list[str] | None, partitions: int, timeout: float = 600) -> dict[str, float]:
        """Seconds from the process start to the first Metadata answer, and to the first naming all
        ``partitions`` of ``topics`` with a leader and no error."""
        out: dict[str, float] = {}
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            try:
                with Connection("127.0.0.1", self.port, timeout=30, client_id="scaling-bench") as c:
                    resp = c.request(metadata_request(topics))
            except WireError:
                time.sleep(0.02)
                continue
            out.setdefault("first_metadata_s", time.monotonic() - self.started)
            led = sum(
                1 for t in resp.topics if int(t.error_code) == 0
                for p in t.partitions if int(p.error_code) == 0 and int(p.leader_id) >= 0
            )  # fmt: skip
            if led >= partitions:
                out["all_led_s"] = time.monotonic() - self.started
                return out
            time.sleep(0.02)
        raise TimeoutError(f"{partitions} partitions not all led: {out}")

    def stop(self, kill: bool = False) -> float:
        """SIGTERM (clean) or SIGKILL the process group; seconds until the process is gone."""
        t = time.monotonic()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()
        return time.monotonic() - t


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(300)


def _producer(bootstrap: str, acked: list[int], errors: list[str]) -> Producer:
    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += 1
        else:
            errors.append(str(err))

    return Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "on_delivery": on_delivery,
    })  # fmt: skip


def seed(bootstrap: str, topic: str, partitions: int) -> None:
    """One record in every partition, retried while the new partitions' leaders are not yet known."""
    acked: list[int] = [0]
    errors: list[str] = []
    p = _producer(bootstrap, acked, errors)
    for i in range(partitions):
        p.produce(topic, b"seed", partition=i)
    left = p.flush(300)
    if left or errors or acked[0] != partitions:
        raise RuntimeError(f"seeding {topic}: {acked[0]} of {partitions} acknowledged, errors {errors[:3]}")


def produce(b: Broker, topic: str, count: int, size: int, partitions: int | None) -> dict[str, Any]:
    """acks=all; ``partitions``: round robin over that many by number, None: keyless (librdkafka spreads)."""
    acked: list[int] = [0]
    errors: list[str] = []
    p = _producer(b.bootstrap, acked, errors)
    payload = os.urandom(size)
    p.produce(topic, payload, partition=0)  # warm-up: metadata and the connection
    p.flush(30)
    acked[0] = 0
    cpu0 = b.cpu_s()
    t0 = time.perf_counter()
    send = p.produce
    for i in range(count):
        kw = {"partition": i % partitions} if partitions else {}
        try:
            send(topic, payload, **kw)
        except BufferError:
            p.poll(0.005)
            send(topic, payload, **kw)
        if i & 0x3FFF == 0:
            p.poll(0)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    cpu = b.cpu_s() - cpu0
    if errors or left:
        print(f"  {topic}: {count - acked[0]} not acknowledged ({left} queued); {errors[:3]}", file=sys.stderr)
    gb = acked[0] * size / 1e9
    return {
        "sent": count, "msgs": acked[0], "errors": len(errors) + left, "seconds": dt,
        "msgs_per_s": acked[0] / dt, "mb_per_s": acked[0] * size / dt / 1e6,
        "broker_cpu_s": cpu, "broker_cpu_s_per_gb": cpu / gb if gb else float("nan"),
    }  # fmt: skip


def consume(b: Broker, topic: str, partitions: int, count: int, size: int) -> dict[str, Any]:
    """Read ``count`` messages from every partition of ``topic`` from offset 0; the clock starts at the first."""
    c = Consumer({
        "bootstrap.servers": b.bootstrap, "group.id": f"scaling-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
    })  # fmt: skip
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got = 0
    deadline = time.perf_counter() + 300
    while got == 0 and time.perf_counter() < deadline:
        got = sum(1 for m in c.consume(10000, 1.0) if not m.error())
    first, cpu0, t0 = got, b.cpu_s(), time.perf_counter()
    while got < count and time.perf_counter() < deadline:
        # consume(n) waits for n messages or the timeout: ask for no more than are left.
        got += sum(1 for m in c.consume(min(10000, count - got), 1.0) if not m.error())
    dt, cpu = time.perf_counter() - t0, b.cpu_s() - cpu0
    c.close()
    timed = got - first
    gb = timed * size / 1e9
    return {
        "msgs": got, "expected": count, "seconds": dt, "msgs_per_s": timed / dt, "mb_per_s": timed * size / dt / 1e6,
        "broker_cpu_s": cpu, "broker_cpu_s_per_gb": cpu / gb if gb else float("nan"),
    }  # fmt: skip


def _median_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("msgs_per_s", "mb_per_s", "broker_cpu_s_per_gb")
    return {**{k: statistics.median(r[k] for r in runs) for k in keys}, "runs": runs}


def partitions_phase(work: Path, count: int, rounds: int, levels: list[int]) -> dict[str, Any]:
    b = Broker(work / "partitions")
    out: dict[str, Any] = {"count": count, "size": SIZE, "rounds": rounds}
    try:
        b.wait_port()
        b.wait_metadata(None, 0)
        # A first topic and message load what the first of anything loads, so that the RSS steps below
        # are the partitions' own.
        create_topic(b.bootstrap, "warm", 1)
        seed(b.bootstrap, "warm", 1)
        topics = {}
        for n in levels:
            topic = f"parts-{n}"
            rss0 = b.rss_kib()
            t = time.monotonic()
            create_topic(b.bootstrap, topic, n)
            seed(b.bootstrap, topic, n)
            created_s = time.monotonic() - t
            rss1 = b.rss_kib()
            topics[n] = topic
            out[str(n)] = {"create_and_seed_s": created_s, "rss_before_kib": rss0, "rss_after_kib": rss1,
                           "rss_kib_per_partition": (rss1 - rss0) / n, "produce_rr": [], "produce_keyless": [],
                           "consume": []}  # fmt: skip
            print(f"  {n} partitions: created in {created_s:.1f} s, RSS +{(rss1 - rss0) / n:.1f} KiB each",
                  file=sys.stderr)  # fmt: skip
        # Rounds interleave the levels so that the machine's drift falls on every level alike.
        stored = dict.fromkeys(levels, 0)
        for _ in range(rounds):
            for n in levels:
                r = out[str(n)]
                for mode, parts in (("produce_rr", n), ("produce_keyless", None)):
                    r[mode].append(produce(b, topics[n], count, SIZE, parts))
                    stored[n] += r[mode][-1]["msgs"] + 1  # and the warm-up message
                total = stored[n] + n
                r["consume"].append(consume(b, topics[n], n, total, SIZE))
                print(f"  {n}: rr {r['produce_rr'][-1]['mb_per_s']:.0f} MB/s, keyless "
                      f"{r['produce_keyless'][-1]['mb_per_s']:.0f} MB/s, consume {r['consume'][-1]['mb_per_s']:.0f}"
                      " MB/s", file=sys.stderr)  # fmt: skip
        for n in levels:
            r = out[str(n)]
            for mode in ("produce_rr", "produce_keyless", "consume"):
                r[mode] = _median_runs(r[mode])
        out["rss_end_kib"] = b.rss_kib()
    finally:
        b.stop()
    lo, hi = str(levels[0]), str(levels[-1])
    per = 1000 / max(1, levels[-1] - levels[0])
    out["per_1000_partitions"] = {}
    for mode in ("produce_rr", "produce_keyless", "consume"):
        a, z = out[lo][mode], out[hi][mode]
        out["per_1000_partitions"][mode] = {
            "extra_broker_cpu_s_per_gb": (z["broker_cpu_s_per_gb"] - a["broker_cpu_s_per_gb"]) * per,
            "throughput_ratio": z["msgs_per_s"] / a["msgs_per_s"],
        }
    return out


def _handshake(port: int, topic: str) -> socket.socket:
    """A raw connection that has done what a client does first: ApiVersions, then Metadata."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i, req in enumerate((ApiVersionsRequest(client_software_name="scaling", client_software_version="1"),
                             metadata_request([topic]))):  # fmt: skip
        s.sendall(encode_request(req, i + 1, "scaling-idle"))
        frame = _recv(s, struct.unpack(">i", _recv(s, 4))[0])
        decode_response(int(req.__api_key__), int(req.__version__), frame, i + 1)
    return s


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            raise ConnectionError("closed by the broker")
        buf += part
    return bytes(buf)


class Trickle(threading.Thread):
    """Every connection sends a one-record Produce (acks=1) each ``period`` seconds and reads its answer."""

    def __init__(self, socks: list[socket.socket], topic: str, period: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.socks, self.topic, self.period = socks, topic, period
        self.halt = threading.Event()
        self.requests = 0

    def run(self) -> None:
        batch = build_batch([(None, b"x" * 100)])
        data = (TopicProduceData(name=self.topic, partition_data=(PartitionProduceData(index=0, records=batch),)),)  # type: ignore[arg-type]
        req = ProduceRequest(transactional_id=None, acks=1, timeout=timedelta(seconds=5), topic_data=data)  # type: ignore[arg-type]
        frame = encode_request(req, 7, "scaling-trickle")
        while not self.halt.is_set():
            t = time.monotonic()
            for s in self.socks:  # all sent, then all read: the broker sees them concurrently
                s.sendall(frame)
            for s in self.socks:
                _recv(s, struct.unpack(">i", _recv(s, 4))[0])
            self.requests += len(self.socks)
            self.halt.wait(max(0.0, self.period - (time.monotonic() - t)))


def _idle_cpu(b: Broker, seconds: float) -> float:
    """The broker's CPU over ``seconds`` as a fraction of one core."""
    c0, t0 = b.cpu_s(), time.monotonic()
    time.sleep(seconds)
    return (b.cpu_s() - c0) / (time.monotonic() - t0)


def connections_phase(work: Path, count: int, levels: list[int], idle_s: float) -> dict[str, Any]:
    b = Broker(work / "connections")
    out: dict[str, Any] = {"count": count, "size": SIZE, "idle_window_s": idle_s}
    socks: list[socket.socket] = []
    try:
        b.wait_port()
        b.wait_metadata(None, 0)
        out["broker_nofile_soft_hard"] = b.nofile()
        create_topic(b.bootstrap, "conn", 1)
        seed(b.bootstrap, "conn", 1)
        produce(b, "conn", count // 4, SIZE, 1)  # the broker's buffers reach their working size first
        out["no_connections"] = {"rss_kib": b.rss_kib(), "idle_cpu_cores": _idle_cpu(b, idle_s)}
        for n in levels:
            while len(socks) < n:
                socks.append(_handshake(b.port, "conn"))
            rss = b.rss_kib()
            out[str(n)] = {"rss_kib": rss, "idle_cpu_cores": _idle_cpu(b, idle_s),
                           "produce": produce(b, "conn", count, SIZE, 1)}  # fmt: skip
            print(f"  {n} connections: RSS {rss / 1024:.0f} MiB, idle {out[str(n)]['idle_cpu_cores']:.3f} cores, "
                  f"{out[str(n)]['produce']['mb_per_s']:.0f} MB/s", file=sys.stderr)  # fmt: skip
        trickle = Trickle(socks, "conn")
        trickle.start()
        try:
            busy = _idle_cpu(b, idle_s)
            out[f"{levels[-1]}_trickle"] = {"cpu_cores": busy, "produce": produce(b, "conn", count, SIZE, 1)}
        finally:
            trickle.halt.set()
            trickle.join(30)
        out[f"{levels[-1]}_trickle"]["requests"] = trickle.requests
        lo, hi = out[str(levels[0])], out[str(levels[-1])]
        out["rss_kib_per_connection"] = (hi["rss_kib"] - lo["rss_kib"]) / (levels[-1] - levels[0])
        out["throughput_ratio"] = hi["produce"]["msgs_per_s"] / lo["produce"]["msgs_per_s"]
    finally:
        for s in socks:
            s.close()
        b.stop()
    return out


def _first_ack(bootstrap: str, topic: str) -> float:
    """Seconds to an acknowledged acks=all message from a new producer."""
    acked: list[int] = [0]
    errors: list[str] = []
    t = time.monotonic()
    p = _producer(bootstrap, acked, errors)
    p.produce(topic, b"after-restart", partition=0)
    if p.flush(120) or not acked[0]:
        raise RuntimeError(f"no acknowledgement after restart: {errors[:3]}")
    return time.monotonic() - t


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def startup_phase(work: Path, partitions: int, total_bytes: int) -> dict[str, Any]:
    data = work / "startup"
    topics = [f"s{i}" for i in range(max(1, partitions // 1000))]
    per_topic = partitions // len(topics)
    out: dict[str, Any] = {"partitions": per_topic * len(topics), "topics": len(topics)}
    b = Broker(data)
    try:
        b.wait_port()
        b.wait_metadata(None, 0)
        out["empty_rss_kib"] = b.rss_kib()
        t = time.monotonic()
        for name in topics:
            create_topic(b.bootstrap, name, per_topic)
            seed(b.bootstrap, name, per_topic)
        out["create_and_seed_s"] = time.monotonic() - t
        # The bytes go to 100 partitions of the first topic in large messages: the point is a gigabyte of
        # segments to open and check, not the produce path.
        big = 16 * 1024
        t = time.monotonic()
        fill = produce(b, topics[0], total_bytes // big, big, min(100, per_topic))
        out["fill"] = {"seconds": time.monotonic() - t, "mb_per_s": fill["mb_per_s"], "errors": fill["errors"]}
        out["loaded_rss_kib"] = b.rss_kib()
        out["rss_kib_per_partition"] = (out["loaded_rss_kib"] - out["empty_rss_kib"]) / out["partitions"]
        out["broker_nofile_soft_hard"] = b.nofile()
        out["data_bytes"] = _du(data)
        print(f"  {out['partitions']} partitions, {out['data_bytes'] / 1e9:.2f} GB; created in "
              f"{out['create_and_seed_s']:.0f} s", file=sys.stderr)  # fmt: skip
        for how in ("clean", "kill9"):
            out[f"{how}_stop_s"] = b.stop(kill=how == "kill9")
            b = Broker(data, b.port)
            r: dict[str, Any] = {"port_s": b.wait_port()}
            r.update(b.wait_metadata(topics, out["partitions"]))
            t0 = time.monotonic()
            r["first_ack_s"] = t0 - b.started + _first_ack(b.bootstrap, topics[-1])
            r["rss_kib"] = b.rss_kib()
            r["idle_cpu_cores"] = _idle_cpu(b, 5)
            out[f"restart_after_{how}"] = r
            print(f"  restart after {how}: port {r['port_s']:.1f} s, all led {r['all_led_s']:.1f} s, "
                  f"first ack {r['first_ack_s']:.1f} s", file=sys.stderr)  # fmt: skip
            # Some unflushed appends for the kill -9 to leave behind.
            produce(b, topics[-1], 2000, SIZE, per_topic)
    finally:
        if b.proc.poll() is None:
            b.stop()
        shutil.rmtree(data, ignore_errors=True)
    return out


def show(res: dict[str, Any]) -> None:
    con = Console()
    rows: list[tuple[str, ...]] = []
    if p := res.get("partitions"):
        t = Table(title=f"partitions: {p['count']:,} x 1 KiB acks=all per run, median of {p['rounds']}")
        for col in ("partitions", "mode", "msgs/s", "MB/s", "broker CPU s/GB", "RSS KiB/partition"):
            t.add_column(col, justify="right")
        for n in (k for k in p if k.isdigit()):
            for mode in ("produce_rr", "produce_keyless", "consume"):
                m = p[n][mode]
                rows.append((n, mode, f"{m['msgs_per_s']:,.0f}", f"{m['mb_per_s']:.1f}",
                             f"{m['broker_cpu_s_per_gb']:.1f}", f"{p[n]['rss_kib_per_partition']:.1f}"))  # fmt: skip
        for r in rows:
            t.add_row(*r)
        con.print(t)
        con.print({k: {a: round(v, 3) for a, v in d.items()} for k, d in p["per_1000_partitions"].items()})
    if c := res.get("connections"):
        t = Table(title="connections (raw, ApiVersions + Metadata, then idle) beside one producer")
        for col in ("connections", "broker RSS MiB", "broker CPU (cores) idle", "produce msgs/s", "MB/s", "CPU s/GB"):
            t.add_column(col, justify="right")
        for key in [k for k in c if k[0].isdigit()]:
            v = c[key]
            cpu = v.get("idle_cpu_cores", v.get("cpu_cores"))
            t.add_row(key, f"{v['rss_kib'] / 1024:.0f}" if "rss_kib" in v else "-", f"{cpu:.3f}",
                      f"{v['produce']['msgs_per_s']:,.0f}", f"{v['produce']['mb_per_s']:.1f}",
                      f"{v['produce']['broker_cpu_s_per_gb']:.1f}")  # fmt: skip
        con.print(t)
        per, ratio = c["rss_kib_per_connection"], c["throughput_ratio"]
        con.print(f"RSS per connection {per:.1f} KiB; produce throughput, most/fewest connections: {ratio:.2f}")
    if s := res.get("startup"):
        t = Table(title=f"startup: {s['partitions']:,} partitions, {s['data_bytes'] / 1e9:.2f} GB")
        for col in ("after", "stop s", "port s", "first Metadata s", "all led s", "first ack s", "RSS MiB"):
            t.add_column(col, justify="right")
        for how in ("clean", "kill9"):
            r = s[f"restart_after_{how}"]
            t.add_row(how, f"{s[f'{how}_stop_s']:.1f}", f"{r['port_s']:.2f}", f"{r['first_metadata_s']:.2f}",
                      f"{r['all_led_s']:.2f}", f"{r['first_ack_s']:.2f}", f"{r['rss_kib'] / 1024:.0f}")  # fmt: skip
        con.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply message counts and the startup data")
    ap.add_argument("--phases", default="partitions,connections,startup")
    ap.add_argument("--rounds", type=int, default=2, help="produce/consume rounds per partition count")
    ap.add_argument("--partitions", default="1,100,1000")
    ap.add_argument("--connections", default="10,1000")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    phases = args.phases.split(",")
    work = Path(tempfile.mkdtemp(prefix="scaling-bench-"))
    res: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "scale": args.scale, "loadavg_start": os.getloadavg(),
        "bench_nofile_soft_hard": list(resource.getrlimit(resource.RLIMIT_NOFILE)), "nofile_wanted": NOFILE_WANTED,
    }  # fmt: skip
    count = int(200_000 * args.scale)
    try:
        if "partitions" in phases:
            print("== partitions", file=sys.stderr)
            levels = [int(x) for x in args.partitions.split(",")]
            res["partitions"] = partitions_phase(work, count, args.rounds, levels)
        if "connections" in phases:
            print("== connections", file=sys.stderr)
            levels = [int(x) for x in args.connections.split(",")]
            res["connections"] = connections_phase(work, count, levels, 5.0)
        if "startup" in phases:
            print("== startup", file=sys.stderr)
            res["startup"] = startup_phase(work, int(10_000 * args.scale), int(1024**3 * args.scale))
    except BaseException:
        print(f"failed; the brokers' logs are in {work}", file=sys.stderr)
        raise
    res["loadavg_end"] = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)
    show(res)
    write_results("scaling", res, Path(args.out))


if __name__ == "__main__":
    main()
