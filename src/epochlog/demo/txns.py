"""The transaction count the demo shows: the brokers' own counter of completed transactions.

Each broker serves Prometheus metrics on its own port; `epochlog_transaction_coordinator_completed_total`
counts the transactions its coordinator completed, by result. The demo scrapes every broker a few times a
second. A broker killed with kill -9 comes back with its counters at zero, so a drop is taken as a restart
and the last value seen before it is kept; what a broker completed after its last scrape and before its
kill is not counted (a fraction of a second).
"""

from __future__ import annotations

import re
import socket
import urllib.request
from pathlib import Path

from epochlog.server.cluster.local import port_is_free

METRIC = "epochlog_transaction_coordinator_completed_total"
_LINE = re.compile(rf'^{METRIC}\{{result="(commit|abort)"\}} ([0-9.e+]+)$', re.M)


def metrics_ports(base_port: int, broker_ids: list[int]) -> dict[int, int]:
    """A metrics port per broker: base_port+200+i when free (the cluster uses base_port.. and base_port+100..),
    else any free ports the kernel hands out."""
    wanted = {b: base_port + 200 + i for i, b in enumerate(broker_ids)}
    if all(port_is_free(p) for p in wanted.values()):
        return wanted
    out: dict[int, int] = {}
    for b in broker_ids:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            out[b] = s.getsockname()[1]
    return out


def add_metrics_ports(config_files: dict[int, Path], ports: dict[int, int]) -> None:
    """Give each broker's properties file a metrics.port (LocalCluster writes the files; they are read at
    start)."""
    for node_id, path in config_files.items():
        with path.open("a") as f:
            f.write(f"metrics.port={ports[node_id]}\n")


def scrape(port: int, timeout: float = 1.0) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as resp:
        text = resp.read().decode()
    return {m.group(1): float(m.group(2)) for m in _LINE.finditer(text)}


class TxnCounter:
    """Completed transactions summed over the brokers, carried over broker restarts."""

    def __init__(self, ports: dict[int, int]) -> None:
        self.ports = ports
        self.last: dict[tuple[int, str], float] = {}
        self.base: dict[tuple[int, str], float] = {}

    def poll(self) -> None:
        for node, port in self.ports.items():
            try:
                values = scrape(port)
            except OSError:
                continue  # down (killed, restarting)
            for result in ("commit", "abort"):
                v = values.get(result, 0.0)
                key = (node, result)
                if v < self.last.get(key, 0.0):  # the broker restarted with fresh counters
                    self.base[key] = self.base.get(key, 0.0) + self.last[key]
                self.last[key] = v

    def total(self, result: str) -> int:
        return int(sum(self.base.get((n, result), 0.0) + self.last.get((n, result), 0.0) for n in self.ports))
