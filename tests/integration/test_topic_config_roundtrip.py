"""Every topic config Kafka 4.2 has, through real admin clients: what DescribeConfigs lists can be written
back unchanged (AlterConfigs and IncrementalAlterConfigs, confluent-kafka and kafka-python), a config
epochlog does not act on says so in its documentation, and a cleanup.policy emptied by SUBTRACT is
accepted (Kafka 4.2, KIP-1161) and keeps the log whole."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp
from kafka.admin import ConfigResource as KConfigResource

from epochlog.config_defs import NOT_ACTED_ON, TOPIC_CONFIGS
from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, topic_name
from tests.integration.kafka_wire import WireClient, schema_module


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return dict(admin.describe_configs([res])[res].result(15))


def test_describe_everything_then_write_it_all_back(broker: BrokerProcess) -> None:
    topic = topic_name("roundtrip")
    create_topic(broker.bootstrap, topic, config={"file.delete.delay.ms": "1000", "segment.jitter.ms": "5"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = _describe(admin, topic)
    assert set(described) == set(TOPIC_CONFIGS)
    assert described["file.delete.delay.ms"].value == "1000"
    values = {n: e.value for n, e in described.items()}
    # AlterConfigs: the whole set, as a client that copies a topic's configs sends it.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=values)
    admin.alter_configs([res])[res].result(15)
    # IncrementalAlterConfigs: one SET per config.
    ops = [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in values.items()]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
    admin.incremental_alter_configs([res])[res].result(15)
    again = _describe(admin, topic)
    assert {n: e.value for n, e in again.items()} == values


def test_kafka_python_writes_back_what_it_described(broker: BrokerProcess) -> None:
    topic = topic_name("roundtrippy")
    create_topic(broker.bootstrap, topic)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        got = a.describe_configs([KConfigResource("TOPIC", topic)], config_filter="all")
        entries = got["topic"][topic]
        assert set(entries) == set(TOPIC_CONFIGS)
        values = {n: e["value"] for n, e in entries.items()}
        for incremental in (True, False):
            out = a.alter_configs([KConfigResource("TOPIC", topic, values)], incremental=incremental)
            assert out == {"topic": {topic: "OK"}}, out
            again = a.describe_configs([KConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
            assert {n: e["value"] for n, e in again.items()} == values
    finally:
        a.close()


def test_configs_not_acted_on_say_so(broker: BrokerProcess) -> None:
    """DescribeConfigs v4 with include_documentation: a config epochlog accepts but ignores says so."""
    topic = topic_name("docs")
    create_topic(broker.bootstrap, topic)
    m = schema_module(32, 4)
    wire = WireClient(broker.port)
    try:
        r = wire.request(
            32,
            4,
            resources=(m.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None),),
            include_synonyms=False,
            include_documentation=True,
        )
    finally:
        wire.close()
    docs = {c.name: c.documentation or "" for c in r.results[0].configs}
    for name in ("preallocate", "local.retention.ms", "compression.zstd.level", "file.delete.delay.ms"):
        assert docs[name].startswith(NOT_ACTED_ON), name
    assert not docs["retention.ms"].startswith(NOT_ACTED_ON)


def test_remote_storage_is_refused_as_kafka_refuses_it(broker: BrokerProcess) -> None:
    topic = topic_name("tiered")
    create_topic(broker.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ops = [ConfigEntry("remote.storage.enable", "true", incremental_operation=AlterConfigOpType.SET)]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
    try:
        admin.incremental_alter_configs([res])[res].result(15)
        raise AssertionError("remote.storage.enable=true was accepted")
    except Exception as e:  # KafkaException(INVALID_CONFIG)
        assert "Tiered Storage functionality is disabled" in str(e)


def test_cleanup_policy_emptied_by_subtract(broker: BrokerProcess) -> None:
    topic = topic_name("forever")
    create_topic(broker.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(value: str, op: AlterConfigOpType) -> None:
        ops = [ConfigEntry("cleanup.policy", value, incremental_operation=op)]
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
        admin.incremental_alter_configs([res])[res].result(15)

    alter("delete", AlterConfigOpType.SUBTRACT)
    assert _describe(admin, topic)["cleanup.policy"].value == ""
    alter("compact", AlterConfigOpType.APPEND)
    assert _describe(admin, topic)["cleanup.policy"].value == "compact"
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        out = a.alter_configs(
            [KConfigResource("TOPIC", topic, {"cleanup.policy": (AlterConfigOp.SUBTRACT, "compact")})],
            incremental=True,
        )
        assert out == {"topic": {topic: "OK"}}, out
    finally:
        a.close()
    assert _describe(admin, topic)["cleanup.policy"].value == ""
