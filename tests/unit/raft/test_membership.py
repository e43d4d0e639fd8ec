"""KIP-853 in the quorum core: the voter set as the log has it, and the leader's add and remove decisions."""

from __future__ import annotations

import random

from epochlog.protocol.errors import Err
from epochlog.raft.config import QuorumConfig
from epochlog.raft.messages import (
    AddVoterRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    QuorumStateData,
    Ready,
    RemoveVoterRequest,
    UpdateVoterRequest,
    VoterChangeResponse,
    VoteRequest,
    VoteResponse,
)
from epochlog.raft.node import RaftNode
from epochlog.raft.roles import Role
from epochlog.raft.voters import Endpoint, Voter, VoterSet
from epochlog.sim.quorum_log import SimQuorumLog

EP = (Endpoint("CONTROLLER", "127.0.0.1", 9093),)


def voter(n: int) -> Voter:
    return Voter(n, f"dir{n}", EP)


def solo_leader(log: SimQuorumLog | None = None) -> RaftNode:
    """Node 1, the only voter of a dynamic quorum, leading epoch 1 with its first entries committed."""
    n = RaftNode(1, VoterSet.of(voter(1)), log or SimQuorumLog(), None, 0, random.Random(0), "c1", QuorumConfig())
    n.tick(0)
    n.tick(1)
    assert n.role is Role.LEADER and n.is_leader_ready(), n.role
    n.take_ready()
    return n


def fetch(n: RaftNode, sender: int, offset: int, now: int, observer: bool) -> Ready:
    return n.receive(FetchRequest("c1", sender, 50 + offset, n.epoch, offset, n.epoch, 0, observer), now)


def answers(ready: Ready) -> list[VoterChangeResponse]:
    return [o.message for o in ready.messages if isinstance(o.message, VoterChangeResponse)]


def add(n: RaftNode, v: Voter, now: int, rid: int = 900) -> Ready:
    return n.receive(AddVoterRequest("c1", -1, rid, -1, v), now)


def remove(n: RaftNode, voter_id: int, directory: str, now: int, rid: int = 901) -> Ready:
    return n.receive(RemoveVoterRequest("c1", -1, rid, -1, voter_id, directory), now)


def grown_to_two() -> RaftNode:
    """Node 1 leads {1, 2} with the change committed."""
    n = solo_leader()
    fetch(n, 2, n.log.log_end_offset, 10, observer=True)
    add(n, voter(2), 11)
    assert n.voters == (1, 2)
    fetch(n, 2, n.log.log_end_offset, 12, observer=False)
    assert n.high_watermark == n.log.log_end_offset
    return n


def test_the_first_leader_of_a_dynamic_quorum_writes_its_voter_set_into_the_log() -> None:
    n = solo_leader()
    values = [n.log.entry(o).value for o in range(n.log.log_end_offset)]  # type: ignore[union-attr]
    assert values[:2] == ["LC:1", "KV:1"] and values[2].startswith("V:")
    assert n.log.voter_sets(-1) == [(2, VoterSet.of(voter(1)))]
    assert n.membership.kraft_version == 1


def test_a_static_quorum_refuses_voter_changes() -> None:
    n = RaftNode(1, (1,), SimQuorumLog(), None, 0, random.Random(0), "c1", QuorumConfig())
    n.tick(0)
    n.tick(1)
    assert n.role is Role.LEADER
    (resp,) = answers(add(n, voter(2), 5))
    assert resp.error == Err.UNSUPPORTED_VERSION and n.voters == (1,)


def test_an_add_waits_for_the_new_voter_to_catch_up_and_is_answered_when_it_commits() -> None:
    n = solo_leader()
    (resp,) = answers(add(n, voter(2), 5))
    assert resp.error == Err.REQUEST_TIMED_OUT  # node 2 never fetched
    fetch(n, 2, 1, 6, observer=True)
    (resp,) = answers(add(n, voter(2), 7))
    assert resp.error == Err.REQUEST_TIMED_OUT  # it fetched, but is behind the high watermark
    fetch(n, 2, n.log.log_end_offset, 8, observer=True)
    end = n.log.log_end_offset
    ready = add(n, voter(2), 9)
    assert answers(ready) == [] and n.voters == (1, 2)  # in force at once; answered only once committed
    assert n.log.entry(end).value.startswith("V:")  # type: ignore[union-attr]
    assert n.high_watermark == end  # the majority of {1, 2} is both: the record is not committed by node 1 alone
    ready = fetch(n, 2, end + 1, 10, observer=False)
    assert n.high_watermark == end + 1
    (resp,) = answers(ready)
    assert resp.error == Err.NONE and resp.request_id == 900


def test_one_change_at_a_time() -> None:
    n = solo_leader()
    fetch(n, 2, n.log.log_end_offset, 5, observer=True)
    fetch(n, 3, n.log.log_end_offset, 5, observer=True)
    add(n, voter(2), 6)
    (resp,) = answers(add(n, voter(3), 7, rid=902))
    assert resp.error == Err.REQUEST_TIMED_OUT and n.voters == (1, 2)
    fetch(n, 2, n.log.log_end_offset, 8, observer=False)  # the first change commits
    fetch(n, 3, n.log.log_end_offset, 8, observer=True)
    add(n, voter(3), 9, rid=903)
    assert n.voters == (1, 2, 3)


def test_a_change_waits_for_the_leader_to_commit_in_its_epoch() -> None:
    n = RaftNode(1, VoterSet.of(voter(1), voter(2)), SimQuorumLog(), None, 0, random.Random(0), "c1")
    n.tick(5000)
    for pre in (True, False):
        n.receive(VoteResponse(2, n.inflight[2][0], Err.NONE, 0 if pre else 1, -1, True, pre), 5000)
    assert n.role is Role.LEADER and not n.is_leader_ready()  # node 2 has not fetched its LeaderChange
    fetch(n, 3, 0, 5001, observer=True)
    (resp,) = answers(add(n, voter(3), 5002))
    assert resp.error == Err.REQUEST_TIMED_OUT and n.voters == (1, 2)


def test_bad_changes_are_refused() -> None:
    n = grown_to_two()
    fetch(n, 3, n.log.log_end_offset, 20, observer=True)
    assert answers(add(n, voter(2), 21))[0].error == Err.DUPLICATE_VOTER
    assert answers(add(n, Voter(3, "dir3"), 22))[0].error == Err.INVALID_REQUEST  # no endpoint
    assert answers(remove(n, 7, "dir7", 23))[0].error == Err.VOTER_NOT_FOUND
    assert answers(remove(n, 2, "another-dir", 24))[0].error == Err.VOTER_NOT_FOUND
    follower = RaftNode(2, VoterSet.of(voter(1), voter(2)), SimQuorumLog(), None, 0, random.Random(0), "c1")
    assert answers(add(follower, voter(3), 25))[0].error == Err.NOT_LEADER_OR_FOLLOWER
    assert n.voters == (1, 2)


def test_a_removed_leader_leads_until_the_removal_commits_then_resigns() -> None:
    n = grown_to_two()
    fetch(n, 3, n.log.log_end_offset, 20, observer=True)
    add(n, voter(3), 21)
    fetch(n, 2, n.log.log_end_offset, 22, observer=False)  # {1, 2} of {1, 2, 3}: committed
    ready = remove(n, 1, "dir1", 23)
    assert answers(ready) == [] and n.voters == (2, 3) and n.role is Role.LEADER
    end = n.log.log_end_offset
    fetch(n, 2, end, 24, observer=False)  # one of the two remaining voters: no majority of {2, 3}
    assert n.role is Role.LEADER and n.high_watermark < end
    (resp,) = answers(fetch(n, 3, end, 25, observer=False))
    assert resp.error == Err.NONE and n.role is Role.LEADER
    ready = n.tick(26)
    assert n.role is Role.RESIGNED
    ends = {o.to for o in ready.messages if isinstance(o.message, EndQuorumEpochRequest)}
    assert ends == {2, 3}
    n.tick(25 + 2 * QuorumConfig().election_timeout_ms)
    assert n.role is Role.UNATTACHED and not n.is_voter  # it looks for the new leader as an observer


def test_a_follower_takes_the_voter_set_from_the_log_and_drops_it_with_a_truncation() -> None:
    leader = grown_to_two()
    fetch(leader, 3, leader.log.log_end_offset, 20, observer=True)
    add(leader, voter(3), 21)
    f = RaftNode(2, VoterSet.of(voter(1)), SimQuorumLog(), QuorumStateData(1, 1, -1), 0, random.Random(0), "c1")
    assert not f.is_voter
    rid = f.inflight[1][0]
    records = leader.log.read(0, 100)
    f.receive(FetchResponse(1, rid, Err.NONE, 1, 1, high_watermark=3, records=records), 30)
    assert f.voters == (1, 2, 3) and f.is_voter
    assert f.membership.truncated(records[-1][0]) and f.membership.voters.ids == (1, 2)
    # a restart reads the voter set back from the log
    again = RaftNode(2, VoterSet.of(voter(1)), f.log, QuorumStateData(1, 1, -1), 40, random.Random(0), "c1")
    assert again.voters == (1, 2, 3)


def test_a_dynamic_voter_grants_a_vote_to_a_candidate_of_a_newer_voter_set() -> None:
    n = RaftNode(2, VoterSet.of(voter(1), voter(2)), SimQuorumLog(), None, 0, random.Random(0), "c1")
    resp = n.receive(VoteRequest("c1", 3, 1, 1, 1, 5), 0).messages[0].message
    assert isinstance(resp, VoteResponse) and resp.granted
    static = RaftNode(2, (1, 2), SimQuorumLog(), None, 0, random.Random(0), "c1")
    resp = static.receive(VoteRequest("c1", 3, 1, 1, 1, 5), 0).messages[0].message
    assert isinstance(resp, VoteResponse) and resp.error == Err.INCONSISTENT_VOTER_SET


def test_a_voter_updates_its_endpoints_answered_once_appended() -> None:
    n = grown_to_two()
    moved = Voter(2, "dir2", (Endpoint("CONTROLLER", "10.0.0.2", 9095),))
    (resp,) = answers(n.receive(UpdateVoterRequest("c1", 2, 905, n.epoch, moved), 20))
    assert resp.error == Err.NONE and n.membership.voters.get(2) == moved and n.voters == (1, 2)
    # uncommitted: the next change waits, as for any Voters record
    (resp,) = answers(n.receive(UpdateVoterRequest("c1", 2, 906, n.epoch, moved), 21))
    assert resp.error == Err.REQUEST_TIMED_OUT
    fetch(n, 2, n.log.log_end_offset, 22, observer=False)
    stranger = Voter(2, "another-dir", moved.endpoints)
    (resp,) = answers(n.receive(UpdateVoterRequest("c1", 2, 907, n.epoch, stranger), 23))
    assert resp.error == Err.VOTER_NOT_FOUND
