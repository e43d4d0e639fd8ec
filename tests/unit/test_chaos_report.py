"""The chaos report and summary from a hand-made result (no cluster): every part is there, the anomaly is shown
with the records around it, and the command refuses what it cannot do before it starts anything."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from epochlog.chaos.checkers import Verdict, check_availability, check_queue, check_txn
from epochlog.chaos.history import Fault, History, Observation, Read, Send, Txn
from epochlog.chaos.report import render_html, summary_lines
from epochlog.chaos.run import ChaosOptions, ChaosResult, skipped_parts

pytestmark = pytest.mark.unit


def _result() -> ChaosResult:
    h = History()
    for i in range(20):
        h.sends.append(Send("producer-1", f"v{i}", 0, i * 0.5, i * 0.5 + 0.05, True, i))
        if i != 7:  # v7 acknowledged, then gone
            h.final.append(Read("final", 0, i, f"v{i}", 30))
    h.final_complete = True
    h.workload_end_s = 12
    h.faults = [Fault("kill", "broker-1", 2.0, "leader of 2 partition(s)", 5.0), Fault("pause", "controller-2", 6.0)]
    h.observations = [
        Observation(0, "leader", 0, 1, 0),
        Observation(2.5, "leader", 0, 2, 1),
        Observation(0, "controller", -1, 101, -1),
    ]
    txn = History(t0=h.t0)
    txn.txns = [Txn("txn-1", 0, [(0, "t-0-0")], "commit", 1, 1.5, "committed")]
    txn.final = [Read("final", 0, 0, "t-0-0", 30)]
    txn.final_complete = True
    opts = ChaosOptions(duration=10, workloads=["queue", "txn"])
    res = ChaosResult(opts, 42, h, Verdict(), skipped=skipped_parts(opts), txn_history=txn)
    check_queue(h, res.verdict)
    check_availability(h, res.verdict)
    check_txn(txn, res.verdict)
    return res


def test_summary_and_json_say_what_happened() -> None:
    res = _result()
    lines = summary_lines(res)
    assert lines[-1] == "verdict: INVALID"
    assert any(line.startswith("ANOMALY lost: v7") for line in lines)
    assert any("transactions: 1 committed" in line for line in lines)
    j = res.as_json()
    assert (j["lost"], j["anomalies"], j["verdict"]) == (1, 1, "anomalies")
    assert j["faults"][0] == {
        "kind": "kill",
        "target": "broker-1",
        "at_s": 2.0,
        "healed_s": 5.0,
        "why": "leader of 2 partition(s)",
        "first_ack_after_s": pytest.approx(0.05),
        "led_resume_s": {},  # only a partition fault on a leader is timed per partition
    }
    assert {s["what"] for s in j["skipped"]} >= {"workload groups", "nemesis powerloss", "nemesis disk"}


def test_report_holds_the_timeline_charts_and_the_evidence() -> None:
    page = render_html(_result())
    assert page.count("<svg") == 3
    assert ">p0</text>" in page and ">controller</text>" in page
    assert "kill broker-1" in page and "pause controller-2" in page
    # The lost record's place in the log: its neighbours shown, the offset it should be at highlighted.
    assert "v7 acknowledged at 0/7" in page
    assert page.count("<tr class=''>") == 6
    assert "<tr class='here'><td class='num'>0</td><td class='num'>7</td><td>(nothing here in the final read)" in page
    assert "transactions committed / aborted / unknown" in page
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nemesis", "kill,bogus"], "unknown nemesis bogus"),
        (["--workload", "bogus"], "unknown workload(s) bogus"),
        (["--unsafe", "bogus"], "unknown --unsafe bogus"),
        (["--set", "novalue"], "--set expects key=value"),
    ],
)
def test_the_command_refuses_before_it_starts_anything(args: list[str], message: str, tmp_path: object) -> None:
    from epochlog.cli.main import app

    out = CliRunner().invoke(app, ["chaos", "--duration", "5", *args])
    assert out.exit_code == 2, out.output
    assert message in " ".join(out.output.split())


def _label_boxes(html: str) -> list[tuple[float, float, int]]:
    """(x, end x, row y) of every fault label in the timeline."""
    import re

    from epochlog.chaos.report import LABEL_CHAR_PX

    out = []
    for x, y, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" fill="#\w+" font-size="10">([^<]+)</text>', html):
        out.append((float(x), float(x) + len(text) * LABEL_CHAR_PX, int(float(y))))
    return out


def test_fault_labels_never_overlap_and_sparse_ones_are_all_shown() -> None:
    res = _result()
    boxes = _label_boxes(render_html(res))
    assert len(boxes) == len(res.history.faults)  # two faults far apart: both named
    res.history.faults = [
        Fault("partition", f"broker-{i % 3 + 1}", i * 0.3, "any node", i * 0.3 + 2) for i in range(40)
    ]
    boxes = _label_boxes(render_html(res))
    assert 3 <= len(boxes) < 40  # crowded: some named, the rest left to the tooltips and the table
    for a in boxes:
        for b in boxes:
            if a is not b and a[2] == b[2]:
                assert a[1] <= b[0] or b[1] <= a[0], (a, b)
