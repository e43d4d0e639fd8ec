"""Real clients over secured listeners of a real node: SASL_SSL with SCRAM-SHA-512 (confluent-kafka,
kafka-python, aiokafka, kcat), SSL with client certificates, and each listener advertising itself."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.integration.helpers import create_topic, topic_name
from tests.integration.security_node import ALICE_PASSWORD, SecureNode, start_secure_node

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    n = start_secure_node(tmp_path_factory.mktemp("secure"))
    yield n
    n.broker.stop()


def _produce(conf: dict[str, str], topic: str, count: int) -> int:
    acked = [0]

    def done(err: object, _msg: object) -> None:
        acked[0] += err is None

    p = Producer({**conf, "acks": "all"})
    for i in range(count):
        p.produce(topic, f"v{i}".encode(), key=f"k{i}".encode(), on_delivery=done)
    assert p.flush(30) == 0
    return acked[0]


def _consume(conf: dict[str, str], topic: str, count: int, timeout: float = 30) -> list[bytes]:
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_confluent_scram_sha512_over_sasl_ssl(node: SecureNode) -> None:
    topic = topic_name("scram")
    conf = node.librdkafka_sasl_ssl("alice", ALICE_PASSWORD)
    assert _produce(conf, topic, 50) == 50
    assert _consume(conf, topic, 50) == [f"v{i}".encode() for i in range(50)]


def test_confluent_scram_sha256_and_plain_over_sasl_plaintext(node: SecureNode) -> None:
    topic = topic_name("sasl-plain")
    for mechanism in ("SCRAM-SHA-256", "PLAIN"):
        conf = {
            "bootstrap.servers": node.sasl_plaintext,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "alice",
            "sasl.password": ALICE_PASSWORD,
        }
        assert _produce(conf, topic, 10) == 10


def test_confluent_client_certificate_over_ssl(node: SecureNode) -> None:
    topic = topic_name("mtls")
    conf = node.librdkafka_ssl()
    assert _produce(conf, topic, 20) == 20
    assert len(_consume(conf, topic, 20)) == 20


def test_kafka_python_scram_and_client_certificate(node: SecureNode) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = topic_name("kp-sec")
    create_topic(node.plaintext, topic)
    scram = {
        "bootstrap_servers": node.sasl_ssl,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": ALICE_PASSWORD,
        "ssl_cafile": str(node.pki.ca_cert),
    }
    mtls = {
        "bootstrap_servers": node.ssl,
        "security_protocol": "SSL",
        "ssl_cafile": str(node.pki.ca_cert),
        "ssl_certfile": str(node.pki.client_cert),
        "ssl_keyfile": str(node.pki.client_key),
    }
    for conf in (scram, mtls):
        p = KafkaProducer(acks="all", **conf)
        for i in range(10):
            p.send(topic, f"x{i}".encode()).get(timeout=20)
        p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=5000, **mtls)
    values = [m.value for m in c]
    c.close()
    assert len(values) == 20


def test_aiokafka_scram_and_client_certificate(node: SecureNode) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = topic_name("aio-sec")
    create_topic(node.plaintext, topic)

    async def run() -> list[bytes]:
        scram_ctx = create_ssl_context(cafile=str(node.pki.ca_cert))
        p = AIOKafkaProducer(
            bootstrap_servers=node.sasl_ssl,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password=ALICE_PASSWORD,
            ssl_context=scram_ctx,
            acks="all",
        )
        await p.start()
        try:
            for i in range(10):
                await p.send_and_wait(topic, f"a{i}".encode())
        finally:
            await p.stop()
        mtls_ctx = create_ssl_context(
            cafile=str(node.pki.ca_cert), certfile=str(node.pki.client_cert), keyfile=str(node.pki.client_key)
        )
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=node.ssl,
            security_protocol="SSL",
            ssl_context=mtls_ctx,
            auto_offset_reset="earliest",
        )
        await c.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    got.extend(m.value for m in msgs)
        finally:
            await c.stop()
        return got

    assert asyncio.run(asyncio.wait_for(run(), 60)) == [f"a{i}".encode() for i in range(10)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (scripts/setup installs it)")
def test_kcat_over_sasl_ssl(node: SecureNode) -> None:
    topic = topic_name("kcat-sec")
    create_topic(node.plaintext, topic)
    sec = [
        "-X", "security.protocol=SASL_SSL",
        "-X", "sasl.mechanisms=SCRAM-SHA-512",
        "-X", "sasl.username=alice",
        "-X", f"sasl.password={ALICE_PASSWORD}",
        "-X", f"ssl.ca.location={node.pki.ca_cert}",
    ]  # fmt: skip
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    produce = ["kcat", "-b", node.sasl_ssl, *sec, "-t", topic, "-P", "-K:"]
    subprocess.run(produce, input=lines.encode(), check=True, timeout=30)
    out = subprocess.run(
        ["kcat", "-b", node.sasl_ssl, *sec, "-t", topic, "-C", "-o", "beginning", "-e", "-f", "%k=%s\n"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    assert out.splitlines() == [f"k{i}=v{i}" for i in range(10)]


def test_each_listener_advertises_its_own_address(node: SecureNode) -> None:
    """Metadata names the brokers at the listener the client came in on: a SASL_SSL client must never be
    sent to the PLAINTEXT port."""
    for conf, port in (
        (node.librdkafka_sasl_ssl("alice", ALICE_PASSWORD), node.sasl_ssl_port),
        (node.librdkafka_ssl(), node.ssl_port),
        ({"bootstrap.servers": node.plaintext}, node.broker.port),
    ):
        md = AdminClient(conf).list_topics(timeout=10)
        assert {b.port for b in md.brokers.values()} == {port}


def test_no_secret_in_the_broker_log(node: SecureNode, tmp_path: Path) -> None:
    # Some failed logins first, so the failure paths have logged what they log.
    bad = Producer({**node.librdkafka_sasl_ssl("alice", "not-" + ALICE_PASSWORD), "message.timeout.ms": 2000})
    bad.produce("t", b"x")
    bad.flush(3)
    text = node.broker.log_text()
    assert "authentication failed" in text.lower()
    for secret in (ALICE_PASSWORD, "not-" + ALICE_PASSWORD, "admin-Secr3t-pw"):
        assert secret not in text


def test_describe_configs_hides_passwords_and_keys(node: SecureNode) -> None:
    from confluent_kafka.admin import ConfigResource

    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    admin = AdminClient({"bootstrap.servers": node.plaintext})
    configs = admin.describe_configs([res])[res].result(15)
    jaas = configs["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert configs["ssl.keystore.location"].value == str(node.pki.broker_keystore)  # a path is not a secret
    assert not configs["ssl.keystore.location"].is_sensitive
