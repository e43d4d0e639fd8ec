"""Carrying out a metadata change over thousands of partitions leaves the event loop turns in between, so the
broker's heartbeats (and every client) keep going while it opens logs and writes epoch checkpoints."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from epochlog.server.cluster.replica_manager import APPLY_YIELD_EVERY, ReplicaManager

pytestmark = pytest.mark.unit


def test_thousands_of_transitions_leave_the_loop_turns_and_survive_one_failure() -> None:
    async def scenario() -> tuple[list[int], list[tuple[str, int]]]:
        turns = [0]
        stop = False

        async def heartbeat() -> None:  # stands for any task due while the states are applied
            while not stop:
                turns[0] += 1
                await asyncio.sleep(0)

        seen: list[int] = []
        done: list[tuple[str, int]] = []

        def carry_out(t: SimpleNamespace) -> None:
            seen.append(turns[0])
            if t.key == ("t", 7):
                raise OSError("disk said no")
            done.append(t.key)

        rm = object.__new__(ReplicaManager)
        rm.carry_out = carry_out
        task = asyncio.ensure_future(heartbeat())
        await asyncio.sleep(0)
        await rm.carry_out_all(SimpleNamespace(key=("t", p)) for p in range(10 * APPLY_YIELD_EVERY))
        stop = True
        await task
        return seen, done

    seen, done = asyncio.run(scenario())
    # The other task ran between chunks: the count it keeps moved at least once per chunk.
    assert len(set(seen)) >= 10
    assert max(len([s for s in seen if s == v]) for v in set(seen)) <= APPLY_YIELD_EVERY
    assert len(done) == 10 * APPLY_YIELD_EVERY - 1 and ("t", 7) not in done
