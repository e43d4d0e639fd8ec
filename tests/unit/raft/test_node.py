"""The quorum core, one message at a time: its rules, and bad input that must change nothing."""

from __future__ import annotations

import random

from epochlog.protocol.errors import Err
from epochlog.raft.config import QuorumConfig
from epochlog.raft.messages import (
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumStateData,
    Ready,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from epochlog.raft.node import RaftNode
from epochlog.raft.roles import Role
from epochlog.sim.quorum_log import SimQuorumLog

VOTERS = (1, 2, 3)


def node(state: QuorumStateData | None = None, node_id: int = 1, voters: tuple[int, ...] = VOTERS) -> RaftNode:
    return RaftNode(node_id, voters, SimQuorumLog(), state, 0, random.Random(0), "c1", QuorumConfig())


def vote(
    epoch: int, sender: int = 2, pre: bool = False, cluster: str = "c1", last: tuple[int, int] = (-1, 0)
) -> VoteRequest:
    return VoteRequest(cluster, sender, 7, epoch, last[0], last[1], pre)


def answer(ready: Ready) -> object:
    assert len(ready.messages) == 1, ready.messages
    return ready.messages[0].message


def leader_of(epoch: int = 1) -> RaftNode:
    """Node 1, leader of ``epoch`` with votes from 2."""
    n = node(QuorumStateData(epoch - 1, -1, -1))
    n.tick(5000)  # election timeout: pre-vote
    n.receive(VoteResponse(2, n.inflight[2][0], Err.NONE, epoch - 1, -1, True, True), 5000)
    n.receive(VoteResponse(2, n.inflight[2][0], Err.NONE, epoch, -1, True, False), 5000)
    assert n.role is Role.LEADER and n.epoch == epoch
    n.take_ready()
    return n


def test_a_vote_is_written_before_it_is_granted_and_granted_once() -> None:
    n = node()
    ready = n.receive(vote(1, sender=2), 0)
    assert isinstance(answer(ready), VoteResponse) and answer(ready).granted  # type: ignore[attr-defined]
    assert ready.quorum_state == QuorumStateData(1, -1, 2)
    again = answer(n.receive(vote(1, sender=3), 1))
    assert not again.granted  # type: ignore[attr-defined]


def test_a_pre_vote_changes_nothing_on_disk_and_a_leader_refuses_it() -> None:
    n = node()
    ready = n.receive(vote(0, pre=True), 0)
    assert answer(ready).granted and ready.quorum_state is None  # type: ignore[attr-defined]
    lead = leader_of()
    assert not answer(lead.receive(vote(1, sender=3, pre=True, last=(1, 5)), 6000)).granted  # type: ignore[attr-defined]
    assert lead.role is Role.LEADER


def test_a_shorter_log_gets_no_vote() -> None:
    n = leader_of()
    n.propose(["a", "b"], 6000)
    n.resign(6001)
    assert not answer(n.receive(vote(2, sender=3, last=(1, 1)), 6002)).granted  # type: ignore[attr-defined]


def test_bad_votes_are_refused_and_change_nothing() -> None:
    for req, code in [
        (vote(5, sender=9), Err.INCONSISTENT_VOTER_SET),  # not a voter
        (vote(5, cluster="other"), Err.INCONSISTENT_CLUSTER_ID),
    ]:
        n = node(QuorumStateData(3, -1, -1))
        ready = n.receive(req, 0)
        resp = answer(ready)
        assert resp.error == code and not resp.granted  # type: ignore[attr-defined]
        assert n.epoch == 3 and ready.quorum_state is None
    n = node(QuorumStateData(3, -1, -1))
    resp = answer(n.receive(vote(2), 0))
    assert resp.error == Err.FENCED_LEADER_EPOCH and resp.epoch == 3  # type: ignore[attr-defined]


def test_a_restarted_leader_resigns_its_epoch_and_says_so() -> None:
    n = node(QuorumStateData(4, 1, 1))
    ready = n.take_ready()
    assert n.role is Role.RESIGNED
    assert {o.to for o in ready.messages if isinstance(o.message, EndQuorumEpochRequest)} == {2, 3}
    assert not answer(n.receive(vote(4, sender=2), 1)).granted  # type: ignore[attr-defined]


def test_fetch_errors_name_the_leader_and_change_nothing() -> None:
    lead = leader_of(2)
    cases = [
        (FetchRequest("c1", 2, 1, 1, 0, -1), Err.FENCED_LEADER_EPOCH),
        (FetchRequest("c1", 2, 1, 3, 0, -1), Err.UNKNOWN_LEADER_EPOCH),
        (FetchRequest("zz", 2, 1, 2, 0, -1), Err.INCONSISTENT_CLUSTER_ID),
        (FetchRequest("c1", 2, 1, 2, -5, -1), Err.INVALID_REQUEST),
    ]
    for req, code in cases:
        resp = answer(lead.receive(req, 6000))
        assert isinstance(resp, FetchResponse) and resp.error == code and resp.leader_id == 1
    assert lead.role is Role.LEADER and lead.high_watermark == -1
    follower = node(QuorumStateData(2, 1, -1), node_id=2)
    follower.take_ready()
    resp = answer(follower.receive(FetchRequest("c1", 3, 1, 2, 0, -1), 0))
    assert resp.error == Err.NOT_LEADER_OR_FOLLOWER and resp.leader_id == 1  # type: ignore[attr-defined]


def test_an_observer_may_fetch_but_never_counts_toward_the_high_watermark() -> None:
    lead = leader_of()
    lead.receive(FetchRequest("c1", 100, 1, 1, 1, 1), 6000)
    assert lead.high_watermark == -1  # the LeaderChange is on node 1 alone
    lead.receive(FetchRequest("c1", 2, 2, 1, 1, 1), 6001)
    assert lead.high_watermark == 1


def test_fetch_snapshot_errors() -> None:
    lead = leader_of()
    missing = answer(lead.receive(FetchSnapshotRequest("c1", 2, 1, 1, SnapshotId(5, 1), 0), 6000))
    assert isinstance(missing, FetchSnapshotResponse) and missing.error == Err.SNAPSHOT_NOT_FOUND
    lead.propose(["a"], 6000)
    lead.receive(FetchRequest("c1", 2, 2, 1, 2, 1), 6001)
    log = lead.log
    assert isinstance(log, SimQuorumLog)
    snap = log.take_snapshot(["LC:1", "a"], 2)
    assert snap is not None
    far = answer(lead.receive(FetchSnapshotRequest("c1", 2, 3, 1, snap, 10_000), 6002))
    assert far.error == Err.POSITION_OUT_OF_RANGE  # type: ignore[attr-defined]


def test_a_single_voter_leads_itself_and_commits_its_own_writes() -> None:
    n = node(voters=(1,))
    n.tick(5000)
    assert n.role is Role.LEADER and n.is_leader_ready()
    last, ready = n.propose(["x"], 5001)
    assert last == 1 and ready.flush and ready.high_watermark == 2


def _follower_fetching_a_snapshot(snap: SnapshotId) -> tuple[RaftNode, int]:
    """Node 2, follower of 1 in epoch 2, told by its leader to fetch ``snap``; returns it and the
    FetchSnapshot request id in flight."""
    f = node(QuorumStateData(2, 1, -1), node_id=2)
    f.take_ready()
    f.tick(1)
    fetch_id = f.inflight[1][0]
    f.receive(FetchResponse(1, fetch_id, Err.NONE, 2, 1, high_watermark=9, snapshot_id=snap), 2)
    assert f.snapshot_fetch == (snap, 0)
    return f, f.inflight[1][0]


def test_a_malformed_snapshot_is_refused_and_changes_nothing() -> None:
    snap = SnapshotId(9, 1)
    f, rid = _follower_fetching_a_snapshot(snap)
    end, hw = f.log.log_end_offset, f.high_watermark
    garbage = b"\x00not a snapshot\xff"
    ready = f.receive(FetchSnapshotResponse(1, rid, Err.NONE, 2, 1, snap, len(garbage), 0, garbage), 3)
    assert ready.load_snapshot is None and ready.high_watermark is None
    assert f.log.log_end_offset == end and f.high_watermark == hw and f.log.latest_snapshot() is None
    assert f.snapshot_fetch is None  # it starts over from a fresh Fetch
    assert f.role is Role.FOLLOWER and f.leader_id == 1


def test_a_whole_snapshot_is_installed() -> None:
    """The other side of the case above, so that one cannot pass by refusing every snapshot."""
    leader_log = SimQuorumLog()
    leader_log.append_as_leader([f"v{i}" for i in range(9)], 1, 0)
    good = leader_log.take_snapshot([f"v{i}" for i in range(9)], 9)
    assert good is not None
    data = leader_log.read_snapshot(good, 0, 1 << 20)
    f, rid = _follower_fetching_a_snapshot(good)
    ready = f.receive(FetchSnapshotResponse(1, rid, Err.NONE, 2, 1, good, len(data), 0, data), 3)
    assert ready.load_snapshot == good and f.log.log_end_offset == 9 and f.high_watermark == 9
