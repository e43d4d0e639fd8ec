"""KIP-951: an answer that says "not the leader" also names the current leader and its endpoint, so the
client can move on without a metadata round trip (librdkafka 2.4+ and Kafka 3.7+ clients use it).
Produce v10+ and Fetch v16+ carry them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.protocol.errors import Err

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi

HINTED_ERRORS = (Err.NOT_LEADER_OR_FOLLOWER, Err.FENCED_LEADER_EPOCH)


def disowned(broker: BrokerApi, topic: str, partition: int, leader: int, now: int) -> bool:
    """The metadata here names this broker leader, but it no longer serves as one (its lease ran out and its
    followers left, replication/lease.py): naming it would only bring clients back."""
    if leader != broker.config.node_id:
        return False
    part = broker.partition(topic, partition)
    return part is not None and not part.replica.serves_as_leader(now)


def add_hint(
    broker: BrokerApi, topic: str | None, partition: int, row: dict[str, Any], nodes: dict[int, Any], listener: str = ""
) -> None:
    """Set ``row["current_leader"]`` when the row's error calls for it and the leader is known, and add
    the leader's endpoint to ``nodes`` (node id -> NodeEndpoint fields)."""
    image = broker.image
    if topic is None or row.get("error_code") not in HINTED_ERRORS:
        return
    st = image.states.get((topic, partition))
    if st is None or st.leader < 0:
        return
    if disowned(broker, topic, partition, st.leader, now_ms()):
        return
    row["current_leader"] = {"leader_id": st.leader, "leader_epoch": st.leader_epoch}
    ep = image.brokers.get(st.leader)
    if ep is not None:
        host, port = ep.address_for(listener)
        nodes[ep.broker_id] = {"node_id": ep.broker_id, "host": host, "port": port, "rack": ep.rack}
