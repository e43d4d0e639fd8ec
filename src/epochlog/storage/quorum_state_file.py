"""The ``quorum-state`` file: a voter's epoch, its leader and its vote, durable before it acts on them.

Kafka's FileQuorumStateStore format (data_version 0, one JSON object). Written to ``quorum-state.tmp``,
fsynced, renamed over the old file, and the directory fsynced: a crash leaves the old state or the new,
never a torn one. A file that cannot be read stops the controller: voting from nothing could vote
twice in an epoch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from epochlog.raft.messages import QuorumStateData
from epochlog.storage import fileops
from epochlog.storage.errors import StorageError

FILE_NAME = "quorum-state"


class QuorumStateCorrupt(StorageError):
    """The file exists but does not read back: the node stops rather than forget a vote."""


class QuorumStateFile:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self.tmp = directory / (FILE_NAME + ".tmp")

    def read(self) -> QuorumStateData | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
            state = QuorumStateData(int(doc["leaderEpoch"]), int(doc["leaderId"]), int(doc["votedId"]))
        except (ValueError, KeyError, TypeError) as e:
            raise QuorumStateCorrupt(
                f"{self.path} cannot be read ({e}); refusing to start a voter that may have voted in an epoch "
                "it no longer remembers. Restore the file, or remove this node's metadata log directory so it "
                "rejoins empty."
            ) from None
        if state.leader_epoch < 0:
            raise QuorumStateCorrupt(f"{self.path}: negative leaderEpoch {state.leader_epoch}")
        return state

    def write(self, state: QuorumStateData, cluster_id: str, voters: tuple[int, ...]) -> None:
        doc = {
            "clusterId": cluster_id,
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in voters],
            "data_version": 0,
        }
        ops = fileops.ops()
        ops.write_file(self.tmp, json.dumps(doc).encode())
        ops.rename(self.tmp, self.path)
        ops.fsync_dir(self.path.parent)

    def remove_leftovers(self) -> None:
        if self.tmp.exists():
            os.unlink(self.tmp)
