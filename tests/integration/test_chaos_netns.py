"""The network-namespace partition backend of `epochlog chaos`, with real epochlog processes in real namespaces.

A cut must stop a node reaching the other nodes (and them reaching it) while a client still reaches it, and a
heal must give both back; what the run made must be gone at its end, after an interrupt, and after a crash
(by the next run). Needs root and working namespaces with iptables: skipped, saying why, otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlog.chaos.cluster import ChaosCluster
from epochlog.chaos.netns import FAMILY, NetnsNetwork, clean_stale, usable
from epochlog.client.epochs import LeaderEpochClient

pytestmark = pytest.mark.integration

_OK, _WHY = usable()
needs_netns = pytest.mark.skipif(not _OK, reason=f"network namespaces with iptables unavailable here: {_WHY}")


def _names() -> tuple[set[str], set[str]]:
    ns = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    links = {line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}
    return ns, links


def _left(prefix: str) -> list[str]:
    ns, links = _names()
    return sorted(n for n in ns | links if n.startswith(prefix))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosCluster]:
    if not _OK:
        pytest.skip(f"network namespaces with iptables unavailable here: {_WHY}")
    c = ChaosCluster(tmp_path_factory.mktemp("netns") / "data", 1, 3, partition_backend="netns")
    try:
        c.build()
        c.start(60)
        yield c
    finally:
        c.stop()
    assert c.network is not None and _left(c.network.prefix) == []


def _reaches(c: ChaosCluster, frm: str, to: str) -> bool:
    """Whether a TCP connection from inside ``frm``'s namespace to ``to``'s listener opens within 1 s."""
    assert c.network is not None
    target = c.node(to)
    code = f"import socket; socket.create_connection(({target.host!r}, {target.port}), 1).close()"
    cmd = ["ip", "netns", "exec", c.network.namespace(frm), sys.executable, "-c", code]
    return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0


def _client_reaches(c: ChaosCluster, broker: str) -> bool:
    """A Kafka client in the chaos process's own namespace gets a Metadata answer from this broker."""
    node = c.node(broker)
    try:
        with LeaderEpochClient(f"{node.host}:{node.port}", timeout=3.0, retries=1, backoff=0.1) as cl:
            cl.metadata([])
    except Exception:
        return False
    return True


@needs_netns
@pytest.mark.timeout(120)
def test_each_node_is_its_own_pid_in_its_own_namespace(cluster: ChaosCluster) -> None:
    """kill and pause signal the recorded pid: it must be the node's process, not `ip netns exec` around it."""
    assert cluster.network is not None
    seen = set()
    for n in cluster.lc.nodes.values():
        assert n.proc is not None and n.alive
        ns_inode = os.stat(f"/run/netns/{cluster.network.namespace(n.name)}").st_ino
        assert os.stat(f"/proc/{n.proc.pid}/ns/net").st_ino == ns_inode
        assert b"epochlog.cli.main" in Path(f"/proc/{n.proc.pid}/cmdline").read_bytes()
        seen.add(ns_inode)
    assert len(seen) == len(cluster.lc.nodes)  # one namespace each
    assert os.stat("/proc/self/ns/net").st_ino not in seen  # the clients' is none of them


@needs_netns
@pytest.mark.timeout(120)
def test_partition_cuts_nodes_apart_but_not_from_clients(cluster: ChaosCluster) -> None:
    b1, b2, ctrl = "broker-1", "broker-2", "controller"
    assert _reaches(cluster, b1, b2) and _reaches(cluster, b2, b1) and _reaches(cluster, b1, ctrl)
    cluster.isolate(cluster.node(b1).node_id)
    try:
        assert not _reaches(cluster, b1, b2)
        assert not _reaches(cluster, b2, b1)
        assert not _reaches(cluster, b1, ctrl)
        assert _reaches(cluster, b2, ctrl) and _reaches(cluster, b2, "broker-3")  # only the cut node's links
        assert _client_reaches(cluster, b1)
    finally:
        cluster.heal_links()
    assert _reaches(cluster, b1, b2) and _reaches(cluster, b2, b1) and _reaches(cluster, b1, ctrl)
    assert _client_reaches(cluster, b1)
    assert cluster.network is not None and "DROP" not in cluster.network.rules(b1)


@needs_netns
@pytest.mark.timeout(120)
def test_one_cut_link_leaves_the_others(cluster: ChaosCluster) -> None:
    """The kip101 nemesis cuts single links: only that pair loses each other."""
    cluster.links.cut(cluster.node("broker-1").node_id, cluster.node("broker-2").node_id)
    try:
        assert not _reaches(cluster, "broker-1", "broker-2")
        assert _reaches(cluster, "broker-1", "broker-3") and _reaches(cluster, "broker-1", "controller")
    finally:
        cluster.heal_links()
    assert _reaches(cluster, "broker-1", "broker-2")


@needs_netns
@pytest.mark.timeout(120)
def test_broken_on_purpose_the_probe_sees_a_partition_that_leaks(cluster: ChaosCluster) -> None:
    """Remove the DROP rules behind the backend's back during a cut: the probe must see the nodes reach each
    other again. So the probe's 'cannot reach' above is the rules' doing, and a backend that failed to install
    them would fail the isolation test."""
    assert cluster.network is not None
    cluster.isolate(cluster.node("broker-1").node_id)
    try:
        assert not _reaches(cluster, "broker-1", "broker-2")
        for n in ("broker-1", "broker-2"):
            flush = ["ip", "netns", "exec", cluster.network.namespace(n), "iptables", "-w", "5", "-F"]
            subprocess.run(flush, check=True)
        assert _reaches(cluster, "broker-1", "broker-2")
    finally:
        cluster.heal_links()


_CRASHING_RUN = """
import sys, time
from pathlib import Path
from epochlog.chaos.netns import NetnsNetwork
net = NetnsNetwork.create(["a", "b"], Path(sys.argv[1]))
print(net.prefix, flush=True)
time.sleep(60)
"""


@needs_netns
@pytest.mark.timeout(120)
def test_a_crashed_runs_network_is_removed_by_the_next_and_nothing_else(tmp_path: Path) -> None:
    state = tmp_path / "state"
    foreign = f"{FAMILY}zz-not-ours"  # the family's prefix, but in no state file: never touched
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    crashed = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_RUN, str(state)], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    try:
        assert crashed.stdout is not None
        prefix = crashed.stdout.readline().strip()
        assert prefix.startswith(FAMILY) and len(_left(prefix)) == 5, prefix  # bridge, 2 namespaces, 2 veths
        assert clean_stale(state) == [] and len(_left(prefix)) == 5  # its run is alive: left alone
        crashed.send_signal(signal.SIGKILL)
        crashed.wait(10)
        assert len(_left(prefix)) == 5  # a crash leaves it all behind
        net = NetnsNetwork.create(["x"], state)
        try:
            assert _left(prefix) == []
            assert len(net.cleaned_stale) == 5 and all(n.startswith(prefix) for n in net.cleaned_stale)
            assert foreign in _names()[0]
        finally:
            net.teardown()
        assert _left(net.prefix) == [] and list(state.iterdir()) == []
    finally:
        if crashed.poll() is None:
            crashed.kill()
            crashed.wait(10)
        subprocess.run(["ip", "netns", "del", foreign], check=False)
        clean_stale(state)


@pytest.mark.long
@needs_netns
@pytest.mark.timeout(180)
def test_interrupted_run_removes_its_network(tmp_path: Path) -> None:
    """Ctrl-C while the nodes run in their namespaces: exit 130 and no namespace, veth or bridge of it left."""
    cmd = [sys.executable, "-m", "epochlog.cli.main", "chaos", "--partition-backend", "netns", "--duration", "60"]
    proc = subprocess.Popen(
        [*cmd, "--nemesis", "partition", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    prefix, lines = "", []
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "network namespaces elc" in line:
                prefix = line.split("network namespaces ", 1)[1].split("-*", 1)[0]
            if prefix and line.startswith("workloads"):
                break
            assert line, "".join(lines)
        assert prefix and _left(prefix), "".join(lines)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, "".join(lines) + out
    assert _left(prefix) == []


@pytest.mark.long
@needs_netns
@pytest.mark.timeout(400)
def test_short_chaos_run_with_namespace_partitions(tmp_path: Path) -> None:
    out_json = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "epochlog.cli.main", "chaos", "--partition-backend", "netns", "--duration", "45"]
    cmd += ["--nemesis", "partition,controller,leader", "--seed", "5", "--json", str(out_json)]
    proc = subprocess.run([*cmd, "--data-dir", str(tmp_path / "data")], capture_output=True, text=True, timeout=380)
    out = proc.stdout + proc.stderr
    r = json.loads(out_json.read_text())
    assert r["partition_backend"]["used"] == "netns", r["partition_backend"]
    assert r["anomalies"] == 0, json.dumps(r["examples"][:10], indent=1) + out[-3000:]
    assert proc.returncode == 0 and not r["problems"], out[-3000:]
    assert r["final_read_complete"] and r["acked"] > 1000
    parts = [f for f in r["faults"] if f["kind"] == "partition"]
    assert len(parts) >= 3 and all(f["healed_s"] is not None for f in parts), r["faults"]
    assert {f["why"] for f in parts} & {"active controller"} or any("leader" in f["why"] for f in parts)
    assert "partition by network namespaces" not in {s["what"] for s in r["skipped"]}
    assert "network namespaces elc" in out
    prefix = out.split("network namespaces ", 1)[1].split("-*", 1)[0]
    assert _left(prefix) == []
