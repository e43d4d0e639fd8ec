"""What existing Kafka clients lack: epoch-aware offset validation (KIP-320) and admin helpers."""

from epochlog.client.epochs import LeaderEpochClient, Position, Truncation, ValidationReport, divergence

__all__ = ["LeaderEpochClient", "Position", "Truncation", "ValidationReport", "divergence"]
