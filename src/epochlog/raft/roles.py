"""A quorum member's roles (KIP-595's states, with KIP-996's prospective one)."""

from __future__ import annotations

from enum import Enum


class Role(Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"
