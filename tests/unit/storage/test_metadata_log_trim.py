"""Snapshots bound the metadata log only as far as its segments let them: whole segments go."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.config_error import ConfigError
from epochlog.controller.records import BrokerFenced
from epochlog.raft.messages import SnapshotId
from epochlog.server.cluster.controller_config import ControllerConfig
from epochlog.storage.metadata_raft_log import MetadataRaftLog

pytestmark = pytest.mark.unit


def _fill(log: MetadataRaftLog, batches: int) -> None:
    for _ in range(batches):
        log.append_as_leader([BrokerFenced(b) for b in range(50)], epoch=1, now_ms=0)
    log.flush()


def _bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


@pytest.mark.parametrize(("segment_bytes", "trims"), [(16 * 1024, True), (None, False)])
def test_a_snapshot_frees_whole_segments(tmp_path: Path, segment_bytes: int | None, trims: bool) -> None:
    log = MetadataRaftLog(tmp_path, segment_bytes)
    _fill(log, 200)
    end = log.log_end_offset
    before = _bytes(tmp_path)
    log.log.high_watermark = end
    snap = SnapshotId(end, 1)
    log.write_snapshot(snap, [BrokerFenced(1)])
    log.trim_to_snapshot(snap)
    if trims:
        assert log.log_start_offset > 0 and len(log.log.segments) == 1
        assert _bytes(tmp_path) < before / 4
    else:
        assert len(log.log.segments) == 1 and _bytes(tmp_path) >= before
    log.close()
    reopened = MetadataRaftLog(tmp_path, segment_bytes)
    assert reopened.latest_snapshot() == snap and reopened.log_end_offset == end
    reopened.close()


def test_segment_size_config_follows_kafka() -> None:
    assert ControllerConfig.from_properties({}).segment_bytes == 1 << 30
    c = ControllerConfig.from_properties({"metadata.log.segment.bytes": str(8 << 20)})
    assert c.segment_bytes == 8 << 20
    with pytest.raises(ConfigError, match=r"metadata\.log\.segment\.bytes"):
        ControllerConfig.from_properties({"metadata.log.segment.bytes": str(1 << 20)})  # under the 8 MiB floor
    small = {"metadata.log.segment.bytes": str(1 << 20), "metadata.log.segment.min.bytes": str(1 << 20)}
    assert ControllerConfig.from_properties(small).segment_bytes == 1 << 20


def test_a_malformed_received_snapshot_is_refused_and_the_log_kept(tmp_path: Path) -> None:
    log = MetadataRaftLog(tmp_path)
    _fill(log, 3)
    end = log.log_end_offset
    snap = SnapshotId(end + 100, 2)
    log.write_snapshot_part(snap, 0, b'{"kind": "BrokerFenced", "data": {"broker": 1}}\n{"kind": "Nope"')
    assert log.install_snapshot(snap) is False
    assert log.log_end_offset == end and log.latest_snapshot() is None
    assert not any(p.name.endswith(".part") for p in log.dir.iterdir())
    good = SnapshotId(end + 100, 2)
    log.write_snapshot_part(good, 0, b'{"kind": "BrokerFenced", "data": {"broker": 1}}\n')
    assert log.install_snapshot(good) is True
    assert log.latest_snapshot() == good and log.log_end_offset == end + 100
    log.close()
