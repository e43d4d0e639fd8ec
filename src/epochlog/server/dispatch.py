"""The API key -> handler table.

A handler takes (broker, header, frame) and returns a response description (dict, see
protocol.codec.build), ready bytes, a coroutine producing either, or server.responses.NO_RESPONSE (acks=0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from epochlog.protocol.api_versions import SERVED
from epochlog.protocol.codec import RequestHeader
from epochlog.protocol.errors import UnsupportedVersion

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

Handler = Callable[["Broker", RequestHeader, memoryview], Any]
_TABLE: dict[int, Handler] = {}


def _load() -> None:
    from epochlog.server.handlers import (
        acls,
        admin,
        client_quotas,
        configs,
        consumer_groups,
        delete_records,
        describe_topic_partitions,
        fetch,
        groups,
        log_dirs,
        metadata,
        offsets,
        produce,
        producer_id,
        sasl,
        scram,
        share,
        share_groups,
        share_offsets,
        share_state,
        transaction_admin,
        transactions,
    )

    _TABLE.update(
        {
            0: produce.handle_produce,
            1: fetch.handle_fetch,
            2: offsets.handle_list_offsets,
            3: metadata.handle_metadata,
            8: groups.handle_offset_commit,
            9: groups.handle_offset_fetch,
            10: groups.handle_find_coordinator,
            11: groups.handle_join_group,
            12: groups.handle_heartbeat,
            13: groups.handle_leave_group,
            14: groups.handle_sync_group,
            15: groups.handle_describe_groups,
            16: groups.handle_list_groups,
            17: sasl.handle_sasl,
            18: metadata.handle_api_versions,
            19: admin.handle_create_topics,
            20: admin.handle_delete_topics,
            21: delete_records.handle_delete_records,
            22: producer_id.handle_init_producer_id,
            23: offsets.handle_offset_for_leader_epoch,
            24: transactions.handle_add_partitions_to_txn,
            25: transactions.handle_add_offsets_to_txn,
            26: transactions.handle_end_txn,
            27: transactions.handle_write_txn_markers,
            28: transactions.handle_txn_offset_commit,
            29: acls.handle_describe_acls,
            30: acls.handle_create_acls,
            31: acls.handle_delete_acls,
            32: configs.handle_describe_configs,
            33: configs.handle_alter_configs,
            35: log_dirs.handle_describe_log_dirs,
            36: sasl.handle_sasl,
            37: admin.handle_create_partitions,
            43: admin.handle_elect_leaders,
            44: configs.handle_alter_configs,
            45: admin.handle_alter_partition_reassignments,
            46: admin.handle_list_partition_reassignments,
            42: groups.handle_delete_groups,
            47: groups.handle_offset_delete,
            48: client_quotas.handle_describe_client_quotas,
            49: client_quotas.handle_alter_client_quotas,
            50: scram.handle_describe_user_scram_credentials,
            51: scram.handle_alter_user_scram_credentials,
            60: metadata.handle_describe_cluster,
            61: transaction_admin.handle_describe_producers,
            65: transaction_admin.handle_describe_transactions,
            66: transaction_admin.handle_list_transactions,
            68: consumer_groups.handle_consumer_group_heartbeat,
            69: consumer_groups.handle_consumer_group_describe,
            75: describe_topic_partitions.handle_describe_topic_partitions,
            76: share_groups.handle_share_group_heartbeat,
            77: share_groups.handle_share_group_describe,
            78: share.handle_share_fetch,
            79: share.handle_share_acknowledge,
            83: share_state.handle_initialize_share_group_state,
            84: share_state.handle_read_share_group_state,
            85: share_state.handle_write_share_group_state,
            86: share_state.handle_delete_share_group_state,
            87: share_state.handle_read_share_group_state_summary,
            90: share_offsets.handle_describe_share_group_offsets,
            91: share_offsets.handle_alter_share_group_offsets,
            92: share_offsets.handle_delete_share_group_offsets,
        }
    )


def dispatch(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    if not _TABLE:
        _load()
    handler = _TABLE.get(header.api_key)
    if handler is None:
        raise UnsupportedVersion(f"api key {header.api_key} has no handler")
    broker.metrics.requests_of(SERVED[header.api_key], header.api_version).inc()
    return handler(broker, header, frame)
