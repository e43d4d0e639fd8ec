"""The demo's summary and report name the cluster it ran and each controller the same way throughout."""

from __future__ import annotations

import re

from epochlog.demo.model import DemoResult
from epochlog.demo.report import render_html, summary_lines


def _killed_run() -> DemoResult:
    return DemoResult(
        topic="page-views",
        partitions=3,
        rate=1000,
        duration=60,
        brokers=3,
        controllers=3,
        kill_t=20.0,
        killed_broker=1,
        killed_epoch=0,
        killed_controller="controller-3",
        new_controller="controller-1",
        controller_failover_seconds=1.5,
        restart_t=40.0,
    )


def test_summary_says_three_controllers_and_three_brokers() -> None:
    first = summary_lines(_killed_run())[0]
    assert first.startswith("cluster: 3 controllers (a quorum) + 3 brokers;"), first


def test_controllers_are_named_by_node_name_everywhere() -> None:
    res = _killed_run()
    text = "\n".join(summary_lines(res)) + render_html(res)
    assert "controller-3 (the active controller)" in text
    assert "controller-1 is active" in text
    assert "broker-1 and controller-3 restarted" in text
    assert "controller failover: controller-1 active" in text
    # No second naming: "controller 103" (node id) next to "controller-3" (node name).
    assert not re.search(r"controller \d", text), re.findall(r".{30}controller \d.{10}", text)


def test_report_intro_describes_the_quorum() -> None:
    page = render_html(_killed_run())
    assert "3 controllers (a quorum) and 3 brokers on 127.0.0.1" in page
    assert "A controller and" not in page
