"""The groups the coordinator serves are the membership core's (epochlog.groups.model); here, what the
driver adds to them: which topics a "consumer" group subscribes to (OffsetDelete), read from the members'
subscriptions with the consumer protocol's parser."""

from __future__ import annotations

from epochlog.groups.model import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    STATES,
    Group,
    Member,
)
from epochlog.protocol.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL
from epochlog.protocol.consumer_protocol import subscribed_topics as member_topics

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "PREPARING_REBALANCE",
    "STABLE",
    "STATES",
    "Group",
    "Member",
    "is_subscribed_to",
    "subscribed_topics",
]


def subscribed_topics(g: Group) -> frozenset[str] | None:
    """The topics the members of a "consumer" group subscribe to (the union of their subscriptions in the
    chosen protocol); None when not known: another protocol type, no protocol chosen yet, or a subscription
    that does not parse. Kafka keeps the set of the last generation; this reads the members as they are
    now, which is the same set once the group is Stable."""
    if g.protocol_type != CONSUMER_PROTOCOL:
        return None
    if not g.members:
        return frozenset()
    if g.protocol_name is None:
        return None
    topics: set[str] = set()
    for m in g.members.values():
        mine = member_topics(m.metadata_for(g.protocol_name))
        if mine is None:
            return None
        topics |= mine
    return frozenset(topics)


def is_subscribed_to(g: Group, topic: str) -> bool:
    """Kafka's rule: when the subscriptions are not known, a "consumer" group counts as subscribed to every
    topic (its offsets are not deleted from under it), any other group to none."""
    topics = subscribed_topics(g)
    if topics is None:
        return g.protocol_type == CONSUMER_PROTOCOL
    return topic in topics
