"""The broker counts the transactions its coordinator completes, by result."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.broker_process import free_port
from tests.integration.helpers import create_topic, topic_name
from tests.integration.test_metrics import scrape, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

COMMITS = 'epochlog_transaction_coordinator_completed_total{result="commit"}'
ABORTS = 'epochlog_transaction_coordinator_completed_total{result="abort"}'


def test_completed_transactions_counted_by_result(broker_factory) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    b = broker_factory({"metrics.port": str(port)})
    topic = topic_name("txm")
    create_topic(b.bootstrap, topic)
    before = scrape(port)
    assert before.get(COMMITS, 0.0) == 0.0 and before.get(ABORTS, 0.0) == 0.0
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "txm-1", "linger.ms": 5})
    p.init_transactions(30)
    for i in range(3):
        p.begin_transaction()
        p.produce(topic, b"c%d" % i, partition=0)
        p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"a", partition=0)
    p.flush(10)  # else librdkafka purges the record before AddPartitionsToTxn and sends no EndTxn at all
    p.abort_transaction(30)
    # The completing record is written after the markers, asynchronously to the client's EndTxn answer.
    assert wait_for(port, COMMITS, lambda v: v >= 3) == 3.0
    assert wait_for(port, ABORTS, lambda v: v >= 1) == 1.0
    # A new incarnation fences the old one; its open transaction is aborted by the coordinator.
    p.begin_transaction()
    p.produce(topic, b"z", partition=0)
    p.flush(10)
    Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "txm-1"}).init_transactions(30)
    assert wait_for(port, ABORTS, lambda v: v >= 2) == 2.0
    assert scrape(port)[COMMITS] == 3.0
