"""Where the replicas of new partitions go, over brokers that may have racks (broker.rack).

Kafka's replica assignment (AdminUtils.assignReplicasToBrokers, which its reassign-partitions --generate
still uses) is the model. Rack-unaware: the first replicas go round-robin over the sorted brokers from a
start index, the followers at a distance from the first that grows by one every full round (``shift``).
Rack-aware: the same round-robin over the rack-alternated broker list (the first broker of each rack in
rack order, then the second of each...), and a follower is skipped while its rack already holds a replica
of the partition and some rack holds none, or while its broker already does. So every partition lands on
min(replication factor, racks) racks and, the leaders being the round-robin's, each broker leads an equal
share (within one) of consecutive partitions. Kafka refuses a mix of brokers with and without a rack.

The controller (CreateTopics, CreatePartitions) places with ``controller_place``: deterministic (start and
shift 0: the core has no randomness, so the simulator replays), the same layout as before racks when no
broker has one, and, like KRaft's StripedReplicaPlacer, brokers without a rack counted as one more rack
rather than refused. Pure: brokers and racks in, replica lists out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# A broker with no rack, as a rack name: sorts before every real rack (KRaft sorts an absent rack first).
NO_RACK = ""


class PlacementError(ValueError):
    """The replicas cannot be placed (Kafka's InvalidReplicationFactor / AdminOperationException words)."""


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """The brokers, one of each rack in turn (racks sorted, brokers sorted within a rack): brokers
    1,2 on rack a and 3 on rack b give 1, 3, 2."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max((len(c) for c in columns), default=0)):
        out.extend(c[i] for c in columns if i < len(c))
    return out


def _follower(first: int, shift: int, j: int, n: int) -> int:
    """Index of a follower candidate: never ``first`` itself, the distance grows with ``shift``."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _check(partitions: int, rf: int, brokers: int) -> None:
    if partitions <= 0:
        raise PlacementError("Number of partitions must be larger than 0.")
    if rf <= 0:
        raise PlacementError("Replication factor must be larger than 0.")
    if rf > brokers:
        raise PlacementError(f"Replication factor: {rf} larger than available brokers: {brokers}.")


def rack_unaware(
    partitions: int, rf: int, brokers: Sequence[int], start: int = 0, shift: int = 0, first_partition: int = 0
) -> list[tuple[int, ...]]:
    """Replica lists of partitions ``first_partition``.. over ``brokers`` (sorted here), racks ignored."""
    _check(partitions, rf, len(brokers))
    ordered = sorted(brokers)
    n = len(ordered)
    out = []
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        out.append((ordered[first], *(ordered[_follower(first, shift, j, n)] for j in range(rf - 1))))
    return out


def rack_aware(
    partitions: int, rf: int, racks: Mapping[int, str], start: int = 0, shift: int = 0, first_partition: int = 0
) -> list[tuple[int, ...]]:
    """Replica lists of partitions ``first_partition``.. over the brokers of ``racks`` (broker -> rack),
    each partition on as many racks as it has replicas, up to all of them."""
    _check(partitions, rf, len(racks))
    arranged = rack_alternated(racks)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    out = []
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [arranged[first]]
        used_racks = {racks[arranged[first]]}
        k = 0
        while len(replicas) < rf:
            candidate = arranged[_follower(first, shift * n_racks, k, n)]
            k += 1
            rack = racks[candidate]
            if rack in used_racks and len(used_racks) < n_racks:
                continue  # a rack without a replica of this partition comes first
            if candidate in replicas:
                continue
            replicas.append(candidate)
            used_racks.add(rack)
        out.append(tuple(replicas))
    return out


def assign(
    partitions: int,
    rf: int,
    racks: Mapping[int, str | None],
    start: int = 0,
    shift: int = 0,
    first_partition: int = 0,
) -> list[tuple[int, ...]]:
    """Kafka's assignReplicasToBrokers: rack-unaware when no broker has a rack, rack-aware when all have one,
    refused when only some do (reassign-partitions --generate; --disable-rack-aware passes no racks)."""
    named = {b: r for b, r in racks.items() if r is not None}
    if not named:
        return rack_unaware(partitions, rf, list(racks), start, shift, first_partition)
    if len(named) != len(racks):
        _check(partitions, rf, len(racks))
        raise PlacementError("Not all brokers have rack information for replica rack aware assignment.")
    return rack_aware(partitions, rf, named, start, shift, first_partition)


def controller_place(first: int, end: int, rf: int, racks: Mapping[int, str | None]) -> list[tuple[int, ...]]:
    """Replica lists of partitions first..end-1 over the live brokers ``racks`` names (broker -> rack or
    None). Without any rack: partition p on the brokers from the p-th on, consecutive (the layout from before
    racks). With racks: rack-aware, a broker without one on a rack of its own (KRaft's placer does not refuse)."""
    if end <= first:
        return []
    if all(r is None for r in racks.values()):
        live = sorted(racks)
        _check(end - first, rf, len(live))
        return [tuple(live[(p + i) % len(live)] for i in range(rf)) for p in range(first, end)]
    return rack_aware(
        end - first, rf, {b: NO_RACK if r is None else r for b, r in racks.items()}, first_partition=first
    )
