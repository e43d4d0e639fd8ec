"""KafkaJS (pinned in tests/js/package.json, installed by scripts/setup) against a real broker: its
transactional producer commits and aborts, and its consumer, read_committed by default, sees only what
was committed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.helpers import topic_name

pytestmark = pytest.mark.integration

JS = Path(__file__).resolve().parent.parent / "js"


def _kafkajs_or_skip() -> None:
    if shutil.which("node") and (JS / "node_modules" / "kafkajs").is_dir():
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run the KafkaJS tests: scripts/setup installs node and tests/js/node_modules")
    pytest.skip("node or KafkaJS is not installed here (bash scripts/setup installs them)")


def test_kafkajs_transactions_commit_and_abort(broker_factory) -> None:
    _kafkajs_or_skip()
    b = broker_factory()
    topic = topic_name("js")
    out = subprocess.run(
        ["node", str(JS / "transactions.js"), b.bootstrap, topic], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])["seen"]
    assert seen == [f"commit-{i}" for i in range(4)]
