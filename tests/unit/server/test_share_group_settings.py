"""A new share-partition takes its group's configs from the metadata image: share.auto.offset.reset decides
where it starts (earliest, latest, by_duration: the first record at most that old, else the high watermark)
and share.record.lock.duration.ms its locks; a group without configs keeps the broker's settings;
share.isolation.level bounds each read (the LSO under read_committed) and names the aborted batches. And a
share-partition's lag as DescribeShareGroupOffsets answers it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.clock import now_ms
from epochlog.server.share.config import ShareConfig
from epochlog.server.share.partitions import SharePartitions


class _Log:
    log_start_offset = 10

    def __init__(self, first_at_or_after: dict[int, int]) -> None:
        self.asked: list[int] = []
        self.answers = first_at_or_after

    def offset_for_timestamp(self, ts: int) -> tuple[int, int, int] | None:
        self.asked.append(ts)
        for cutoff, offset in sorted(self.answers.items()):
            if ts <= cutoff:
                return offset, cutoff, 0
        return None


def _shares(group_configs: dict[str, dict[str, str]]) -> SharePartitions:
    broker: Any = SimpleNamespace(image=SimpleNamespace(cluster=SimpleNamespace(group_configs=group_configs)))
    return SharePartitions(broker, ShareConfig(record_lock_duration_ms=30_000))


def _part(log: _Log) -> Any:
    return SimpleNamespace(log=log, high_watermark=50)


def test_without_group_configs_the_broker_settings_and_latest() -> None:
    cfg, start_from = _shares({})._group_settings("g", _part(_Log({})))
    assert (cfg.auto_offset_reset, cfg.record_lock_duration_ms, start_from) == ("latest", 30_000, 10)


def test_earliest_and_the_groups_lock_duration() -> None:
    own = {"g": {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}}
    cfg, start_from = _shares(own)._group_settings("g", _part(_Log({})))
    assert (cfg.auto_offset_reset, cfg.record_lock_duration_ms, start_from) == ("earliest", 20_000, 10)
    # Another group is not bound by them.
    assert _shares(own)._group_settings("other", _part(_Log({})))[0].auto_offset_reset == "latest"


@pytest.mark.parametrize(("found", "expected"), [(30, 30), (5, 10), (70, 50), (None, 50)])
def test_by_duration_starts_at_the_first_record_that_recent(found: int | None, expected: int) -> None:
    log = _Log({} if found is None else {now_ms() + 60_000: found})
    own = {"g": {"share.auto.offset.reset": "by_duration:PT1H"}}
    cfg, start_from = _shares(own)._group_settings("g", _part(log))
    # "earliest" from that offset: clamped into [log start, high watermark]; no record that late: the HW.
    assert (cfg.auto_offset_reset, start_from) == ("earliest", expected)
    assert abs(log.asked[0] - (now_ms() - 3_600_000)) < 5_000


def test_lag_counts_what_is_not_yet_acknowledged_or_archived_up_to_the_high_watermark() -> None:
    from epochlog.groups.share.model import ACKNOWLEDGED, ARCHIVED, AVAILABLE
    from epochlog.groups.share.records import PartitionState, StateBatch
    from epochlog.server.handlers.share_offsets import _lag

    part = SimpleNamespace(high_watermark=20, is_leader=True, topic_id="00000000-0000-0000-0000-000000000001")
    local = [True]
    shares = SimpleNamespace(state=SimpleNamespace(is_local=lambda _key: local[0]))
    broker: Any = SimpleNamespace(partition=lambda _t, _p: part, shares=shares)
    batches = (StateBatch(10, 11, ACKNOWLEDGED, 1), StateBatch(12, 12, AVAILABLE, 1), StateBatch(15, 24, ARCHIVED, 5))
    # 10 records from 10 to the HW; 2 acknowledged and 5 archived below the HW: 3 left.
    assert _lag(broker, "g", "t", 0, PartitionState(1, 0, 10, batches)) == 3
    assert _lag(broker, "g", "t", 0, PartitionState(1, 0, 20, ())) == 0
    assert _lag(broker, "g", "t", 0, PartitionState()) == -1  # never consumed
    local[0] = False  # another broker keeps the state: its summary has no batches to count
    assert _lag(broker, "g", "t", 0, PartitionState(1, 0, 10, batches)) == -1
    local[0] = True
    part.is_leader = False
    assert _lag(broker, "g", "t", 0, PartitionState(1, 0, 10, batches)) == -1  # not led here: unknown


def test_the_groups_isolation_level_bounds_the_read_and_names_the_aborted_batches() -> None:
    from epochlog.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader
    from epochlog.server.share.reads import isolation_level, read_bound, split_read
    from epochlog.storage.transaction_index import AbortedTxn

    asked: list[tuple[int, int]] = []

    def aborted_transactions(start: int, bound: int) -> list[AbortedTxn]:
        asked.append((start, bound))
        return [AbortedTxn(7, 12, 14, 12)]

    log = SimpleNamespace(aborted_transactions=aborted_transactions)
    part: Any = SimpleNamespace(high_watermark=50, replica=SimpleNamespace(last_stable_offset=lambda: 30), log=log)
    shares = _shares({"rc": {"share.isolation.level": "read_committed"}})
    assert (isolation_level(shares.broker, "rc"), isolation_level(shares.broker, "other")) == (
        "read_committed", "read_uncommitted")  # fmt: skip
    assert (read_bound(part, "read_committed"), read_bound(part, "read_uncommitted")) == (30, 50)

    def header(base: int, last: int, pid: int, attributes: int) -> BatchHeader:
        return BatchHeader(base, 0, 0, 0, 0, attributes, last - base, 0, 0, pid, 0, 0, 1)

    txn, marker = TRANSACTIONAL_MASK, TRANSACTIONAL_MASK | CONTROL_MASK
    headers = [header(10, 11, -1, 0), header(12, 13, 7, txn), header(14, 14, 7, marker)]
    assert split_read(part, "read_committed", 10, 30, headers) == ([(10, 11)], [(12, 13)])
    assert asked == [(10, 30)]
    assert split_read(part, "read_uncommitted", 10, 50, headers) == ([(10, 11), (12, 13)], [])
    assert asked == [(10, 30)]  # read_uncommitted never asks the transaction index
