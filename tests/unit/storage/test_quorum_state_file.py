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
