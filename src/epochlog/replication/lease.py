"""A broker's lease on its leaderships, from the heartbeats the active controller answers (beyond Kafka).

The active controller fences a broker it has not heard from for broker.session.timeout.ms, counted from
when each heartbeat ARRIVED (Kafka's BrokerHeartbeatManager touches the broker on receipt). Counting the
lease from when the answered heartbeat was SENT makes it end no later than that deadline, whatever the
network delay, so a broker whose lease has expired knows the controller has fenced it or is about to,
and that another replica is or will be leader. A cut-off leader then stops acting as one toward clients:
acks=all writes waiting on it and new writes are answered NOT_LEADER_OR_FOLLOWER (retriable: an
idempotent producer sends the same sequence to the new leader, which answers a batch it already has as
a duplicate), and its Metadata answers stop naming it leader, so clients refresh from another broker.
Without the lease such writes waited for the client's timeout, and clients kept coming back to it.

The lease says nothing about what is committed: the ISR and the HW decide that, lease or not. It only
moves clients away sooner. So a leader whose followers in the ISR all still fetch from it keeps serving past
its lease (PartitionReplica.isr_following): its writes still commit, and with the whole controller quorum
down (no controller to fence anyone; the next one gives every broker a fresh session) the cluster stays
writable as Kafka's does. A leader cut off from the controller only stops once the controller has moved its
partitions and the followers have gone to the new leader. The only ISR member keeps serving too: no clean
election can move its partition, so stopping would only take it offline.

A heartbeat answered "fenced" ends the lease at once; the next one answered unfenced starts it again, and
the broker serves as whatever the metadata then says.
"""

from __future__ import annotations


class BrokerLease:
    """Pure in ``now``: the caller says when a heartbeat was sent and how it was answered."""

    __slots__ = ("enabled", "expires_ms", "timeout_ms")

    def __init__(self, timeout_ms: int, enabled: bool = True, expires_ms: int = 0) -> None:
        self.timeout_ms = timeout_ms
        self.enabled = enabled
        # Not held until the first unfenced answer: a broker that just registered is fenced until then.
        self.expires_ms = expires_ms

    def answered(self, sent_ms: int, fenced: bool) -> None:
        """The active controller answered the heartbeat sent at ``sent_ms``: unfenced renews the lease to
        ``sent_ms`` + the session timeout (never shortening it: answers may come out of order); fenced
        ends it."""
        if fenced:
            self.expires_ms = 0
        else:
            self.expires_ms = max(self.expires_ms, sent_ms + self.timeout_ms)

    def holds(self, now_ms: int) -> bool:
        return not self.enabled or now_ms < self.expires_ms

    def lapsed(self, now_ms: int) -> bool:
        """Held once and run out for want of answers (not ended by a "fenced" answer, not yet begun): the
        broker is cut off from the active controller, and its clients should ask another broker."""
        return self.enabled and 0 < self.expires_ms <= now_ms

    def remaining_ms(self, now_ms: int) -> int:
        return max(0, self.expires_ms - now_ms) if self.enabled else 1 << 62


# A node with no controller to be fenced by (a single node): always holds.
NO_LEASE = BrokerLease(0, enabled=False)
