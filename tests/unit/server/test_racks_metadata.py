"""broker.rack travels from server.properties through the broker's registration, the metadata record and
every broker's image to the Metadata and DescribeCluster answers and to DescribeConfigs."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest
from kio.schema.types import BrokerId
from kio.static.primitive import i64

from epochlog.config_defs import ConfigSource
from epochlog.controller.controller import Controller
from epochlog.controller.records import BrokerRegistration, from_json, to_json
from epochlog.protocol.codec import RequestHeader
from epochlog.server.cluster.controller_apis import broker_registration
from epochlog.server.cluster.image import MetadataImage
from epochlog.server.config import BrokerConfig
from epochlog.server.handlers.metadata import _broker_rows
from epochlog.server.topic_configs import DynamicBrokerConfigs, broker_config_entries

pytestmark = pytest.mark.unit


def test_broker_rack_is_read_from_server_properties() -> None:
    assert BrokerConfig.from_properties({"broker.rack": "rack-2"}).broker_rack == "rack-2"
    assert BrokerConfig.from_properties({}).broker_rack is None
    assert BrokerConfig.from_properties({"broker.rack": " "}).broker_rack is None


def test_the_record_stores_a_rack_and_omits_none() -> None:
    kind, data = to_json(BrokerRegistration(1, 1, "h", 1, rack="r1"))
    assert data["rack"] == "r1"
    assert from_json(kind, data) == BrokerRegistration(1, 1, "h", 1, rack="r1")
    _, rackless = to_json(BrokerRegistration(1, 1, "h", 1))
    assert "rack" not in rackless  # a cluster without racks writes the records it always wrote


def test_registration_carries_the_rack_to_every_image_and_snapshot() -> None:
    core = Controller()
    core.register_broker(1, 0, rack="rack-1")
    core.register_broker(2, 0)
    image = MetadataImage()
    for r in core.records:
        image.apply(r)
    assert {b.broker_id: b.rack for b in image.live_brokers()} == {1: "rack-1", 2: None}
    again = MetadataImage()
    for r in core.snapshot_records():
        again.apply(r)
    assert again.brokers[1].rack == "rack-1"
    core.register_broker(1, 10)  # restarted without broker.rack: it has none now
    assert core.brokers[1].rack is None


def test_the_controller_records_the_rack_the_broker_registered_with() -> None:
    core = Controller()
    server: Any = SimpleNamespace(
        config=SimpleNamespace(cluster_id=""),
        cluster_id="c",
        core=core,
        qc=SimpleNamespace(session_opened=lambda conn, b: None),
        offline_dirs={},
        dir_assignments={},
        persist=lambda: None,
    )
    req = BrokerRegistrationRequest(
        broker_id=BrokerId(4),
        cluster_id="c",
        incarnation_id=uuid.uuid4(),
        listeners=(),
        features=(),
        rack="rack-3",
        previous_broker_epoch=i64(-1),
    )
    assert broker_registration(server, None, req)["error_code"] == 0
    assert core.brokers[4].rack == "rack-3"


def test_metadata_and_describe_cluster_rows_carry_the_rack() -> None:
    core = Controller()
    core.register_broker(1, 0, host="h", port=1, rack="rack-1")
    core.register_broker(2, 0, host="h", port=2)
    image = MetadataImage()
    for r in core.records:
        image.apply(r)
    broker: Any = SimpleNamespace(image=image)
    header = RequestHeader(3, 12, 0, None, 0)
    rows = {r["node_id"]: r["rack"] for r in _broker_rows(broker, header)}
    assert rows == {1: "rack-1", 2: None}


def test_describe_configs_shows_broker_rack_set_or_not() -> None:
    rows = broker_config_entries(BrokerConfig.from_properties({"broker.rack": "r9"}), DynamicBrokerConfigs())
    (rack,) = [e for e in rows if e.name == "broker.rack"]
    assert (rack.value, rack.source, rack.read_only) == ("r9", ConfigSource.STATIC_BROKER_CONFIG, True)
    rows = broker_config_entries(BrokerConfig.from_properties({}), DynamicBrokerConfigs())
    (rack,) = [e for e in rows if e.name == "broker.rack"]
    assert (rack.value, rack.source) == (None, ConfigSource.DEFAULT_CONFIG)


def test_a_local_cluster_with_racks_deals_brokers_round_robin(tmp_path: Any) -> None:
    from epochlog.properties import load_properties
    from epochlog.server.cluster.local import LocalCluster

    lc = LocalCluster(tmp_path / "c", 6, 20000, racks=3)
    assert [load_properties(lc.broker(b).config).get("broker.rack") for b in lc.broker_ids()] == [
        "rack-1", "rack-2", "rack-3", "rack-1", "rack-2", "rack-3"
    ]
    assert "broker.rack" not in load_properties(LocalCluster(tmp_path / "d", 2, 20100).broker(1).config)
