"""Group commit (server/group_commit.py) on real logs, a real core and real fsyncs: the batches appended in
one event-loop turn cost one fdatasync, and no acknowledgement leaves before the fsync covering it is back
(the fsync is held in its worker thread here, and the acks wait for it)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchRequest, PartitionState
from epochlog.server.group_commit import GroupCommit
from epochlog.server.partition import Partition
from epochlog.storage import fileops
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog


class CountingOps(fileops.FileOps):
    """The real calls; fdatasync is counted, and held while ``gate`` is clear."""

    def __init__(self) -> None:
        self.fdatasyncs = 0
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def fdatasync(self, fd: int, path: str | Path = "") -> None:
        self.entered.set()
        assert self.gate.wait(10), "the test never let the fsync go"
        self.fdatasyncs += 1
        super().fdatasync(fd, path)


def _partition(tmp: Path, gc: GroupCommit, isr: tuple[int, ...], flush_messages: int = 1) -> Partition:
    cfg = LogConfig(flush_interval_messages=flush_messages)
    plog = PartitionLog.open(tmp / "t-0", "t", 0, cfg, recover=False)
    core = PartitionReplica(1, "t", 0, PartitionReplicaLog(plog), min_insync_replicas=1)
    part = Partition("t", 0, uuid.uuid4(), plog, core, gc)
    core.apply_state(PartitionState(1, 0, frozenset(isr), isr, 0), 0)
    return part


def _produce(part: Partition, n: int, acks: int) -> list[asyncio.Future[int]]:
    futs = []
    for i in range(n):
        res = part.append(build_batch([(None, b"v%d" % i)]), 0, acks)
        assert res.error == Err.NONE and res.wait_offset >= 0
        futs.append(part.wait_committed(res.wait_offset, acks))
    return futs


def test_batches_of_one_turn_cost_one_fsync(tmp_path: Path) -> None:
    ops = CountingOps()
    prev = fileops.install(ops)

    async def run() -> None:
        gc = GroupCommit()
        part = _partition(tmp_path, gc, (1,))
        await asyncio.sleep(0.05)  # the start-up sync of the (empty) log
        ops.fdatasyncs, gc.jobs = 0, 0
        futs = _produce(part, 50, acks=-1)  # fifty produces in one turn
        assert part.log.log_end_offset == 50
        codes = await asyncio.wait_for(asyncio.gather(*futs), 5)
        assert codes == [Err.NONE] * 50
        assert ops.fdatasyncs == 1 and gc.jobs == 1
        assert part.high_watermark == 50 and part.log.recovery_point == 50
        gc.close()

    try:
        asyncio.run(run())
    finally:
        fileops.install(prev)


def test_no_ack_before_its_fsync(tmp_path: Path) -> None:
    ops = CountingOps()
    prev = fileops.install(ops)

    async def run() -> None:
        gc = GroupCommit()
        part = _partition(tmp_path, gc, (1,))
        await asyncio.sleep(0.05)
        ops.gate.clear()
        ops.entered.clear()
        all_futs = _produce(part, 3, acks=-1)
        one_futs = _produce(part, 2, acks=1)
        await asyncio.to_thread(ops.entered.wait, 5)  # the fsync is running (and held)
        more = _produce(part, 2, acks=1)  # written while it runs: not covered by it
        await asyncio.sleep(0.2)
        assert not any(f.done() for f in all_futs + one_futs + more)
        assert part.high_watermark == 0 and part.replica.durability.durable_end_offset == 0
        ops.gate.set()
        assert await asyncio.wait_for(asyncio.gather(*all_futs, *one_futs, *more), 5) == [Err.NONE] * 7
        assert part.high_watermark == 7
        gc.close()

    try:
        asyncio.run(run())
    finally:
        ops.gate.set()
        fileops.install(prev)


def test_acks_all_waits_for_the_leaders_own_sync_too(tmp_path: Path) -> None:
    """The follower already holds the records; the leader's place in the HW is its synced end."""
    ops = CountingOps()
    prev = fileops.install(ops)

    async def run() -> None:
        gc = GroupCommit()
        part = _partition(tmp_path, gc, (1, 2))
        await asyncio.sleep(0.05)
        ops.gate.clear()
        futs = _produce(part, 4, acks=-1)
        part.replica.handle_fetch(FetchRequest(2, 4, 0, 0), 1)  # the follower reports it holds all four
        part.sync()
        await asyncio.sleep(0.1)
        assert part.high_watermark == 0 and not any(f.done() for f in futs)
        ops.gate.set()
        assert await asyncio.wait_for(asyncio.gather(*futs), 5) == [Err.NONE] * 4
        gc.close()

    try:
        asyncio.run(run())
    finally:
        ops.gate.set()
        fileops.install(prev)


def test_default_policy_never_syncs_per_append(tmp_path: Path) -> None:
    ops = CountingOps()
    prev = fileops.install(ops)

    async def run() -> None:
        gc = GroupCommit()
        part = _partition(tmp_path, gc, (1,), flush_messages=LogConfig().flush_interval_messages)
        before = ops.fdatasyncs
        for i in range(20):
            res = part.append(build_batch([(None, b"v%d" % i)]), 0, 1)
            assert res.wait_offset == -1  # acks=1 is answered at once
        await asyncio.sleep(0.05)
        assert ops.fdatasyncs == before and gc.jobs == 0
        assert part.high_watermark == 20
        gc.close()

    try:
        asyncio.run(run())
    finally:
        fileops.install(prev)


class FailingOps(fileops.FileOps):
    def fdatasync(self, fd: int, path: str | Path = "") -> None:
        raise OSError(5, "Input/output error (test)", str(path))


def test_a_failed_fsync_acknowledges_nothing_and_takes_the_dir_offline(tmp_path: Path) -> None:
    async def run() -> None:
        gc = GroupCommit()
        part = _partition(tmp_path, gc, (1,))
        await asyncio.sleep(0.05)
        prev = fileops.install(FailingOps())
        try:
            futs = _produce(part, 3, acks=-1)
            await asyncio.sleep(0.2)
        finally:
            fileops.install(prev)
        assert not any(f.done() for f in futs)  # the broker answers them KAFKA_STORAGE_ERROR as it goes offline
        assert part.high_watermark == 0
        assert part.log.failures.is_offline(part.log.log_dir)
        gc.close()

    asyncio.run(run())


def test_changing_the_policy_on_a_live_partition(tmp_path: Path) -> None:
    """flush.messages changed on the topic: from then on acks wait for syncs, or no longer do."""
    ops = CountingOps()
    prev = fileops.install(ops)

    async def run() -> None:
        gc = GroupCommit()
        part = _partition(tmp_path, gc, (1,), flush_messages=LogConfig().flush_interval_messages)
        assert part.append(build_batch([(None, b"a")]), 0, 1).wait_offset == -1
        part.log.config = LogConfig(flush_interval_messages=1)
        part.apply_flush_policy()
        await asyncio.sleep(0.05)  # the first sync covers what the default mode wrote
        assert part.replica.durability.durable_end_offset == 1
        ops.gate.clear()
        futs = _produce(part, 2, acks=1)
        await asyncio.sleep(0.05)
        assert not any(f.done() for f in futs)
        part.log.config = LogConfig()
        part.apply_flush_policy()  # back to the default: nothing waits for a sync any more
        assert [f.result() for f in futs] == [Err.NONE, Err.NONE]
        ops.gate.set()
        await asyncio.sleep(0.05)
        gc.close()

    try:
        asyncio.run(run())
    finally:
        ops.gate.set()
        fileops.install(prev)
