"""What a replica's own log may count toward an acknowledgement.

With ``flush.messages=1`` (Kafka's ``log.flush.interval.messages=1``) a topic promises that an acknowledged
record survives a power loss of every replica at once. The driver does not fsync each append: it syncs each
log once per event-loop turn (group commit) and reports how far the log is durable after each sync. Until
then the records exist only in the page cache, so none of them may count:

- on a leader, toward an acks=1 answer or toward its own place in the high watermark (the minimum over the
  ISR: the leader's contribution is its durable end, not its log end);
- on a follower, toward the fetch offset it sends its leader, which is how the leader learns what the
  follower holds (the fetch offset is also where the next read starts, so the follower syncs before it
  fetches again rather than reporting less than its log end).

Without that policy (the default) every record counts once written, as in Kafka: a power loss of all
replicas may lose acknowledged records, a loss of a minority does not.
"""

from __future__ import annotations


class Durability:
    __slots__ = ("count_unsynced", "durable_end_offset", "sync_before_ack")

    def __init__(self, sync_before_ack: bool = False, durable_end_offset: int = 0) -> None:
        self.sync_before_ack = sync_before_ack
        # The log holds every offset below this on stable storage, as the driver last reported.
        self.durable_end_offset = durable_end_offset
        # For the simulator's break-on-purpose run only: count the unsynced log end as if it were durable.
        self.count_unsynced = False

    @property
    def enforced(self) -> bool:
        return self.sync_before_ack and not self.count_unsynced

    def countable_end(self, log_end_offset: int) -> int:
        """The end of what this replica may count as held, for acknowledgements and the HW."""
        if not self.enforced:
            return log_end_offset
        return min(self.durable_end_offset, log_end_offset)

    def needs_sync(self, log_end_offset: int) -> bool:
        """Records above the durable end wait for a sync before they can count."""
        return self.enforced and self.durable_end_offset < log_end_offset

    def synced(self, offset: int, log_end_offset: int) -> bool:
        """The driver made the log durable up to ``offset`` (the log end when its sync began; a sync begun
        before a truncation is not reported, since the records it covered may be gone). Returns whether
        the durable end moved."""
        new = min(offset, log_end_offset)
        if new <= self.durable_end_offset:
            return False
        self.durable_end_offset = new
        return True

    def truncated(self, log_end_offset: int) -> None:
        """The log was cut: offsets at or above its new end hold other records from now on."""
        self.durable_end_offset = min(self.durable_end_offset, log_end_offset)
