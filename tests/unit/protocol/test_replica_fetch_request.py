"""The leader's fast path for its followers' Fetch (protocol/replica_fetch_request.py, server/handlers/
replica_fetch.py): it reads every request our followers send exactly as kio does, declines everything
else, and answers byte for byte what the general Fetch path answers, the core's rules included."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import time
import uuid
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.index import load_request_schema

from epochlog.client.wire import encode_request
from epochlog.protocol import codec
from epochlog.protocol.errors import Err
from epochlog.protocol.fetch_request_writer import ReplicaFetchPartition, encode_replica_fetch
from epochlog.protocol.fetch_response_writer import encode_fetch_response, encode_replica_fetch_response
from epochlog.protocol.records import build_batch
from epochlog.protocol.replica_fetch_request import parse_replica_fetch
from epochlog.replication.fetch_sessions import FetchSessionCache
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import PartitionState
from epochlog.server.handlers import fetch as fetch_handler
from epochlog.server.handlers import replica_fetch
from epochlog.server.partition import Partition
from epochlog.server.responses import Waiting
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog

pytestmark = pytest.mark.unit

PARTS = {
    "t": [ReplicaFetchPartition(0, 3, 0, -1, 0, 1 << 20)],
    "orders": [ReplicaFetchPartition(0, 7, 123_456_789_012, 6, 100, 1 << 20), ReplicaFetchPartition(3, 0, 0, -1, 0, 5)],
    "ünïcode": [ReplicaFetchPartition(1, 2, 9, 2, -1, 1 << 20)],
}


def _header(frame: memoryview) -> codec.RequestHeader:
    header = codec.parse_header(frame[4:])
    codec.finish_header(frame[4:], header)
    return header


def _kio_request(topics: list[str], **extra: Any) -> Any:
    mod = importlib.import_module(load_request_schema(1, 12).__module__)
    return load_request_schema(1, 12)(
        replica_id=extra.pop("replica_id", 2),
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=10 << 20,
        topics=tuple(
            mod.FetchTopic(
                topic=t,
                partitions=tuple(
                    mod.FetchPartition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in PARTS[t]
                ),
            )
            for t in topics
        ),
        forgotten_topics_data=extra.pop("forgotten_topics_data", ()),
        **extra,
    )


@pytest.mark.parametrize("topics", [["orders"], ["orders", "ünïcode"], []])
def test_reads_what_our_followers_send_as_kio_does(topics: list[str]) -> None:
    raw = memoryview(
        encode_replica_fetch(41, "replica-fetcher-2", 2, 500, 1, 10 << 20, [(t, PARTS[t]) for t in topics])
    )
    frame = raw[4:]
    header = _header(raw)
    got = parse_replica_fetch(frame, header.size, header.api_version)
    want = codec.decode_body(frame, header)
    assert got is not None
    assert (got.replica_id, got.max_wait_ms, got.min_bytes, got.max_bytes) == (
        want.replica_id,
        want.max_wait.total_seconds() * 1000,
        want.min_bytes,
        want.max_bytes,
    )
    assert got.topics == [
        (
            t.topic,
            [
                (
                    p.partition,
                    p.current_leader_epoch,
                    p.fetch_offset,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                    p.partition_max_bytes,
                )
                for p in t.partitions
            ],
        )
        for t in want.topics
    ]


def _declined(frame: bytes) -> bool:
    mv = memoryview(frame)[4:]
    header = codec.parse_header(mv)
    codec.finish_header(mv, header)
    return parse_replica_fetch(mv, header.size, header.api_version) is None


def test_declines_every_other_shape() -> None:
    mod = importlib.import_module(load_request_schema(1, 12).__module__)
    ours = encode_replica_fetch(1, "f", 2, 500, 1, 1 << 20, [("orders", PARTS["orders"])])
    assert not _declined(ours)
    assert _declined(encode_request(_kio_request(["orders"], replica_id=-1), 1, "consumer"))
    assert _declined(encode_request(_kio_request(["orders"], cluster_id="c"), 1, "f"))  # a tagged field
    assert _declined(encode_request(_kio_request(["orders"], session_id=5, session_epoch=1), 1, "f"))
    assert _declined(encode_request(_kio_request(["orders"], isolation_level=1), 1, "f"))
    forgotten = (mod.ForgottenTopic(topic="orders", partitions=(1,)),)
    assert _declined(encode_request(_kio_request(["orders"], forgotten_topics_data=forgotten), 1, "f"))
    assert _declined(encode_request(_kio_request(["orders"], rack_id="r"), 1, "f"))
    many = [ReplicaFetchPartition(i, 0, 0, -1, 0, 1) for i in range(200)]  # an array length of two varint bytes
    assert _declined(encode_replica_fetch(1, "f", 2, 500, 1, 1 << 20, [("orders", many)]))
    assert _declined(ours[:-5])  # truncated
    assert _declined(ours + b"\x00")  # trailing bytes
    v11 = bytearray(ours)
    v11[6:8] = (11).to_bytes(2, "big")
    assert parse_replica_fetch(memoryview(bytes(v11))[4:], 100, 11) is None


def test_answer_is_what_the_general_encoder_writes() -> None:
    chunks = [b"a" * 70, memoryview(b"b" * 90), b""]
    rows = [
        (0, 0, 10, 10, 0, None, chunks),
        (1, Err.FENCED_LEADER_EPOCH, 5, -1, 0, None, None),
        (2, 0, 7, 7, 3, (4, 6), None),
        (3, 0, 9, 9, 0, None, None),
    ]
    dict_rows: list[dict[str, Any]] = []
    spliced: list[list[Any]] = []
    for p, err, hw, lso, start, div, ch in rows:
        row: dict[str, Any] = {
            "partition_index": p,
            "error_code": err,
            "high_watermark": hw,
            "last_stable_offset": lso,
            "log_start_offset": start,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": b"",
        }
        if div is not None:
            row["diverging_epoch"] = {"epoch": div[0], "end_offset": div[1]}
        if ch:
            row["records"] = len(spliced)
            spliced.append(ch)
        dict_rows.append(row)
    want = encode_fetch_response(12, 77, [{"topic": "t", "partitions": dict_rows}], spliced, throttle_time_ms=3)
    got = encode_replica_fetch_response(77, 3, [("t", rows)])
    assert b"".join(bytes(b) for b in got) == b"".join(bytes(b) for b in want)


# -- the handler, on a real core and log ----------------------------------------------------------------


class _Counter:
    def labels(self, *_a: Any) -> _Counter:
        return self

    def inc(self, *_a: Any) -> None:
        pass

    def observe(self, *_a: Any) -> None:
        pass


BATCHES = [build_batch([(None, b"v%d" % i)]) for i in range(3)]  # the same bytes in every log compared


def _broker(tmp: Path, records: int = 3) -> tuple[Any, Partition]:
    plog = PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(), recover=False)
    core = PartitionReplica(1, "t", 0, PartitionReplicaLog(plog), min_insync_replicas=2)
    core.apply_state(PartitionState(1, 3, frozenset({1, 2}), (1, 2), 0), 0)
    part = Partition("t", 0, uuid.uuid4(), plog, core)
    for batch in BATCHES[:records]:
        assert part.append(bytes(batch), 0).error == Err.NONE
    alters: list[Any] = []
    broker = SimpleNamespace(
        authorizer=None,
        partition=lambda name, i: part if (name, i) == ("t", 0) else None,
        topic_name_for_id=lambda _id: None,
        config=SimpleNamespace(fetch_max_bytes=50 << 20, replica_fetch_response_max_bytes=10 << 20),
        metrics=SimpleNamespace(bytes_out=_Counter()),
        image=SimpleNamespace(states={("t", 1): None}, topics={}, brokers={}),
        fetch_sessions=FetchSessionCache(),
        client_quotas=SimpleNamespace(measuring=lambda _kind: False),
        replication_throttles=SimpleNamespace(leader=None),
        submit_alter=lambda p, proposal: alters.append(proposal),
    )
    return broker, part


def _answer(broker: Any, frame: bytes, general: bool = False) -> bytes:
    mv = memoryview(frame)[4:]
    header = _header(memoryview(frame))

    async def run() -> Any:
        if general:
            saved = replica_fetch.serve
            replica_fetch.serve = lambda *_a: None  # type: ignore[assignment]
            try:
                result = fetch_handler.handle_fetch(broker, header, mv)
            finally:
                replica_fetch.serve = saved  # type: ignore[assignment]
        else:
            result = fetch_handler.handle_fetch(broker, header, mv)
        if isinstance(result, Waiting):
            result = await result.coro
        return result

    out = asyncio.run(run())
    return b"".join(bytes(b) for b in out)


CASES = {
    "records from the start": [ReplicaFetchPartition(0, 3, 0, -1, 0, 1 << 20)],
    "caught up, no wait": [ReplicaFetchPartition(0, 3, 3, 3, 0, 1 << 20)],
    "diverging epoch": [ReplicaFetchPartition(0, 3, 2, 1, 0, 1 << 20)],
    "fenced": [ReplicaFetchPartition(0, 4, 0, -1, 0, 1 << 20)],
    "past the end": [ReplicaFetchPartition(0, 3, 9, -1, 0, 1 << 20)],
    "partition cap and a missing partition": [
        ReplicaFetchPartition(0, 3, 1, 3, 0, 1),
        ReplicaFetchPartition(1, 3, 0, -1, 0, 1 << 20),
        ReplicaFetchPartition(2, 3, 0, -1, 0, 1 << 20),
    ],
}


@pytest.mark.parametrize("case", list(CASES))
def test_fast_and_general_paths_answer_alike(tmp_path: Path, case: str) -> None:
    frame = encode_replica_fetch(5, "replica-fetcher-2", 2, 0, 1, 10 << 20, [("t", CASES[case])])
    fast_broker, fast_part = _broker(tmp_path / "fast")
    general_broker, general_part = _broker(tmp_path / "general")
    assert _answer(fast_broker, frame) == _answer(general_broker, frame, general=True)
    # and both moved the core alike (the follower's position, so the HW)
    assert fast_part.replica.high_watermark == general_part.replica.high_watermark
    assert fast_part.replica.followers[2].log_end_offset == general_part.replica.followers[2].log_end_offset


def test_a_request_it_declines_is_answered_as_the_fast_path_answers_its_twin(tmp_path: Path) -> None:
    ours = encode_replica_fetch(5, "f", 2, 0, 1, 10 << 20, [("t", PARTS["t"])])
    twin = _kio_request(["t"], cluster_id="tagged")  # the fast path declines any tagged field
    twin = dataclasses.replace(twin, max_wait=timedelta(0))
    declined = encode_request(twin, 5, "f")
    assert _declined(declined)
    fast_broker, _ = _broker(tmp_path / "fast")
    general_broker, _ = _broker(tmp_path / "general")
    assert _answer(fast_broker, ours) == _answer(general_broker, declined)


def test_the_follower_fetch_releases_acks_all_in_the_same_step(tmp_path: Path) -> None:
    async def go() -> None:
        broker, part = _broker(tmp_path, records=0)
        appended = part.append(build_batch([(None, b"x")]), 0)
        fut = part.wait_committed(appended.wait_offset)
        assert not fut.done()
        frame = encode_replica_fetch(5, "f", 2, 500, 1, 10 << 20, [("t", [ReplicaFetchPartition(0, 3, 1, 3, 0, 1)])])
        mv = memoryview(frame)[4:]
        result = fetch_handler.handle_fetch(broker, _header(memoryview(frame)), mv)
        assert fut.done() and fut.result() == Err.NONE  # before any await: no event-loop turn in between
        assert isinstance(result, Waiting)  # nothing new to read: the follower's fetch long-polls
        task = asyncio.ensure_future(result.coro)
        await asyncio.sleep(0)
        task.cancel()

    asyncio.run(go())


def test_a_long_poll_is_answered_when_the_leader_appends(tmp_path: Path) -> None:
    async def go() -> None:
        broker, part = _broker(tmp_path)
        frame = encode_replica_fetch(5, "f", 2, 30_000, 1, 10 << 20, [("t", [ReplicaFetchPartition(0, 3, 3, 3, 0, 1)])])
        result = fetch_handler.handle_fetch(broker, _header(memoryview(frame)), memoryview(frame)[4:])
        assert isinstance(result, Waiting)
        task = asyncio.ensure_future(result.coro)
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done()
        assert part.waiters  # registered
        started = time.monotonic()
        part.append(build_batch([(None, b"new")]), 0)
        out = await asyncio.wait_for(task, 5)
        assert time.monotonic() - started < 1  # not the 30 s max wait
        assert b"new" in b"".join(bytes(b) for b in out)
        assert not part.waiters  # unregistered

    asyncio.run(go())


def test_a_long_poll_ends_at_max_wait_with_nothing(tmp_path: Path) -> None:
    async def go() -> None:
        broker, part = _broker(tmp_path)
        frame = encode_replica_fetch(5, "f", 2, 50, 1, 10 << 20, [("t", [ReplicaFetchPartition(0, 3, 3, 3, 0, 1)])])
        result = fetch_handler.handle_fetch(broker, _header(memoryview(frame)), memoryview(frame)[4:])
        assert isinstance(result, Waiting)
        out = await asyncio.wait_for(result.coro, 5)
        want = encode_replica_fetch_response(5, 0, [("t", [(0, 0, 3, 3, 0, None, None)])])
        assert b"".join(bytes(b) for b in out) == b"".join(bytes(b) for b in want)
        assert not part.waiters

    asyncio.run(go())
