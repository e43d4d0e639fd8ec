"""share.isolation.level against a real broker: transactional confluent-kafka producers commit some transactions
and abort others, interleaved with each other and with plain records. A ShareConsumer in a group set to
read_committed (IncrementalAlterConfigs on the GROUP resource) gets exactly the committed and plain records,
none of the aborted ones, and nothing at or after an open transaction until it commits; one in a
read_uncommitted group (the default) gets the aborted records too, and the open transaction's at once."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.client.configs import ConfigsError, alter, describe
from epochlog.codes import Err
from epochlog.config_defs import RESOURCE_GROUP
from tests.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "txq"
SETTINGS = {"group.share.heartbeat.interval.ms": "300"}


def txn_producer(b: BrokerProcess) -> Producer:
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}", "linger.ms": 0})
    p.init_transactions(30)
    return p


def send(p: Producer, values: list[bytes]) -> None:
    for v in values:
        p.produce(TOPIC, v)
    assert p.flush(15) == 0  # in the log, not only in the client's queue


def names(prefix: str, n: int = 3) -> list[bytes]:
    return [b"%s-%d" % (prefix.encode(), i) for i in range(n)]


def group_config(b: BrokerProcess, group: str, configs: dict[str, str]) -> None:
    """Set the group's configs and wait until the broker's metadata has them (DescribeConfigs answers from it)."""
    alter(b.bootstrap, RESOURCE_GROUP, group, configs, [])
    deadline = time.monotonic() + 15
    while {c.name: c.value for c in describe(b.bootstrap, RESOURCE_GROUP, group) if c.name in configs} != configs:
        assert time.monotonic() < deadline, describe(b.bootstrap, RESOURCE_GROUP, group)
        time.sleep(0.1)


def share_consumer(b: BrokerProcess, group: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, "share.acknowledgement.mode": "implicit"})
    c.subscribe([TOPIC])
    return c


def poll_until(
    consumers: dict[str, ShareConsumer], got: dict[str, list[bytes]], done: Callable[[], bool], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, {k: sorted(v) for k, v in got.items()}
        for name, c in consumers.items():
            got[name] += [m.value() for m in (c.poll(0.05) or []) if m.error() is None]


def test_read_committed_share_group_gets_only_committed_records(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory(SETTINGS)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    with pytest.raises(ConfigsError, match="String must be one of: read_committed, read_uncommitted") as e:
        alter(b.bootstrap, RESOURCE_GROUP, "rc", {"share.isolation.level": "committed"}, [])
    assert e.value.code == Err.INVALID_CONFIG
    described = {c.name: (c.value, c.source) for c in describe(b.bootstrap, RESOURCE_GROUP, "ru")}
    assert described["share.isolation.level"] == ("read_uncommitted", "DEFAULT_CONFIG")
    group_config(b, "rc", {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
    group_config(b, "ru", {"share.auto.offset.reset": "earliest"})
    assert {c.name: c.source for c in describe(b.bootstrap, RESOURCE_GROUP, "rc")}["share.isolation.level"] == (
        "DYNAMIC_GROUP_CONFIG"
    )

    p1, p2, plain = txn_producer(b), txn_producer(b), Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    # Interleaved: p1's committed transaction spans p2's aborted one and a plain record, then the other way round.
    p1.begin_transaction()
    send(p1, names("c1"))
    p2.begin_transaction()
    send(p2, names("a2"))
    send(plain, [b"plain-0"])
    send(p1, names("c1b", 2))
    p2.abort_transaction(30)
    p1.commit_transaction(30)
    p2.begin_transaction()
    send(p2, names("c2"))
    p1.begin_transaction()
    send(p1, names("a1"))
    send(plain, [b"plain-1"])
    p1.abort_transaction(30)
    p2.commit_transaction(30)
    committed = [*names("c1"), *names("c1b", 2), b"plain-0", *names("c2"), b"plain-1"]
    aborted = [*names("a2"), *names("a1")]

    consumers = {"rc": share_consumer(b, "rc"), "ru": share_consumer(b, "ru")}
    got: dict[str, list[bytes]] = {"rc": [], "ru": []}
    try:
        poll_until(consumers, got, lambda: len(got["rc"]) >= len(committed) and len(got["ru"]) >= 15, 40)
        assert sorted(got["rc"]) == sorted(committed)
        assert sorted(got["ru"]) == sorted(committed + aborted)  # the control: the aborted records are there

        # An open transaction holds back read_committed from its first record on, plain records after it too.
        p3 = txn_producer(b)
        p3.begin_transaction()
        send(p3, names("open", 2))
        send(plain, [b"plain-2"])
        later = [*names("open", 2), b"plain-2"]
        # Once the read_uncommitted group has them, they are in the log below the high watermark; the
        # read_committed one keeps polling meanwhile and must not have had any.
        poll_until(consumers, got, lambda: set(later) <= set(got["ru"]), 20)
        deadline = time.monotonic() + 2
        poll_until(consumers, got, lambda: time.monotonic() > deadline, 10)
        assert sorted(got["rc"]) == sorted(committed), "read_committed got records of an open transaction"
        p3.commit_transaction(30)
        poll_until(consumers, got, lambda: set(later) <= set(got["rc"]), 20)
        assert sorted(got["rc"]) == sorted(committed + later)  # exactly once each, never an aborted one
        assert sorted(got["ru"]) == sorted(committed + aborted + later)
    finally:
        for c in consumers.values():
            c.close()
