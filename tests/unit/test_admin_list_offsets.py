"""epochlog.client.admin.list_offsets against a fake AdminClient: what a leader kill looks like to it."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from epochlog.client import admin as admin_mod
from epochlog.client.admin import LATEST, TopicGoneError, list_offsets
from epochlog.client.epochs import Position


@dataclass
class _Info:
    offset: int
    leader_epoch: int | None


class FakeAdmin:
    """Answers list_offsets from a script, one entry per call: an offset, or a KafkaError code to raise."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.calls = 0
        self.metadata_refreshes = 0

    def list_offsets(self, req: dict, **kw: Any) -> dict:
        self.calls += 1
        step = self.script.pop(0)
        out = {}
        for ctp in req:
            f: Future = Future()
            if isinstance(step, tuple):
                f.set_result(_Info(*step))
            else:
                f.set_exception(KafkaException(KafkaError(step)))
            out[ctp] = f
        return out

    def list_topics(self, topic: str | None = None, timeout: float = 10.0) -> None:
        self.metadata_refreshes += 1


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_mod.time, "sleep", lambda s: None)


def test_invalid_offset_right_after_a_leader_kill_is_retried() -> None:
    # Seen on a 3-broker cluster: 0.5 s after kill -9 of the leader, librdkafka answered -1001 with no error.
    fake = FakeAdmin([(-1001, None), (100, 1)])
    assert list_offsets(fake, {("t", 0): LATEST}) == {("t", 0): Position(100, 1)}
    assert fake.calls == 2 and fake.metadata_refreshes == 1


def test_fenced_leader_epoch_refreshes_metadata_before_retrying() -> None:
    fake = FakeAdmin([KafkaError.FENCED_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, (42, 2)])
    assert list_offsets(fake, {("t", 0): LATEST}) == {("t", 0): Position(42, 2)}
    assert fake.metadata_refreshes == 2


def test_no_valid_answer_within_the_retries_raises() -> None:
    fake = FakeAdmin([(-1001, None)] * 4)
    with pytest.raises(TopicGoneError, match="no valid offset"):
        list_offsets(fake, {("t", 0): LATEST}, retries=3)
    assert fake.calls == 4


def test_timestamp_without_a_match_is_an_answer() -> None:
    fake = FakeAdmin([(-1, None)])
    assert list_offsets(fake, {("t", 0): 1_700_000_000_000}, timestamps=True) == {("t", 0): Position(-1, -1)}
    assert fake.calls == 1


def test_unknown_partition_is_not_retried() -> None:
    fake = FakeAdmin([KafkaError.UNKNOWN_TOPIC_OR_PART])
    with pytest.raises(TopicGoneError):
        list_offsets(fake, {("t", 0): LATEST})
    assert fake.calls == 1
