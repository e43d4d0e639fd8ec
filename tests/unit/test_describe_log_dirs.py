"""DescribeLogDirs answered from a broker's log directories: sizes, an offline directory, a topic filter,
and every version encodes."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from kio.serial import entity_writer

from epochlog.protocol.api_versions import supported_range
from epochlog.protocol.codec import RequestHeader, encode_response, request_class
from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.server.handlers.log_dirs import handle_describe_log_dirs
from epochlog.storage.config import LogConfig
from epochlog.storage.log_dirs import LogDirs


def _frame(version: int, topics: list[tuple[str, list[int]]] | None) -> tuple[RequestHeader, memoryview]:
    cls = request_class(35, version)
    mod = __import__(cls.__module__, fromlist=["DescribableLogDirTopic"])
    wanted = None
    if topics is not None:
        wanted = tuple(mod.DescribableLogDirTopic(topic=t, partitions=tuple(p)) for t, p in topics)
    req = cls(topics=wanted)
    out = io.BytesIO()
    entity_writer(cls)(out, req)
    header = RequestHeader(api_key=35, api_version=version, correlation_id=1, client_id="c", size=0)
    return header, memoryview(out.getvalue()).toreadonly()


def test_sizes_offline_dirs_and_filters(tmp_path: Path) -> None:
    dirs = LogDirs([tmp_path / "a", tmp_path / "b"], LogConfig())
    dirs.open(node_id=1)
    plog = dirs.managers[0].create("t", 0, None)
    plog.append_as_leader(build_batch([(None, b"x" * 100)]), 0, 0)
    assert plog.size_bytes > 100
    dirs.managers[0].create("u", 1, None)
    dirs.failures.mark_offline(dirs.managers[1].dir, "test")
    broker = SimpleNamespace(log_manager=dirs, authorizer=None)
    low, high = supported_range(35)  # type: ignore[misc]
    for version in range(low, high + 1):
        header, frame = _frame(version, [("t", [0]), ("missing", [0])])
        body = handle_describe_log_dirs(broker, header, frame)  # type: ignore[arg-type]
        online, offline = body["results"]
        assert online["error_code"] == Err.NONE and online["log_dir"] == str((tmp_path / "a").resolve())
        assert [t["name"] for t in online["topics"]] == ["t"]  # the filter; a missing topic is left out
        (row,) = online["topics"][0]["partitions"]
        assert row["partition_size"] == plog.size_bytes and row["offset_lag"] == 0 and row["is_future_key"] is False
        assert online["total_bytes"] >= online["usable_bytes"] >= 0
        assert offline["error_code"] == Err.KAFKA_STORAGE_ERROR and offline["topics"] == []
        assert encode_response(35, version, 1, body)
    header, frame = _frame(high, None)
    body = handle_describe_log_dirs(broker, header, frame)  # type: ignore[arg-type]
    assert sorted(t["name"] for t in body["results"][0]["topics"]) == ["t", "u"]
