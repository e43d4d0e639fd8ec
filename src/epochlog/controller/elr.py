"""Leader election and KIP-966's eligible leader replicas (ELR), as pure functions of one partition.

Why ELR: with the high watermark held back while the ISR is below min.insync.replicas (replication/
partition.py), a replica that leaves an ISR already below min ISR still holds every committed record.
Kafka 4.1 keeps such replicas in the ELR, lets the ISR become empty, and elects from the ELR when the ISR
has no live member, instead of waiting for the last ISR member or electing uncleanly. A replica whose
broker restarts after an unclean shutdown may have lost unflushed records, so it leaves the ELR (the
caller passes it as ``unclean_shutdown``). The rules follow Kafka's PartitionChangeBuilder:

- ISR at or above min ISR: the ELR is empty.
- below: ELR = (old ELR | old ISR) - new ISR - unclean-shutdown replicas.
- the last-known ELR holds Kafka's "last known leader" (its default, balanced recovery): the leader a
  partition had when its ISR first became empty (or its sole ISR member, if it was already leaderless),
  kept while it has no leader, cleared once it has one.
- election: a live member of the ISR; when the ISR is empty, a live member of the ELR (which then becomes
  the ISR on its own); when both are empty, the last known leader if it is live (an unclean election, as
  no replica is known to hold every committed record; a partition whose every replica crashed comes back
  rather than stay offline, as in Kafka);
  then, only if unclean election is allowed, any live replica. An unclean election clears ELR and
  last-known ELR: the lineage starts over.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from epochlog.replication.types import PartitionState

NO_LEADER = -1


def target_elr(
    current: PartitionState | None,
    target_isr: Collection[int],
    min_isr: int,
    unclean_shutdown: Collection[int] = (),
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The (ELR, last-known ELR) a partition gets when its ISR becomes ``target_isr``; the last-known ELR is
    the current one here: ``last_known_leader`` settles it once the new leader is known."""
    if current is None or len(target_isr) >= min_isr:
        return (), current.last_known_elr if current is not None else ()
    isr = set(target_isr)
    candidates = set(current.elr) | set(current.isr)
    elr = sorted(r for r in candidates if r not in isr and r not in unclean_shutdown)
    return tuple(elr), current.last_known_elr


def last_known_leader(current: PartitionState | None, new_isr: Collection[int], new_leader: int) -> tuple[int, ...]:
    """Kafka's last known leader: set to the partition's leader when its ISR first becomes empty, kept while it
    has no leader, cleared once it has one."""
    if current is None:
        return ()
    # The leader, or the sole ISR member of a partition already leaderless (a replica on a failed log
    # directory stays in the ISR without leading until its broker comes back).
    last = current.leader
    if last == NO_LEADER and len(current.isr) == 1:
        (last,) = current.isr
    if not new_isr and last != NO_LEADER and current.last_known_elr != (last,):
        return (last,)
    if new_leader != NO_LEADER:
        return ()
    return current.last_known_elr


@dataclass(frozen=True)
class Choice:
    leader: int  # NO_LEADER when nobody may lead
    isr: frozenset[int]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    unclean: bool = False  # no replica was known to hold every committed record
    from_elr: bool = False


def choose(
    replicas: tuple[int, ...],
    target_isr: frozenset[int],
    elr: tuple[int, ...],
    last_known: tuple[int, ...],
    acceptable: Callable[[int], bool],
    allow_unclean: bool,
    preferred: int | None = None,
    elr_rules: bool = True,
) -> Choice:
    """Who leads after a change to ``target_isr`` (ELR already computed by ``target_elr``).

    ``acceptable``: a live replica whose log may serve (not fenced, not shutting down, not on a failed
    directory). ``preferred``: only that replica may win (and never uncleanly)."""
    order = [r for r in replicas if r in target_isr and acceptable(r)]
    from_elr: list[int] = []
    if elr_rules and not target_isr:
        from_elr = [r for r in replicas if r in elr and acceptable(r)]
    if preferred is not None:
        order = [preferred] if preferred in order else []
        from_elr = [preferred] if preferred in from_elr else []
    if order:
        return Choice(order[0], target_isr, elr, last_known)
    if from_elr:
        leader = from_elr[0]
        return Choice(leader, frozenset({leader}), tuple(r for r in elr if r != leader), last_known, from_elr=True)
    if preferred is None:
        if elr_rules and not target_isr and not elr and len(last_known) == 1 and acceptable(last_known[0]):
            return Choice(last_known[0], frozenset(last_known), (), (), unclean=True)
        if allow_unclean:
            live = [r for r in replicas if acceptable(r)]
            if live:
                # The KIP-101 appendix: an unclean leader starts a new lineage, alone in its ISR.
                return Choice(live[0], frozenset({live[0]}), (), (), unclean=True)
    return Choice(NO_LEADER, target_isr, elr, last_known)
