"""A share-partition leader's read of the log under the group's ``share.isolation.level`` (group config, as the
metadata log has it at each fetch; default read_uncommitted). The decision is the sans-IO core's
(groups/share/isolation.py); this feeds it what the Fetch path of a read_committed consumer uses: the last
stable offset (``offsets.last_stable_offset``, through the replica) and the aborted transactions of the range
read, from the transaction index (``PartitionLog.aborted_transactions``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from epochlog.config_defs import SHARE_ISOLATION_LEVEL
from epochlog.groups.share.isolation import AbortedTxn, LogBatch, Ranges, offered, read_limit
from epochlog.groups.share.model import READ_COMMITTED, READ_UNCOMMITTED

if TYPE_CHECKING:
    from epochlog.protocol.record_batch import BatchHeader
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.partition import Partition


def isolation_level(broker: Broker, group: str) -> str:
    """The group's share.isolation.level (the controller refuses any other value than Kafka's two)."""
    return broker.image.cluster.group_configs.get(group, {}).get(SHARE_ISOLATION_LEVEL, READ_UNCOMMITTED)


def read_bound(part: Partition, level: str) -> int:
    """Where the read stops: the high watermark, or the last stable offset under read_committed."""
    hw = part.high_watermark
    return read_limit(level, hw, part.replica.last_stable_offset() if level == READ_COMMITTED else hw)


def split_read(
    part: Partition, level: str, read_from: int, bound: int, headers: Sequence[BatchHeader]
) -> tuple[Ranges, Ranges]:
    """(ranges to acquire, aborted ranges to archive) of the batches read from ``read_from`` below ``bound``."""
    txns: list[AbortedTxn] = []
    if level == READ_COMMITTED and any(h.is_transactional and not h.is_control for h in headers):
        txns = [
            AbortedTxn(a.producer_id, a.first_offset, a.last_offset)
            for a in part.log.aborted_transactions(read_from, bound)
        ]
    batches = [LogBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional, h.is_control) for h in headers]
    return offered(level, batches, txns)
