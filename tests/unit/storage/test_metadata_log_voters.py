"""KIP-853's Voters records in the metadata log on disk: found after appends, across a reopen, and in a snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.controller.image import ClusterImage
from epochlog.controller.records import BrokerFenced
from epochlog.raft.messages import KRaftVersionRecord, LeaderChange, SnapshotId, VotersRecord
from epochlog.raft.voters import Endpoint, Voter, VoterSet
from epochlog.storage.metadata_raft_log import MetadataRaftLog, decode_records

pytestmark = pytest.mark.unit

ONE = VoterSet.of(Voter(1, "AAAAAAAAAAAAAAAAAAAAAA", (Endpoint("CONTROLLER", "127.0.0.1", 9093),)))
TWO = ONE.with_voter(Voter(2, "BBBBBBBBBBBBBBBBBBBBBB", (Endpoint("CONTROLLER", "127.0.0.1", 9094),)))


def test_voter_sets_are_read_back_from_the_log_and_a_snapshot(tmp_path: Path) -> None:
    log = MetadataRaftLog(tmp_path)
    log.append_as_leader([LeaderChange(1, (1,), (1,)), KRaftVersionRecord(1), VotersRecord(ONE)], 1, 0)
    log.append_as_leader([BrokerFenced(b) for b in range(5)], 1, 0)
    log.append_as_leader([VotersRecord(TWO)], 1, 0)
    log.flush()
    assert log.voter_sets(-1) == [(2, ONE), (8, TWO)]
    assert log.voter_sets(3) == [(8, TWO)] and log.voter_sets(9) == []
    log.close()
    log = MetadataRaftLog(tmp_path)
    assert log.voter_sets(-1) == [(2, ONE), (8, TWO)]
    # the controller's image keeps the last set for its snapshots, and a log that starts at one reads it there
    image = ClusterImage()
    for _, record in decode_records(log.read_bytes(0, 1 << 20, None)):
        image.apply(record)
    log.log.high_watermark = log.log_end_offset
    snap = SnapshotId(log.log_end_offset, 1)
    log.write_snapshot(snap, image.snapshot())
    log.log.truncate_fully_and_start_at(snap.end_offset)
    assert log.voter_sets(-1) == [(8, TWO)]
    log.close()
