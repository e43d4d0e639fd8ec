"""dump-log decodes the metadata log and its snapshots into records, and says what it cannot decode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epochlog.controller.records import BrokerRegistration, PartitionChange, Topic
from epochlog.raft.messages import SnapshotId
from epochlog.storage.dump_log import dump, format_dump, is_metadata_path
from epochlog.storage.metadata_raft_log import MetadataRaftLog

pytestmark = pytest.mark.unit


def _write(tmp_path: Path) -> Path:
    log = MetadataRaftLog(tmp_path)
    log.append_as_leader([BrokerRegistration(1, 1, "127.0.0.1", 9092), Topic("t", 1, id="")], epoch=3, now_ms=0)
    log.append_as_leader([PartitionChange("t", 0, 1, 0, (1,), (1,), 0)], epoch=3, now_ms=0)
    log.flush()
    log.write_snapshot(SnapshotId(3, 3), [BrokerRegistration(1, 1, "127.0.0.1", 9092), Topic("t", 1)])
    log.close()
    return tmp_path / "__cluster_metadata-0"


def test_segments_and_snapshots_are_decoded(tmp_path: Path) -> None:
    part = _write(tmp_path)
    assert is_metadata_path(part)
    entries = list(dump(part, decode_metadata=True))
    decoded = [(e.get("offset"), e["kind"]) for e in entries if "kind" in e and "offset" in e]
    assert decoded == [(0, "BrokerRegistration"), (1, "Topic"), (2, "PartitionChange")]
    change = next(e for e in entries if e.get("kind") == "PartitionChange")
    assert change["data"]["isr"] == [1] and change["data"]["topic"] == "t"
    snap = [e["kind"] for e in entries if "snapshot_record" in e]
    assert snap == ["BrokerRegistration", "Topic"]
    text = "\n".join(format_dump(entries))
    assert "offset: 2 PartitionChange" in text and "Dumping snapshot" in text


def test_an_undecodable_record_is_reported_not_fatal(tmp_path: Path) -> None:
    part = _write(tmp_path)
    snap = next(part.glob("*.checkpoint"))
    snap.write_bytes(snap.read_bytes() + b'{"kind": "NoSuchRecord", "data": {}}\n')
    entries = list(dump(snap, decode_metadata=True))
    errors = [e for e in entries if "error" in e]
    assert len(errors) == 1 and "NoSuchRecord" in errors[0]["error"]
    assert [e["kind"] for e in entries if "kind" in e] == ["BrokerRegistration", "Topic"]


def test_ordinary_partitions_are_not_decoded(tmp_path: Path) -> None:
    part = _write(tmp_path)
    entries = list(dump(part, decode_metadata=False))
    assert not any("kind" in e for e in entries)
    assert not is_metadata_path(tmp_path / "orders-0")
    json.dumps(entries)  # --json prints them
