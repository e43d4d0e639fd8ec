"""Every node's data directory under its own power-loss file system (chaos/powerfs), for the ``powerloss`` and
``disk`` nemeses: mounted after the cluster is built and before it starts, unmounted after it stops.

Each node's traces move out of its data directory (to ``<name>.trace`` beside it): a trace records what the
node did, and a power loss must not erase the record of a write it acknowledged.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from epochlog.chaos.cluster import ChaosCluster
from epochlog.chaos.powerfs.mount import PowerFS, unavailable_reason
from epochlog.properties import load_properties
from epochlog.server.cluster.local import write_properties

log = logging.getLogger("epochlog.chaos")

NEMESES = ("powerloss", "disk")


def why_not() -> str | None:
    """Why the nemeses that need the file system cannot run here (None: they can)."""
    return unavailable_reason()


class NodeDisks:
    def __init__(self, cluster: ChaosCluster) -> None:
        self.cluster = cluster
        self.fs: dict[str, PowerFS] = {}
        # Unix socket paths are limited to 108 bytes; a data directory can be deeper than that allows.
        self._sockets = Path(tempfile.mkdtemp(prefix="epochlog-powerfs-"))

    def mount(self) -> None:
        data_dir = self.cluster.data_dir
        try:
            for name, node_dir in self.cluster.node_data_dirs().items():
                node = self.cluster.node(name)
                props = load_properties(node.config)
                props["epochlog.trace.dir"] = str(data_dir / f"{name}.trace")
                write_properties(node.config, props)
                fs = PowerFS(
                    data_dir / ".backing" / name,
                    node_dir,
                    self._sockets / f"{name}.sock",
                    data_dir / "logs" / f"powerfs-{name}.log",
                )
                self.fs[name] = fs.start()
        except BaseException:
            self.unmount()
            raise
        log.info("data directories under powerfs: %s", ", ".join(sorted(self.fs)))

    def powerloss(self, name: str) -> dict[str, Any]:
        return self.fs[name].powerloss()

    def fail(self, name: str, kind: str) -> None:
        self.fs[name].fail(kind)

    def heal(self, name: str) -> None:
        self.fs[name].heal()

    def heal_all(self) -> None:
        for name, fs in self.fs.items():
            try:
                fs.heal()
            except Exception as e:  # its server is gone: the unmount at the end still runs
                log.warning("healing the disk of %s failed: %r", name, e)

    def unmount(self) -> None:
        """Unmount every file system (lazily when busy) and stop its process; every one is tried."""
        for name, fs in self.fs.items():
            try:
                fs.stop()
            except Exception as e:
                log.warning("unmounting the data directory of %s failed: %r", name, e)
        shutil.rmtree(self._sockets, ignore_errors=True)
