"""The console's pure parts: metadata from kio's real response type, the overview counts, lag, payloads."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta

from epochlog.console.metadata import parse_metadata
from epochlog.console.payload import show_bytes
from epochlog.console.reader import lag, overview_of
from epochlog.protocol.codec import response_class

MD = response_class(3, 9)
_mod = __import__(MD.__module__, fromlist=["x"])


def _part(i: int, leader: int, epoch: int, replicas: list[int], isr: list[int]) -> object:
    return _mod.MetadataResponsePartition(
        error_code=ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
        partition_index=i32(i),
        leader_id=BrokerId(leader),
        leader_epoch=i32(epoch),
        replica_nodes=tuple(BrokerId(r) for r in replicas),
        isr_nodes=tuple(BrokerId(r) for r in isr),
        offline_replicas=(),
    )


def _response() -> object:
    brokers = tuple(_mod.MetadataResponseBroker(node_id=BrokerId(n), host="127.0.0.1", port=i32(9090 + n), rack=None)
                    for n in (1, 2))  # fmt: skip
    topics = (
        _mod.MetadataResponseTopic(
            error_code=ErrorCode.none,
            name=TopicName("orders"),
            is_internal=False,
            # Listed out of order on purpose: the console sorts partitions.
            partitions=(
                _part(2, -1, 4, [3, 1], []),  # broker 3 is down and led it: offline
                _part(0, 1, 7, [1, 2], [1, 2]),
                _part(1, 2, 3, [2, 1], [2]),  # under-replicated
            ),
            topic_authorized_operations=i32(-2147483648),
        ),
    )
    return MD(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=brokers,
        cluster_id="c1",
        controller_id=BrokerId(2),
        topics=topics,
        cluster_authorized_operations=i32(-2147483648),
    )


def test_metadata_keeps_epochs_and_sorts_partitions() -> None:
    md = parse_metadata(_response())
    t = md.topics["orders"]
    assert [p.partition for p in t.partitions] == [0, 1, 2]
    assert (t.partitions[0].leader, t.partitions[0].leader_epoch) == (1, 7)
    assert t.partitions[1].under_replicated and not t.partitions[0].under_replicated
    assert t.partitions[2].is_offline
    assert md.controller_id == 2 and [b.node_id for b in md.brokers] == [1, 2]


def test_overview_counts_leaders_per_broker_and_bad_partitions() -> None:
    ov = overview_of(parse_metadata(_response()))
    assert ov["partitions"] == 3
    assert ov["under_replicated_partitions"] == 2  # partition 1, and partition 2 with an empty ISR
    assert ov["offline_partitions"] == 1
    assert {b["node_id"]: b["leaders"] for b in ov["brokers"]} == {1: 1, 2: 1}
    assert {b["node_id"]: b["replicas"] for b in ov["brokers"]} == {1: 3, 2: 2}
    assert ov["controller_id"] == 2


@pytest.mark.parametrize(
    ("committed", "end", "expected"),
    [(5, 12, 7), (12, 12, 0), (None, 12, None), (-1, 12, None), (5, None, None), (13, 12, 0)],
)
def test_lag(committed: int | None, end: int | None, expected: int | None) -> None:
    assert lag(committed, end) == expected


def test_payload_text_hex_and_fallback() -> None:
    assert show_bytes(b"caf\xc3\xa9", "text") == {"as": "text", "data": "café"}
    assert show_bytes(b"\x00\xff", "text") == {"as": "hex", "data": "00 ff"}
    assert show_bytes(b"ab", "hex") == {"as": "hex", "data": "61 62"}
    assert show_bytes(None, "text") == {"as": "null", "data": None}
    assert show_bytes(b'{"a":[1,"\xc3\xa9"]}', "json") == {"as": "json", "data": '{\n  "a": [\n    1,\n    "é"\n  ]\n}'}
    assert show_bytes(b"not json", "json") == {"as": "text", "data": "not json"}
    assert show_bytes(b"\xff", "json") == {"as": "hex", "data": "ff"}
    with pytest.raises(ValueError):
        show_bytes(b"x", "yaml")


def test_quorum_view_puts_the_leader_first_with_lags() -> None:
    from types import SimpleNamespace as NS

    from epochlog.console.quorum import quorum_view

    def rep(i: int, leo: int, caught: int) -> NS:
        return NS(replica_id=i, log_end_offset=leo, last_fetch_timestamp=caught, last_caught_up_timestamp=caught)

    row = NS(
        leader_id=3002, leader_epoch=4, high_watermark=120,
        current_voters=[rep(3001, 118, 900), rep(3002, 121, 1003), rep(3003, 121, -1)],
        observers=[rep(2, 100, 950), rep(1, 121, 990)],
    )  # fmt: skip
    q = quorum_view(row, now_ms=1000)
    assert (q["leader_id"], q["leader_epoch"], q["high_watermark"]) == (3002, 4, 120)
    assert [(v["node_id"], v["role"], v["lag"]) for v in q["voters"]] == [
        (3002, "leader", 0),
        (3001, "follower", 3),
        (3003, "follower", 0),
    ]
    assert [o["node_id"] for o in q["observers"]] == [1, 2]
    assert q["observers"][1]["lag"] == 21 and q["voters"][1]["caught_up_ms_ago"] == 100
    assert q["voters"][2]["caught_up_ms_ago"] is None
    assert q["voters"][0]["caught_up_ms_ago"] == 0  # the controller's clock 3 ms ahead of ours


def test_metadata_client_asks_the_broker_that_answered_last_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from epochlog.client.wire import WireError
    from epochlog.console import metadata as md_mod

    asked: list[tuple[str, int]] = []
    down = {("127.0.0.1", 9001)}

    class FakeConn:
        def __init__(self, host: str, port: int, *a: object, **kw: object) -> None:
            self.addr = (host, port)

        def request(self, req: object) -> object:
            asked.append(self.addr)
            if self.addr in down:
                raise WireError("timed out")  # a stopped broker: each try costs a timeout
            return _response()

        def close(self) -> None:
            pass

    from epochlog.client import wire

    monkeypatch.setattr(wire, "Connection", FakeConn)  # what the client's connection pool opens
    c = md_mod.MetadataClient("127.0.0.1:9001,127.0.0.1:9002")
    c.fetch()
    asked.clear()
    c.fetch()
    # The crafted answer names brokers 9091 and 9092; the one that answered (9002) is asked first.
    assert asked == [("127.0.0.1", 9002)]
