"""The quorum-state file: what a voter promised survives a restart, and a damaged file stops it."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.raft.messages import QuorumStateData
from epochlog.storage.quorum_state_file import QuorumStateCorrupt, QuorumStateFile

pytestmark = pytest.mark.unit


def test_a_vote_reads_back(tmp_path: Path) -> None:
    f = QuorumStateFile(tmp_path)
    assert f.read() is None  # a new voter
    f.write(QuorumStateData(7, -1, 3), "c1", (1, 2, 3))
    assert QuorumStateFile(tmp_path).read() == QuorumStateData(7, -1, 3)
    assert not f.tmp.exists()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"leaderEpoch": 3}',
        '{"leaderEpoch": "x", "leaderId": 1, "votedId": -1}',
        '{"leaderEpoch": -2, "leaderId": 1, "votedId": -1}',
        "[1, 2]",
    ],
)
def test_a_damaged_file_refuses_to_start_the_voter(tmp_path: Path, text: str) -> None:
    (tmp_path / "quorum-state").write_text(text)
    with pytest.raises(QuorumStateCorrupt, match="quorum-state"):
        QuorumStateFile(tmp_path).read()


def test_the_metadata_log_directory_is_durable_before_any_vote(tmp_path: Path) -> None:
    """A vote is written into the metadata partition's directory before any record is: that directory's own
    entry must be on disk first, or a crash could take the vote with it and let the voter vote again."""
    from epochlog.storage import fileops
    from epochlog.storage.metadata_raft_log import MetadataRaftLog

    calls: list[tuple[str, str]] = []

    class Recording(fileops.FileOps):
        def fsync_dir(self, path: str | Path) -> None:
            calls.append(("dirfsync", str(path)))
            super().fsync_dir(path)

    prev = fileops.install(Recording())
    try:
        log = MetadataRaftLog(tmp_path / "meta")
        assert ("dirfsync", str(log.dir.parent)) in calls and ("dirfsync", str(log.dir)) in calls
        log.close()
    finally:
        fileops.install(prev)
