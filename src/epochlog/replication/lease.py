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
moves clients away sooner. A heartbeat answered "fenced" ends it at once; the next heartbeat answered
unfenced starts it again, and the broker serves as whatever the metadata then says.
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

    def remaining_ms(self, now_ms: int) -> int:
        return max(0, self.expires_ms - now_ms) if self.enabled else 1 << 62


# A node with no controller to be fenced by (a single node): always holds.
NO_LEASE = BrokerLease(0, enabled=False)
