"""A local cluster of real processes on 127.0.0.1: a controller quorum and N brokers, each its own process.

Used by `epochlog cluster up`, the demo, the benchmarks and the fault tests. Brokers 1..N listen on
base_port .. base_port+N-1; controllers on base_port+100 onwards. One controller is node 0 and named
"controller"; a quorum of C is nodes 101..100+C, named "controller-1".."controller-C", with
controller.quorum.voters naming them all. Every process is started here and stopped here by its own
pid; nothing else is touched.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CONTROLLER_PORT_OFFSET = 100


def wait_for_port(
    port: int, timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None, host: str = "127.0.0.1"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listen_port_range() -> tuple[int, int]:
    """Ports below the kernel's ephemeral range: a port the kernel may hand to an outgoing connection
    (say a broker dialling the controller) between our check and a node's bind would make it fail."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return (10000, max(low - CONTROLLER_PORT_OFFSET - 20, 10001))


def free_base_port(brokers: int = 3, attempts: int = 200, controllers: int = 1) -> int:
    """A base port p such that p..p+brokers-1 and the controllers' p+100.. are free on 127.0.0.1 right now."""
    import random

    lo, hi = _listen_port_range()
    for _ in range(attempts):
        base = random.randrange(lo, hi)
        cports = range(base + CONTROLLER_PORT_OFFSET, base + CONTROLLER_PORT_OFFSET + controllers)
        if all(port_is_free(p) for p in [*range(base, base + brokers), *cports]):
            return base
    raise RuntimeError("no free range of ports found on 127.0.0.1")


def fresh_data_dir(wanted: str | Path | None, prefix: str) -> Path:
    """A run's data directory: ``wanted`` when it is new or empty (created), else a new temporary one. A
    directory that already holds something is refused (ValueError): a run must not mix its data with another's."""
    if wanted is None:
        return Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    data_dir = Path(wanted).resolve()
    if data_dir.exists() and any(data_dir.iterdir()):
        raise ValueError(f"--data-dir {data_dir} is not empty; give a new or empty directory")
    data_dir.mkdir(parents=True, exist_ok=True)
    return data_dir


def write_properties(path: Path, props: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def rack_of(broker: int, racks: int) -> str:
    """The rack ``epochlog cluster up --racks N`` gives broker ``broker`` (1-based): rack-1..rack-N in turn."""
    return f"rack-{(broker - 1) % racks + 1}"


@dataclass
class Node:
    name: str
    node_id: int
    port: int
    config: Path
    log: Path
    role: str
    proc: subprocess.Popen[bytes] | None = None
    # Where clients dial it, and what its command line is run under: the chaos command's network-namespace
    # backend puts each node in a namespace of its own (``ip netns exec <ns>``) on an address of its own.
    host: str = "127.0.0.1"
    exec_prefix: tuple[str, ...] = ()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class LocalCluster:
    data_dir: Path
    brokers: int = 3
    base_port: int = 9092
    broker_settings: dict[str, str] = field(default_factory=dict)
    controller_settings: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    controllers: int = 1
    # Called with each node just spawned (e.g. to check that the recorded pid is the node's own).
    after_spawn: Callable[[Node], None] | None = None
    # Racks (broker.rack): brokers dealt round-robin to rack-1..rack-N (broker 1 on rack-1, ...); 0: none.
    racks: int = 0
    # Multi-core mode (`--cores N`): N broker processes per host, every one a full broker; a host's brokers
    # share a rack named for the host, so rack-aware placement never puts two copies of a partition on one
    # host. Brokers 1..N are the first host's, N+1..2N the second's. 0: one broker per host, as before.
    cores: int = 0
    # The hosts' names (their brokers' broker.rack) in multi-core mode; host-1, host-2, ... when not given.
    host_names: tuple[str, ...] = ()

    def rack(self, broker: int) -> str | None:
        """Broker ``broker``'s broker.rack (1-based id), or None when the cluster has no racks."""
        if self.cores > 0:
            host = (broker - 1) // self.cores
            return self.host_names[host] if host < len(self.host_names) else f"host-{host + 1}"
        return rack_of(broker, self.racks) if self.racks > 0 else None

    @property
    def hosts(self) -> int:
        """How many machines the brokers stand for: copies of a partition beyond this would share one."""
        return -(-self.brokers // self.cores) if self.cores > 0 else self.brokers

    def __post_init__(self) -> None:
        if self.cores > 0 and self.racks > 0:
            raise ValueError("racks and cores are exclusive: in multi-core mode a host is its brokers' rack")
        self.data_dir = Path(self.data_dir).resolve()
        id_file = self.data_dir / "cluster.id"
        if id_file.exists():
            cluster_id = id_file.read_text().strip()
        else:
            from epochlog.storage.log_manager import new_cluster_id

            self.data_dir.mkdir(parents=True, exist_ok=True)
            cluster_id = new_cluster_id()
            id_file.write_text(cluster_id + "\n")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)
        cbase = self.base_port + CONTROLLER_PORT_OFFSET
        if self.controllers == 1:
            ctrls = [("controller", 0, cbase, "controller")]
        else:
            ctrls = [
                (f"controller-{i}", 100 + i, cbase + i - 1, f"controller-{i}") for i in range(1, self.controllers + 1)
            ]
        voters = ",".join(f"{nid}@127.0.0.1:{port}" for _, nid, port, _ in ctrls)
        for name, nid, port, dirname in ctrls:
            logfile = self.data_dir / "logs" / f"{name}.log"
            ctrl = Node(name, nid, port, self.data_dir / f"{name}.properties", logfile, "controller")
            write_properties(
                ctrl.config,
                {
                    "process.roles": "controller",
                    "node.id": str(nid),
                    "cluster.id": cluster_id,
                    "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                    "log.dirs": str(self.data_dir / dirname),
                    "controller.quorum.voters": voters,
                    **self.controller_settings,
                },
            )
            self.nodes[name] = ctrl
        for i in range(1, self.brokers + 1):
            port = self.base_port + i - 1
            node = Node(
                f"broker-{i}",
                i,
                port,
                self.data_dir / f"broker-{i}.properties",
                self.data_dir / "logs" / f"broker-{i}.log",
                "broker",
            )
            write_properties(
                node.config,
                {
                    "process.roles": "broker",
                    "node.id": str(i),
                    "cluster.id": cluster_id,
                    "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                    "log.dirs": str(self.data_dir / f"broker-{i}"),
                    "controller.quorum.voters": voters,
                    "default.replication.factor": str(min(3, self.hosts)),
                    "offsets.topic.num.partitions": "5",
                    "offsets.topic.replication.factor": str(min(3, self.hosts)),
                    "transaction.state.log.num.partitions": "5",
                    "transaction.state.log.replication.factor": str(min(3, self.hosts)),
                    "transaction.state.log.min.isr": str(min(2, self.hosts)),
                    "share.coordinator.state.topic.num.partitions": "5",
                    "share.coordinator.state.topic.replication.factor": str(min(3, self.hosts)),
                    "share.coordinator.state.topic.min.isr": str(min(2, self.hosts)),
                    **({"broker.rack": rack} if (rack := self.rack(i)) is not None else {}),
                    **self.broker_settings,
                },
            )
            self.nodes[node.name] = node

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.nodes.values() if n.role == "broker")

    @property
    def controller(self) -> Node:
        """The first controller (the only one, in a quorum of one)."""
        return self.controller_nodes()[0]

    def controller_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.role == "controller"]

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.controller_nodes())

    def active_controller(self, timeout: float = 30.0) -> Node:
        """The controller the quorum elected, as DescribeQuorum tells it."""
        deadline = time.monotonic() + timeout
        while True:
            leader = self.quorum_leader()
            for n in self.controller_nodes():
                if n.node_id == leader and n.alive:
                    return n
            if time.monotonic() > deadline:
                raise TimeoutError(f"no active controller after {timeout}s")
            time.sleep(0.05)

    def quorum_leader(self) -> int:
        """The quorum leader's id as the first live controller that knows it says (-1: none knows)."""
        from epochlog.client.quorum import leader_of

        for n in self.controller_nodes():
            if n.alive:
                leader = leader_of([n.port], n.host)
                if leader >= 0:
                    return leader
        return -1

    def broker(self, node_id: int) -> Node:
        return self.nodes[f"broker-{node_id}"]

    def broker_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.role == "broker"]

    # -- processes ----------------------------------------------------------------------
    def spawn(self, node: Node, log_level: str = "INFO") -> None:
        args = [
            *node.exec_prefix,
            sys.executable,
            "-m",
            "epochlog.cli.main",
            node.role,
            "--config",
            str(node.config),
            "--log-level",
            log_level,
        ]
        out = open(node.log, "ab")
        node.proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ}, start_new_session=True
        )
        out.close()
        if self.after_spawn is not None:
            self.after_spawn(node)

    def start(self, timeout: float = 60.0) -> LocalCluster:
        try:
            for ctrl in self.controller_nodes():
                self.spawn(ctrl)
            for ctrl in self.controller_nodes():
                wait_for_port(ctrl.port, timeout, ctrl.proc, ctrl.host)
            for node in self.nodes.values():
                if node.role == "broker":
                    self.spawn(node)
            for node in self.nodes.values():
                if node.role == "broker":
                    wait_for_port(node.port, timeout, node.proc, node.host)
        except BaseException:
            self.stop()  # a node that failed to start must not leave the others running
            raise
        return self

    def start_node(self, name: str, timeout: float = 60.0) -> None:
        node = self.nodes[name]
        if node.alive:
            return
        self.spawn(node)
        wait_for_port(node.port, timeout, node.proc, node.host)

    def start_nodes(self, names: list[str], timeout: float = 60.0) -> None:
        """Start every stopped one of them before waiting for any: they recover side by side, as machines
        restarted together do, instead of one after another."""
        started = [self.nodes[n] for n in names if not self.nodes[n].alive]
        for node in started:
            self.spawn(node)
        for node in started:
            wait_for_port(node.port, timeout, node.proc, node.host)

    def signal(self, name: str, sig: int) -> None:
        node = self.nodes[name]
        if node.alive:
            assert node.proc is not None
            node.proc.send_signal(sig)

    def kill9(self, name: str) -> None:
        node = self.nodes[name]
        if node.alive:
            assert node.proc is not None
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait(10)

    def stop_node(self, name: str, timeout: float = 30.0) -> int | None:
        node = self.nodes[name]
        if node.proc is None:
            return None
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            node.proc.send_signal(signal.SIGTERM)
            try:
                node.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if os.environ.get("EPOCHLOG_DEBUG_HANG"):
                    dump = subprocess.run(
                        ["py-spy", "dump", "--pid", str(node.proc.pid)], capture_output=True, text=True
                    )
                    (self.data_dir / "logs" / f"{name}.hang").write_text(dump.stdout + dump.stderr)
                node.proc.kill()
                node.proc.wait(10)
        return node.proc.returncode

    def stop(self, timeout: float = 30.0) -> None:
        """Brokers first (their controlled shutdown needs the controller), then the controller."""
        brokers = [n for n in self.nodes.values() if n.role == "broker" and n.alive]
        for n in brokers:
            assert n.proc is not None
            n.proc.send_signal(signal.SIGCONT)
            n.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for n in brokers:
            assert n.proc is not None
            try:
                n.proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                n.proc.kill()
                n.proc.wait(10)
        for ctrl in self.controller_nodes():
            self.stop_node(ctrl.name, timeout)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
