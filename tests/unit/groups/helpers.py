"""A coordinator on a fake clock and an in-memory store, and short-hands for the calls tests repeat."""

from __future__ import annotations

import asyncio
from typing import Any

from epochlog.server.groups import GroupConfig, GroupCoordinator, JoinResult, MemoryOffsetsStore, SyncResult

SESSION_MS = 10_000
REBALANCE_MS = 30_000


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Wall(FakeClock):
    """Seconds since the epoch, for commit and state timestamps."""

    def __init__(self) -> None:
        super().__init__(1_700_000_000.0)


async def make(
    store: MemoryOffsetsStore | None = None, clock: FakeClock | None = None, wall: FakeClock | None = None, **cfg: Any
) -> tuple[GroupCoordinator, FakeClock, MemoryOffsetsStore]:
    cfg.setdefault("group_initial_rebalance_delay_ms", 0)
    cfg.setdefault("offsets_topic_num_partitions", 4)
    store = store or MemoryOffsetsStore(cfg["offsets_topic_num_partitions"])
    clock = clock or FakeClock()
    c = GroupCoordinator(store, GroupConfig(**cfg), clock=clock, wall_clock=wall or Wall())
    await c.start(run_background=False)
    for p in range(store.num_partitions):  # a single broker leads every partition of __consumer_offsets
        c.load_partition(p)
    return c, clock, store


async def settle() -> None:
    """Let parked joins/syncs and spawned writes run."""
    for _ in range(10):
        await asyncio.sleep(0)


def join(
    c: GroupCoordinator,
    group: str = "g",
    member_id: str = "",
    protocols: list[tuple[str, bytes]] | None = None,
    instance: str | None = None,
    client_id: str = "cli",
    require_known: bool = False,
    session_ms: int = SESSION_MS,
) -> asyncio.Task[JoinResult]:
    return asyncio.ensure_future(
        c.join_group(
            group,
            member_id,
            instance,
            client_id,
            "/127.0.0.1",
            session_ms,
            REBALANCE_MS,
            "consumer",
            protocols if protocols is not None else [("range", b"sub-" + client_id.encode())],
            require_known,
        )
    )


def sync(
    c: GroupCoordinator, r: JoinResult, assignments: dict[str, bytes] | None = None, group: str = "g"
) -> asyncio.Task[SyncResult]:
    return asyncio.ensure_future(
        c.sync_group(group, r.generation_id, r.member_id, None, "consumer", r.protocol_name, assignments or {})
    )


async def join_one(c: GroupCoordinator, group: str = "g", client_id: str = "cli") -> JoinResult:
    t = join(c, group, client_id=client_id)
    await settle()
    assert t.done()
    return t.result()


async def stable_group(c: GroupCoordinator, group: str = "g") -> JoinResult:
    r = await join_one(c, group)
    s = sync(c, r, {r.member_id: b"assignment-1"}, group)
    await settle()
    assert s.result().error_code == 0
    return r


def aio(fn: Any) -> Any:
    """Run an async test on a fresh event loop (the project does not use pytest-asyncio)."""
    import functools

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return run
