"""The simulator's reports name brokers as the scenarios' narratives do, and colour epochs as the console."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from epochlog.replication.types import TruncationMode
from epochlog.sim.report import epoch_colour, text_report
from epochlog.sim.scenarios import SCENARIOS, broker_names

pytestmark = pytest.mark.sim

NAMED = re.compile(r"\b([A-Z]) \((\d+)\)")


def narrative_names(doc: str) -> dict[int, str]:
    """{broker id: letter} from "B (1) leads, A (2) follows"."""
    return {int(n): letter for letter, n in NAMED.findall(doc)}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_report_names_match_the_narrative(name: str) -> None:
    said = narrative_names(SCENARIOS[name].__doc__ or "")
    names = broker_names(name, sorted(said) or [1, 2, 3])
    assert {b: names[b] for b in said} == said


def test_a_report_that_ignored_the_narrative_would_fail() -> None:
    """KIP-101's scenario 1 has B lead as broker 1: A, B in id order would contradict it."""
    said = narrative_names(SCENARIOS["kip101-scenario1"].__doc__ or "")
    assert said == {1: "B", 2: "A"}
    assert broker_names(None, [1, 2]) != said
    w = SCENARIOS["kip101-scenario1"](TruncationMode.LEADER_EPOCH)
    assert "B (broker 1) [" in text_report(w, broker_names("kip101-scenario1", list(w.brokers)))


def test_epoch_colours_are_the_consoles() -> None:
    js = (files("epochlog.console") / "static" / "console.js").read_text()
    m = re.search(r"const epochColour = \(e\) => `hsl\(\$\{\(210 \+ e \* 137\.5\) % 360\}, 55%, 40%\)`;", js)
    assert m, "console.js's epochColour changed: change sim/report.py's epoch_colour with it"
    assert [epoch_colour(e) for e in range(3)] == ["hsl(210, 55%, 40%)", "hsl(347.5, 55%, 40%)", "hsl(125, 55%, 40%)"]
