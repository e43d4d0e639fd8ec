"""A data dir written by the single-node broker of before combined mode opens in `epochlog up`.

The old broker kept topics in epochlog-topics.json and its producer-id high water in producer-id-block;
the directory is built here the way that broker left it (same storage layer, same files), then a real
`epochlog up` must serve every record at its offset, continue the leader epochs, and never hand out a
producer id below the old high water."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from epochlog.protocol.records import build_batch
from epochlog.storage.config import LogConfig
from epochlog.storage.log_manager import LogManager
from tests.broker_process import BrokerProcess
from tests.integration.helpers import consume_assign
from tests.integration.kafka_wire import WireClient

OLD_EPOCH = 3
OLD_PRODUCER_ID_HIGH = 2000


def _write_old_single_node_dir(d: Path) -> uuid.UUID:
    manager = LogManager(d, LogConfig())
    manager.open(node_id=1)
    topic_id = uuid.uuid4()
    plog = manager.create("old", 0, topic_id, LogConfig())
    plog.epoch_cache.assign(OLD_EPOCH, 0)
    now = time.time_ns() // 1_000_000
    for i in range(5):
        plog.append_as_leader(build_batch([(None, b"old-%d" % i)]), OLD_EPOCH, now)
    plog.high_watermark = plog.log_end_offset
    manager.close()
    registry = {
        "version": 1,
        "topics": {
            "old": {
                "id": str(topic_id),
                "partitions": 1,
                "configs": {},
                "leader_epochs": [OLD_EPOCH],
                "internal": False,
            }
        },
    }
    (d / "epochlog-topics.json").write_text(json.dumps(registry))
    (d / "producer-id-block").write_text(f"{OLD_PRODUCER_ID_HIGH}\n")
    return topic_id


def test_old_single_node_dir_is_imported(tmp_path: Path) -> None:
    d = tmp_path / "data"
    _write_old_single_node_dir(d)
    b = BrokerProcess(d).start()
    try:
        msgs = consume_assign(b.bootstrap, "old", 0, 5, timeout=20)
        assert [(m.offset(), m.value()) for m in msgs] == [(i, b"old-%d" % i) for i in range(5)]
        assert {m.leader_epoch() for m in msgs} == {OLD_EPOCH}
        p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "acks": "all"})
        p.produce("old", value=b"new")
        assert p.flush(20) == 0
        new = consume_assign(b.bootstrap, "old", 0, 6, timeout=20)[-1]
        assert new.offset() == 5 and new.value() == b"new"
        assert new.leader_epoch() > OLD_EPOCH, "the node came back as a returning leader: a new epoch"
        wire = WireClient(b.port)
        try:
            resp = wire.request(
                22,
                4,
                transactional_id=None,
                transaction_timeout=datetime.timedelta(milliseconds=-1),
                producer_id=-1,
                producer_epoch=-1,
            )
        finally:
            wire.close()
        assert resp.error_code == 0 and int(resp.producer_id) >= OLD_PRODUCER_ID_HIGH
        assert not (d / "epochlog-topics.json").exists(), "imported once, then set aside"
        assert (d / "epochlog-topics.json.imported").exists()
    finally:
        b.stop()
    # A second start reads the metadata log only, and still serves everything.
    b.start()
    try:
        assert len(consume_assign(b.bootstrap, "old", 0, 6, timeout=20)) == 6
    finally:
        b.stop()


def test_registry_beside_a_metadata_log_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "data"
    b = BrokerProcess(d).start()
    b.stop()
    _write_old_single_node_dir(d)
    try:
        b.start()
    except RuntimeError:
        pass
    else:  # pragma: no cover - the failure this test exists for
        b.stop()
        raise AssertionError("a node started with both a topic registry and a metadata log")
    assert "holds both a single-node topic registry" in b.log_path.read_text()
