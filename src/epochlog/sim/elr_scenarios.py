"""KIP-966 scenarios: min.insync.replicas=2 on three replicas, the cluster finalizing
eligible.leader.replicas.version as a new one does. Each takes switches that drop one rule, so a test can
show the invariant it protects firing (sim/elr_invariants.py)."""

from __future__ import annotations

import random
from collections.abc import Callable

from epochlog.controller.partition_changes import UNSAFE_KEEP_UNCLEAN_IN_ELR
from epochlog.replication.types import TruncationMode
from epochlog.sim.scenarios import BOUNCES, _bounce, _periodic
from epochlog.sim.world import Faults, World

Actions = dict[int, Callable[[World], None]]


def _world(mode: TruncationMode, elr: bool, keep_unclean: bool, hw_rule: bool = True, seed: int = 0) -> World:
    w = World(seed=seed, brokers=3, mode=mode, min_isr=2, elr=elr, elr_hw_rule=hw_rule)
    if keep_unclean:
        w.controller.unsafe.add(UNSAFE_KEEP_UNCLEAN_IN_ELR)
    # Flushing left to the OS, which has not written these logs back yet: a power loss takes what the
    # replica held since it last became leader or follower, committed records included.
    w.flush_chance = 0.0
    return w


def _stop(bid: int, hard: bool) -> Callable[[World], None]:
    """The broker stops (a power loss when ``hard``: its unflushed records are gone) and the controller
    fences it at once, as it does when the broker's session connection closes."""

    def run(w: World) -> None:
        w.crash(bid, hard=hard)
        w.fence(bid)

    return run


def _append(bid: int, value: str) -> Callable[[World], None]:
    def run(w: World) -> None:
        if w.brokers[bid].alive and w.state().leader == bid:
            w.leader_append(bid, value)  # an acks=1 write: the leader alone holds it

    return run


def last_replica_standing(
    mode: TruncationMode = TruncationMode.LEADER_EPOCH, elr: bool = True, keep_unclean: bool = False
) -> World:
    """The ISR shrinks to broker 1 (3 stopped, then 2: 2 holds every committed record and is eligible);
    1 takes acks=1 writes it alone holds, then loses power and comes back without them. 1 must not lead
    again; 2, coming back, is elected from the ELR, and 1 catches up from it."""
    w = _world(mode, elr, keep_unclean)
    actions: Actions = {
        300: _stop(3, hard=False),
        800: _stop(2, hard=False),
        900: _append(1, "only-on-1"),
        1200: _stop(1, hard=True),
        1500: lambda w: w.restart(1),
        1900: lambda w: w.restart(2),
        2200: lambda w: w.restart(3),
    }
    return _periodic(w, 3000, actions)


def unclean_elr_member(
    mode: TruncationMode = TruncationMode.LEADER_EPOCH, elr: bool = True, keep_unclean: bool = False
) -> World:
    """The ISR shrinks to broker 1 while 2, eligible, loses power; 2's restart must take it out of the
    ELR (it lost what it held), then 1 dies too: nobody eligible is left, and 2 must not be elected."""
    w = _world(mode, elr, keep_unclean)
    actions: Actions = {
        300: _stop(3, hard=False),
        800: _stop(2, hard=True),
        1100: lambda w: w.restart(2),
        1150: _stop(1, hard=False),
        1600: lambda w: w.restart(1),
        2000: lambda w: w.restart(3),
    }
    return _periodic(w, 3000, actions)


def hw_below_min_isr(mode: TruncationMode = TruncationMode.LEADER_EPOCH, hw_rule: bool = True) -> World:
    """The ISR shrinks to broker 1, which takes acks=1 writes; then 1 stops and 2, eligible, is elected.
    The HW must not have moved while the ISR was below min ISR, or 2 lacks records a consumer has read."""
    w = _world(mode, True, False, hw_rule)
    actions: Actions = {
        300: _stop(3, hard=False),
        800: _stop(2, hard=False),
        900: _append(1, "u1"),
        950: _append(1, "u2"),
        1300: _stop(1, hard=False),
        1600: lambda w: w.restart(2),
        2000: lambda w: w.restart(1),
        2200: lambda w: w.restart(3),
    }
    return _periodic(w, 3000, actions)


def elr_random(seed: int, mode: TruncationMode = TruncationMode.LEADER_EPOCH) -> World:
    """A seeded random schedule of power losses, clean stops and pauses on a lossy network, with
    KIP-966 on and min ISR 2: no invariant may fire, the ELR's included."""
    w = World(
        seed=seed,
        brokers=3,
        mode=mode,
        min_isr=2,
        elr=True,
        faults=Faults(drop=0.02, duplicate=0.02, min_delay_ms=1, max_delay_ms=15),
    )
    rng: random.Random = w.rng
    for b in w.brokers.values():
        b.log.flush_every_append = rng.random() < 0.3
    actions: Actions = {}
    t = 200
    while t < 3000:
        bid = rng.randint(1, 3)
        kind = rng.choice([*BOUNCES, "fence"])
        if kind == "fence":
            actions[t] = _stop(bid, hard=rng.random() < 0.5)
            actions[t + rng.randint(100, 900)] = (lambda b: lambda w: w.restart(b))(bid)
        else:
            _bounce(actions, rng, t, bid, kind, tear=kind == "crash" and rng.random() < 0.3)
        t += rng.randint(100, 500)
    return _periodic(w, 3500, actions)


ELR_SCENARIOS: dict[str, Callable[[TruncationMode], World]] = {
    "elr-last-replica-standing": last_replica_standing,
    "elr-unclean-member": unclean_elr_member,
    "elr-hw-below-min-isr": hw_below_min_isr,
}
