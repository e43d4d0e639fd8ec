"""A broker's metadata is the controller's ClusterImage, applied by the same apply(): every broker and the
controller agree on a topic's id, partitions and brokers, and no broker makes an id up."""

from __future__ import annotations

import uuid

import pytest

from epochlog.controller.controller import Controller
from epochlog.controller.image import NO_TOPIC_ID
from epochlog.controller.records import BrokerRegistration, PartitionChange, Topic, TopicDeleted
from epochlog.server.cluster.image import MetadataImage

pytestmark = pytest.mark.unit

TID = uuid.UUID("6b1a0f5e-4a35-4b7e-9a1b-0c2d3e4f5a6b")


def _images(records: list[object]) -> tuple[MetadataImage, MetadataImage]:
    a, b = MetadataImage(), MetadataImage()
    for r in records:
        a.apply(r)  # type: ignore[arg-type]
        b.apply(r)  # type: ignore[arg-type]
    return a, b


def test_a_topic_without_an_id_has_the_same_id_on_every_broker() -> None:
    a, b = _images([Topic("t", 1), PartitionChange("t", 0, 1, 0, (1,), (1,), 0)])
    assert a.topics["t"].uuid == b.topics["t"].uuid == NO_TOPIC_ID
    assert a.topic_name_for_id(NO_TOPIC_ID) is None  # no id: nobody can name it by one


def test_the_broker_reads_what_the_controller_applied() -> None:
    core = Controller()
    core.register_broker(1, 0)
    core.create_topic("t", 2, 1, topic_id=str(TID))
    image = MetadataImage()
    for r in core.records:
        image.apply(r)
    assert image.topics["t"].uuid == TID
    assert image.topic_name_for_id(TID) == "t"
    assert dict(image.states) == {("t", p): core.image.topics["t"].partitions[p] for p in range(2)}
    assert [b.broker_id for b in image.live_brokers()] == [1]


def test_deleting_a_topic_forgets_its_id_and_partitions() -> None:
    image = MetadataImage()
    image.apply(Topic("t", 1, id=str(TID)))
    image.apply(PartitionChange("t", 0, 1, 0, (1,), (1,), 0))
    applied = image.apply(TopicDeleted("t"))
    assert [t.name for t in applied.deleted] == ["t"]
    assert image.topic_name_for_id(TID) is None
    assert ("t", 0) not in image.states and len(image.states) == 0


def test_a_broker_is_reached_through_the_listener_a_client_came_in_on() -> None:
    image = MetadataImage()
    image.apply(BrokerRegistration(1, 3, "10.0.0.1", 9092, listeners=(("INTERNAL", "10.0.0.1", 9092), ("EXT", "h", 1))))
    ep = image.brokers[1]
    assert ep.address_for("EXT") == ("h", 1)
    assert ep.address_for("OTHER") == ("10.0.0.1", 9092)
