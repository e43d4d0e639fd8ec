"""ISR changes of the partitions this broker leads go through the controller (AlterPartition): the
replication core proposes them (a shrink, or the unanswered change again), this manager sends them and
hands the answer back to the core, which decides what it changes."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kio.schema.alter_partition.v3.request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kio.schema.types import BrokerId
from kio.static.primitive import i32, i64

from epochlog.clock import now_ms
from epochlog.protocol.errors import Err
from epochlog.replication.types import AlterIsr, PartitionState, Role
from epochlog.server.cluster.peer import PeerError
from epochlog.server.partition import Partition

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker

log = logging.getLogger("epochlog.broker")

TICK_S = 0.25  # how often the leaders' cores are asked for an ISR change


class AlterPartitionManager:
    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker

    async def ticker(self) -> None:
        b = self.broker
        while not b.shutting_down:
            await asyncio.sleep(TICK_S)
            now = now_ms()
            for part in list(b.partitions.values()):
                r = part.replica
                if r is None or r.role is not Role.LEADER or part.offline:
                    continue
                proposal = r.next_isr_change(now)  # a shrink, or the unanswered change again
                if proposal is not None:
                    log.info(
                        "%s-%d: proposing ISR %s -> %s", r.topic, r.partition, sorted(r.isr), sorted(proposal.new_isr)
                    )
                    self.submit(part, proposal)

    def submit(self, part: Partition, proposal: AlterIsr) -> None:
        self.broker.spawn(self._alter(part, proposal))

    async def _alter(self, part: Partition, proposal: AlterIsr) -> None:
        b = self.broker
        r = part.replica
        assert r is not None
        req = AlterPartitionRequest(
            broker_id=BrokerId(b.config.node_id),
            broker_epoch=i64(b.session.epoch),
            topics=(
                TopicData(
                    topic_id=part.topic_id,
                    partitions=(
                        PartitionData(
                            partition_index=i32(proposal.partition),
                            leader_epoch=i32(proposal.leader_epoch),
                            new_isr_with_epochs=tuple(
                                BrokerState(broker_id=BrokerId(x), broker_epoch=i64(-1))
                                for x in sorted(proposal.new_isr)
                            ),
                            partition_epoch=i32(proposal.partition_epoch),
                        ),
                    ),
                ),
            ),
        )
        try:
            resp = await b.controller.request("rpc", req, timeout=5)
        except PeerError as e:
            log.info("AlterPartition for %s-%d failed: %s", part.topic, part.partition, e)
            r.on_isr_change_answer(proposal, Err.REQUEST_TIMED_OUT, None, now_ms())
            return
        row = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
        if row is None or row.error_code:
            log.info(
                "AlterPartition for %s-%d refused: %s",
                part.topic,
                part.partition,
                Err(row.error_code).name if row is not None else "empty response",
            )
            code = Err(row.error_code) if row is not None else Err.UNKNOWN_SERVER_ERROR
            r.on_isr_change_answer(proposal, code, None, now_ms())
            return
        # The core decides what the answer changes (only the change in flight, only within its leader epoch).
        was_leading, isr = r.role is Role.LEADER, r.isr
        r.on_isr_change_answer(
            proposal,
            Err.NONE,
            PartitionState(
                int(row.leader_id),
                int(row.leader_epoch),
                frozenset(int(x) for x in row.isr),
                r.replicas,
                int(row.partition_epoch),
            ),
            now_ms(),
        )
        b.metrics.isr_changed(isr, r.isr, was_leading and r.role is Role.LEADER)
        part.sync()
