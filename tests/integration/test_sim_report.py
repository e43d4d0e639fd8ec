"""`epochlog sim --scenario X --open`: the report served by the console's app on 127.0.0.1, loaded in
Debian's chromium (headless): no console errors, the pictures' labels are the narrative's names, epochs
have the console's colours, and the timeline steps through the snapshots."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.broker_process import free_port
from tests.integration.browser import chromium, recording_page

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SCENARIO = "kip101-scenario1"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("sim-open")
    port = free_port()
    log = out / "sim.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochlog.cli.main", "sim", "--scenario", SCENARIO, "-q",
             "--report-dir", str(out / "reports"), "--open", "--port", str(port)],
            stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "DISPLAY": "", "BROWSER": "false"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            m = re.search(r"http://127\.0\.0\.1:\d+/sim/\S+\.html", log.read_text())
            url = m.group(0) if m else None
            time.sleep(0.1)
        assert url == f"http://127.0.0.1:{port}/sim/{SCENARIO}-leader-epoch.html"
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def page() -> Iterator[tuple[Any, list[str]]]:
    with chromium() as b:
        yield recording_page(b)


def test_report_loads_with_the_narratives_names(served: str, page: tuple[Any, list[str]]) -> None:
    p, errors = page
    p.goto(served)
    p.wait_for_selector("section.step:not([hidden]) svg.logs")
    narrative = p.inner_text("#narrative")
    said = {int(n): letter for letter, n in re.findall(r"\b([A-Z]) \((\d+)\)", narrative)}
    assert said == {1: "B", 2: "A"}  # "B (1) leads, A (2) follows"
    labels = p.eval_on_selector_all(
        "section.step:not([hidden]) g.replica",
        "gs => gs.map(g => [g.dataset.broker, g.querySelector('text.label').textContent])",
    )
    shown = {int(b): text.split(" ")[0] for b, text in labels}
    assert shown == said, labels
    # The lineage table's columns and the history use the same names.
    heads = p.eval_on_selector_all(
        "section.step:not([hidden]) table.lineage th[data-replica]", "hs => hs.map(h => h.textContent)"
    )
    assert heads == ["B (broker 1) (leader)", "A (broker 2)"]
    assert "B (broker 1) crashes hard" in p.inner_text("#history")
    assert not re.search(r"\bb[12]\b", p.inner_text("main"))
    assert errors == []


def test_timeline_steps_through_with_console_colours(served: str, page: tuple[Any, list[str]]) -> None:
    p, errors = page
    p.goto(served)
    p.wait_for_selector("section.step:not([hidden])")
    n = len(p.query_selector_all("section.step"))
    assert n == 4
    assert p.inner_text("#step-pos").startswith("step 1 of 4: start")
    for i in range(2, n + 1):
        p.click("#next")
        assert p.get_attribute(f"#step-{i}", "hidden") is None
        assert len(p.query_selector_all("section.step:not([hidden])")) == 1
    assert p.inner_text("#step-pos") == "step 4 of 4: B failed, A elected"
    assert p.is_disabled("#next")
    # The last step: A leads in epoch 1 from offset 2, drawn in the console's colour for epoch 1.
    colour = p.get_attribute('#step-4 tr[data-epoch="1"] td[data-replica="2"]', "style")
    assert colour == "background:hsl(347.5, 55%, 40%)"
    js = p.evaluate("() => `hsl(${(210 + 1 * 137.5) % 360}, 55%, 40%)`")  # console.js's epochColour(1)
    assert colour.endswith(js)
    p.keyboard.press("ArrowLeft")
    assert p.inner_text("#step-pos").startswith("step 3 of 4")
    assert errors == []


def test_reports_list_and_no_path_outside(served: str, page: tuple[Any, list[str]]) -> None:
    import urllib.error
    import urllib.request

    base = served.rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/", timeout=10) as r:
        assert f"{SCENARIO}-leader-epoch.html" in r.read().decode()
    for bad in ("..%2Fsim.log", "sim.log", "nope.html"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}/{bad}", timeout=10)
        assert e.value.code == 404
