"""KIP-853 with real processes: a dynamic controller quorum grows from one controller to three under an acks=all
producer, a controller host is replaced (the new one added, the old one removed), and the active controller is
removed; the operator's steps are `epochlog storage format` and `epochlog metadata-quorum`, as with Kafka's
tools, and nothing acknowledged is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.client.quorum import describe_quorum_request, leader_of
from epochlog.client.wire import Connection
from tests.integration.cluster_helpers import AckingProducer, create_topic, wait_until
from tests.integration.quorum_procs import CLUSTER, Proc, directory_id, epochlog, kraft_version, voters, voters_are
from tests.integration.test_cluster import consume_all

pytestmark = pytest.mark.integration
QUORUM = {"controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000"}


def update_voter(ctrls: dict[int, Proc], c: Proc) -> int:
    """UpdateRaftVoter for ``c`` with the endpoint it listens on, sent to the active controller; the error code."""
    from epochlog.cli.quorum_voters_cmd import controller_of
    from epochlog.server.quorum.voter_wire import update_request

    ports = {i: x.port for i, x in ctrls.items() if x.proc is not None and x.proc.poll() is None}
    with Connection("127.0.0.1", ports[leader_of(list(ports.values()))], client_id="test-dynamic-quorum") as conn:
        epoch = int(conn.request(describe_quorum_request()).topics[0].partitions[0].leader_epoch)
        return int(conn.request(update_request(CLUSTER, epoch, controller_of(c.config))).error_code)


def test_grow_replace_and_remove_the_active_controller(tmp_path: Path) -> None:
    ctrls = {i: Proc(tmp_path, f"controller-{i}", "controller", i, dict(QUORUM)) for i in (1, 2, 3, 4)}
    bootstrap = ",".join(c.address for c in ctrls.values())
    for c in ctrls.values():
        c.config.write_text(c.config.read_text() + f"controller.quorum.bootstrap.servers={bootstrap}\n")
    broker = Proc(
        tmp_path,
        "broker-10",
        "broker",
        10,
        {"controller.quorum.bootstrap.servers": bootstrap, "group.initial.rebalance.delay.ms": "0"},
    )
    procs = [*ctrls.values(), broker]
    c1 = ctrls[1]
    epochlog("storage", "format", "-d", str(c1.dir), "-t", CLUSTER, "--standalone", "--node-id", "1",
             "--controller", c1.address)  # fmt: skip
    for i in (2, 3, 4):
        epochlog("storage", "format", "-d", str(ctrls[i].dir), "-t", CLUSTER, "--no-initial-controllers",
                 "--node-id", str(i))  # fmt: skip
    prod: AckingProducer | None = None
    try:
        for c in procs:
            c.start()
        assert voters(ctrls) == {1: directory_id(c1)}
        assert kraft_version(c1.port) == (1, 1), "a quorum formatted --standalone is at kraft.version 1"
        create_topic(broker.address, "orders", 1, 1, {})
        prod = AckingProducer(broker.address, "orders").start()
        wait_until(lambda: len(prod.acked) > 300, 30, "acknowledged writes before the quorum grows")

        # One controller to three, under load; the option before the subcommand, as Kafka's tool takes it.
        for i in (2, 3):
            out = epochlog("metadata-quorum", "--bootstrap-controller", c1.address, "add-controller",
                           "--command-config", str(ctrls[i].config))  # fmt: skip
            assert f"Added controller {i} with directory id {directory_id(ctrls[i])}" in out
        wait_until(lambda: voters_are(ctrls, {1, 2, 3}), 30, "three voters")
        status = epochlog("metadata-quorum", "describe", "--bootstrap-controller", c1.address, "--status")
        assert all(f'"directoryId": "{directory_id(ctrls[i])}"' in status for i in (1, 2, 3)), status
        replication = epochlog("metadata-quorum", "describe", "--bootstrap-controller", c1.address, "--replication")
        assert replication.splitlines()[0].split()[:2] == ["NodeId", "DirectoryId"]
        assert update_voter(ctrls, ctrls[2]) == 0  # UpdateRaftVoter (82): its endpoints, re-recorded
        at = len(prod.acked)
        wait_until(lambda: len(prod.acked) > at + 200, 30, "writes acknowledged with three voters")

        # Replace the host of a follower: add controller 4, then remove the old one.
        leader = leader_of([c.port for c in ctrls.values()])
        old = next(i for i in (2, 3) if i != leader)
        epochlog("metadata-quorum", "--bootstrap-controller", bootstrap, "add-controller",
                 "--command-config", str(ctrls[4].config))  # fmt: skip
        epochlog("metadata-quorum", "--bootstrap-controller", bootstrap, "remove-controller",
                 "--controller-id", str(old), "--controller-directory-id", directory_id(ctrls[old]))  # fmt: skip
        remaining = {1, 2, 3, 4} - {old}
        wait_until(lambda: voters_are(ctrls, remaining), 30, f"voters {sorted(remaining)}")
        ctrls[old].stop()

        # Remove the active controller itself: it resigns once the removal commits, the others elect a leader.
        active = leader_of([ctrls[i].port for i in remaining])
        assert active in remaining
        out = epochlog("metadata-quorum", "--bootstrap-controller", bootstrap, "remove-controller",
                       "--controller-id", str(active), "--controller-directory-id",
                       directory_id(ctrls[active]))  # fmt: skip
        assert f"Removed KRaft controller {active}" in out
        last = remaining - {active}
        new_active = wait_until(
            lambda: (x := leader_of([ctrls[i].port for i in last])) in last and x, 30, "a new active controller"
        )
        assert new_active != active
        wait_until(lambda: voters_are(ctrls, last), 30, f"voters {sorted(last)}")
        at = len(prod.acked)
        wait_until(lambda: len(prod.acked) > at + 200, 60, "writes acknowledged after the active controller left")
        prod.stop()
        assert not prod.errors, prod.errors[:5]
        seen = consume_all(broker.address, "orders", len(prod.acked))
        missing = {v: o for v, o in prod.acked.items() if seen.get(v) != o}
        assert not missing, f"{len(missing)} acknowledged records not found where acknowledged"
    finally:
        if prod is not None:
            prod._stop.set()  # a failed test leaves the thread; the processes go below
        for c in reversed(procs):
            c.stop()
