"""Partitions by real networks: each node in a network namespace of its own, cut from the others by iptables.

The run makes one bridge on a private /24 it picks (one that no address or route of this machine overlaps) and,
for every node, a namespace joined to the bridge by a veth pair. The chaos process, the clients, stays in the
machine's own namespace and reaches each node on the node's address through the bridge (the bridge holds the
subnet's first address); nodes reach each other directly, with no proxy between them. A cut between two nodes
is a DROP rule for the other's address on INPUT and OUTPUT inside each one's namespace, so packets between them
vanish as on a broken network while the bridge's address, the clients', is never matched. Healing flushes the
rules. Unlike the proxy backend, healing closes nothing: the TCP connections that lost packets resume by
retransmission (or are dropped by their ends' own timeouts), as after a real partition.

Everything has the run's prefix, ``elc`` and four random hex digits: namespaces ``<prefix>-<node>``, bridge
``<prefix>br``, veths ``<prefix>h<k>`` (the machine's side) and ``<prefix>n<k>`` (the node's). What the run made
is written, as it makes it, to a state file in STATE_DIR with the run's pid; the teardown deletes exactly that,
and a later run deletes what a crashed one left (its pid gone) from its file. Nothing whose name is not in a
state file is touched, whatever its name.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import random
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlog.chaos.proxy import Links
from epochlog.properties import load_properties
from epochlog.server.cluster.local import LocalCluster, Node, write_properties

log = logging.getLogger("epochlog.chaos.netns")

FAMILY = "elc"
STATE_DIR = Path("/run/epochlog-chaos")
TOOLS = ("ip", "iptables", "iptables-restore")


class NetnsUnavailable(Exception):
    """Network namespaces cannot be used here; the message says why."""


def _run(args: list[str], stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=15, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def usable() -> tuple[bool, str]:
    """Whether this process can make namespaces and iptables rules in them, and why (not)."""
    if os.geteuid() != 0:
        return False, "not root"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return False, f"{', '.join(missing)} not found (Debian packages iproute2, iptables)"
    probe = f"{FAMILY}probe{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return False, f"a network namespace cannot be made: {e}"
    try:
        _run(["ip", "netns", "exec", probe, "iptables", "-w", "5", "-A", "OUTPUT", "-d", "192.0.2.1", "-j", "DROP"])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return False, f"iptables rules cannot be set in a namespace: {e}"
    finally:
        _run(["ip", "netns", "del", probe], check=False)
    return True, "root, with ip and iptables, and namespaces with iptables rules can be made"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: a pid with another start time is another process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _existing() -> tuple[set[str], set[str]]:
    """(namespace names, link names) on this machine right now."""
    namespaces = {line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()}
    links = set()
    for line in _run(["ip", "-o", "link", "show"]).stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            links.add(parts[1].strip().split("@")[0])
    return namespaces, links


def _delete(made: list[list[str]], node_pids: Iterable[int] = ()) -> list[str]:
    """Deletes what a run made (["link"|"netns", name], in the order made), newest first; the errors."""
    namespaces, links = _existing()
    pids = set(node_pids)
    errors = []
    for kind, name in reversed(made):
        if kind == "link" and name in links:
            proc = _run(["ip", "link", "del", name], check=False)
        elif kind == "netns" and name in namespaces:
            # A node that outlived its run (the run was killed) would keep the namespace alive: only the pids
            # the run recorded as its nodes, and only when they are still inside that namespace.
            inside = {int(p) for p in _run(["ip", "netns", "pids", name], check=False).stdout.split()}
            for pid in inside & pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            proc = _run(["ip", "netns", "del", name], check=False)
        else:
            continue
        if proc.returncode != 0:
            errors.append(f"{kind} {name}: {proc.stderr.strip()}")
    return errors


def clean_stale(state_dir: Path = STATE_DIR) -> list[str]:
    """Deletes what runs whose process is gone left behind (from their state files); the names deleted."""
    cleaned: list[str] = []
    if not state_dir.is_dir():
        return cleaned
    for path in sorted(state_dir.glob(f"{FAMILY}*.json")):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            log.warning("unreadable network state file %s left alone: %r", path, e)
            continue
        if _start_time(int(state["pid"])) == state.get("pid_start"):
            continue  # that run is still going
        errors = _delete(state["made"], state.get("node_pids", {}).values())
        if errors:
            log.warning("stale network of %s not fully removed: %s", path.name, "; ".join(errors))
            continue
        cleaned += [name for _kind, name in state["made"]]
        path.unlink()
        log.info("removed the network a crashed run left: %s", ", ".join(n for _k, n in state["made"]))
    return cleaned


def _taken_networks(state_dir: Path) -> list[ipaddress.IPv4Network]:
    nets = []
    for args in (["ip", "-4", "-o", "addr", "show"], ["ip", "-4", "route", "show", "table", "all"]):
        for word in _run(args).stdout.split():
            with contextlib.suppress(ValueError):
                if "/" in word or word[:1].isdigit():
                    nets.append(ipaddress.ip_network(word, strict=False))
    for path in state_dir.glob(f"{FAMILY}*.json") if state_dir.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, KeyError):
            nets.append(ipaddress.ip_network(json.loads(path.read_text())["subnet"]))
    return [n for n in nets if isinstance(n, ipaddress.IPv4Network) and n.prefixlen > 0]


def pick_subnet(taken: list[ipaddress.IPv4Network], rng: random.Random) -> ipaddress.IPv4Network:
    """A /24 in 10.200.0.0-10.254.255.0 that overlaps none of ``taken``."""
    candidates = list(range(200 * 256, 255 * 256))
    rng.shuffle(candidates)  # two runs at once rarely try the same one first
    for c in candidates:
        net = ipaddress.IPv4Network(f"10.{c // 256}.{c % 256}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return net
    raise NetnsUnavailable("no free private /24 found in 10.200.0.0/16-10.254.0.0/16")


@dataclass
class NetnsNetwork:
    """The namespaces, veths and bridge of one run, and the DROP rules in force."""

    run_id: str
    subnet: ipaddress.IPv4Network
    node_names: list[str]
    state_dir: Path = STATE_DIR
    made: list[list[str]] = field(default_factory=list)
    node_pids: dict[str, int] = field(default_factory=dict)
    cleaned_stale: list[str] = field(default_factory=list)
    _rules: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def create(cls, node_names: list[str], state_dir: Path = STATE_DIR) -> NetnsNetwork:
        ok, why = usable()
        if not ok:
            raise NetnsUnavailable(why)
        cleaned = clean_stale(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        namespaces, links = _existing()
        while True:
            run_id = secrets.token_hex(2)
            prefix = f"{FAMILY}{run_id}"
            if not (state_dir / f"{prefix}.json").exists() and not any(
                n.startswith(prefix) for n in namespaces | links
            ):
                break
        net = cls(run_id, pick_subnet(_taken_networks(state_dir), random.Random()), list(node_names), state_dir)
        net.cleaned_stale = cleaned
        try:
            net._save()  # before anything is made: a crash at any later point leaves the record
            net._build()
        except BaseException:
            net.teardown()
            raise
        return net

    # -- names and addresses ---------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return f"{FAMILY}{self.run_id}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def host_address(self) -> str:
        """The bridge's address: where the clients' packets come from, as the nodes see them."""
        return str(self.subnet.network_address + 1)

    def namespace(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def address(self, node: str) -> str:
        return str(self.subnet.network_address + 2 + self.node_names.index(node))

    def exec_prefix(self, node: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespace(node))

    @property
    def state_file(self) -> Path:
        return self.state_dir / f"{self.prefix}.json"

    def _save(self) -> None:
        state: dict[str, Any] = {
            "pid": os.getpid(),
            "pid_start": _start_time(os.getpid()),
            "subnet": str(self.subnet),
            "made": self.made,
            "node_pids": self.node_pids,
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.state_file)

    def _make(self, kind: str, name: str, args: list[str]) -> None:
        _run(args)
        self.made.append([kind, name])
        self._save()

    def _build(self) -> None:
        br = self.bridge
        self._make("link", br, ["ip", "link", "add", br, "type", "bridge", "forward_delay", "0"])
        _run(["ip", "addr", "add", f"{self.host_address}/{self.subnet.prefixlen}", "dev", br])
        _run(["ip", "link", "set", br, "up"])
        for k, node in enumerate(self.node_names):
            ns, outside, inside = self.namespace(node), f"{self.prefix}h{k}", f"{self.prefix}n{k}"
            self._make("netns", ns, ["ip", "netns", "add", ns])
            self._make(
                "link", outside, ["ip", "link", "add", outside, "type", "veth", "peer", "name", inside, "netns", ns]
            )
            _run(["ip", "link", "set", outside, "master", br, "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(node)}/{self.subnet.prefixlen}", "dev", inside])
            _run(["ip", "-n", ns, "link", "set", inside, "up"])

    # -- processes -------------------------------------------------------------------------------------
    def check_spawned(self, node: Node, timeout: float = 10.0) -> None:
        """The pid recorded for a node is the node's own, in its namespace: ``ip netns exec`` replaces itself
        with the command (no fork), and kill and pause signal that pid. Waits for the exec to happen."""
        proc = node.proc
        assert proc is not None
        want = os.stat(f"/run/netns/{self.namespace(node.name)}").st_ino
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return  # it died: waiting for its port reports that, with its exit status
            try:
                inode = os.stat(f"/proc/{proc.pid}/ns/net").st_ino
                cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                inode, cmdline = 0, []
            if inode == want and b"epochlog.cli.main" in cmdline:
                self.node_pids[node.name] = proc.pid
                self._save()
                return
            time.sleep(0.02)
        raise RuntimeError(f"{node.name}: pid {proc.pid} did not become the node in {self.namespace(node.name)}")

    # -- cuts ------------------------------------------------------------------------------------------
    def apply(self, cut: set[frozenset[str]]) -> None:
        """Makes the DROP rules exactly ``cut`` (pairs of node names that must not reach each other)."""
        wanted = {n: frozenset(p for pair in cut if n in pair for p in pair if p != n) for n in self.node_names}
        # Each pair is cut on both sides; the most cut node first, so an isolation holds after its first
        # namespace's rules (one iptables-restore), the others only repeat it.
        for node in sorted(self.node_names, key=lambda n: -len(wanted[n])):
            peers = wanted[node]
            if self._rules.get(node, frozenset()) == peers:
                continue
            lines = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"]
            for p in sorted(peers):
                lines += [f"-A INPUT -s {self.address(p)}/32 -j DROP", f"-A OUTPUT -d {self.address(p)}/32 -j DROP"]
            # Without --noflush the filter table is replaced whole and at once: these rules and no others.
            _run(
                ["ip", "netns", "exec", self.namespace(node), "iptables-restore", "-w", "5"],
                "\n".join([*lines, "COMMIT", ""]),
            )
            self._rules[node] = peers

    def rules(self, node: str) -> str:
        """The node's namespace's filter rules as iptables prints them (for tests and post-mortems)."""
        return _run(["ip", "netns", "exec", self.namespace(node), "iptables", "-w", "5", "-S"]).stdout

    # -- the end ---------------------------------------------------------------------------------------
    def teardown(self) -> None:
        """Deletes what this run made; the state file stays when something could not be, for the next run."""
        errors = _delete(self.made, self.node_pids.values())
        if errors:
            log.warning("network of %s not fully removed: %s", self.prefix, "; ".join(errors))
            return
        self.made.clear()
        self.state_file.unlink(missing_ok=True)


class NetnsLinks(Links):
    """The proxy backend's record of cut links, each change enforced by iptables in the namespaces at once."""

    def __init__(self, network: NetnsNetwork, names: dict[int, str]) -> None:
        super().__init__()
        self.network, self.names = network, names

    def _enforce(self) -> None:
        self.network.apply({frozenset(self.names[i] for i in pair) for pair in self.pairs()})

    def cut(self, a: int, b: int) -> None:
        super().cut(a, b)
        self._enforce()

    def isolate(self, node: int, others: Iterable[int]) -> None:
        for o in others:  # all recorded first, then one set of rules
            if o != node:
                super().cut(node, o)
        self._enforce()

    def heal(self) -> None:
        super().heal()
        self._enforce()


def configure(lc: LocalCluster, network: NetnsNetwork) -> None:
    """Puts every node of a LocalCluster in its namespace: its address in its listeners and in every node's
    controller.quorum.voters, started under ``ip netns exec``, its pid checked when spawned."""
    for n in lc.nodes.values():
        n.host, n.exec_prefix = network.address(n.name), network.exec_prefix(n.name)
    voters = ",".join(f"{n.node_id}@{n.host}:{n.port}" for n in lc.controller_nodes())
    for n in lc.nodes.values():
        props = load_properties(n.config)
        props["controller.quorum.voters"] = voters
        props["listeners"] = f"PLAINTEXT://{n.host}:{n.port}"
        if n.role == "broker":
            props["advertised.listeners"] = f"PLAINTEXT://{n.host}:{n.port}"
        write_properties(n.config, props)
    lc.after_spawn = network.check_spawned


BACKENDS = ("auto", "netns", "proxy")


def choose_backend(asked: str) -> tuple[str, str]:
    """(backend used, why) for ``--partition-backend``: auto is netns when it can be used here, else proxy. An
    explicit netns that cannot be used is NetnsUnavailable; an unknown name is ValueError."""
    if asked not in BACKENDS:
        raise ValueError(f"unknown partition backend {asked!r}: choose from {', '.join(BACKENDS)}")
    if asked == "proxy":
        return "proxy", "asked for (--partition-backend proxy)"
    ok, why = usable()
    if ok:
        return "netns", why
    if asked == "netns":
        raise NetnsUnavailable(f"--partition-backend netns cannot be used here: {why}")
    return "proxy", f"network namespaces cannot be used here: {why}"
