"""Named scenarios from the seeds, each a deterministic script over the simulated cluster.

Brokers are numbered from 1; broker 1 leads first. Each function returns the World after the run;
the caller reads ``world.violations`` (breaks) and ``world.checker.permitted`` (losses the protocol
allows, e.g. after an unclean election).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

from epochlog.replication.types import TruncationMode
from epochlog.sim.world import CONTROLLER, Faults, World


def kip101_scenario1(mode: TruncationMode) -> World:
    """KIP-101 Scenario 1: high-watermark truncation followed by an immediate leader election.

    B (1) leads, A (2) follows. A fetches m1, m2; the round that would tell A the new HW is lost; A
    restarts; B fails; A is elected. Truncating to the HW on restart loses the committed m2 (and m1).
    """
    w = World(brokers=2, mode=mode)
    w.run_for(10)
    w.snapshot("start")
    w.leader_append(1, "m1")
    w.leader_append(1, "m2")
    w.follower_fetch(2)  # A gets m1, m2; B's HW is still 0
    w.follower_fetch(2, deliver_response=False)  # B's HW moves to 2, acks m1 and m2; A never hears it
    w.snapshot("m1, m2 committed; A's HW still 0")
    w.crash(2, hard=False)
    w.restart(2)
    w.run_for(10)
    w.snapshot("A restarted")
    w.crash(1, hard=True)
    w.fence(1)
    w.apply_controller_now()
    w.run_for(10)
    w.snapshot("B failed, A elected")
    return w


def kip101_scenario2(mode: TruncationMode) -> World:
    """KIP-101 Scenario 2: replica divergence on restart after multiple hard failures.

    A (1) leads; m1 and m2 are committed; A flushed both, B (2) only m1. Both lose power; B comes
    back first, is elected and takes m3 at offset 1; A returns as follower. Truncating to A's HW
    keeps A's m2 at offset 1 while B has m3 there: the replicas diverge.
    """
    w = World(brokers=2, mode=mode)
    w.run_for(10)
    w.leader_append(1, "m1")
    w.follower_fetch(2)
    w.follower_fetch(2)
    w.brokers[2].log.flush()
    w.leader_append(1, "m2")
    w.follower_fetch(2)
    w.follower_fetch(2)
    w.brokers[1].log.flush()
    w.brokers[1].persisted_hw = w.brokers[1].replica.high_watermark
    w.snapshot("m1, m2 committed; B flushed only m1")
    w.crash(1, hard=True)
    w.crash(2, hard=True)
    w.fence(1)
    w.fence(2)
    w.restart(2)
    w.apply_controller_now()
    w.run_for(10)
    w.leader_append(2, "m3")
    w.snapshot("power back: B leads and takes m3")
    w.restart(1)
    w.apply_controller_now()
    w.run_for(10)
    for _ in range(4):
        w.follower_fetch(1)
        w.follower_fetch(1)
    w.snapshot("A rejoined as follower")
    return w


def kip101_unclean(mode: TruncationMode) -> World:
    """The KIP-101 appendix: an unclean election can still lose committed data (by design)."""
    w = World(brokers=2, mode=mode, unclean=True)
    w.run_for(10)
    w.leader_append(1, "m1")
    w.follower_fetch(2)
    w.follower_fetch(2)
    w.partition_network(1, 2)
    w.brokers[1].replica.isr = frozenset({1})  # B fell behind and was shrunk out
    w.controller.topics["t"].partitions[0].isr = frozenset({1})
    w.leader_append(1, "m2")
    w.run_for(10)
    w.snapshot("m2 committed by A alone")
    w.crash(1, hard=False)
    w.fence(1)
    w.apply_controller_now()  # B is elected uncleanly
    w.run_for(10)
    w.leader_append(2, "m3")
    w.heal_network()
    w.restart(1)
    w.apply_controller_now()
    w.run_for(10)
    for _ in range(3):
        w.follower_fetch(1)
    w.snapshot("A follows the unclean leader")
    return w


def _periodic(w: World, until: int, actions: dict[int, Callable[[World], None]]) -> World:
    w.start_periodic(until)
    for t, fn in sorted(actions.items()):
        w.schedule(t, partial(fn, w))
    w.snapshot("start")
    w.run_until(until)
    w.heal_network()
    for bid, b in w.brokers.items():
        if b.paused:
            w.resume(bid)
        if not b.alive:
            w.restart(bid)
    w.start_periodic(w.now + 3000, produce_every=0)
    w.run_until(w.now + 3000)
    w.checker.check_converged()
    w.snapshot("end")
    return w


def zombie_leader(mode: TruncationMode) -> World:
    """A paused leader (SIGSTOP) is replaced; when it wakes it must not commit anything (KIP-320/359)."""
    w = World(brokers=3, mode=mode)
    return _periodic(w, 4000, {500: lambda w: w.pause(1), 2500: lambda w: w.resume(1)})


def zombie_follower(mode: TruncationMode) -> World:
    """A paused follower misses a leader change; its stale fetches are fenced and it catches up."""
    w = World(brokers=3, mode=mode)
    return _periodic(
        w,
        4000,
        {
            300: lambda w: w.pause(3),
            800: lambda w: w.crash(1),
            1000: lambda w: w.restart(1),
            2800: lambda w: w.resume(3),
        },
    )


def isolated_leader(mode: TruncationMode, enforce_lease: bool = True, faults: Faults | None = None) -> World:
    """The leader is cut off from its followers and the controller while the producer still reaches it (the
    chaos ``partition`` nemesis aimed at a leader). Its lease ends within the session timeout: it answers the
    writes waiting on it NOT_LEADER and refuses new ones, acknowledges nothing more, the controller fences it
    and elects another ISR member, and writes are acknowledged again within the session timeout plus 2 s
    (scaled as the session is). ``enforce_lease=False`` is Kafka's broker: the writes wait until it heals."""
    w = World(brokers=3, mode=mode, min_isr=2, enforce_lease=enforce_lease, faults=faults)

    def cut(w: World) -> None:
        leader = w.state().leader
        for other in (CONTROLLER, *w.brokers):
            if other != leader:
                w.partition_network(leader, other)
        w.log_event(f"broker {leader} (the leader) is cut off from the controller and the other brokers")
        w.checker.cut_off_at = w.now

    return _periodic(w, 4500, {800: cut})


def fast_leader_changes(mode: TruncationMode) -> World:
    """Leaders change back to back, with writes in flight."""
    w = World(brokers=3, mode=mode)
    actions: dict[int, Callable[[World], None]] = {}
    for i, t in enumerate(range(300, 2400, 150)):
        actions[t] = (lambda b: lambda w: w.elect(b))(1 + i % 3)
    return _periodic(w, 3000, actions)


def fast_leader_changes_no_writes(mode: TruncationMode) -> World:
    w = World(brokers=3, mode=mode)
    w.start_periodic(2000, produce_every=0)
    for i, t in enumerate(range(100, 1900, 100)):
        w.schedule(t, (lambda b: lambda: w.elect(b))(1 + i % 3))
    w.run_until(2000)
    return w


def missed_epochs(mode: TruncationMode) -> World:
    """A follower is down for several epochs, then returns and reconciles across all of them."""
    w = World(brokers=3, mode=mode)
    return _periodic(
        w,
        5000,
        {
            300: lambda w: w.crash(3),
            800: lambda w: w.elect(2),
            1300: lambda w: w.elect(1),
            1800: lambda w: w.crash(1),
            2300: lambda w: w.restart(1),
            3000: lambda w: w.restart(3),
        },
    )


def isr_rejoin(mode: TruncationMode) -> World:
    """A cut-off follower leaves the ISR after the lag time and rejoins across an epoch change."""
    w = World(brokers=3, mode=mode)
    return _periodic(
        w,
        5000,
        {200: lambda w: w.partition_network(1, 3), 1800: lambda w: w.elect(2), 2600: lambda w: w.heal_network()},
    )


def hw_under_min_isr(mode: TruncationMode) -> World:
    """min.insync.replicas=2: when the ISR shrinks to the leader alone, acks=all writes are refused."""
    w = World(brokers=3, mode=mode, min_isr=2)
    return _periodic(
        w,
        4000,
        {
            300: lambda w: w.crash(2),
            350: lambda w: w.crash(3),
            2500: lambda w: w.restart(2),
            2600: lambda w: w.restart(3),
        },
    )


def stale_restart(mode: TruncationMode) -> World:
    """All replicas die; a stale one restarts first and must not become leader cleanly."""
    w = World(brokers=3, mode=mode)
    return _periodic(
        w,
        5000,
        {
            300: lambda w: w.crash(3),
            1500: lambda w: w.crash(1),
            1520: lambda w: w.crash(2),
            2000: lambda w: w.restart(3),
            3000: lambda w: w.restart(1),
            3100: lambda w: w.restart(2),
        },
    )


SCENARIOS: dict[str, Callable[[TruncationMode], World]] = {
    "kip101-scenario1": kip101_scenario1,
    "kip101-scenario2": kip101_scenario2,
    "kip101-unclean": kip101_unclean,
    "zombie-follower": zombie_follower,
    "zombie-leader": zombie_leader,
    "fast-leader-changes": fast_leader_changes,
    "missed-epochs": missed_epochs,
    "isr-rejoin": isr_rejoin,
    "hw-under-min-isr": hw_under_min_isr,
    "stale-restart": stale_restart,
    "isolated-leader": isolated_leader,
    # defined below; the name is looked up when the scenario runs
    "reassign-under-faults": lambda mode: reassignment_schedule(1, mode),
    "durable-power-loss": lambda mode: durable_power_loss(1, mode),
}

# The letters each scenario's narrative (its docstring) gives the brokers, where they are not A for broker
# 1, B for 2 and so on: KIP-101's first scenario has B lead. The reports label the pictures with these.
BROKER_NAMES: dict[str, dict[int, str]] = {"kip101-scenario1": {1: "B", 2: "A"}}


def broker_names(scenario: str | None, broker_ids: list[int]) -> dict[int, str]:
    """{broker id: its letter in the scenario's narrative}; A, B, C... in id order when it names none."""
    names = BROKER_NAMES.get(scenario or "", {})
    return {b: names.get(b, chr(ord("A") + i) if i < 26 else str(b)) for i, b in enumerate(sorted(broker_ids))}


BOUNCES = ("crash", "clean", "pause")


def _bounce(
    actions: dict[int, Callable[[World], None]], rng: random.Random, t: int, bid: int, kind: str, tear: bool = False
) -> None:
    """Take broker ``bid`` down at ``t`` (a hard crash, torn or not, a clean stop, or a pause) and back later."""
    if kind == "crash":
        actions[t] = (lambda b, tr: lambda w: w.crash(b, hard=True, tear=tr))(bid, tear)
        actions[t + rng.randint(100, 900)] = (lambda b: lambda w: w.restart(b))(bid)
    elif kind == "clean":
        actions[t] = (lambda b: lambda w: w.crash(b, hard=False))(bid)
        actions[t + rng.randint(100, 900)] = (lambda b: lambda w: w.restart(b))(bid)
    else:
        actions[t] = (lambda b: lambda w: w.pause(b))(bid)
        actions[t + rng.randint(100, 1500)] = (lambda b: lambda w: w.resume(b))(bid)


def random_schedule(
    seed: int, mode: TruncationMode = TruncationMode.LEADER_EPOCH, transactions: bool = False
) -> World:
    """A seeded random fault schedule: crashes (hard or clean), pauses, cuts, elections, lossy network.
    ``transactions``: the producer writes transactions and markers (sim/transactions.py)."""
    w = World(
        seed=seed,
        brokers=3,
        mode=mode,
        faults=Faults(drop=0.02, duplicate=0.02, min_delay_ms=1, max_delay_ms=15),
        transactions=transactions,
    )
    rng = w.rng
    for b in w.brokers.values():
        b.log.flush_every_append = rng.random() < 0.3
    actions: dict[int, Callable[[World], None]] = {}
    t = 200
    while t < 3000:
        bid = rng.randint(1, 3)
        kind = rng.choice(["crash", "clean", "pause", "cut", "elect"])
        if kind in BOUNCES:
            tear = kind == "crash" and rng.random() < 0.3
            _bounce(actions, rng, t, bid, kind, tear)
        elif kind == "cut":
            other = 1 + (bid % 3)
            actions[t] = (lambda a, b: lambda w: w.partition_network(a, b))(bid, other)
            actions[t + rng.randint(100, 1500)] = lambda w: w.heal_network()
        else:
            actions[t] = (lambda b: lambda w: w.elect(b))(bid)
        t += rng.randint(100, 500)
    return _periodic(w, 3500, actions)


def reassignment_schedule(seed: int, mode: TruncationMode = TruncationMode.LEADER_EPOCH) -> World:
    """A seeded reassignment of a 3-replica partition over 4 brokers (KIP-455) under acks=all writes and a
    random fault schedule (crashes, pauses, elections, a lossy network), sometimes cancelled and restarted.
    Besides the usual invariants, the move must have completed once every broker is back."""
    w = World(
        seed=seed,
        brokers=4,
        replication_factor=3,
        mode=mode,
        faults=Faults(drop=0.02, duplicate=0.02, min_delay_ms=1, max_delay_ms=15),
    )
    rng = w.rng
    target = rng.choice([[4, 2, 3], [2, 3, 4], [4, 1, 2], [4], [1, 4], [3, 2, 1, 4]])
    # Scheduled apart from the faults, whose times may coincide with these.
    w.schedule(300, lambda: w.reassign(target))
    if rng.random() < 0.3:
        w.schedule(300 + rng.randint(1, 600), lambda: w.reassign(None))
        w.schedule(1200 + rng.randint(0, 600), lambda: w.reassign(target))
    actions: dict[int, Callable[[World], None]] = {}
    t = 200
    while t < 3000:
        bid = rng.randint(1, 4)
        kind = rng.choice(["crash", "clean", "pause", "elect"])
        if kind in BOUNCES:
            _bounce(actions, rng, t, bid, kind)
        else:
            # An election among the eligible replicas (naming one outside the ISR would leave the partition
            # leaderless until a broker re-registers, which no broker here needs to do).
            actions[t] = lambda w: w.elect(None)
        t += rng.randint(200, 700)
    _periodic(w, 3500, actions)
    w.checker.check_reassigned(target)
    return w


def _power_off_all(w: World) -> None:
    for bid in list(w.brokers):
        w.crash(bid, hard=True)


def _power_on_all(w: World) -> None:
    for bid in list(w.brokers):
        w.restart(bid)


def durable_power_loss(
    seed: int, mode: TruncationMode = TruncationMode.LEADER_EPOCH, count_unsynced: bool = False
) -> World:
    """flush.messages=1 (the durable mode): acks=all writes every 5 ms while every broker loses power at
    once, several times, each at a random moment; syncs come by group commit 1-40 ms after the appends
    they cover. No acknowledged record may be lost, even with every replica's page cache gone.
    ``count_unsynced`` breaks it on purpose: the cores count their unsynced log ends."""
    w = World(
        seed=seed,
        brokers=3,
        mode=mode,
        min_isr=2,
        faults=Faults(drop=0.01, min_delay_ms=1, max_delay_ms=5),
        durable=True,
        count_unsynced=count_unsynced,
    )
    rng = w.rng
    actions: dict[int, Callable[[World], None]] = {}
    t = 300
    while t < 3000:
        actions[t] = _power_off_all
        actions[t + rng.randint(50, 300)] = _power_on_all
        t += rng.randint(400, 800)
    w.start_periodic(3500, produce_every=5)
    for at, fn in sorted(actions.items()):
        w.schedule(at, partial(fn, w))
    w.snapshot("start")
    w.run_until(3500)
    w.start_periodic(w.now + 2000, produce_every=0)
    w.run_until(w.now + 2000)
    w.checker.check_converged()
    w.snapshot("end")
    return w
