"""QuorumController: the rules that put the controller core on the quorum."""

from __future__ import annotations

import pytest

from epochlog.controller.controller import Controller
from epochlog.controller.quorum_controller import NotActive, QuorumController
from epochlog.controller.records import BrokerRegistration, MetadataRecord

pytestmark = pytest.mark.unit


def _log() -> list[MetadataRecord]:
    c = Controller()
    for b in (1, 2, 3):
        c.register_broker(b, 0)
    c.create_topic("t", 1, 3)
    return list(c.records)


def _reader(log: list[MetadataRecord]):  # type: ignore[no-untyped-def]
    return lambda start, end: log[start:end]


def test_standby_applies_committed_records_in_order() -> None:
    log = _log()
    qc = QuorumController()
    assert qc.on_commit(2, _reader(log)) == 2
    assert sorted(qc.core.brokers) == [1, 2]
    assert qc.on_commit(2, _reader(log)) == 0  # nothing new
    qc.on_commit(len(log), _reader(log))
    assert "t" in qc.core.topics and qc.applied == len(log)


def test_activation_waits_for_the_leader_change_and_everything_before_it() -> None:
    log = _log()
    qc = QuorumController()
    qc.on_commit(3, _reader(log))
    qc.became_leader(len(log))  # its LeaderChange sits at len(log)
    assert not qc.maybe_activate(leader_ready=False, now_ms=0)
    assert not qc.maybe_activate(leader_ready=True, now_ms=0)  # applied 3 < own_from
    qc.on_commit(len(log) + 1, _reader([*log, BrokerRegistration(9, 1)]))
    assert qc.maybe_activate(leader_ready=True, now_ms=0)
    assert not qc.maybe_activate(leader_ready=True, now_ms=0)  # once


def test_own_records_are_not_applied_twice_at_commit() -> None:
    log = _log()
    qc = QuorumController()
    qc.on_commit(len(log), _reader(log))
    qc.became_leader(len(log))
    qc.on_commit(len(log) + 1, _reader([*log, BrokerRegistration(9, 1)]))
    qc.maybe_activate(True, 0)
    epoch_before = qc.core.brokers[1].epoch
    qc.core.register_broker(1, 0)
    new = qc.take_proposals()
    assert len(new) >= 1
    qc.proposed(len(log) + 1 + len(new) - 1)
    full = [*log, BrokerRegistration(9, 1), *new]
    qc.on_commit(len(full), _reader(full))
    assert qc.core.brokers[1].epoch == epoch_before + 1  # not + 2
    assert qc.all_committed()


def test_a_standby_may_not_propose_and_a_deposed_leader_reverts() -> None:
    log = _log()
    qc = QuorumController()
    qc.on_commit(len(log), _reader(log))
    qc.core.register_broker(7, 0)
    with pytest.raises(NotActive):
        qc.take_proposals()
    assert qc.lost_leadership()  # it holds a decision that never committed: rebuild
    qc.rebuild(log, len(log), 0)
    assert 7 not in qc.core.brokers and not qc.active
    assert not qc.lost_leadership()  # nothing uncommitted now
