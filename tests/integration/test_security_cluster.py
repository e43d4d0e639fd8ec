"""A cluster that speaks SASL_SSL everywhere: three controllers elect each other and three brokers
register, fetch metadata and replicate over SASL_SSL with SCRAM-SHA-512, and clients get in the same way.
The credentials come from `epochlog storage format --add-scram` on every node, before its first start."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.properties import load_properties
from epochlog.server.cluster.local import LocalCluster, free_base_port
from tests.integration.cluster_helpers import QUORUM, wait_until
from tests.integration.security_node import format_scram
from tests.pki import make_pki

pytestmark = pytest.mark.integration

BROKER_PASSWORD = "br0ker-Secr3t"
ADMIN_PASSWORD = "adm1n-Secr3t"


def _jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def _rewrite(path: Path, listener: str, extra: dict[str, str]) -> None:
    props = load_properties(path)
    props["listeners"] = props["listeners"].replace("PLAINTEXT://", f"{listener}://")
    props.update(extra)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


@pytest.fixture
def secure_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    pki = make_pki(tmp_path / "pki")
    common = {
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL",
        "controller.listener.names": "CONTROLLER",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
        "listener.name.controller.scram-sha-512.sasl.jaas.config": _jaas("broker", BROKER_PASSWORD),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_cert),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker;User:admin",
    }
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, base_port=free_base_port(3, controllers=3), controllers=3)
    for node in cluster.nodes.values():
        if node.role == "controller":
            _rewrite(node.config, "CONTROLLER", {**common, **QUORUM})
        else:
            _rewrite(
                node.config,
                "SASL_SSL",
                {
                    **common,
                    "inter.broker.listener.name": "SASL_SSL",
                    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                    "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": _jaas("broker", BROKER_PASSWORD),
                },
            )
        data = Path(load_properties(node.config)["log.dirs"])
        format_scram(data, ("SCRAM-SHA-512", "broker", BROKER_PASSWORD), ("SCRAM-SHA-512", "admin", ADMIN_PASSWORD))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _client(cluster: LocalCluster, user: str, password: str) -> dict[str, str]:
    pki_ca = Path(load_properties(cluster.broker(1).config)["ssl.truststore.location"])
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(pki_ca),
    }


def test_a_sasl_ssl_cluster_replicates_and_survives_a_leader_kill(secure_cluster: LocalCluster) -> None:
    conf = _client(secure_cluster, "admin", ADMIN_PASSWORD)
    admin = AdminClient(conf)
    topic = "secure-replicated"
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)

    def isr_full() -> bool:
        md = admin.list_topics(topic, timeout=5)
        return len(md.topics[topic].partitions[0].isrs) == 3

    wait_until(isr_full, 30, "every replica in the ISR (followers fetch over SASL_SSL)")
    acked: list[int] = []

    def produce(start: int, count: int) -> None:
        p = Producer({**conf, "acks": "all", "enable.idempotence": True})
        for i in range(start, start + count):
            p.produce(topic, str(i).encode(), on_delivery=lambda e, m: None if e else acked.append(int(m.value())))
        assert p.flush(60) == 0

    produce(0, 200)
    leader = admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader
    secure_cluster.kill9(f"broker-{leader}")

    def new_leader() -> bool:
        p = AdminClient(conf).list_topics(topic, timeout=5).topics[topic].partitions[0]
        return p.leader not in (-1, leader)

    wait_until(new_leader, 30, "a new leader elected by the controllers over SASL_SSL")
    produce(200, 200)
    assert len(acked) == 400
    # Read by assignment: a group would need __consumer_offsets, which waits for its 3 replicas' brokers.
    c = Consumer({**conf, "group.id": "secure-check", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: set[int] = set()
    deadline = time.monotonic() + 60
    while len(got) < 400 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.add(int(m.value()))
    c.close()
    assert set(acked) <= got  # no acknowledged write lost

    # A wrong password is refused by the brokers; nothing was ever served in the clear.
    bad = AdminClient({**_client(secure_cluster, "admin", "wrong"), "socket.timeout.ms": 3000})
    with pytest.raises(Exception):  # noqa: B017 - librdkafka raises KafkaException with a transport error
        bad.list_topics(timeout=4)
    for node in secure_cluster.nodes.values():
        text = node.log.read_text(errors="replace")
        assert BROKER_PASSWORD not in text and ADMIN_PASSWORD not in text
