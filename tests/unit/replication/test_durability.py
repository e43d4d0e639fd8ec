"""The durable mode's rule in the core (replication/durability.py): under flush.messages=1 only what the
driver reported synced counts toward an acknowledgement, on the leader (acks=1, its own place in the HW)
and on a follower (the fetch offset it reports). Each rule is also shown broken on purpose."""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchOutcome, FetchResponse, PartitionState
from epochlog.sim.disk_log import SimLog


def replica(bid: int, durable: bool = True) -> PartitionReplica:
    r = PartitionReplica(bid, "t", 0, SimLog(), min_insync_replicas=1)
    r.durability.sync_before_ack = durable
    return r


def lead(r: PartitionReplica, isr: tuple[int, ...] = (1,)) -> None:
    r.apply_state(PartitionState(1, 0, frozenset(isr), isr, 0), 0)


def follow(r: PartitionReplica) -> None:
    r.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)


def test_sole_leader_hw_waits_for_the_sync() -> None:
    r = replica(1)
    lead(r)
    res = r.append(["m0", "m1"], 0, acks=-1)
    assert res.wait_offset == 1
    assert r.high_watermark == 0 and r.ack_result(1, 0) is None  # written, not synced: nothing counts yet
    r.synced(1)  # a sync that began after m0 only
    assert r.high_watermark == 1 and r.ack_result(1, 0) is None
    r.synced(2)
    assert r.high_watermark == 2 and r.ack_result(1, 0) == Err.NONE


def test_acks_1_waits_for_the_leaders_sync_only_in_durable_mode() -> None:
    r = replica(1)
    lead(r, (1, 2))
    res = r.append(["m0"], 0, acks=1)
    assert res.wait_offset == 0
    assert r.ack_result(0, 0, acks=1) is None
    r.synced(1)
    assert r.ack_result(0, 0, acks=1) == Err.NONE
    assert r.high_watermark == 0  # the follower has not fetched: acks=1 does not wait for it

    plain = replica(1, durable=False)
    lead(plain, (1, 2))
    assert plain.append(["m0"], 0, acks=1).wait_offset == -1  # answered at once, as today


def test_default_mode_counts_the_log_end() -> None:
    r = replica(1, durable=False)
    lead(r)
    r.append(["m0"], 0)
    assert r.high_watermark == 1


def test_follower_syncs_before_it_reports_its_log_end() -> None:
    leader, follower = replica(1), replica(2)
    lead(leader, (1, 2))
    follow(follower)
    leader.append(["m0", "m1"], 0)
    leader.synced(2)
    assert leader.high_watermark == 0
    req = follower.next_fetch()
    assert req is not None and req.fetch_offset == 0
    decision, _ = leader.handle_fetch(req, 0)
    batches = leader.log.read(decision.read_from, 10)  # type: ignore[attr-defined]
    out = follower.handle_fetch_response(FetchResponse(decision.error, decision.high_watermark, None, batches, 0))
    assert out is FetchOutcome.APPENDED and follower.log.log_end_offset == 2
    # Its next fetch would tell the leader it holds offsets 0 and 1: not before they are synced.
    assert follower.needs_sync() and follower.next_fetch() is None
    follower.synced(2)
    req = follower.next_fetch()
    assert req is not None and req.fetch_offset == 2
    leader.handle_fetch(req, 1)
    assert leader.high_watermark == 2


def test_break_on_purpose_counting_the_unsynced_end() -> None:
    leader, follower = replica(1), replica(2)
    for r in (leader, follower):
        r.durability.count_unsynced = True
    lead(leader, (1, 2))
    follow(follower)
    leader.append(["m0"], 0)
    req = follower.next_fetch()
    assert req is not None
    decision, _ = leader.handle_fetch(req, 0)
    follower.handle_fetch_response(
        FetchResponse(decision.error, 0, None, leader.log.read(0, 10), 0)  # type: ignore[attr-defined]
    )
    req = follower.next_fetch()
    assert req is not None  # fetches again with nothing synced anywhere
    leader.handle_fetch(req, 1)
    assert leader.high_watermark == 1  # acknowledged while only page caches hold it


def test_truncation_lowers_the_durable_end() -> None:
    r = replica(2)
    follow(r)
    r.log.append_as_follower([(0, _entry("a")), (1, _entry("b"))])
    r.synced(2)
    r._truncate(1, "test")
    assert r.durability.durable_end_offset == 1
    r.log.append_as_follower([(1, _entry("c"))])
    assert r.needs_sync()  # the new record at offset 1 is not the synced one
    r.synced(5)  # a report past the end counts only up to it
    assert r.durability.durable_end_offset == 2


def test_new_leader_counts_what_it_flushed_on_election() -> None:
    r = replica(1)
    r.log.append_as_follower([(0, _entry("a"))])
    lead(r)
    assert r.durability.durable_end_offset == 1 and r.high_watermark == 1


def _entry(value: str):  # type: ignore[no-untyped-def]
    from epochlog.sim.disk_log import Entry

    return Entry(0, value)
