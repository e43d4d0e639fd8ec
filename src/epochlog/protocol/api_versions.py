"""The API keys and version ranges epochlog serves, and the hand-built ApiVersions fallback."""

from __future__ import annotations

import struct

from kio.schema.index import api_key_map, schema_name_map

from epochlog.protocol.errors import Err


def kio_range(api_key: int) -> tuple[int, int]:
    versions = sorted(schema_name_map[api_key_map[api_key]].keys())
    return versions[0], versions[-1]


# api key -> name; ranges are as wide as kio parses (contiguous, as kafka-python needs).
SERVED: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    60: "DescribeCluster",
    61: "DescribeProducers",
    65: "DescribeTransactions",
    66: "ListTransactions",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    75: "DescribeTopicPartitions",
    76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    83: "InitializeShareGroupState",
    84: "ReadShareGroupState",
    85: "WriteShareGroupState",
    86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary",
    90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
}

# Produce is advertised from v0 because librdkafka refuses brokers that do not list the old
# versions (KAFKA-18659); versions kio cannot parse are refused when actually sent.
ADVERTISED_MIN_OVERRIDE = {0: 0}


# Versions kio parses whose meaning we do not serve: InitProducerId v6 is KIP-939's two-phase commit;
# EndTxn v5 and TxnOffsetCommit v5 are transaction version 2 (KIP-890 part 2), which this broker does
# not finalize, so clients keep to the versions of transaction version 1. ListTransactions v2 adds KIP-1152's
# transactional id pattern (a Java regular expression), not served. ShareFetch and ShareAcknowledge v2 add
# KIP-1222's renew acknowledgements and acquire modes, not served.
MAX_OVERRIDE = {22: 5, 26: 4, 28: 4, 66: 1, 78: 1, 79: 1}


def supported_range(api_key: int) -> tuple[int, int] | None:
    if api_key not in SERVED:
        return None
    lo, hi = kio_range(api_key)
    return lo, min(hi, MAX_OVERRIDE.get(api_key, hi))


def advertised() -> list[tuple[int, int, int]]:
    rows = []
    for key in sorted(SERVED):
        lo, hi = supported_range(key) or kio_range(key)
        rows.append((key, ADVERTISED_MIN_OVERRIDE.get(key, lo), hi))
    return rows


def is_supported(api_key: int, version: int) -> bool:
    r = supported_range(api_key)
    return r is not None and r[0] <= version <= r[1]


def api_versions_v0_error_frame(correlation_id: int) -> bytes:
    """ApiVersions response v0 with UNSUPPORTED_VERSION listing our ranges.

    A client that asks with a version we cannot parse gets this, so it can retry with one we
    know; v0 is the one body every client can read.
    """
    rows = advertised()
    body = struct.pack(">ihi", correlation_id, Err.UNSUPPORTED_VERSION, len(rows))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, lo, hi in rows)
    return struct.pack(">i", len(body)) + body
