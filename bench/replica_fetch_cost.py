"""The leader's CPU per follower Fetch, in-process: the general Fetch path against the replica fast path.

  PYTHONPATH=src .venv/bin/python bench/replica_fetch_cost.py [--repeats 7] [--calls 2000]

A leader partition on a real core and log holds 200 batches of 1 KiB (acks=all at 1 KiB, one record per
produce); a follower's Fetch v12 (as protocol/fetch_request_writer.py packs it) is handed to
handle_fetch again and again, and the best of the repeats is reported per call. The fast path
(server/handlers/replica_fetch.py) is turned off for the general figure. On a shared machine the minimum
is the figure that means something; a cluster run's CPU per GB moves by more than the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from epochlog.protocol import codec
from epochlog.protocol.fetch_request_writer import ReplicaFetchPartition, encode_replica_fetch
from epochlog.protocol.records import build_batch
from epochlog.replication.fetch_sessions import FetchSessionCache
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import PartitionState
from epochlog.server.handlers import fetch
from epochlog.server.partition import Partition
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog

try:
    from epochlog.server.handlers import replica_fetch
except ImportError:  # a tree from before the fast path: the general path alone
    replica_fetch = None  # type: ignore[assignment]

BATCHES = 200


def _leader(tmp: Path) -> Any:
    plog = PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(), recover=False)
    core = PartitionReplica(1, "t", 0, PartitionReplicaLog(plog), min_insync_replicas=2)
    core.apply_state(PartitionState(1, 3, frozenset({1, 2, 3}), (1, 2, 3), 0), 0)
    part = Partition("t", 0, uuid.uuid4(), plog, core)
    for _ in range(BATCHES):
        part.append(build_batch([(None, b"x" * 1024)]), 0)
    return SimpleNamespace(
        authorizer=None,
        partition=lambda name, i: part if (name, i) == ("t", 0) else None,
        topic_name_for_id=lambda _id: None,
        config=SimpleNamespace(fetch_max_bytes=50 << 20, replica_fetch_response_max_bytes=10 << 20),
        image=SimpleNamespace(states={}, topics={}, brokers={}),
        fetch_sessions=FetchSessionCache(),
        client_quotas=SimpleNamespace(measuring=lambda _kind: False),
        replication_throttles=SimpleNamespace(leader=None),
        submit_alter=lambda _part, _proposal: None,
    )


def _cost(broker: Any, frame: bytes, general: bool, repeats: int, calls: int) -> float:
    """Best microseconds per handle_fetch call (header parse included, as the connection does it)."""
    mv = memoryview(frame)[4:]
    if replica_fetch is None and not general:
        return float("nan")
    saved = replica_fetch.serve if replica_fetch is not None else None
    best = float("inf")
    try:
        if general and replica_fetch is not None:
            replica_fetch.serve = lambda *_a: None  # type: ignore[assignment]
        for _ in range(repeats):
            started = time.perf_counter()
            for _ in range(calls):
                header = codec.parse_header(mv)
                codec.finish_header(mv, header)
                fetch.handle_fetch(broker, header, mv)
            best = min(best, (time.perf_counter() - started) / calls * 1e6)
    finally:
        if replica_fetch is not None:
            replica_fetch.serve = saved  # type: ignore[assignment]
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()

    async def run() -> None:  # futures (a long poll's) need a running loop
        broker = _leader(Path(tempfile.mkdtemp(prefix="replica-fetch-cost-")))
        cases = (("one 1 KiB batch", BATCHES - 1), ("ten batches", BATCHES - 10), ("at the log end", BATCHES))
        for name, offset in cases:
            asked = [("t", [ReplicaFetchPartition(0, 3, offset, 3, 0, 1 << 20)])]
            frame = encode_replica_fetch(5, "replica-fetcher-2", 2, 0, 1, 10 << 20, asked)
            general = _cost(broker, frame, True, args.repeats, args.calls)
            fast = _cost(broker, frame, False, args.repeats, args.calls)
            print(f"{name:16s} general {general:6.1f} us  fast {fast:6.1f} us  fast/general {fast / general:.2f}")

    asyncio.run(run())


if __name__ == "__main__":
    main()
