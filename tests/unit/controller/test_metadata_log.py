"""The controller's records survive a restart through the on-disk metadata log."""

from __future__ import annotations

from pathlib import Path

from epochlog.controller.controller import Controller
from epochlog.server.metadata_log import MetadataLog


def test_replay_rebuilds_the_image_and_returning_leader_gets_new_epoch(tmp_path: Path) -> None:
    c = Controller()
    for b in (1, 2, 3):
        c.register_broker(b, 0)
    c.create_topic("t", 2, 3)
    c.elect_leader("t", 0, 2)
    mlog = MetadataLog(tmp_path)
    mlog.append(c.records)
    before = {p: st for p, st in c.topics["t"].partitions.items()}
    mlog.log.truncate_to(mlog.log.log_end_offset)  # nothing to cut; simulate a crash without close
    again = Controller.replay(MetadataLog(tmp_path).read_all())
    assert again.topics["t"].partitions == before
    assert all(b.fenced for b in again.brokers.values())
    again.register_broker(2, 10)  # the leader of partition 0 returns
    assert again.topics["t"].partitions[0].leader_epoch == before[0].leader_epoch + 1


def test_producer_id_blocks_are_unique_and_survive_replay() -> None:
    c = Controller()
    a = c.allocate_producer_ids(1, 1000)
    b = c.allocate_producer_ids(2, 1000)
    assert (a, b) == (0, 1000)
    again = Controller.replay(c.records)
    assert again.allocate_producer_ids(3, 1000) == 2000  # never an id handed out before the restart
