"""The topics a classic consumer group member subscribes to, from its JoinGroup metadata.

The metadata of protocol type "consumer" is a ConsumerProtocolSubscription: a version, then a body of
which version 0 is the prefix of every later one. As Kafka's coordinator does, only that prefix is read,
so a newer client's subscription still names its topics. The bytes are the client's: they go through the
length-checking reader.
"""

from __future__ import annotations

import struct

from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription

from epochlog.protocol.tolerant_reader import tolerant_reader

PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics named by one member's subscription, None when the bytes are not a subscription."""
    if len(metadata) < 2:
        return None
    (version,) = struct.unpack_from(">h", metadata, 0)
    if version < 0:
        return None
    try:
        sub, _ = tolerant_reader(ConsumerProtocolSubscription)(memoryview(bytes(metadata)).toreadonly(), 2)
    except Exception:  # anything a client can put there: lengths past the end, bad UTF-8...
        return None
    return frozenset(sub.topics)
