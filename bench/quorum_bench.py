"""The controller quorum's benchmarks, on real processes on 127.0.0.1:

1. failover: kill -9 of the active controller and of a partition's leader at the same moment, under an
   idempotent acks=all producer. Times from the kill to: another controller active (DescribeQuorum polled
   every 20 ms), the partition's new leader visible in Metadata (polled every 20 ms), and the first
   acknowledged write. The client-side share is the last minus the second.
2. CreateTopics latency: 100 topics (1 partition, RF 3) created one request at a time.
3. Metadata log size over 10^5 ISR changes (AlterPartition) with snapshots every
   --snapshot-bytes: the log stays bounded because each snapshot lets the log below it go.

  .venv/bin/python bench/quorum_bench.py [--rounds 3] [--isr-changes 100000] [--snapshot-bytes 1048576]
                                         [--segment-bytes 1048576 (0: Kafka's 1 GiB)] [--only failover|churn]

Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from results_file import write_results
from rich.console import Console
from rich.table import Table
from tests.integration.cluster_helpers import leader_epoch, wait_until

from epochlog.client.quorum import leader_of
from epochlog.server.cluster.local import LocalCluster, free_base_port


def _quorum_leader(lc: LocalCluster) -> int:
    return leader_of([n.port for n in lc.controller_nodes() if n.alive])


def failover_round(lc: LocalCluster, topic: str) -> dict[str, Any]:
    bs = lc.bootstrap
    old_leader, _ = wait_until(lambda: leader_epoch(bs, topic), 30, "a partition leader")
    active = lc.active_controller(30)
    acked: list[float] = []
    errors: list[str] = []
    stop = threading.Event()
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 1})

    def cb(err: Any, _msg: Any) -> None:
        (errors.append(str(err)) if err is not None else acked.append(time.monotonic()))

    def run() -> None:
        while not stop.is_set():
            try:
                p.produce(topic, b"x" * 100, on_delivery=cb)
            except BufferError:
                pass
            p.poll(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: len(acked) > 500, 30, "writes before the kill")
    lc.kill9(active.name)
    lc.kill9(f"broker-{old_leader}")
    t0 = time.monotonic()
    controller_s = leader_s = ack_s = None
    while time.monotonic() - t0 < 60 and (controller_s is None or leader_s is None or ack_s is None):
        now = time.monotonic() - t0
        if controller_s is None and _quorum_leader(lc) not in (-1, active.node_id):
            controller_s = now
        if leader_s is None:
            try:
                if leader_epoch(bs, topic)[0] not in (-1, old_leader):
                    leader_s = now
            except Exception:
                pass
        if ack_s is None and acked and acked[-1] > t0:
            ack_s = next(a for a in acked if a > t0) - t0
        time.sleep(0.02)
    stop.set()
    t.join(5)
    p.flush(30)
    lc.start_node(active.name)
    lc.start_node(f"broker-{old_leader}")
    return {
        "controller_active_s": controller_s,
        "partition_leader_visible_s": leader_s,
        "first_ack_s": ack_s,
        "client_side_s": None if ack_s is None or leader_s is None else max(ack_s - leader_s, 0.0),
        "errors": len(errors),
    }


def create_topics_latency(lc: LocalCluster, n: int) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": lc.bootstrap})
    lat = []
    for i in range(n):
        t0 = time.monotonic()
        admin.create_topics([NewTopic(f"ct-{i}", 1, 3)])[f"ct-{i}"].result(30)
        lat.append((time.monotonic() - t0) * 1000)
    lat.sort()
    return {
        "topics": n,
        "p50_ms": round(statistics.median(lat), 1),
        "p99_ms": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1),
        "max_ms": round(lat[-1], 1),
    }


def metadata_log_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def isr_churn(work: Path, changes: int, snapshot_bytes: int, segment_bytes: int) -> dict[str, Any]:
    """One real controller process; this script plays three brokers: registers them, keeps them heartbeating,
    creates a topic and flips its ISR between [1,2,3] and [1,2] with AlterPartition."""
    from kio.schema.alter_partition.v3.request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
    from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
    from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest, Listener
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    from epochlog.client.wire import Connection

    base = free_base_port(1, controllers=1)
    settings = {
        "metadata.log.max.record.bytes.between.snapshots": str(snapshot_bytes),
        "broker.session.timeout.ms": "60000",
    }
    if segment_bytes:
        # Snapshots free whole segments: with Kafka's 1 GiB segments nothing would go in this run.
        settings["metadata.log.segment.bytes"] = str(segment_bytes)
        settings["metadata.log.segment.min.bytes"] = str(segment_bytes)
    lc = LocalCluster(work, 0, base, controller_settings=settings)
    lc.nodes = {k: v for k, v in lc.nodes.items() if v.role == "controller"}
    lc.start()
    try:
        ctrl = lc.controller
        conn = Connection("127.0.0.1", ctrl.port, client_id="bench-broker", timeout=30)
        epochs = {}

        def register(b: int) -> Any:
            return conn.request(
                BrokerRegistrationRequest(
                    broker_id=b,
                    cluster_id=(work / "cluster.id").read_text().strip(),
                    incarnation_id=uuid.uuid4(),
                    listeners=(Listener(name="PLAINTEXT", host="127.0.0.1", port=1000 + b, security_protocol=0),),
                    features=(),
                    rack=None,
                    is_migrating_zk_broker=False,
                    log_dirs=(),
                    previous_broker_epoch=-1,
                )
            )

        def heartbeat(b: int) -> Any:
            return conn.request(
                BrokerHeartbeatRequest(
                    broker_id=b,
                    broker_epoch=epochs[b],
                    current_metadata_offset=1 << 40,
                    want_fence=False,
                    want_shut_down=False,
                    offline_log_dirs=(),
                )
            )

        # The controller answers NOT_CONTROLLER until it is active; registered brokers start fenced
        # and a heartbeat unfences them.
        deadline = time.monotonic() + 30
        for b in (1, 2, 3):
            while (r := register(b)).error_code:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"BrokerRegistration failed with error {r.error_code}")
                time.sleep(0.1)
            epochs[b] = int(r.broker_epoch)
        while any((h := heartbeat(b)).error_code or h.is_fenced for b in (1, 2, 3)):
            if time.monotonic() > deadline:
                raise RuntimeError("the brokers stayed fenced")
            time.sleep(0.1)
        r = conn.request(
            CreateTopicsRequest(
                topics=(
                    CreatableTopic(name="churn", num_partitions=1, replication_factor=3, assignments=(), configs=()),
                ),
                timeout=timedelta(seconds=10),
                validate_only=False,
            )
        )
        if r.topics[0].error_code:
            raise RuntimeError(f"CreateTopics failed with error {r.topics[0].error_code}")
        topic_id = r.topics[0].topic_id
        leader_epoch_, partition_epoch = 0, 0
        samples = []
        t0 = time.monotonic()
        last_hb = 0.0
        for i in range(changes):
            if time.monotonic() - last_hb > 1:
                for b in (1, 2, 3):
                    heartbeat(b)
                last_hb = time.monotonic()
            isr = (1, 2, 3) if i % 2 else (1, 2)
            r = conn.request(
                AlterPartitionRequest(
                    broker_id=1,
                    broker_epoch=epochs[1],
                    topics=(
                        TopicData(
                            topic_id=topic_id,
                            partitions=(
                                PartitionData(
                                    partition_index=0,
                                    leader_epoch=leader_epoch_,
                                    new_isr_with_epochs=tuple(
                                        BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in isr
                                    ),
                                    leader_recovery_state=0,
                                    partition_epoch=partition_epoch,
                                ),
                            ),
                        ),
                    ),
                )
            )
            row = r.topics[0].partitions[0]
            if row.error_code:
                raise RuntimeError(f"AlterPartition {i} failed with error {row.error_code}")
            leader_epoch_, partition_epoch = int(row.leader_epoch), int(row.partition_epoch)
            if (i + 1) % (changes // 20) == 0:
                samples.append({"changes": i + 1, "metadata_dir_bytes": metadata_log_bytes(work / "controller")})
        took = time.monotonic() - t0
        conn.close()
    finally:
        lc.stop()
    sizes = [s["metadata_dir_bytes"] for s in samples]
    return {
        "changes": changes,
        "snapshot_bytes": snapshot_bytes,
        "segment_bytes": segment_bytes or "Kafka's default (1 GiB)",
        "changes_per_s": round(changes / took),
        "samples": samples,
        "max_metadata_dir_bytes": max(sizes),
        "last_metadata_dir_bytes": sizes[-1],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--isr-changes", type=int, default=100_000)
    ap.add_argument("--snapshot-bytes", type=int, default=1 << 20)
    ap.add_argument(
        "--segment-bytes", type=int, default=1 << 20, help="metadata.log.segment.bytes for the churn; 0: the default"
    )
    ap.add_argument("--only", choices=("failover", "churn", "all"), default="all", help="run one part only")
    args = ap.parse_args()
    out: dict[str, Any] = {"args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
        if args.only == "churn":
            out["isr_churn"] = isr_churn(Path(tmp) / "churn", args.isr_changes, args.snapshot_bytes, args.segment_bytes)
            ch = out["isr_churn"]
            print(f"{ch['changes']:,} ISR changes at {ch['changes_per_s']:,}/s; metadata dir bytes max "
                  f"{ch['max_metadata_dir_bytes']:,}, at the end {ch['last_metadata_dir_bytes']:,}")
            write_results("quorum-churn", out)
            return
        lc = LocalCluster(Path(tmp) / "c", 3, free_base_port(3, controllers=3), controllers=3)
        lc.start()
        try:
            admin = AdminClient({"bootstrap.servers": lc.bootstrap})
            topic = NewTopic("failover", 1, 3, config={"min.insync.replicas": "2"})
            admin.create_topics([topic])["failover"].result(30)
            out["failover"] = [failover_round(lc, "failover") for _ in range(args.rounds)]
            if args.only == "all":
                time.sleep(3)
                out["create_topics"] = create_topics_latency(lc, args.topics)
        finally:
            lc.stop()
        if args.only == "all":
            out["isr_churn"] = isr_churn(
                Path(tmp) / "churn", args.isr_changes, args.snapshot_bytes, args.segment_bytes
            )
    table = Table(title="controller quorum")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for i, r in enumerate(out["failover"]):
        table.add_row(
            f"failover round {i + 1}: controller active / leader visible / first ack / client share (s)",
            " / ".join(
                "-" if r[k] is None else f"{r[k]:.2f}"
                for k in ("controller_active_s", "partition_leader_visible_s", "first_ack_s", "client_side_s")
            ),
        )
    if args.only == "failover":
        Console().print(table)
        return
    ct = out["create_topics"]
    table.add_row(
        f"CreateTopics, {ct['topics']} topics one by one: p50 / p99 / max (ms)",
        f"{ct['p50_ms']} / {ct['p99_ms']} / {ct['max_ms']}",
    )
    ch = out["isr_churn"]
    table.add_row(f"{ch['changes']:,} ISR changes: changes/s", f"{ch['changes_per_s']:,}")
    table.add_row(
        "metadata dir bytes: max / at the end", f"{ch['max_metadata_dir_bytes']:,} / {ch['last_metadata_dir_bytes']:,}"
    )
    Console().print(table)
    write_results("quorum", out)


if __name__ == "__main__":
    main()
