"""kcat (Debian's build, on an older librdkafka) against a real epochlog process."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, topic_name

pytestmark = pytest.mark.skipif(
    shutil.which("kcat") is None, reason="kcat is not installed (scripts/setup installs it)"
)


def test_kcat_produce_consume_and_metadata(broker: BrokerProcess) -> None:
    topic = topic_name("kcat")
    create_topic(broker.bootstrap, topic)
    lines = "".join(f"key{i}:value{i}\n" for i in range(20))
    subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-t", topic, "-P", "-K:", "-z", "lz4"],
        input=lines.encode(),
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-t", topic, "-C", "-o", "beginning", "-e", "-f", "%k=%s@%o\n"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    assert out.splitlines() == [f"key{i}=value{i}@{i}" for i in range(20)]
    md = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-L", "-t", topic], capture_output=True, check=True, timeout=30
    ).stdout.decode()
    assert f'topic "{topic}" with 1 partitions' in md
