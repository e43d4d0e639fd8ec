"""One share-partition as its leader keeps it (KIP-932): who holds which record, until when, how often sent.

Every offset between the share-partition start offset (SPSO) and end offset (SPEO, one past the last offset
fetched into the share-partition) that the log has is in flight, with Kafka's record states:

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
                              |  \\--REJECT / GAP--> ARCHIVED
                              \\--RELEASE, lock timeout, member gone--> AVAILABLE, or ARCHIVED at the limit

- ``acquire`` takes the offset ranges the driver read from the log (from ``next_fetch_offset``, as far as the
  isolation level lets it read: read_committed stops at the LSO, isolation.py) and locks for ``member`` every
  AVAILABLE one and every new one, for ``group.share.record.lock.duration.ms``; each acquisition adds one to
  the record's delivery count. The ranges read that hold aborted transactions (read_committed) are archived
  instead, never delivered, as Kafka 4.1 does. ``max_records`` is a soft limit (a log batch is taken
  whole, as Kafka does); no new records are taken while SPEO - SPSO is ``group.share.partition.max.record.locks``.
- ``acknowledge`` is all or nothing, as Kafka's: every offset named must be ACQUIRED by the member (else
  INVALID_RECORD_STATE), inside what was fetched (else INVALID_REQUEST), with a known type (INVALID_REQUEST).
  Offsets below SPSO are ignored; offsets the log does not have are skipped.
- ``tick`` ends expired locks and ``member_left`` releases a member's records; a release keeps the delivery
  count, and a record delivered ``group.share.delivery.count.limit`` times is archived instead.
- SPSO moves past every leading ACKNOWLEDGED or ARCHIVED record; those leave the in-flight map.

Durability: every change comes out as a ``StateWrite`` (the changed offsets as state batches and SPSO), to be
written by the share coordinator before the fetch or acknowledgement is answered. Acquisitions are written
too, as AVAILABLE with the new delivery count: a lock does not survive its leader, but the delivery attempt
must, or a record that crashes its consumers would be delivered without end across failovers. (Kafka 4.0
writes only acknowledgements and timeouts; this is a deliberate difference.) ``from_state`` rebuilds a
partition from the coordinator's state: what was acquired is available again with its count, and a record
whose last allowed delivery was in flight is archived.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.groups.share.messages import AckBatch, Acquired, PartitionEffect, RecordsAvailable, StateWrite, WakeAt
from epochlog.groups.share.model import (
    ACCEPT,
    ACK_TYPES,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AUTO_OFFSET_RESETS,
    AVAILABLE,
    RELEASE,
    TERMINAL,
    SharePartitionConfig,
)
from epochlog.groups.share.records import PartitionState, StateBatch

_NEVER = 2**63 - 1


@dataclass
class InFlight:
    state: int
    delivery_count: int
    member: str = ""
    deadline_ms: int = 0


def _ranges(items: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
    """(offset, a, b) in offset order -> (first, last, a, b) runs of consecutive offsets with equal a, b."""
    out: list[tuple[int, int, int, int]] = []
    for off, a, b in items:
        if out and out[-1][1] + 1 == off and out[-1][2:] == (a, b):
            out[-1] = (out[-1][0], off, a, b)
        else:
            out.append((off, off, a, b))
    return out


def _persisted(rec: InFlight) -> int:
    return AVAILABLE if rec.state == ACQUIRED else rec.state


class SharePartition:
    def __init__(
        self,
        config: SharePartitionConfig,
        start_offset: int,
        state_epoch: int = 0,
        leader_epoch: int = 0,
        inflight: dict[int, InFlight] | None = None,
        end_offset: int | None = None,
    ) -> None:
        self.config = config
        self.start_offset = start_offset
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        # Offset order is insertion order: new offsets only ever come in above every other.
        self.inflight: dict[int, InFlight] = dict(sorted((inflight or {}).items()))
        self.end_offset = max(start_offset, end_offset if end_offset is not None else start_offset)
        self._next_deadline = _NEVER

    # -- creation -----------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        config: SharePartitionConfig,
        log_start_offset: int,
        log_end_offset: int,
        state: PartitionState | None = None,
        leader_epoch: int = 0,
    ) -> tuple[SharePartition, list[PartitionEffect]]:
        """A leader's share-partition: from the coordinator's state, or new at ``share.auto.offset.reset``."""
        if state is not None and state.start_offset != -1:
            return cls.from_state(config, state, leader_epoch, log_start_offset)
        if config.auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise ValueError(f"share.auto.offset.reset must be one of {AUTO_OFFSET_RESETS}")
        start = log_start_offset if config.auto_offset_reset == "earliest" else log_end_offset
        epoch = state.state_epoch if state is not None else 0
        sp = cls(config, start, epoch, leader_epoch)
        return sp, [StateWrite(epoch, leader_epoch, start, ())]

    @classmethod
    def from_state(
        cls, config: SharePartitionConfig, state: PartitionState, leader_epoch: int, log_start_offset: int = 0
    ) -> tuple[SharePartition, list[PartitionEffect]]:
        start = max(state.start_offset, log_start_offset)
        inflight: dict[int, InFlight] = {}
        archived: list[tuple[int, int, int]] = []
        end = start
        for b in sorted(state.batches):
            for off in range(max(b.first_offset, start), b.last_offset + 1):
                st = b.delivery_state
                if st == AVAILABLE and b.delivery_count >= config.delivery_count_limit:
                    st = ARCHIVED  # its last allowed delivery was in flight when the leader went
                    archived.append((off, ARCHIVED, b.delivery_count))
                inflight[off] = InFlight(st, b.delivery_count)
            end = max(end, b.last_offset + 1)
        sp = cls(config, start, state.state_epoch, leader_epoch, inflight, end)
        moved = sp._advance()
        out: list[PartitionEffect] = []
        if archived or moved or start != state.start_offset:
            out.append(sp._write(archived))
        return sp, out

    # -- reading ------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where the next fetch should read: the first AVAILABLE record, else SPEO."""
        for off, rec in self.inflight.items():
            if rec.state == AVAILABLE:
                return off
        return self.end_offset

    def in_flight_limit_reached(self) -> bool:
        return self.end_offset - self.start_offset >= self.config.max_record_locks

    def durable_view(self) -> tuple[int, tuple[StateBatch, ...]]:
        """SPSO and the state batches the coordinator should hold for this partition (a lock is AVAILABLE)."""
        runs = _ranges((off, _persisted(r), r.delivery_count) for off, r in self.inflight.items())
        return self.start_offset, tuple(StateBatch(*r) for r in runs)

    # -- events -------------------------------------------------------------------------------
    def acquire(
        self,
        now_ms: int,
        member: str,
        batches: Sequence[tuple[int, int]],
        max_records: int,
        fetched_end: int | None = None,
        aborted: Sequence[tuple[int, int]] = (),
    ) -> tuple[list[Acquired], list[PartitionEffect]]:
        """Lock for ``member`` what it may have of the fetched ``batches`` ((first, last) offsets, as the log
        has them). ``fetched_end``: the offset after everything the fetch read, the left-out ranges included.
        ``aborted``: ranges read that hold aborted transactions' records (read_committed): archived, never
        delivered, taking nothing of ``max_records``."""
        out = self._expire(now_ms)
        got: list[tuple[int, int, int]] = []
        archived: list[tuple[int, int, int]] = []
        budget = max_records
        deadline = now_ms + self.config.record_lock_duration_ms
        complete = True
        for first, last, dead in sorted([(f, la, False) for f, la in batches] + [(f, la, True) for f, la in aborted]):
            if budget <= 0:
                complete = False
                break
            if dead:
                if not self._archive_aborted(first, last, archived):
                    complete = False
                    break
                continue
            off = max(first, self.start_offset)
            while off <= last and off < self.end_offset and budget > 0:
                rec = self.inflight.get(off)
                if rec is not None and rec.state == AVAILABLE:
                    self._lock(rec, member, deadline)
                    got.append((off, rec.delivery_count, 0))
                    budget -= 1
                off += 1
            if off > last:
                continue
            if budget <= 0 or self.in_flight_limit_reached():
                complete = False
                break
            off = max(off, self.end_offset)
            for new in range(off, last + 1):
                rec = self.inflight[new] = InFlight(AVAILABLE, 0)
                self._lock(rec, member, deadline)
                got.append((new, 1, 0))
            budget -= last + 1 - off
            self.end_offset = last + 1
        if complete and fetched_end is not None and fetched_end > self.end_offset and budget > 0:
            self.end_offset = fetched_end
        got.sort()
        moved = self._advance() if archived else False
        if got or archived or moved:
            out.append(self._write([(off, AVAILABLE, count) for off, count, _ in got] + archived))
        if got:
            self._next_deadline = min(self._next_deadline, deadline)
            out.append(WakeAt(self._next_deadline))
        return [Acquired(f, last, c) for f, last, c, _ in _ranges(got)], out

    def acknowledge(self, now_ms: int, member: str, acks: Sequence[AckBatch]) -> tuple[int, list[PartitionEffect]]:
        """ShareFetch/ShareAcknowledge acknowledgements of one partition: all applied, or none (with why)."""
        out = self._expire(now_ms)
        plan: dict[int, int] = {}
        for b in acks:
            if b.first_offset > b.last_offset or not b.types or any(t not in ACK_TYPES for t in b.types):
                return Err.INVALID_REQUEST, out
            if len(b.types) not in (1, b.last_offset - b.first_offset + 1):
                return Err.INVALID_REQUEST, out
            if b.last_offset < self.start_offset:
                continue  # already past: archived or acknowledged by the start offset's move
            if b.last_offset >= self.end_offset:
                return Err.INVALID_REQUEST, out
            for off in range(max(b.first_offset, self.start_offset), b.last_offset + 1):
                rec = self.inflight.get(off)
                if rec is None:
                    continue  # an offset the log does not have
                if rec.state != ACQUIRED or rec.member != member or off in plan:
                    return Err.INVALID_RECORD_STATE, out
                plan[off] = b.types[0] if len(b.types) == 1 else b.types[off - b.first_offset]
        changed: list[tuple[int, int, int]] = []
        released = False
        for off in sorted(plan):
            rec = self.inflight[off]
            kind = plan[off]
            if kind == RELEASE:
                released |= self._release(rec)
            else:
                rec.state = ACKNOWLEDGED if kind == ACCEPT else ARCHIVED
                rec.member, rec.deadline_ms = "", 0
            changed.append((off, rec.state, rec.delivery_count))
        moved = self._advance()
        if changed or moved:
            out.append(self._write(changed))
        if released:
            out.append(RecordsAvailable())
        return Err.NONE, out

    def tick(self, now_ms: int) -> list[PartitionEffect]:
        """End the acquisition locks that expired by ``now_ms``."""
        return self._expire(now_ms)

    def member_left(self, now_ms: int, member: str) -> list[PartitionEffect]:
        """The member's share session ended (it left, was fenced, its connection closed): release its records."""
        out = self._expire(now_ms)
        mine = [off for off, r in self.inflight.items() if r.state == ACQUIRED and r.member == member]
        return out + self._release_all(mine)

    # -- internals ----------------------------------------------------------------------------
    @staticmethod
    def _lock(rec: InFlight, member: str, deadline: int) -> None:
        rec.state, rec.member, rec.deadline_ms = ACQUIRED, member, deadline
        rec.delivery_count += 1

    def _archive_aborted(self, first: int, last: int, archived: list[tuple[int, int, int]]) -> bool:
        """Archive an aborted transaction's records: the available ones in flight (read before the group read
        committed) and the new ones. False if the in-flight limit stops it before the range's end."""
        for off in range(max(first, self.start_offset), min(last + 1, self.end_offset)):
            rec = self.inflight.get(off)
            if rec is not None and rec.state == AVAILABLE:
                rec.state = ARCHIVED
                archived.append((off, ARCHIVED, rec.delivery_count))
        new = max(first, self.start_offset, self.end_offset)
        if new > last:
            return True
        if self.in_flight_limit_reached():
            return False
        for off in range(new, last + 1):
            self.inflight[off] = InFlight(ARCHIVED, 0)
            archived.append((off, ARCHIVED, 0))
        self.end_offset = last + 1
        return True

    def _release(self, rec: InFlight) -> bool:
        """ACQUIRED -> AVAILABLE, or ARCHIVED once delivered as often as allowed; True if available again."""
        rec.state = ARCHIVED if rec.delivery_count >= self.config.delivery_count_limit else AVAILABLE
        rec.member, rec.deadline_ms = "", 0
        return rec.state == AVAILABLE

    def _release_all(self, offsets: list[int]) -> list[PartitionEffect]:
        if not offsets:
            return []
        released = False
        changed = []
        for off in offsets:
            rec = self.inflight[off]
            released |= self._release(rec)
            changed.append((off, rec.state, rec.delivery_count))
        self._advance()
        out: list[PartitionEffect] = [self._write(changed)]
        if released:
            out.append(RecordsAvailable())
        return out

    def _expire(self, now_ms: int) -> list[PartitionEffect]:
        if now_ms < self._next_deadline:
            return []
        due = [off for off, r in self.inflight.items() if r.state == ACQUIRED and r.deadline_ms <= now_ms]
        out = self._release_all(due)
        self._next_deadline = min(
            (r.deadline_ms for r in self.inflight.values() if r.state == ACQUIRED), default=_NEVER
        )
        if self._next_deadline != _NEVER:
            out.append(WakeAt(self._next_deadline))
        return out

    def _advance(self) -> bool:
        """Move SPSO past the leading records in a final state; True if it moved."""
        before = self.start_offset
        while self.inflight:
            off = next(iter(self.inflight))
            if self.inflight[off].state not in TERMINAL:
                self.start_offset = max(self.start_offset, off)
                break
            del self.inflight[off]
        if not self.inflight:
            self.start_offset = max(self.start_offset, self.end_offset)
        return self.start_offset != before

    def _write(self, changed: Iterable[tuple[int, int, int]]) -> StateWrite:
        batches = tuple(
            StateBatch(f, last, state, count)
            for f, last, state, count in _ranges(sorted(c for c in changed if c[0] >= self.start_offset))
        )
        return StateWrite(self.state_epoch, self.leader_epoch, self.start_offset, batches)
