"""Three controllers and three brokers, real processes on 127.0.0.1, under an idempotent acks=all producer:
the controller quorum loses its leader (kill -9, SIGSTOP, a network cut), is restarted whole, loses a disk,
and nothing acknowledged is lost, moved or duplicated."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

from epochlog.client.quorum import describe_quorum_request, leader_of
from epochlog.client.wire import Connection
from epochlog.controller.quorum_controller import ACTIVATION_GRACE_MS
from epochlog.server.cluster.local import LocalCluster, free_base_port
from tests.integration.cluster_helpers import (
    QUORUM,
    AckingProducer,
    create_topic,
    leader_epoch,
    wait_until,
)
from tests.integration.tcp_proxy import TcpProxy
from tests.integration.test_cluster import consume_all


def _leader_id(lc: LocalCluster) -> int:
    return leader_of([n.port for n in lc.controller_nodes() if n.alive])


def _caught_up(leader_port: int, voter: int) -> bool:
    """The leader's DescribeQuorum shows ``voter`` holding everything committed (its log end at the HW)."""
    with Connection("127.0.0.1", leader_port, client_id="test-quorum", timeout=2) as conn:
        row = conn.request(describe_quorum_request()).topics[0].partitions[0]
    ends = {int(v.replica_id): int(v.log_end_offset) for v in row.current_voters}
    return int(row.high_watermark) > 0 and ends.get(voter, -1) >= int(row.high_watermark)


def _check_acked(bs: str, topic: str, prod: AckingProducer) -> None:
    seen = consume_all(bs, topic, len(prod.acked))
    missing = {v: o for v, o in prod.acked.items() if seen.get(v) != o}
    assert not missing, f"{len(missing)} acknowledged records not found where acknowledged"


def test_kill9_of_the_active_controller_and_a_partition_leader_at_once(quorum_cluster: LocalCluster) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    topic = "orders"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    leader0, epoch0 = wait_until(lambda: leader_epoch(bs, topic), 15, "a partition leader")
    active = lc.active_controller()
    prod = AckingProducer(bs, topic).start()
    wait_until(lambda: len(prod.acked) > 2000, 30, "acknowledged writes before the kills")
    lc.kill9(active.name)
    lc.kill9(f"broker-{leader0}")
    t0 = time.monotonic()
    at_kill = len(prod.acked)
    # The new active controller has no heartbeat history; the dead leader refuses its connection and is
    # fenced at once, not when the activation grace ends (ACTIVATION_GRACE_MS after it became active).
    new_active = wait_until(
        lambda: _leader_id(lc) not in (-1, active.node_id) and _leader_id(lc),
        20,
        "a new active controller",
        interval=0.02,
    )
    active_at = time.monotonic()
    wait_until(lambda: leader_epoch(bs, topic)[0] not in (-1, leader0), 30, "a new partition leader", interval=0.02)
    moved_after = time.monotonic() - active_at
    assert moved_after < ACTIVATION_GRACE_MS / 1000 - 1, f"the partition moved {moved_after:.1f}s after activation"
    wait_until(lambda: len(prod.acked) > at_kill + 100, 30, "writes acknowledged after the kills", interval=0.01)
    resumed = time.monotonic() - t0
    before = len(prod.acked)
    wait_until(lambda: len(prod.acked) > before + 2000, 30, "writes acknowledged after the failover")
    print(
        f"failover to controller {new_active}: partition moved {moved_after:.2f}s after it became active, "
        f"writes resumed {resumed:.1f}s after the kills"
    )
    prod.stop()
    assert prod.errors == []
    leader1, epoch1 = leader_epoch(bs, topic)
    assert leader1 != leader0 and epoch1 > epoch0
    _check_acked(bs, topic, prod)
    # Both come back: the old controller follows the new one, the broker rejoins.
    lc.start_node(active.name)
    lc.start_node(f"broker-{leader0}")
    wait_until(lambda: _leader_id(lc) == new_active, 10, "the quorum to keep its leader")


def test_a_paused_active_controller_steps_down_and_commits_nothing(quorum_cluster: LocalCluster) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    topic = "paused"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: leader_epoch(bs, topic), 15, "a partition leader")
    active = lc.active_controller()
    prod = AckingProducer(bs, topic, rate_sleep=0.01).start()
    wait_until(lambda: len(prod.acked) > 500, 30, "acknowledged writes")
    lc.signal(active.name, signal.SIGSTOP)
    try:
        new = wait_until(lambda: _leader_id(lc) not in (-1, active.node_id) and _leader_id(lc), 20, "a new leader")
        # The cluster keeps working under the new active controller: a topic can be created.
        create_topic(bs, "after-pause", 1, 3, {})
        wait_until(lambda: leader_epoch(bs, "after-pause"), 15, "the new topic's leader")
    finally:
        lc.signal(active.name, signal.SIGCONT)
    # Woken past its fetch timeout, the old leader has resigned: it follows, and the leader stays.
    wait_until(lambda: leader_of([active.port]) == new, 15, "the woken controller to follow the new leader")
    assert _leader_id(lc) == new
    prod.stop()
    assert prod.errors == []
    _check_acked(bs, topic, prod)


def test_all_controllers_restarted_from_disk(quorum_cluster: LocalCluster) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    create_topic(bs, "kept", 4, 3, {})
    wait_until(lambda: leader_epoch(bs, "kept"), 15, "a leader")
    epoch_before = leader_epoch(bs, "kept", 0)[1]
    for n in lc.controller_nodes():
        lc.kill9(n.name)
    for n in lc.controller_nodes():
        lc.start_node(n.name)
    lc.active_controller(30)
    # The metadata survived: the topic is known, and new decisions build on it.
    create_topic(bs, "made-after", 1, 3, {})
    wait_until(lambda: leader_epoch(bs, "made-after"), 20, "the new topic's leader")
    assert leader_epoch(bs, "kept", 0)[1] >= epoch_before


def test_a_wiped_controller_rejoins_and_catches_up(quorum_cluster: LocalCluster) -> None:
    lc = quorum_cluster
    bs = lc.bootstrap
    create_topic(bs, "before-wipe", 2, 3, {})
    active = lc.active_controller()
    victim = next(n for n in lc.controller_nodes() if n.node_id != active.node_id)
    lc.kill9(victim.name)
    shutil.rmtree(lc.data_dir / victim.name)
    create_topic(bs, "while-down", 2, 3, {})
    lc.start_node(victim.name)
    # It follows the leader again, and once caught up could lead: kill the others' leader and see.
    wait_until(lambda: leader_of([victim.port]) == active.node_id, 20, "the wiped controller to follow")
    wait_until(lambda: _caught_up(active.port, victim.node_id), 20, "the wiped controller to catch up")
    lc.kill9(active.name)
    wait_until(lambda: _leader_id(lc) not in (-1, active.node_id), 20, "a new leader without the old one")
    create_topic(bs, "after-wipe", 1, 3, {})
    wait_until(lambda: leader_epoch(bs, "after-wipe"), 20, "the new topic's leader")
    for t in ("before-wipe", "while-down"):
        assert leader_epoch(bs, t)[0] >= 0


def test_a_damaged_quorum_state_stops_that_controller_only(quorum_cluster: LocalCluster) -> None:
    """A voter that cannot read what it promised must not vote again from nothing: it exits with a
    message naming the file, and the other two carry on."""
    lc = quorum_cluster
    active = lc.active_controller()
    victim = next(n for n in lc.controller_nodes() if n.node_id != active.node_id)
    lc.stop_node(victim.name)
    [state] = list((lc.data_dir / victim.name).rglob("quorum-state"))
    state.write_text('{"leaderEpoch": ')
    lc.spawn(victim)
    assert victim.proc is not None
    assert victim.proc.wait(30) == 1
    text = victim.log.read_text()
    assert "refusing to start a voter" in text and str(state) in text
    assert "Traceback" not in text
    create_topic(lc.bootstrap, "after-damage", 1, 3, {})
    wait_until(lambda: leader_epoch(lc.bootstrap, "after-damage"), 20, "a topic created by the other two")


def test_a_network_partition_isolates_the_active_controller(tmp_path: Path) -> None:
    """Every link between controllers goes through a proxy the test controls; brokers reach all of them
    directly. Cut the active controller off from the other two, both sides alive: the majority elects a
    new leader, the old one resigns and commits nothing, brokers follow the new one, writes go on."""
    base = free_base_port(3, controllers=3)
    lc = LocalCluster(tmp_path / "cluster", 3, base, controller_settings=dict(QUORUM), controllers=3)
    ctrls = lc.controller_nodes()
    proxies = {(a.node_id, b.node_id): TcpProxy(b.port) for a in ctrls for b in ctrls if a is not b}
    for a in ctrls:
        voters = ",".join(
            f"{b.node_id}@127.0.0.1:{b.port if a is b else proxies[(a.node_id, b.node_id)].port}" for b in ctrls
        )
        text = a.config.read_text().splitlines()
        a.config.write_text(
            "".join(
                (f"controller.quorum.voters={voters}" if line.startswith("controller.quorum.voters=") else line) + "\n"
                for line in text
            )
        )
    lc.start()
    try:
        bs = lc.bootstrap
        topic = "cut"
        create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: leader_epoch(bs, topic), 15, "a partition leader")
        old = lc.active_controller()
        prod = AckingProducer(bs, topic, rate_sleep=0.01).start()
        wait_until(lambda: len(prod.acked) > 500, 30, "acknowledged writes")
        links = [p for (a, b), p in proxies.items() if old.node_id in (a, b)]
        for p in links:
            p.partition()
        t0 = time.monotonic()
        others = [n.port for n in ctrls if n is not old]
        new = wait_until(lambda: leader_of(others) not in (-1, old.node_id) and leader_of(others), 20, "a new leader")
        elected = time.monotonic() - t0
        # The old one, still reachable by brokers, must give up leading within check-quorum's 1.5 fetch timeouts.
        wait_until(lambda: leader_of([old.port]) != old.node_id, 10, "the isolated controller to resign")
        resigned = time.monotonic() - t0
        create_topic(bs, "during-cut", 1, 3, {})
        wait_until(lambda: leader_epoch(bs, "during-cut"), 20, "a topic made by the new active controller")
        for p in links:
            p.heal()
        wait_until(lambda: leader_of([old.port]) == new, 20, "the old controller to follow the new one")
        print(f"partition: new leader after {elected:.1f}s, the isolated one resigned after {resigned:.1f}s")
        prod.stop()
        assert prod.errors == []
        _check_acked(bs, topic, prod)
    finally:
        lc.stop()
        for p in proxies.values():
            p.close()
