"""A dynamic quorum's formatted voters (KIP-853): storage format's three ways, read back as the controller does;
the tools' view of voters' directory ids."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from epochlog.cli.main import app
from epochlog.cli.metadata_quorum_cmd import REPLICATION_HEADER, replication_rows, status_lines
from epochlog.raft.voters import Endpoint, Voter, VoterSet
from epochlog.server.cluster.controller_config import parse_bootstrap_servers
from epochlog.server.quorum.voter_wire import dir_text, dir_uuid
from epochlog.storage import bootstrap_voters

pytestmark = pytest.mark.unit
runner = CliRunner()


def fmt(d: Path, *args: str) -> object:
    return runner.invoke(app, ["storage", "format", "-d", str(d), "-t", "c1", *args])


def test_standalone_formats_a_quorum_of_this_controller(tmp_path: Path) -> None:
    r = fmt(tmp_path, "--standalone", "--node-id", "1", "--controller", "127.0.0.1:9093")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    own, voters = bootstrap_voters.read(tmp_path)  # type: ignore[misc]
    assert voters == VoterSet.of(Voter(1, own, (Endpoint("CONTROLLER", "127.0.0.1", 9093),)))
    assert len(own) == 22 and dir_text(dir_uuid(own)) == own
    again = fmt(tmp_path, "--no-initial-controllers", "--node-id", "1")
    assert again.exit_code == 1  # type: ignore[attr-defined]


def test_initial_controllers_and_no_initial_controllers(tmp_path: Path) -> None:
    ids = [bootstrap_voters.new_directory_id() for _ in range(3)]
    spec = ",".join(f"{i}@h{i}:{9090 + i}:{d}" for i, d in enumerate(ids, 1))
    r = fmt(tmp_path / "a", "--initial-controllers", spec, "--node-id", "2")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    own, voters = bootstrap_voters.read(tmp_path / "a")  # type: ignore[misc]
    assert (
        own == ids[1]
        and voters.ids == (1, 2, 3)
        and voters.get(3) == Voter(3, ids[2], (Endpoint("CONTROLLER", "h3", 9093),))
    )
    assert fmt(tmp_path / "b", "--initial-controllers", spec, "--node-id", "7").exit_code == 1  # type: ignore[attr-defined]
    assert fmt(tmp_path / "c", "--initial-controllers", "1@h:1", "--node-id", "1").exit_code == 1  # type: ignore[attr-defined]
    r = fmt(tmp_path / "d", "--no-initial-controllers", "--node-id", "4")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    own, voters = bootstrap_voters.read(tmp_path / "d")  # type: ignore[misc]
    assert voters == VoterSet() and own
    assert bootstrap_voters.read(tmp_path / "e") is None  # a static quorum's directory


def test_bootstrap_servers_are_parsed() -> None:
    assert parse_bootstrap_servers("a:1, [::1]:2") == (("a", 1), ("::1", 2))
    with pytest.raises(Exception, match="host:port"):
        parse_bootstrap_servers("a")


def _replica(n: int, directory: str) -> SimpleNamespace:
    return SimpleNamespace(
        replica_id=n,
        replica_directory_id=dir_uuid(directory),
        log_end_offset=10,
        last_fetch_timestamp=5,
        last_caught_up_timestamp=5,
    )


def test_the_tools_show_directory_ids() -> None:
    d = bootstrap_voters.new_directory_id()
    row = SimpleNamespace(leader_id=1, leader_epoch=3, high_watermark=10, current_voters=[_replica(1, d)], observers=[])
    assert dict(status_lines("c", row, 6))["CurrentVoters"] == f'[{{"id": 1, "directoryId": "{d}"}}]'
    assert REPLICATION_HEADER[:2] == ["NodeId", "DirectoryId"] and replication_rows(row)[0][:2] == ["1", d]
    static = SimpleNamespace(**{**row.__dict__, "current_voters": [_replica(1, "")]})
    assert dict(status_lines("c", static, 6))["CurrentVoters"] == "[1]"
    assert replication_rows(static)[0][1] == "AAAAAAAAAAAAAAAAAAAAAA"
    assert dir_uuid("AAAAAAAAAAAAAAAAAAAAAA") == uuid.UUID(int=0) and dir_text(uuid.UUID(int=0)) == ""
