"""A dynamic quorum's formatted voter set (KIP-853): what `storage format --standalone | --initial-controllers |
--no-initial-controllers` writes, and what the controller starts from until its log holds a Voters record.

Kafka keeps it as a bootstrap checkpoint (00000000000000000000-0000000000.checkpoint holding KRaftVersion and
Voters records); ours is one JSON file beside meta.properties, with this controller's own metadata directory
id (a voter is the pair node id, directory id: a controller that lost its disk is a new voter). Without the
file the quorum is static (controller.quorum.voters, kraft.version 0).
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

from epochlog.raft.voters import Endpoint, Voter, VoterSet
from epochlog.storage.checkpoints import write_atomically

VOTERS_FILE = "bootstrap-voters.json"


def new_directory_id() -> str:
    """A fresh directory id in Kafka's text form (Uuid.toString: URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def parse_initial_controllers(text: str, listener: str = "CONTROLLER") -> VoterSet:
    """--initial-controllers: 'id@host:port:directoryid,...' (Kafka's form)."""
    voters = []
    for item in (s.strip() for s in text.split(",")):
        ident, at, rest = item.partition("@")
        host_port, _, directory_id = rest.rpartition(":")
        host, _, port = host_port.rpartition(":")
        if not (at and ident.isdigit() and host and port.isdigit() and directory_id):
            raise ValueError(f"--initial-controllers: {item!r} is not id@host:port:directoryid")
        voters.append(Voter(int(ident), directory_id, (Endpoint(listener, host, int(port)),)))
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ValueError("--initial-controllers names a controller twice")
    return VoterSet.of(*voters)


def write(directory: Path, own_directory_id: str, voters: VoterSet) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {
        "version": 1,
        "kraft.version": 1,
        "directory.id": own_directory_id,
        "voters": [
            {
                "id": v.node_id,
                "directory.id": v.directory_id,
                "endpoints": [[e.listener, e.host, e.port] for e in v.endpoints],
            }
            for v in voters.voters
        ],
    }
    path = directory / VOTERS_FILE
    write_atomically(path, json.dumps(doc, indent=1))
    return path


def read(directory: Path) -> tuple[str, VoterSet] | None:
    """(this controller's directory id, the formatted voter set); None for a static quorum's directory."""
    path = directory / VOTERS_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} cannot be read: {e}") from None
    try:
        voters = VoterSet.of(
            *(
                Voter(
                    int(v["id"]),
                    str(v["directory.id"]),
                    tuple(Endpoint(str(n), str(h), int(p)) for n, h, p in v["endpoints"]),
                )
                for v in doc["voters"]
            )
        )
        return str(doc["directory.id"]), voters
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path} is malformed: {e}") from None
