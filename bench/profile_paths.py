"""Where the broker's time goes on each path of issue 26: py-spy on the broker(s) while a load runs.

  .venv/bin/python bench/profile_paths.py [--seconds 12] [--cases produce,consume,tls,rf3,spark] [--rate 100]

py-spy must be installed outside the project venv (bench/pyspy_stacks.py says how). Cases:
  produce   `epochlog up`, confluent-kafka producer, 1 KiB, acks=all, linger 5 ms (bench/produce_consume.py's)
  consume   the same node, 100 B messages read from offset 0 over and over by one consumer
  tls       the secure node of bench/security_bench.py: 1 KiB produce, then consume, over PLAINTEXT and over
            SASL_SSL (SCRAM-SHA-512, TLS 1.3) on the same node
  rf3       a LocalCluster of 3 brokers (bench/cluster_bench.py's), RF=3 min ISR 2, 1 KiB acks=all; all three
            brokers profiled, labelled leader / follower
  spark     the exactly-once sink of bench/spark_sink_eos_bench.py (one warm-up run, then the profiled run):
            the broker on-CPU, and the Spark Python workers wall-clock (idle included), with the sink's time
            split by the line of epochlog/spark/sink.py it was on (which phase)
Brokers are sampled with native frames and idle threads, the idle samples then dropped
(bench/pyspy_stacks.py says why and how), so the C under `SSLObject.read` or uvloop shows. Each load runs
--seconds after a warm-up; sampling covers the load only. Prints the top self / inclusive
functions per process and writes bench/results/profile-*.json; the collapsed stacks stay in
bench/results/profiles/ (gzipped).
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brokers import start
from confluent_kafka import Consumer, Producer, TopicPartition
from produce_consume import create_topic
from pyspy_stacks import Recording, read_stacks, show
from results_file import RESULTS, write_results

PROFILES = RESULTS / "profiles"
RecFactory = Callable[[], Recording]


def _producer(bootstrap: str, acks: str, conf: dict[str, str] | None) -> tuple[Producer, list[int]]:
    acked = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                  "on_delivery": on_delivery, **(conf or {})})  # fmt: skip
    return p, acked


def produce_for(bootstrap: str, topic: str, size: int, seconds: float, rec: RecFactory | None,
                acks: str = "all", conf: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Produce for ``seconds`` (sampled by ``rec`` if given) after a warm-up message; acknowledged only."""
    p, acked = _producer(bootstrap, acks, conf)
    payload = b"\x5a" * size
    p.produce(topic, payload)
    p.flush(30)
    acked[0] = 0
    recording = rec() if rec else None
    t0 = time.perf_counter()
    deadline = t0 + seconds
    i = 0
    while True:
        try:
            p.produce(topic, payload)
        except BufferError:
            p.poll(0.005)
            continue
        i += 1
        if i & 0x3FFF == 0:
            p.poll(0)
            if time.perf_counter() > deadline:
                break
    left = p.flush(120)
    dt = time.perf_counter() - t0
    if recording:
        recording.stop()
    return {"topic": topic, "msgs": acked[0], "unacked": i - acked[0], "left": left, "seconds": round(dt, 2),
            "msgs_per_s": round(acked[0] / dt), "mb_per_s": round(acked[0] * size / dt / 1e6, 1)}  # fmt: skip


def fill(bootstrap: str, topic: str, size: int, count: int, conf: dict[str, str] | None = None) -> int:
    """``count`` messages with acks=1 and no profiling: the data a consume case reads."""
    p, acked = _producer(bootstrap, "1", conf)
    payload = b"\x5a" * size
    for i in range(count):
        try:
            p.produce(topic, payload)
        except BufferError:
            p.poll(0.005)
            p.produce(topic, payload)
        if i & 0x3FFF == 0:
            p.poll(0)
    p.flush(120)
    return acked[0]


def consume_for(bootstrap: str, topic: str, end: int, size: int, seconds: float, rec: RecFactory | None,
                conf: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Read partition 0 from offset 0 to ``end`` again and again for ``seconds`` (bench/produce_consume.py's
    consumer settings); the first message of the first pass is the warm-up."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"prof-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760, **(conf or {})})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    first = time.monotonic() + 60
    while time.monotonic() < first and not any(not m.error() for m in c.consume(1, 1.0)):
        pass
    recording = rec() if rec else None
    got = passes = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        msgs = [m for m in c.consume(10000, 0.5) if not m.error()]
        got += len(msgs)
        if msgs and msgs[-1].offset() >= end - 1:
            passes += 1
            c.assign([TopicPartition(topic, 0, 0)])
    dt = time.perf_counter() - t0
    if recording:
        recording.stop()
    c.close()
    return {"topic": topic, "msgs": got, "passes": passes, "seconds": round(dt, 2), "msgs_per_s": round(got / dt),
            "mb_per_s": round(got * size / dt / 1e6, 1)}  # fmt: skip


class Session:
    """Every case's recordings and results, for the JSON and the tables."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cases: dict[str, Any] = {}

    def rec(self, case: str, pids: dict[str, int], **kw: Any) -> RecFactory:
        def factory() -> Recording:
            r = Recording(pids, PROFILES, case, rate=self.args.rate, **kw).start()
            self.cases.setdefault(case, {})["_rec"] = r
            return r

        return factory

    def done(self, case: str, load: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
        entry = self.cases.setdefault(case, {})
        rec: Recording = entry.pop("_rec")
        entry.update(load=load, processes=rec.summaries(self.args.top), **(extra or {}))
        print(f"== {case}: {load}", file=sys.stderr)
        show(case, entry["processes"], self.args.show)


def case_single(s: Session, seconds: float) -> None:
    node = start("epochlog")
    try:
        pid = {"broker": node.pid()}
        if "produce" in s.args.cases:
            topic = f"prof-{uuid.uuid4().hex[:8]}"
            create_topic(node.bootstrap, topic)
            s.done("produce_1KiB_acks_all", produce_for(node.bootstrap, topic, 1024, seconds,
                                                        s.rec("produce_1KiB_acks_all", pid)))  # fmt: skip
        if "consume" in s.args.cases:
            topic = f"prof-{uuid.uuid4().hex[:8]}"
            create_topic(node.bootstrap, topic)
            end = fill(node.bootstrap, topic, 100, s.args.consume_fill)
            s.done("consume_100B", consume_for(node.bootstrap, topic, end, 100, seconds, s.rec("consume_100B", pid)))
    finally:
        node.stop()


def case_tls(s: Session, seconds: float) -> None:
    from tests.integration.security_node import ALICE_PASSWORD, start_secure_node

    with tempfile.TemporaryDirectory(prefix="profile-tls-") as tmp:
        node = start_secure_node(Path(tmp))
        try:
            pid = {"broker": node.broker.proc.pid}  # type: ignore[union-attr]
            confs = {"plaintext": {"bootstrap.servers": node.plaintext},
                     "sasl_ssl": node.librdkafka_sasl_ssl("alice", ALICE_PASSWORD)}  # fmt: skip
            for name, conf in confs.items():
                bootstrap = conf["bootstrap.servers"]
                topic = f"prof-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, topic, client_conf=conf)
                case = f"tls_node_{name}_produce_1KiB"
                prod = produce_for(bootstrap, topic, 1024, seconds, s.rec(case, pid),
                                   conf=conf)  # fmt: skip
                s.done(case, prod)
                case = f"tls_node_{name}_consume_1KiB"
                end = prod["msgs"] + 1
                s.done(case, consume_for(bootstrap, topic, end, 1024, seconds,
                                         s.rec(case, pid), conf=conf))  # fmt: skip
        finally:
            node.broker.stop()


def case_rf3(s: Session, seconds: float) -> None:
    from confluent_kafka.admin import AdminClient

    from epochlog.server.cluster.local import LocalCluster, free_base_port

    work = Path(tempfile.mkdtemp(prefix="profile-rf3-"))
    lc = LocalCluster(work, 3, free_base_port(3))
    try:
        lc.start()
        topic = f"prof-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + 60
        while True:  # the brokers register; creating RF=3 fails until three have
            try:
                create_topic(lc.bootstrap, topic, rf=3)
                md = AdminClient({"bootstrap.servers": lc.bootstrap}).list_topics(topic, timeout=10)
                leader = md.topics[topic].partitions[0].leader
                if leader >= 0:
                    break
            except Exception as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no RF=3 topic: {e}") from e
            time.sleep(1)
        pids = {}
        for node in lc.nodes.values():
            if node.proc is not None and node.role == "broker":
                pids[f"broker{node.node_id}-{'leader' if node.node_id == leader else 'follower'}"] = node.proc.pid
        s.done("rf3_produce_1KiB_acks_all", produce_for(lc.bootstrap, topic, 1024, seconds,
                                                        s.rec("rf3_produce_1KiB_acks_all", pids)))  # fmt: skip
    finally:
        lc.stop()
        shutil.rmtree(work, ignore_errors=True)


def _python_descendants(root: int, skip: set[int]) -> list[int]:
    """Python processes under ``root`` (the Spark JVM's workers), not descending into any pid in ``skip``
    (the broker; processes already sampled with their subprocesses)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c in skip:
                continue
            try:
                if "python" in Path(f"/proc/{c}/exe").resolve().name:
                    out.append(c)
                    continue  # sampled with --subprocesses: its children are its
            except OSError:
                pass
            todo.append(c)
    return out


def sink_lines(path: Path) -> list[dict[str, Any]]:
    """Wall time of the Spark workers by the deepest frame in epochlog/spark/sink.py: function and line,
    with the line's source, so each sink phase (init_transactions, the marker read, the rows, the commit)
    shows as its own row."""
    import epochlog.spark.sink as sink_mod

    src = Path(sink_mod.__file__).read_text().splitlines()
    by: Counter[str] = Counter()
    total = 0
    for frames, n in read_stacks(path).items():
        total += n
        for fr in reversed(frames):
            if "spark/sink.py" in fr:
                fn, _, line = fr.rpartition(":")
                ln = line.rstrip(")")
                text = src[int(ln) - 1].strip() if ln.isdigit() and int(ln) <= len(src) else ""
                by[f"{fn.split(' (')[0]}:{ln}  {text[:70]}"] += n
                break
    return [{"name": k, "samples": v, "pct": round(100 * v / max(total, 1), 1)} for k, v in by.most_common(20)]


def case_spark(s: Session, records: int) -> None:
    import spark_sink_eos_bench as eos
    from tests.broker_process import BrokerProcess

    from epochlog.spark.pipeline import JVM_THROUGHPUT, local_session

    tmp = Path(tempfile.mkdtemp(prefix="profile-spark-"))
    broker = BrokerProcess(tmp / "data").start()
    try:
        src = eos._topic(broker.bootstrap, 2)
        eos._produce(broker.bootstrap, src, records)
        spark = local_session("profile-sink", jvm_options=JVM_THROUGHPUT)
        spark.sparkContext.setLogLevel("ERROR")
        warm = eos._run(spark, broker.bootstrap, src, records, tmp / "ckpt-warm")
        bpid = broker.proc.pid  # type: ignore[union-attr]
        on_cpu = Recording({"broker": bpid}, PROFILES, "spark_eos_sink", rate=s.args.rate).start()
        workers = Recording({}, PROFILES, "spark_eos_sink_workers", rate=s.args.rate, native=False, lines=True,
                            subprocesses=True)  # fmt: skip
        attached: set[int] = {bpid}
        stop = threading.Event()

        def follow() -> None:  # workers started during the run too (a worker's forks are followed by -s)
            while not stop.is_set():
                for pid in _python_descendants(os.getpid(), attached):
                    attached.add(pid)
                    workers.attach(f"py{pid}", pid)
                stop.wait(0.5)

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        try:
            measured = eos._run(spark, broker.bootstrap, src, records, tmp / "ckpt")
        finally:
            stop.set()
            t.join(5)
            on_cpu.stop()
            workers.stop()
        spark.stop()
        entry = s.cases.setdefault("spark_eos_sink", {})
        entry["load"] = {"records": records, "warm_up": warm, "measured": measured}
        entry["processes"] = on_cpu.summaries(s.args.top)
        wsum = workers.summaries(s.args.top)
        entry["workers"] = wsum
        entry["sink_lines"] = {spy.name: sink_lines(spy.out) for spy in workers.spies if spy.out.exists()}
        print(f"== spark_eos_sink: {entry['load']}", file=sys.stderr)
        show("spark_eos_sink", entry["processes"], s.args.show)
        show("spark_eos_sink workers", wsum, s.args.show)
        for name, rows in entry["sink_lines"].items():
            if rows:
                print(f"-- {name}: wall time by sink.py line", file=sys.stderr)
                for r in rows[:12]:
                    print(f"  {r['pct']:5.1f}%  {r['name']}", file=sys.stderr)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _gzip_profiles(names: list[str]) -> int:
    total = 0
    for name in names:
        p = PROFILES / name
        if p.exists():
            gz = p.with_suffix(".txt.gz")
            gz.write_bytes(gzip.compress(p.read_bytes(), 9))
            p.unlink()
            total += gz.stat().st_size
    return total


def main() -> None:
    global PROFILES
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=12)
    ap.add_argument("--cases", default="produce,consume,tls,rf3,spark")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=25, help="rows kept per table in the JSON")
    ap.add_argument("--show", type=int, default=12, help="rows printed per table")
    ap.add_argument("--consume-fill", type=int, default=1_000_000, help="100 B messages the consume case reads")
    ap.add_argument("--spark-records", type=int, default=500_000)
    ap.add_argument("--profiles-dir", default=str(PROFILES), help="where the collapsed stacks go")
    args = ap.parse_args()
    args.cases = set(filter(None, args.cases.split(",")))
    PROFILES = Path(args.profiles_dir).resolve()
    s = Session(args)
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    if args.cases & {"produce", "consume"}:
        case_single(s, args.seconds)
    if "tls" in args.cases:
        case_tls(s, args.seconds)
    if "rf3" in args.cases:
        case_rf3(s, args.seconds)
    if "spark" in args.cases:
        case_spark(s, args.spark_records)
    files = [p["file"] for c in s.cases.values() for group in ("processes", "workers")
             for p in c.get(group, {}).values() if "file" in p]  # fmt: skip
    gz_bytes = _gzip_profiles(files)
    write_results("profile", {"started": started, "args": {k: (sorted(v) if isinstance(v, set) else v)
                                                            for k, v in vars(args).items()},
                              "profiles_dir": str(PROFILES.relative_to(RESULTS.parent.parent)),
                              "profiles_gz_bytes": gz_bytes, "cases": s.cases})  # fmt: skip


if __name__ == "__main__":
    main()
