"""KIP-392, fetching from the closest replica: which replica a consumer should read from (the leader's
decision) and what a follower answers a consumer that reads from it.

The leader decides only for a consumer (replica id -1) whose Fetch carries client metadata (v11+) and only
when replica.selector.class names Kafka's RackAwareReplicaSelector; without a selector every consumer reads
from the leader (Kafka's default). The candidates are the leader and the followers in the ISR whose log
holds the fetch offset (log start <= offset <= log end) on a live broker; among them the selector prefers
the leader when it shares the client's rack, else the most caught-up replica of that rack (largest log end,
then the most recently caught up), else the leader. Choosing another replica, the leader answers with
preferred_read_replica set and no records.

A follower serves a consumer's fetch (v11+; an older one only reads from leaders) up to its own high
watermark: never a record the ISR may not hold. Kafka's answers: the leader epoch is checked as a leader
checks it (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), an offset outside [log start, log end] is
OFFSET_OUT_OF_RANGE (the consumer goes back to the leader), and an offset between the HW and the log end
gets no records and no error until the HW passes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.replication.types import FetchDecision

# replica.selector.class values: Kafka's class name (and its simple name) of the one selector it ships.
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTOR_NAMES = frozenset({RACK_AWARE_SELECTOR, "RackAwareReplicaSelector"})
NO_PREFERRED = -1


@dataclass(frozen=True)
class ReplicaView:
    """A replica as the selector sees it."""

    broker: int
    log_end_offset: int
    since_caught_up_ms: int  # 0: caught up now (the leader always is)


def eligible(
    followers: Mapping[int, tuple[int, int, int]], isr: frozenset[int], fetch_offset: int, now_ms: int
) -> list[ReplicaView]:
    """Followers (broker -> (log start, log end, last caught up ms)) that may serve ``fetch_offset``: in
    the ISR, and their log holds the offset."""
    return [
        ReplicaView(b, end, max(0, now_ms - caught_up))
        for b, (start, end, caught_up) in sorted(followers.items())
        if b in isr and start <= fetch_offset <= end
    ]


def select(
    client_rack: str, leader: ReplicaView, followers: Sequence[ReplicaView], racks: Mapping[int, str | None]
) -> int:
    """Kafka's RackAwareReplicaSelector: the broker a consumer on ``client_rack`` should read from, as the
    Fetch's preferred_read_replica (NO_PREFERRED: the leader itself). ``racks`` names the live brokers'
    racks; a follower on a broker not in it (fenced, gone) is never chosen."""
    if not client_rack:
        return NO_PREFERRED
    if racks.get(leader.broker) == client_rack:
        return NO_PREFERRED
    near = [f for f in followers if f.broker != leader.broker and racks.get(f.broker) == client_rack]
    if not near:
        return NO_PREFERRED
    best = max(near, key=lambda f: (f.log_end_offset, -f.since_caught_up_ms, -f.broker))
    return best.broker


def follower_read(
    fetch_offset: int,
    epoch_error: int,
    high_watermark: int,
    log_start_offset: int,
    log_end_offset: int,
    last_stable_offset: int,
    read_committed: bool,
) -> FetchDecision:
    """A follower's answer to a consumer reading from it (KIP-392): up to its HW (or LSO), never above."""
    if epoch_error:
        return FetchDecision(epoch_error, high_watermark)
    if fetch_offset < log_start_offset or fetch_offset > log_end_offset:
        return FetchDecision(Err.OFFSET_OUT_OF_RANGE, high_watermark, log_start_offset)
    bound = last_stable_offset if read_committed else high_watermark
    # An offset above the bound reads nothing (read_from >= read_to): empty, no error, as Kafka's follower.
    return FetchDecision(
        Err.NONE, high_watermark, log_start_offset, None, fetch_offset, max(bound, 0), last_stable_offset
    )
