"""The console's pages in Debian's chromium on crafted cluster states no healthy test cluster holds for long:
a replica that diverged from the leader (KIP-101), a broker that is down, a partition with no leader. The
web app runs in-process over a fake reader, so what is checked is only how the pages draw these states."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from epochlog.console.app import create_app
from tests.integration.browser import chromium, recording_page, served

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]



def _entries(*pairs: tuple[int, int]) -> list[dict[str, int]]:
    return [{"epoch": e, "start_offset": s} for e, s in pairs]


class CraftedReader:
    """Partition t-0: broker 1 leads in epoch 3; broker 2 still holds an epoch-2 branch it wrote as an old
    leader; broker 3 is down. Partition t-1 has no leader."""

    def partition(self, name: str, partition: int, offsets_timeout: float | None = None) -> dict[str, Any]:
        if partition == 1:
            return {"topic": name, "partition": 1, "leader": -1, "leader_epoch": 4, "replicas": [3], "isr": [],
                    "offline_replicas": [3], "under_replicated": True, "offline": True, "error": 5,
                    "log_start_offset": None, "high_watermark": None, "last_stable_offset": None,
                    "lineage": [{"broker": 3, "leader": False, "source": None, "entries": [],
                                 "error": "broker not in the metadata (down or fenced)"}]}  # fmt: skip
        return {
            "topic": name, "partition": 0, "leader": 1, "leader_epoch": 3, "replicas": [1, 2, 3], "isr": [1],
            "offline_replicas": [3], "under_replicated": True, "offline": False, "error": 0,
            "log_start_offset": 0, "high_watermark": 120, "last_stable_offset": 120,
            "lineage": [
                {"broker": 1, "leader": True, "source": "OffsetsForLeaderEpoch", "error": None,
                 "entries": _entries((0, 0), (1, 50), (3, 90))},
                {"broker": 2, "leader": False, "source": "leader-epoch-checkpoint", "error": None,
                 "entries": _entries((0, 0), (1, 50), (2, 80)), "diverges": {"epoch": 2, "offset": 80}},
                {"broker": 3, "leader": False, "source": None, "entries": [], "error": "broker not in the metadata"},
            ],
        }  # fmt: skip

    def overview(self) -> dict[str, Any]:
        broker = {"node_id": 1, "host": "h", "port": 1, "rack": None, "leaders": 1, "replicas": 1}
        return {"cluster_id": "c", "controller_id": 1, "topics": 1, "partitions": 2, "under_replicated_partitions": 2,
                "offline_partitions": 1, "unknown_leaders": [3], "brokers": [broker]}  # fmt: skip


@pytest.fixture(scope="module")
def console() -> Iterator[str]:
    with served(create_app(CraftedReader(), refresh=0.2)) as url:  # type: ignore[arg-type]
        yield url


@pytest.fixture(scope="module")
def page() -> Iterator[tuple[Any, list[str]]]:
    with chromium() as b:
        yield recording_page(b)


def test_a_diverged_replica_is_outlined_from_its_divergence(console: str, page: tuple[Any, list[str]]) -> None:
    p, errors = page
    p.goto(f"{console}/topics/t/0")
    p.wait_for_selector("#lineage tbody tr")
    diverged = p.eval_on_selector_all(
        "td.diverged", "cells => cells.map(c => [c.dataset.replica, c.closest('tr').dataset.epoch, c.textContent])"
    )
    assert diverged == [["2", "2", "80"]]
    # Epoch 3 is the leader's only; broker 2 lacks it and broker 3 is unknown.
    row3 = p.eval_on_selector_all('tr[data-epoch="3"] td', "cells => cells.map(c => c.textContent)")
    assert row3 == ["3", "90", "\N{EN DASH}", "?"]
    notes = p.inner_text("#lineage-notes")
    assert "broker 2: diverges from the leader at offset 80 (epoch 2)" in notes
    assert "broker 3: broker not in the metadata" in notes
    assert p.inner_text('[data-card="isr"] .v') == "1"
    assert errors == []


def test_a_partition_with_no_leader_and_the_overview_warnings(console: str, page: tuple[Any, list[str]]) -> None:
    p, errors = page
    p.goto(f"{console}/topics/t/1")
    p.wait_for_selector('[data-card="leader"] .v.bad')
    assert p.inner_text('[data-card="leader"] .v') == "none"
    assert p.inner_text("main").count("No epochs known.") == 1
    p.goto(f"{console}/")
    p.wait_for_selector('[data-card="offline"] .v.bad')
    assert p.inner_text('[data-card="offline"] .v') == "1"
    assert "leaders not among live brokers: 3" in p.inner_text("main")
    assert errors == []
