"""The consumer-group driver's writes against its answers: no member is told an assignment before the records
that decided it are in __consumer_offsets, also when its own heartbeat changed nothing."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from epochlog.groups.consumer.messages import HeartbeatRequest, HeartbeatResponse
from epochlog.groups.consumer.model import Assignment
from epochlog.protocol.errors import Err
from epochlog.server.groups import GroupCoordinator, MemoryOffsetsStore

from ..helpers import aio, make, settle

pytestmark = pytest.mark.unit


class FlakyStore(MemoryOffsetsStore):
    """Its next append waits until released, then fails if told to (a write the ISR never took)."""

    def __init__(self, num_partitions: int) -> None:
        super().__init__(num_partitions)
        self.hold: asyncio.Event | None = None
        self.fail_next = False

    async def append(self, partition: int, batch: bytes) -> None:
        hold, self.hold = self.hold, None
        if hold is not None:
            await hold.wait()
            if self.fail_next:
                self.fail_next = False
                raise OSError("not replicated")
        await super().append(partition, batch)


def hb(c: GroupCoordinator, member_id: str, epoch: int, owned: Assignment | None) -> asyncio.Task[HeartbeatResponse]:
    join = epoch == 0
    req = HeartbeatRequest(
        "g",
        member_id,
        epoch,
        rebalance_timeout_ms=30_000 if join else -1,
        subscribed_topic_names=("a",) if join else None,
        owned=owned,
    )
    return asyncio.ensure_future(c.consumer_heartbeat(req))


@aio
async def test_an_answer_that_changes_nothing_waits_for_the_records_it_reflects() -> None:
    store = FlakyStore(4)
    c, _, _ = await make(store=store)
    c.topic_counts = lambda: {"a": 6}
    # The records name topics by id (Kafka's layout): a topic the coordinator has no id for is left out of them.
    c.topic_ids = lambda: {"a": uuid.UUID(int=10)}
    r1 = await hb(c, "m1", 0, frozenset())
    assert r1.assignment is not None
    await hb(c, "m1", r1.member_epoch, r1.assignment)
    r2 = await hb(c, "m2", 0, frozenset())
    kept = (await hb(c, "m1", 1, None)).assignment
    assert kept is not None
    await hb(c, "m1", 1, kept)  # revoked: the rest is m2's to take
    release = store.hold = asyncio.Event()
    store.fail_next = True
    given = hb(c, "m2", r2.member_epoch, None)  # decided, its records held
    await settle()
    assert not given.done()
    # m2 timed out and heartbeats again: nothing changes, but the answer would say what the held write says.
    again = hb(c, "m2", r2.member_epoch, None)
    await settle()
    assert not again.done()
    release.set()
    assert (await given).error_code == Err.COORDINATOR_NOT_AVAILABLE
    assert (await again).error_code == Err.COORDINATOR_NOT_AVAILABLE
    # The group was rebuilt from the log; what m1 had said it owns still counts (it is connected as before
    # and will not send a full request to say it again), what m2 was given in the lost write is gone.
    rebuilt = c.consumer_groups["g"].group
    assert rebuilt.members["m1"].unconfirmed == frozenset() and rebuilt.members["m1"].assigned == kept
    assert rebuilt.members["m2"].assigned == frozenset()
