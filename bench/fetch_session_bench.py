"""What a KIP-227 fetch session saves a consumer of many partitions, per empty fetch.

  PYTHONPATH=src .venv/bin/python bench/fetch_session_bench.py [--partitions 1000] [--fetches 200]

Starts one epochlog broker (`epochlog up`), creates a topic of N partitions and writes one record to
each, then has a caught-up consumer fetch with Fetch v12 (kafka-python's and the Java client's version)
and max_wait 0, so every answer is empty of records: the steady state of a consumer between bursts.
Two ways: sessionless (epoch -1: every request names all N partitions and every answer lists all N) and
incremental (a session opened by one full fetch; then requests name nothing and answers carry nothing
that did not change). Prints bytes sent, bytes received and the round trip per fetch (median and p90),
and writes JSON to bench/results/.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--fetches", type=int, default=200)
    args = ap.parse_args()
    broker = start("epochlog")
    try:
        topic = "sessions"
        _prepare(broker.bootstrap, topic, args.partitions)
        offsets = dict.fromkeys(range(args.partitions), 1)  # caught up: one record each, read already
        f = Fetcher(broker.port, topic, args.partitions, offsets)
        rows = []
        for incremental in (False, True, False, True):  # interleaved, so load drift hits both alike
            rows.append(_run(f, args.fetches, incremental))
        f.wire.close()
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
    Console().print(table)
    write_results("fetch-sessions", results)


if __name__ == "__main__":
    main()
