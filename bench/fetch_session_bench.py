"""What a KIP-227 fetch session saves a consumer of many partitions, per empty fetch.

  PYTHONPATH=src .venv/bin/python bench/fetch_session_bench.py [--partitions 1000] [--fetches 200]

Starts one epochlog broker (`epochlog up`), creates a topic of N partitions and writes one record to
each, then has a caught-up consumer fetch with Fetch v12 (kafka-python's and the Java client's version)
and max_wait 0, so every answer is empty of records: the steady state of a consumer between bursts.
Two ways: sessionless (epoch -1: every request names all N partitions and every answer lists all N) and
incremental (a session opened by one full fetch; then requests name nothing and answers carry nothing
that did not change). Prints bytes sent, bytes received and the round trip per fetch (median and p90).
Then a real kafka-python consumer (which fetches through sessions) polls the caught-up topic, against
this broker and against one with max.incremental.fetch.session.cache.slots=0, and its own fetch-latency
and fetch-rate metrics are reported. Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from brokers import start
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.serial import entity_reader
from results_file import write_results
from rich.console import Console
from rich.table import Table
from tests.integration.kafka_wire import WireClient, schema_module

VERSION = 12


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return buf


class Fetcher:
    def __init__(self, port: int, topic: str, partitions: int, offsets: dict[int, int]) -> None:
        self.m = schema_module(1, VERSION)
        self.wire = WireClient(port)
        self.topic = topic
        self.partitions = partitions
        self.offsets = offsets
        self.resp_cls = load_response_schema(1, VERSION)

    def fetch(self, session_id: int, epoch: int, name_all: bool) -> tuple[int, int, float, Any]:
        """(request bytes, response bytes, seconds, decoded response)."""
        m = self.m
        parts = tuple(
            m.FetchPartition(partition=p, fetch_offset=self.offsets[p], partition_max_bytes=1 << 20)
            for p in range(self.partitions)
        )
        corr, frame = self.wire.frame(
            1,
            VERSION,
            replica_id=-1,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=50 << 20,
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=(m.FetchTopic(topic=self.topic, partitions=parts),) if name_all else (),
            forgotten_topics_data=(),
            rack_id="",
        )
        t = time.perf_counter()
        self.wire.sock.sendall(frame)
        size = struct.unpack(">i", _recv(self.wire.sock, 4))[0]
        body = _recv(self.wire.sock, size)
        elapsed = time.perf_counter() - t
        assert struct.unpack_from(">i", body)[0] == corr
        resp, _ = entity_reader(self.resp_cls)(body[5:], 0)
        return len(frame), size + 4, elapsed, resp


def _prepare(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(120)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            for i in range(partitions):
                p.produce(topic, b"x", partition=i)
            break
        except Exception:  # the new partitions' leaders not known yet
            p.flush(5)
            time.sleep(0.5)
    assert p.flush(120) == 0


def _run(f: Fetcher, fetches: int, incremental: bool) -> dict[str, Any]:
    sid, epoch = 0, -1
    if incremental:
        _req, _resp, _t, first = f.fetch(0, 0, True)
        sid, epoch = int(first.session_id), 1
        assert sid != 0, "the broker opened no session"
    sent, got, times, listed = [], [], [], []
    for _ in range(fetches):
        req, resp_bytes, secs, resp = f.fetch(sid, epoch, not incremental)
        assert int(resp.error_code) == 0, resp.error_code
        if incremental:
            epoch += 1
        sent.append(req)
        got.append(resp_bytes)
        times.append(secs)
        listed.append(sum(len(t.partitions) for t in resp.responses))
    times.sort()
    return {
        "mode": "incremental session" if incremental else "sessionless (full)",
        "request_bytes": statistics.median(sent),
        "response_bytes": statistics.median(got),
        "partitions_in_response": statistics.median(listed),
        "median_ms": statistics.median(times) * 1000,
        "p90_ms": times[int(len(times) * 0.9)] * 1000,
    }


def _kafka_python(bootstrap: str, topic: str, partitions: int, seconds: float) -> dict[str, float]:
    """A caught-up kafka-python consumer of every partition, polling for ``seconds``: its own fetch metrics
    (it fetches through a session when the broker gives it one)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=0, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 1)
        warm = time.monotonic() + 5
        while time.monotonic() < warm:
            c.poll(timeout_ms=100)
        polls = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            c.poll(timeout_ms=100)
            polls += 1
        m = c.metrics()["consumer-fetch-manager-metrics"]
        sessions = {h.next_metadata.session_id for h in c._fetcher._session_handlers.values()}
        return {
            "fetch_latency_avg_ms": float(m["fetch-latency-avg"]),
            "fetch_rate_per_s": float(m["fetch-rate"]),
            "session": float(bool(sessions - {0})),
        }
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--fetches", type=int, default=200)
    ap.add_argument("--kafka-python-seconds", type=float, default=15, help="0 skips the kafka-python runs")
    args = ap.parse_args()
    broker = start("epochlog")
    clients: dict[str, dict[str, float]] = {}
    try:
        topic = "sessions"
        _prepare(broker.bootstrap, topic, args.partitions)
        offsets = dict.fromkeys(range(args.partitions), 1)  # caught up: one record each, read already
        f = Fetcher(broker.port, topic, args.partitions, offsets)
        rows = []
        for incremental in (False, True, False, True):  # interleaved, so load drift hits both alike
            rows.append(_run(f, args.fetches, incremental))
        f.wire.close()
        if args.kafka_python_seconds > 0:
            clients["kafka-python, session"] = _kafka_python(
                broker.bootstrap, topic, args.partitions, args.kafka_python_seconds
            )
    finally:
        broker.stop()
    if args.kafka_python_seconds > 0:
        # The same consumer against a broker that keeps no sessions (no slots): every fetch in full.
        broker = start("epochlog", {"max.incremental.fetch.session.cache.slots": "0"})
        try:
            _prepare(broker.bootstrap, "sessions", args.partitions)
            clients["kafka-python, no session"] = _kafka_python(
                broker.bootstrap, "sessions", args.partitions, args.kafka_python_seconds
            )
        finally:
            broker.stop()
    results: dict[str, Any] = {
        "partitions": args.partitions,
        "fetches_per_run": args.fetches,
        "load_average_at_end": os.getloadavg(),  # the machine is shared: read the times with this
        "runs": rows,
    }
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_mode.setdefault(r["mode"], []).append(r)
    table = Table(title=f"An empty Fetch v12 of {args.partitions} partitions, one consumer, loopback")
    for col in ("mode", "request B", "response B", "partitions answered", "median ms", "p90 ms"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    summary = {}
    for mode, rs in by_mode.items():
        s = {k: statistics.median([r[k] for r in rs]) for k in rs[0] if k != "mode"}
        summary[mode] = s
        table.add_row(
            mode,
            f"{s['request_bytes']:.0f}",
            f"{s['response_bytes']:.0f}",
            f"{s['partitions_in_response']:.0f}",
            f"{s['median_ms']:.2f}",
            f"{s['p90_ms']:.2f}",
        )
    results["summary"] = summary
    results["kafka_python"] = clients
    Console().print(table)
    if clients:
        kp = Table(title=f"kafka-python {args.kafka_python_seconds:.0f} s caught up on {args.partitions} partitions")
        for col in ("broker", "session", "fetch latency avg ms", "fetches/s"):
            kp.add_column(col, justify="left" if col == "broker" else "right")
        for name, c in clients.items():
            latency, rate = f"{c['fetch_latency_avg_ms']:.2f}", f"{c['fetch_rate_per_s']:.1f}"
            kp.add_row(name, "yes" if c["session"] else "no", latency, rate)
        Console().print(kp)
    write_results("fetch-sessions", results)


if __name__ == "__main__":
    main()
