"""A partition replica's trace events (trace/events.py), for the trace checker: what its role, ISR, log end
and high watermark became. Kept apart from the replication rules in partition.py, which call these at the
moments the rules change that state; every emit is a no-op unless the driver enabled its tracer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochlog.trace import events as trace

if TYPE_CHECKING:
    from epochlog.replication.log import ReplicaLog
    from epochlog.replication.types import AlterIsr, Role


class PartitionTracing:
    """Mixed into PartitionReplica, which owns every attribute named here."""

    topic: str
    partition: int
    broker_id: int
    role: Role
    leader_epoch: int
    leader_id: int
    partition_epoch: int
    high_watermark: int
    isr: frozenset[int]
    pending_isr: AlterIsr | None
    log: ReplicaLog
    tracer: trace.Tracer
    _traced_leo: int

    def _trace_role(self, epoch_start: int) -> None:
        if self.tracer.enabled:
            leo = self.log.log_end_offset
            self._traced_leo = leo
            self.tracer.emit(
                trace.Role(
                    self.topic,
                    self.partition,
                    self.role.value,
                    self.leader_epoch,
                    self.leader_id,
                    epoch_start,
                    leo,
                    self.high_watermark,
                )
            )

    def _trace_isr(self, proposed: bool) -> None:
        if self.tracer.enabled:
            isr = self.pending_isr.new_isr if proposed and self.pending_isr is not None else self.isr
            self.tracer.emit(
                trace.Isr(
                    self.topic,
                    self.partition,
                    self.leader_epoch,
                    self.partition_epoch,
                    self.broker_id,
                    tuple(sorted(isr)),
                    proposed,
                )
            )

    def _trace_leader_progress(self, new_hw: int) -> None:
        """Before the HW moves to ``new_hw``: the log end a leader append reached, and the HW's move with the
        epochs of the records it commits."""
        leo = self.log.log_end_offset
        if leo != self._traced_leo:
            self._traced_leo = leo
            self.tracer.emit(trace.Leo(self.topic, self.partition, self.role.value, self.leader_epoch, leo))
        if new_hw > self.high_watermark:
            runs = trace.epochs_between(self.log, self.high_watermark, new_hw)
            self.tracer.emit(
                trace.Hw(self.topic, self.partition, self.role.value, self.leader_epoch, new_hw, leo, runs)
            )

    def _trace_follower_progress(self, hw_before: int) -> None:
        leo = self.log.log_end_offset
        if leo != self._traced_leo:
            self._traced_leo = leo
            self.tracer.emit(trace.Leo(self.topic, self.partition, self.role.value, self.leader_epoch, leo))
        if self.high_watermark != hw_before:
            self.tracer.emit(
                trace.Hw(self.topic, self.partition, self.role.value, self.leader_epoch, self.high_watermark, leo)
            )
