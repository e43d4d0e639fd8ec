"""The quorum's voter set (KIP-853): who votes, under which directory, at which endpoints, and its history.

A static quorum (``controller.quorum.voters``, kraft.version 0) has one voter set for life. A dynamic one
(kraft.version 1) starts from the set its storage was formatted with and changes by Voters control records
in the log. A voter set takes effect when its record is appended, not when it commits: the leader counts
its majority over the newest set at once, and a follower that truncates the record away goes back to the
set before it. That is only safe one change at a time (any majority of the old set and any majority of a
set one voter apart intersect), which membership.py enforces.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_DIRECTORY = ""  # a voter of a static quorum has no directory id


@dataclass(frozen=True, order=True)
class Endpoint:
    listener: str
    host: str
    port: int


@dataclass(frozen=True, order=True)
class Voter:
    """One voter: its node id, the directory id of its metadata log (Kafka's base64 Uuid form) and where it listens.

    A voter is the pair (id, directory): a controller that lost its disk comes back with a new directory id
    and is not the voter that was (it may have voted and forgotten), so it must be added again."""

    node_id: int
    directory_id: str = NO_DIRECTORY
    endpoints: tuple[Endpoint, ...] = ()

    def same_key(self, node_id: int, directory_id: str) -> bool:
        return self.node_id == node_id and (directory_id == NO_DIRECTORY or directory_id == self.directory_id)


@dataclass(frozen=True)
class VoterSet:
    voters: tuple[Voter, ...] = ()

    @staticmethod
    def of(*voters: Voter | int) -> VoterSet:
        vs = [v if isinstance(v, Voter) else Voter(v) for v in voters]
        return VoterSet(tuple(sorted(vs)))

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(v.node_id for v in self.voters)

    def get(self, node_id: int) -> Voter | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    def with_voter(self, voter: Voter) -> VoterSet:
        return VoterSet.of(*self.voters, voter)

    def without(self, node_id: int) -> VoterSet:
        return VoterSet(tuple(v for v in self.voters if v.node_id != node_id))

    def one_change_from(self, other: VoterSet) -> bool:
        """Whether ``other`` adds or removes at most one voter (ids with their directories; endpoints may differ)."""
        a, b = {(v.node_id, v.directory_id) for v in self.voters}, {(v.node_id, v.directory_id) for v in other.voters}
        return len(a ^ b) <= 1


class VoterSetHistory:
    """The voter sets the log holds, by the offset of their Voters record; ``base`` is the one before the log's
    first (the static set, or the one the storage was formatted with: offset -1)."""

    def __init__(self, base: VoterSet) -> None:
        self.base = base
        self.entries: list[tuple[int, VoterSet]] = []

    def latest(self) -> VoterSet:
        return self.entries[-1][1] if self.entries else self.base

    def latest_offset(self) -> int:
        """The offset of the newest Voters record, -1 if the log holds none."""
        return self.entries[-1][0] if self.entries else -1

    def add(self, offset: int, voters: VoterSet) -> None:
        if self.entries and offset <= self.entries[-1][0]:
            return  # already known (a replay of the same records)
        self.entries.append((offset, voters))

    def truncate_from(self, offset: int) -> bool:
        """The log lost its entries from ``offset`` on; returns whether the latest voter set changed."""
        before = self.latest()
        self.entries = [(o, v) for o, v in self.entries if o < offset]
        return self.latest() != before
