"""The share persister (server/share/persister.py) with a fake broker and coordinator: one key's writes reach
the coordinator in the order made even when one is retried, retriable codes are retried within a bound and
then answered, a remote coordinator's answers are read back, and a read finds a coordinator that moves here."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.codes import Err
from epochlog.groups.share.messages import StateWrite
from epochlog.groups.share.records import PartitionState, StateBatch
from epochlog.server.share import persister as persister_mod
from epochlog.server.share.persister import SharePersister

pytestmark = pytest.mark.unit

KEY = ("g", "00000000-0000-0000-0000-000000000001", 0)
ME = 1


async def _code(c: int) -> int:
    return c


@dataclass
class FakeState:
    """The share coordinator in process: answers from a script, records what it was asked."""

    write_codes: list[int] = field(default_factory=list)
    read_codes: list[int] = field(default_factory=list)
    writes: list[StateWrite] = field(default_factory=list)

    def coordinator_key(self, key: Any) -> str:
        return f"{key[0]}:{key[1]}:{key[2]}"

    def write(self, key: Any, w: StateWrite) -> Any:
        self.writes.append(w)
        return _code(self.write_codes.pop(0) if self.write_codes else Err.NONE)

    def read(self, key: Any, leader_epoch: int) -> tuple[int, PartitionState | None]:
        code = self.read_codes.pop(0) if self.read_codes else Err.NONE
        return code, (PartitionState(0, leader_epoch, 7) if code == Err.NONE else None)


def make(coordinator: list[int]) -> tuple[SharePersister, FakeState]:
    broker = SimpleNamespace(
        config=SimpleNamespace(node_id=ME),
        share_coordinator_for=lambda _k: coordinator[0],
        image=SimpleNamespace(brokers={2: SimpleNamespace(host="127.0.0.1", port=1)}),
        peer_security=None,
    )
    state = FakeState()
    return SharePersister(broker, state), state  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(persister_mod, "BACKOFF_S", (0.001, 0.002))
    monkeypatch.setattr(persister_mod, "RETRY_S", 0.2)


def w(n: int) -> StateWrite:
    return StateWrite(0, 1, n, ())


def test_a_retried_write_keeps_its_place_before_later_ones() -> None:
    async def run() -> list[int]:
        p, state = make([ME])
        state.write_codes = [Err.NOT_COORDINATOR]  # the first write's first attempt finds the partition moving
        first, second = p.write(KEY, w(1)), p.write(KEY, w(2))
        assert await first == Err.NONE and await second == Err.NONE
        return [x.start_offset for x in state.writes]

    assert asyncio.run(run()) == [1, 1, 2]


def test_fencing_is_answered_at_once_and_no_coordinator_within_the_bound() -> None:
    async def run() -> tuple[int, int, int]:
        p, state = make([ME])
        state.write_codes = [Err.FENCED_LEADER_EPOCH]
        fenced = await p.write(KEY, w(1))
        calls = len(state.writes)
        p2, _ = make([-1])
        none = await p2.write(KEY, w(1))
        return fenced, calls, none

    assert asyncio.run(run()) == (Err.FENCED_LEADER_EPOCH, 1, Err.COORDINATOR_NOT_AVAILABLE)


def _read_answer(code: int, start: int, batches: tuple[Any, ...] = (), state_epoch: int = 3) -> Any:
    row = SimpleNamespace(error_code=code, state_epoch=state_epoch, start_offset=start, state_batches=batches)
    return SimpleNamespace(results=[SimpleNamespace(partitions=[row])])


def test_a_remote_coordinators_answers_are_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, Any]] = []
    answers = [
        _read_answer(Err.COORDINATOR_LOAD_IN_PROGRESS, -1),
        _read_answer(
            Err.NONE, 5, (SimpleNamespace(first_offset=5, last_offset=9, delivery_state=0, delivery_count=1),)
        ),
        _read_answer(Err.NONE, -1, state_epoch=0),
        _read_answer(Err.NONE, -1),
    ]

    async def send(self: SharePersister, node: int, req: Any) -> Any:
        sent.append((node, req))
        return answers.pop(0)

    monkeypatch.setattr(SharePersister, "_send", send)

    async def run() -> tuple[Any, Any, Any]:
        p, _ = make([2])
        return await p.read(KEY, 4), await p.read(KEY, 4), await p.read(KEY, 4)

    loaded, never, reset = asyncio.run(run())
    assert loaded == (Err.NONE, PartitionState(3, -1, 5, (StateBatch(5, 9, 0, 1),)))
    assert never == (Err.NONE, None)  # start offset -1, state epoch 0 and no batches: never initialized
    # Reset by DeleteShareGroupOffsets: no start offset, but the state epoch the next writes must carry.
    assert reset == (Err.NONE, PartitionState(3, -1, -1))
    assert [n for n, _r in sent] == [2, 2, 2, 2]
    req = sent[0][1]
    assert (req.group_id, str(req.topics[0].topic_id), int(req.topics[0].partitions[0].leader_epoch)) == (
        "g",
        KEY[1],
        4,
    )


def test_a_read_follows_the_coordinator_moving_here(monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = [2]

    async def send(self: SharePersister, node: int, req: Any) -> Any:
        coordinator[0] = ME  # the state partition's leadership moved to this broker meanwhile
        return _read_answer(Err.NOT_COORDINATOR, -1)

    monkeypatch.setattr(SharePersister, "_send", send)

    async def run() -> tuple[int, PartitionState | None]:
        p, _ = make(coordinator)
        return await p.read(KEY, 4)

    assert asyncio.run(run()) == (Err.NONE, PartitionState(0, 4, 7))


def test_a_remote_write_after_an_unreachable_coordinator(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[Any] = [None, SimpleNamespace(results=[SimpleNamespace(partitions=[SimpleNamespace(error_code=0)])])]
    sent: list[Any] = []

    async def send(self: SharePersister, node: int, req: Any) -> Any:
        sent.append(req)
        return answers.pop(0)

    monkeypatch.setattr(SharePersister, "_send", send)

    async def run() -> int:
        p, _ = make([2])
        return await p.write(KEY, StateWrite(1, 2, 3, (StateBatch(3, 4, 2, 1),)))

    assert asyncio.run(run()) == Err.NONE
    part = sent[-1].topics[0].partitions[0]
    assert (int(part.state_epoch), int(part.leader_epoch), int(part.start_offset)) == (1, 2, 3)
    assert [(int(b.first_offset), int(b.last_offset), int(b.delivery_state)) for b in part.state_batches] == [(3, 4, 2)]


def test_a_reset_goes_under_the_state_epoch_after_the_remote_one(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []
    summary = SimpleNamespace(error_code=0, state_epoch=4, leader_epoch=2, start_offset=17)
    answers: list[Any] = [
        SimpleNamespace(results=[SimpleNamespace(partitions=[summary])]),
        SimpleNamespace(results=[SimpleNamespace(partitions=[SimpleNamespace(error_code=Err.NOT_COORDINATOR)])]),
        SimpleNamespace(results=[SimpleNamespace(partitions=[SimpleNamespace(error_code=0)])]),
    ]

    async def send(self: SharePersister, node: int, req: Any) -> Any:
        sent.append(req)
        return answers.pop(0)

    monkeypatch.setattr(SharePersister, "_send", send)

    async def run() -> int:
        p, _ = make([2])
        p.broker.image.topics = {"__share_group_state": object()}
        return await p.reset(KEY, -1)

    assert asyncio.run(run()) == Err.NONE
    assert type(sent[0]).__name__ == "ReadShareGroupStateSummaryRequest"
    # The initialize is retried after NOT_COORDINATOR with the same epoch: one past the summary's.
    for req in sent[1:]:
        part = req.topics[0].partitions[0]
        assert (type(req).__name__, int(part.state_epoch), int(part.start_offset)) == (
            "InitializeShareGroupStateRequest",
            5,
            -1,
        )
    assert len(sent) == 3
