"""The trace checker over hand-made event streams: each invariant kept, and each broken on purpose."""

from __future__ import annotations

from pathlib import Path

from epochlog.storage.epoch_cache import LeaderEpochCache
from epochlog.trace import events as ev
from epochlog.trace.check import TraceChecker, check_stream
from epochlog.trace.sink import FileSink, ReadyTracer, find_traces, read_merged, read_trace

B, C = ev.BROKER, ev.CONTROLLER


class Stream:
    """Events as nodes would write them: a per-node sequence and a clock that moves by 1 ms an event."""

    def __init__(self) -> None:
        self.events: list[ev.Stamped] = []
        self.seq: dict[tuple[int, str], int] = {}

    def add(self, node: int, event: ev.Event, src: str = B) -> Stream:
        n = self.seq.get((node, src), 0)
        self.seq[(node, src)] = n + 1
        self.events.append(ev.Stamped(node, src, n, len(self.events), event))
        return self

    def check(self) -> TraceChecker:
        return check_stream(self.events)


def role(node: int, r: str, epoch: int, leader: int, leo: int = 0, hw: int = 0) -> ev.Role:
    return ev.Role("t", 0, r, epoch, leader, leo if r == "leader" else -1, leo, hw)


def hw(epoch: int, value: int, leo: int, runs: tuple[tuple[int, int], ...] = (), r: str = "leader") -> ev.Hw:
    return ev.Hw("t", 0, r, epoch, value, leo, runs)


def truncate(epoch: int, frm: int, to: int, epoch_at: int) -> ev.Truncate:
    return ev.Truncate("t", 0, "follower", epoch, frm, to, epoch_at, 0, "test")


def invariants(checker: TraceChecker) -> set[str]:
    return {v.invariant for v in checker.violations}


def _healthy() -> Stream:
    """Broker 1 leads epoch 0 and commits 0..1; broker 2 follows; broker 2 then leads epoch 1 from offset 2 and
    broker 1, which had appended offset 2 in epoch 0 that nobody committed, truncates it."""
    s = Stream()
    s.add(1, ev.Start()).add(2, ev.Start())
    s.add(1, role(1, "leader", 0, 1)).add(2, role(2, "follower", 0, 1))
    s.add(1, hw(0, 2, 3, ((0, 0),))).add(2, hw(0, 2, 2, r="follower"))
    s.add(2, role(2, "leader", 1, 2, leo=2, hw=2)).add(1, role(1, "follower", 1, 2, leo=3, hw=2))
    s.add(1, truncate(1, 3, 2, epoch_at=0))  # offset 2 of epoch 0 was never committed
    s.add(2, hw(1, 4, 4, ((1, 2),)))
    s.add(2, ev.Isr("t", 0, 1, 1, 2, (1, 2), proposed=True))
    s.add(2, ev.TxnMarker("t", 0, 1, 7, True, 4))
    return s


def test_a_healthy_history_keeps_every_invariant_and_counts_its_checks() -> None:
    c = _healthy().check()
    assert not c.violations, c.report()
    assert c.events == 12
    assert c.checks >= 15


def test_two_leaders_in_one_epoch() -> None:
    s = _healthy().add(3, role(3, "leader", 1, 3))
    assert invariants(s.check()) == {"one-leader-per-epoch"}


def test_a_follower_naming_another_leader_for_the_epoch() -> None:
    s = _healthy().add(3, role(3, "follower", 1, 1))
    assert invariants(s.check()) == {"one-leader-per-epoch"}


def test_a_marker_written_by_a_broker_not_leading_the_epoch() -> None:
    s = _healthy().add(1, ev.TxnMarker("t", 0, 1, 7, False, 5))
    assert invariants(s.check()) == {"one-leader-per-epoch"}


def test_leader_hw_going_back_within_a_term() -> None:
    s = _healthy().add(2, hw(1, 3, 4, ((1, 2),)))
    assert invariants(s.check()) == {"leader-hw-monotonic"}


def test_leader_hw_may_start_lower_after_a_restart() -> None:
    s = _healthy().add(2, ev.Start()).add(2, role(2, "leader", 1, 2, leo=4, hw=0)).add(2, hw(1, 3, 4, ((1, 2),)))
    assert not s.check().violations


def test_hw_past_the_log_end() -> None:
    s = _healthy().add(2, hw(1, 9, 5, ((1, 4),)))
    assert invariants(s.check()) == {"hw-within-log"}


def test_follower_hw_above_every_leader() -> None:
    s = _healthy().add(1, hw(1, 7, 7, r="follower"))
    assert invariants(s.check()) == {"follower-hw-committed"}


def test_follower_hw_stamped_in_the_same_millisecond_as_the_leaders_is_not_judged_early() -> None:
    s = _healthy()
    s.add(1, hw(1, 5, 5, r="follower"))
    s.add(2, hw(1, 5, 5, ((1, 4),)))
    last = s.events[-1]
    s.events[-1] = ev.Stamped(last.node, last.src, last.seq, s.events[-2].ms, last.event)  # a tie, wrong way round
    assert not s.check().violations


def test_truncating_a_committed_record() -> None:
    s = _healthy().add(2, ev.Start()).add(2, truncate(1, 4, 1, epoch_at=0))  # offset 1 of epoch 0 was committed
    c = s.check()
    assert invariants(c) == {"truncate-below-committed"}
    assert "dropping the committed record at offset 1 of epoch 0" in c.violations[0].detail
    assert c.violations[0].context  # the events before it, for the report


def test_truncating_a_diverged_record_below_the_hw_is_allowed() -> None:
    # Offset 2 was committed in epoch 1; a replica holding offset 2 of epoch 0 there drops a different record.
    s = _healthy().add(3, truncate(1, 3, 2, epoch_at=0))
    assert not s.check().violations


def test_after_an_unclean_election_the_loss_is_permitted_and_reported() -> None:
    s = _healthy().add(0, ev.Unclean("t", 0, 3), src=C).add(2, truncate(2, 4, 1, epoch_at=0))
    c = s.check()
    assert not c.violations
    assert [v.invariant for v in c.permitted] == ["truncate-below-committed"]


def test_a_replica_taking_an_older_epoch() -> None:
    s = _healthy().add(1, ev.Start()).add(1, role(1, "follower", 0, 1))
    assert invariants(s.check()) == {"epoch-monotonic"}


def test_an_isr_without_its_leader() -> None:
    s = _healthy().add(2, ev.Isr("t", 0, 1, 2, 2, (1, 3), proposed=False))
    assert invariants(s.check()) == {"isr-has-leader"}


def test_a_recreated_topic_is_another_partition() -> None:
    s = _healthy()
    again = ev.Role("t", 0, "leader", 0, 3, 0, 0, 0, tid="other-id")
    s.add(3, again)
    assert not s.check().violations


# -- the quorum -------------------------------------------------------------------------------------------


def _quorum() -> Stream:
    s = Stream()
    for n in (1, 2, 3):
        s.add(n, ev.Start(), C).add(n, ev.RaftState(0, -1, -1, "restarted"), C)
    s.add(1, ev.RaftState(1, -1, 1, "candidate"), C)
    s.add(2, ev.RaftVote(1, 1), C).add(2, ev.RaftState(1, -1, 1, "unattached"), C)
    s.add(1, ev.RaftState(1, 1, 1, "leader"), C)
    s.add(2, ev.RaftState(1, 1, 1, "follower"), C)
    s.add(1, ev.RaftHw(1, "leader", 3, ((0, 0), (1, 2))), C)
    s.add(2, ev.RaftHw(1, "follower", 3), C)
    s.add(3, ev.RaftTruncate(1, 4, 3, epoch_at=0), C)  # an entry of epoch 0 at 3, never committed
    return s


def test_a_healthy_quorum_history() -> None:
    c = _quorum().check()
    assert not c.violations, c.report()


def test_a_voter_voting_twice_in_one_epoch_even_across_a_restart() -> None:
    s = _quorum().add(2, ev.Start(), C).add(2, ev.RaftVote(1, 3), C)
    assert invariants(s.check()) == {"raft-vote-once"}


def test_two_raft_leaders_in_one_epoch() -> None:
    s = _quorum().add(3, ev.RaftState(1, 3, 3, "leader"), C)
    assert "raft-one-leader-per-epoch" in invariants(s.check())


def test_a_raft_epoch_going_back_but_not_after_the_disk_was_lost() -> None:
    back = _quorum().add(1, ev.Start(), C).add(1, ev.RaftState(0, -1, -1, "restarted"), C)
    assert invariants(back.check()) == {"raft-epoch-monotonic"}
    wiped = _quorum().add(1, ev.DiskLost(), C).add(1, ev.Start(), C).add(1, ev.RaftState(0, -1, -1, "restarted"), C)
    assert not wiped.check().violations


def test_a_raft_commit_going_back_within_a_life() -> None:
    s = _quorum().add(2, ev.RaftHw(1, "follower", 2), C)
    assert invariants(s.check()) == {"raft-commit-monotonic"}
    restarted = _quorum().add(2, ev.Start(), C).add(2, ev.RaftHw(1, "follower", 2), C)
    assert not restarted.check().violations


def test_a_raft_truncation_below_the_commit() -> None:
    s = _quorum().add(3, ev.RaftTruncate(1, 3, 2, epoch_at=1), C)
    assert invariants(s.check()) == {"raft-truncate-below-commit"}


# -- the pieces around it ----------------------------------------------------------------------------------


class _Log:
    def __init__(self, entries: list[tuple[int, int]], leo: int) -> None:
        self.cache = LeaderEpochCache(entries)
        self.leo = leo

    def latest_epoch(self) -> int:
        return self.cache.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.leo)


def test_epochs_between_walks_the_cache() -> None:
    log = _Log([(0, 0), (2, 5), (3, 9)], 12)
    assert ev.epochs_between(log, 6, 12) == ((2, 6), (3, 9))
    assert ev.epochs_between(log, 0, 3) == ((0, 0),)
    assert [ev.epoch_at(log, o) for o in (0, 4, 5, 9, 11)] == [0, 0, 2, 3, 3]
    trimmed = _Log([(5, 10), (6, 12)], 15)  # the entries below offset 10 left with old segments
    assert ev.epoch_at(trimmed, 3) == -1
    assert ev.epoch_at(trimmed, 10) == 5
    assert ev.epoch_at(_Log([], 0), 0) == -1


def test_files_round_trip_and_merge_by_clock(tmp_path: Path) -> None:
    clock = iter(range(100, 200, 2))
    a = FileSink(tmp_path / "a", 1, B, clock=lambda: next(clock))
    other = iter(range(101, 200, 2))
    b = FileSink(tmp_path / "b", 2, C, clock=lambda: next(other))
    a.emit(hw(0, 2, 3, ((0, 0),)))
    b.emit(ev.RaftVote(1, 3))
    a.close()
    b.close()
    with open(tmp_path / "a" / "trace-broker.jsonl", "a") as f:
        f.write('{"node":1,"src":"broker","seq":9,"ms":1')  # a line cut short by kill -9
    files = find_traces([tmp_path])
    assert [p.name for p in files] == ["trace-broker.jsonl", "trace-controller.jsonl"]
    assert [st.event for st in read_trace(files[0])] == [ev.Start(a_pid()), hw(0, 2, 3, ((0, 0),))]
    merged = read_merged(files)
    assert [st.ms for st in merged] == [100, 101, 102, 103]
    assert [st.src for st in merged] == [B, C, B, C]


def a_pid() -> int:
    import os

    return os.getpid()


def test_ready_tracer_holds_until_the_state_is_written() -> None:
    got: list[ev.Event] = []

    class Into:
        enabled = True

        def emit(self, event: ev.Event) -> None:
            got.append(event)

    t = ReadyTracer(Into())
    t.emit(ev.RaftVote(1, 2))
    assert got == []
    t.drop()
    t.emit(ev.RaftVote(1, 3))
    t.release()
    assert got == [ev.RaftVote(1, 3)]
