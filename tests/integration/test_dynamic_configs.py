"""Dynamic configs on one `epochlog up` node (combined mode), through unmodified clients: confluent-kafka's
incremental_alter_configs / describe_configs, kafka-python's alter_configs / describe_configs and the
`epochlog configs` command. Every change takes effect without a restart and survives one."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, produce, topic_name


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def incremental(a: AdminClient, rtype: ResourceType, name: str, **ops: tuple[AlterConfigOpType, str | None]) -> None:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=op) for k, (op, v) in ops.items()]
    res = ConfigResource(rtype, name, incremental_configs=entries)
    a.incremental_alter_configs([res])[res].result(15)


def describe(a: AdminClient, rtype: ResourceType, name: str) -> dict[str, Any]:
    res = ConfigResource(rtype, name)
    return a.describe_configs([res], request_timeout=15)[res].result(15)


def error_code(fn: Callable[[], Any]) -> int:
    with pytest.raises(KafkaException) as e:
        fn()
    return int(e.value.args[0].code())


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", "configs", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


def test_confluent_incremental_alter_and_describe_with_sources_and_synonyms(broker: BrokerProcess) -> None:
    a = admin(broker.bootstrap)
    topic = topic_name("cfg")
    create_topic(broker.bootstrap, topic)
    d = describe(a, ResourceType.TOPIC, topic)
    assert d["retention.ms"].value == "604800000" and d["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    incremental(a, ResourceType.TOPIC, topic, retention_ms=(SET, "3600000"), cleanup_policy=(SET, "compact"))
    incremental(a, ResourceType.TOPIC, topic, cleanup_policy=(AlterConfigOpType.APPEND, "delete"))
    d = describe(a, ResourceType.TOPIC, topic)
    assert d["retention.ms"].value == "3600000"
    assert d["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert d["cleanup.policy"].value == "compact,delete"
    assert not d["retention.ms"].is_read_only
    # librdkafka asks for synonyms: the override, then the broker default it hides
    assert list(d["retention.ms"].synonyms) == ["retention.ms", "log.retention.ms"]
    incremental(a, ResourceType.TOPIC, topic, retention_ms=(DELETE, None))
    d = describe(a, ResourceType.TOPIC, topic)
    assert d["retention.ms"].value == "604800000" and d["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_bad_names_values_and_read_only_configs_are_invalid_config_and_change_nothing(broker: BrokerProcess) -> None:
    a = admin(broker.bootstrap)
    topic = topic_name("bad")
    create_topic(broker.bootstrap, topic, config={"retention.ms": "5000"})
    cases = [
        {"retention.ms": (SET, "soon")},
        {"retention.mss": (SET, "1")},
        {"min.insync.replicas": (SET, "0")},
        {"retention.bytes": (SET, "100"), "segment.bytes": (SET, "2")},  # one bad config refuses all
        {"retention.ms": (AlterConfigOpType.APPEND, "1")},  # not a list
    ]
    for ops in cases:
        entries = [ConfigEntry(k, v, incremental_operation=op) for k, (op, v) in ops.items()]
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
        code = error_code(lambda res=res: a.incremental_alter_configs([res])[res].result(15))
        assert code == KafkaError.INVALID_CONFIG, ops
    broker_res = ConfigResource(
        ResourceType.BROKER, "1", incremental_configs=[ConfigEntry("log.dirs", "/elsewhere", incremental_operation=SET)]
    )
    # Kafka's brokers answer INVALID_REQUEST for a broker config they cannot change (KAFKA-13609)
    assert error_code(lambda: a.incremental_alter_configs([broker_res])[broker_res].result(15)) == (
        KafkaError.INVALID_REQUEST
    )
    set_one = [ConfigEntry("retention.ms", "7", incremental_operation=SET)]
    missing = ConfigResource(ResourceType.TOPIC, "no-such-topic", incremental_configs=set_one)
    assert error_code(lambda: a.incremental_alter_configs([missing])[missing].result(15)) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART
    )
    # validate_only answers as if it applied, and applies nothing
    ok = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=set_one)
    a.incremental_alter_configs([ok], validate_only=True)[ok].result(15)
    d = describe(a, ResourceType.TOPIC, topic)
    assert d["retention.ms"].value == "5000"
    assert d["retention.bytes"].value == "-1" and d["segment.bytes"].value == "1073741824"
    assert d["cleanup.policy"].value == "delete"
    assert describe(a, ResourceType.BROKER, "1")["log.dirs"].is_read_only


def test_alter_configs_replaces_the_set_and_survives_a_restart(broker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource as KPResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    topic = topic_name("kp")
    create_topic(broker.bootstrap, topic, config={"retention.ms": "5000", "segment.bytes": "4096"})
    # AlterConfigs as confluent-kafka sends it: the resource's dynamic set becomes exactly this one.
    a = admin(broker.bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.bytes": "123456"})
    a.alter_configs([res])[res].result(15)
    d = describe(a, ResourceType.TOPIC, topic)
    assert d["retention.bytes"].value == "123456"
    assert d["retention.ms"].source == d["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        # kafka-python's AlterConfigs keeps the other dynamic configs (it describes them and sends them along).
        out = kp.alter_configs(
            [KPResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "60000"})], incremental=False
        )
        assert out == {"topic": {topic: "OK"}}
        got = kp.describe_configs([KPResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert {k: v["value"] for k, v in got.items()} == {"retention.bytes": "123456", "segment.ms": "60000"}
        assert got["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        bad = kp.alter_configs(
            [KPResource(ConfigResourceType.TOPIC, topic, configs={"retention.bytes": "lots"})],
            incremental=False,
            raise_on_unknown=False,
        )
        assert "InvalidConfig" in bad["topic"][topic], bad
        bad = kp.alter_configs(
            [KPResource(ConfigResourceType.TOPIC, topic, configs={"no.such.config": "1"})], raise_on_unknown=False
        )
        assert "InvalidConfig" in bad["topic"][topic], bad
    finally:
        kp.close()
    broker.restart()
    d = describe(admin(broker.bootstrap), ResourceType.TOPIC, topic)
    assert d["retention.bytes"].value == "123456" and d["segment.ms"].value == "60000"
    assert d["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert d["retention.ms"].value == "604800000"


def test_min_insync_replicas_applies_to_acks_all_without_restart(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    a = admin(broker.bootstrap)
    topic = topic_name("minisr")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"before"], {"acks": "all"})

    def send_one() -> KafkaError | None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 3000, "retries": 0})
        errs: list[KafkaError | None] = []
        p.produce(topic, b"x", on_delivery=lambda err, _m: errs.append(err))
        p.flush(10)
        return errs[0] if errs else KafkaError(KafkaError._TIMED_OUT)

    # The cluster-wide default, from the CLI, then the topic's own override wins over it.
    default = ("--entity-type", "brokers", "--entity-default", "--alter")
    r = cli(broker.bootstrap, *default, "--add-config", "min.insync.replicas=2")
    assert r.returncode == 0, r.stderr
    err = send_one()
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    incremental(a, ResourceType.TOPIC, topic, min_insync_replicas=(SET, "1"))
    assert send_one() is None
    incremental(a, ResourceType.TOPIC, topic, min_insync_replicas=(DELETE, None))
    err = send_one()
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    r = cli(broker.bootstrap, *default, "--delete-config", "min.insync.replicas")
    assert r.returncode == 0, r.stderr
    assert send_one() is None


def test_segment_bytes_and_retention_ms_take_effect_without_restart(broker_factory: Any) -> None:
    b = broker_factory({"log.retention.check.interval.ms": "200"})
    a = admin(b.bootstrap)
    topic = topic_name("roll")
    create_topic(b.bootstrap, topic)
    part = b.data_dir / f"{topic}-0"
    produce(b.bootstrap, topic, [b"a" * 500 for _ in range(20)], {"linger.ms": 0})
    assert len(list(part.glob("*.log"))) == 1
    r = cli(b.bootstrap, "--entity-type=topics", "--entity-name", topic, "--alter", "--add-config=segment.bytes=2048")
    assert r.returncode == 0, r.stderr
    for _ in range(6):  # one batch each: the log rolls when the next batch would pass segment.bytes
        produce(b.bootstrap, topic, [b"b" * 1000], {"linger.ms": 0})
    segments = len(list(part.glob("*.log")))
    assert segments >= 3, f"segment.bytes=2048 did not roll the log ({segments} segments)"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "roll"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 26)
        time.sleep(1.0)  # the records are older than retention.ms=500 by the time it is set
        incremental(a, ResourceType.TOPIC, topic, retention_ms=(SET, "500"))
        low = wait_until(
            lambda: c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0], 15, "retention to delete"
        )
        assert low > 0
    finally:
        c.close()
    r = cli(b.bootstrap, "--entity-type", "topics", "--entity-name", topic, "--describe")
    assert r.returncode == 0, r.stderr
    assert "retention.ms=500" in r.stdout and "segment.bytes=2048" in r.stdout
    assert "retention.bytes" not in r.stdout  # only dynamic configs without --all
    r = cli(b.bootstrap, "--entity-type", "topics", "--entity-name", topic, "--describe", "--all")
    assert "retention.bytes=-1 (DEFAULT_CONFIG)" in r.stdout, r.stdout


def test_cli_describe_default_and_refusals(broker: BrokerProcess) -> None:
    default = ("--entity-type", "brokers", "--entity-default")
    r = cli(broker.bootstrap, *default, "--alter", "--add-config", "log.retention.ms=86400000")
    assert r.returncode == 0, r.stderr
    r = cli(broker.bootstrap, *default, "--describe")
    assert r.returncode == 0 and "log.retention.ms=86400000" in r.stdout, r.stdout
    topic = topic_name("dflt")
    create_topic(broker.bootstrap, topic)
    d = describe(admin(broker.bootstrap), ResourceType.TOPIC, topic)
    assert d["retention.ms"].value == "86400000"
    assert d["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    r = cli(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "node.id=5")
    assert r.returncode == 1 and "INVALID_REQUEST" in r.stderr and "node.id" in r.stderr, r.stderr
    r = cli(broker.bootstrap, "--entity-type", "topics", "--entity-name", topic, "--alter", "--add-config", "nope=1")
    assert r.returncode == 1 and "INVALID_CONFIG" in r.stderr, r.stderr
