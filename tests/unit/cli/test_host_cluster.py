"""`epochlog up --cores N` and `cluster up --cores N`: which broker stands on which host (its rack), how many
copies the internal topics get, and the properties a host's brokers cannot share."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from epochlog.cli.host_cluster import host_cluster
from epochlog.config_error import ConfigError
from epochlog.properties import load_properties
from epochlog.server.cluster.local import LocalCluster


def _props(lc: LocalCluster, key: str) -> list[str | None]:
    return [load_properties(lc.broker(b).config).get(key) for b in lc.broker_ids()]


def test_a_hosts_brokers_share_its_rack_and_copies_are_bounded_by_hosts(tmp_path: Path) -> None:
    lc = LocalCluster(tmp_path / "c", 6, 20000, cores=2)
    assert _props(lc, "broker.rack") == ["host-1", "host-1", "host-2", "host-2", "host-3", "host-3"]
    assert lc.hosts == 3
    assert set(_props(lc, "offsets.topic.replication.factor")) == {"3"}
    two = LocalCluster(tmp_path / "d", 4, 20100, cores=2)
    # two hosts: a third copy would share a host with another, so the internal topics get two
    assert set(_props(two, "default.replication.factor")) == {"2"}
    assert set(_props(two, "transaction.state.log.min.isr")) == {"2"}


def test_racks_and_cores_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exclusive"):
        LocalCluster(tmp_path / "c", 4, 20000, cores=2, racks=2)


def test_up_with_cores_is_one_host_of_n_brokers_on_its_own_rack(tmp_path: Path) -> None:
    lc = host_cluster(3, None, tmp_path / "d", 21000, None, ["num.partitions=6"])
    assert lc.broker_ids() == [1, 2, 3] and [lc.broker(b).port for b in (1, 2, 3)] == [21000, 21001, 21002]
    assert set(_props(lc, "broker.rack")) == {socket.gethostname()}
    assert set(_props(lc, "num.partitions")) == {"6"}
    assert set(_props(lc, "offsets.topic.replication.factor")) == {"1"}
    assert len(set(_props(lc, "log.dirs"))) == 3, "each broker keeps its own log directory"
    assert [n.role for n in lc.nodes.values()].count("controller") == 1


@pytest.mark.parametrize(
    ("overrides", "host", "message"),
    [
        (["node.id=4"], None, "node.id"),
        (["listeners=PLAINTEXT://127.0.0.1:1"], None, "listeners"),
        (["controller.quorum.voters=1@x:1"], None, "controller.quorum.voters"),
        (["broker.rack=r"], None, "broker.rack"),
        (["no-equals"], None, "key=value"),
        ([], "10.0.0.1", "--host"),
    ],
)
def test_what_each_broker_needs_its_own_of_is_refused(
    tmp_path: Path, overrides: list[str], host: str | None, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        host_cluster(2, None, tmp_path / "d", 21000, host, overrides)


def test_a_single_process_nodes_data_is_not_taken_over(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "meta.properties").write_text("node.id=1\n")
    with pytest.raises(ConfigError, match="single-process"):
        host_cluster(2, None, tmp_path / "d", 21000, None, [])
