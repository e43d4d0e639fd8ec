"""The cluster under test: LocalCluster's processes, with every link between nodes through a NodeProxy.

Brokers get two listeners: PLAINTEXT for clients (dialled directly) and INTERNAL for other brokers, advertised
at the broker's proxy. The controllers' quorum addresses, in every node's controller.quorum.voters, are their
proxies too. So a partition (links cut in the proxies) separates nodes from each other while the workload's
clients still reach every one of them. Every process is started and stopped by its pid, through LocalCluster.

With ``partition_backend="netns"`` there are no proxies: each node runs in a network namespace of its own and a
cut is iptables rules there (chaos/netns.py); the same Links record says what is cut.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlog.chaos.netns import NetnsLinks, NetnsNetwork, configure
from epochlog.chaos.proxy import Links, NodeProxy
from epochlog.properties import load_properties
from epochlog.server.cluster.local import (
    CONTROLLER_PORT_OFFSET,
    LocalCluster,
    Node,
    free_base_port,
    write_properties,
)

log = logging.getLogger("epochlog.chaos")

# Short failure detection so that a minute holds several faults and their recoveries; RF 3, min ISR 2.
BROKER_DEFAULTS = {
    "replica.lag.time.max.ms": "4000",
    "group.initial.rebalance.delay.ms": "0",
    "epochlog.trace.enable": "true",
    "unclean.leader.election.enable": "false",
    "min.insync.replicas": "2",
}
CONTROLLER_DEFAULTS = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "epochlog.trace.enable": "true",
}
UNSAFE_TRUNCATION = {"replication.truncation.mode": "high-watermark"}




@dataclass
class ChaosCluster:
    data_dir: Path
    controllers: int = 3
    brokers: int = 3
    broker_settings: dict[str, str] = field(default_factory=dict)
    controller_settings: dict[str, str] = field(default_factory=dict)
    links: Links = field(default_factory=Links)
    proxies: dict[int, NodeProxy] = field(default_factory=dict)
    local: LocalCluster | None = None
    partition_backend: str = "proxy"  # or "netns"
    network: NetnsNetwork | None = None

    def _local_cluster(self, base_port: int) -> LocalCluster:
        return LocalCluster(
            self.data_dir,
            brokers=self.brokers,
            base_port=base_port,
            broker_settings={**BROKER_DEFAULTS, **self.broker_settings},
            controller_settings={**CONTROLLER_DEFAULTS, **self.controller_settings},
            controllers=self.controllers,
        )

    def build(self) -> ChaosCluster:
        if self.partition_backend == "netns":
            return self._build_netns()
        # Ports for the brokers' client listeners and, right after them, their INTERNAL ones.
        base = free_base_port(2 * self.brokers, controllers=self.controllers)
        self.local = lc = self._local_cluster(base)
        for n in lc.controller_nodes():
            self.proxies[n.node_id] = NodeProxy(n.node_id, n.port, self.links)
        internal: dict[int, int] = {}
        for i in lc.broker_ids():
            internal[i] = base + self.brokers + i - 1
            self.proxies[i] = NodeProxy(i, internal[i], self.links)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{self.proxies[n.node_id].port}" for n in lc.controller_nodes())
        for n in lc.nodes.values():
            props = load_properties(n.config)
            props["controller.quorum.voters"] = voters
            if n.role == "broker":
                props.update(
                    {
                        "listeners": f"PLAINTEXT://127.0.0.1:{n.port},INTERNAL://127.0.0.1:{internal[n.node_id]}",
                        "advertised.listeners": (
                            f"PLAINTEXT://127.0.0.1:{n.port},INTERNAL://127.0.0.1:{self.proxies[n.node_id].port}"
                        ),
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                        "inter.broker.listener.name": "INTERNAL",
                    }
                )
            write_properties(n.config, props)
        assert base + CONTROLLER_PORT_OFFSET > base + 2 * self.brokers
        return self

    def _build_netns(self) -> ChaosCluster:
        base = free_base_port(self.brokers, controllers=self.controllers)
        self.local = lc = self._local_cluster(base)
        self.network = NetnsNetwork.create(list(lc.nodes))
        try:
            self.links = NetnsLinks(self.network, {n.node_id: n.name for n in lc.nodes.values()})
            configure(lc, self.network)
        except BaseException:
            self.network.teardown()
            raise
        return self

    @property
    def lc(self) -> LocalCluster:
        assert self.local is not None, "build() first"
        return self.local

    def start(self, timeout: float = 90.0) -> None:
        self.lc.start(timeout)

    @property
    def bootstrap(self) -> str:
        return self.lc.bootstrap

    def node_names(self) -> list[str]:
        return list(self.lc.nodes)

    def node(self, name: str) -> Node:
        return self.lc.nodes[name]

    def node_data_dirs(self) -> dict[str, Path]:
        """node name -> its data directory (its one log.dirs entry): what a data-directory mount covers."""
        return {n.name: Path(load_properties(n.config)["log.dirs"].split(",")[0]) for n in self.lc.nodes.values()}

    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.lc.nodes.values()]

    # -- who is who --------------------------------------------------------------------------------
    def active_controller(self, timeout: float = 5.0) -> Node | None:
        try:
            return self.lc.active_controller(timeout)
        except (TimeoutError, Exception):  # mid-election, or every controller paused
            return None

    def leaders(self, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, partition) -> (leader id, leader epoch) from a broker's Metadata; empty when none answers."""
        from epochlog.client.epochs import LeaderEpochClient

        try:
            with LeaderEpochClient(self.bootstrap, timeout=2.0, retries=1, backoff=0.1) as c:
                md = c.metadata(topics)
        except Exception as e:  # no broker answered, or answered mid-failover with what cannot be read
            log.debug("leaders of %s: %r", topics, e)
            return {}
        return {k: (v.leader_id, v.leader_epoch) for k, v in md.items() if k[1] >= 0}

    def replicas(self, topic: str) -> dict[int, list[int]]:
        """partition -> its replicas in assignment order (the order the controller elects in); empty on failure."""
        from confluent_kafka.admin import AdminClient

        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "logger": log}
        try:
            md = AdminClient(conf).list_topics(topic, timeout=3)
            return {p: list(pm.replicas) for p, pm in md.topics[topic].partitions.items()}
        except Exception as e:  # mid-failover: the caller chooses without it
            log.debug("replicas of %s: %r", topic, e)
            return {}

    # -- faults ------------------------------------------------------------------------------------
    def isolate(self, node_id: int) -> None:
        self.links.isolate(node_id, self.node_ids())

    def heal_links(self) -> None:
        self.links.heal()
        for p in self.proxies.values():
            p.heal()

    def resume_all(self) -> None:
        import signal

        for n in self.lc.nodes.values():
            if n.alive:
                self.lc.signal(n.name, signal.SIGCONT)

    def restart_dead(self, timeout: float = 60.0) -> list[str]:
        started = []
        for n in self.lc.nodes.values():
            if not n.alive:
                self.lc.start_node(n.name, timeout)
                started.append(n.name)
        return started

    def heal_everything(self) -> list[str]:
        """Links whole, every process running again; returns the nodes it had to start."""
        self.heal_links()
        self.resume_all()
        return self.restart_dead()

    def wait_healthy(self, topics: list[str], partitions: int, timeout: float) -> bool:
        """Every partition of ``topics`` has a leader and every broker is registered, within ``timeout``."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "logger": log}
        admin: Any = AdminClient(conf)
        while time.monotonic() < deadline:
            try:
                md = admin.list_topics(timeout=2)
                ok = len(md.brokers) == self.brokers and all(
                    t in md.topics
                    and len(md.topics[t].partitions) == partitions
                    and all(p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in md.topics[t].partitions.values())
                    for t in topics
                )
                if ok:
                    return True
            except Exception as e:  # still failing over
                log.debug("not healthy yet: %r", e)
            time.sleep(0.25)
        return False

    def stop(self) -> None:
        try:
            if self.local is not None:
                self.heal_links()  # a controlled shutdown needs the controller
                self.resume_all()
                self.local.stop(timeout=30)
        finally:
            for p in self.proxies.values():
                p.close()
            if self.network is not None:
                self.network.teardown()
