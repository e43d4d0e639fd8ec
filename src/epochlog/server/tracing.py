"""The trace switch (``epochlog.trace.enable``): a broker's or controller's state transitions as JSON lines in
``trace-broker.jsonl`` / ``trace-controller.jsonl`` next to its log (trace/), for the trace checker. Off by
default; the tests and ``epochlog demo`` turn it on and check every run's traces at its end."""

from __future__ import annotations

import logging
from pathlib import Path

from epochlog.controller.records import MetadataRecord, UncleanElection
from epochlog.trace import events as trace
from epochlog.trace.sink import FileSink, close

__all__ = ["TRACE_ENABLE", "close", "node_tracer", "partition_tracer", "trace_record"]

log = logging.getLogger("epochlog.trace")
TRACE_ENABLE = "epochlog.trace.enable"


def node_tracer(enabled: bool, directory: Path, node: int, src: str) -> trace.Tracer:
    if not enabled:
        return trace.NO_TRACE
    sink = FileSink(directory, node, src)
    log.info("%s %d: tracing state transitions to %s", src, node, sink.path)
    return sink


def partition_tracer(tracer: trace.Tracer, topic_id: object) -> trace.Tracer:
    return trace.TopicTracer(tracer, str(topic_id)) if tracer.enabled else tracer


def trace_record(tracer: trace.Tracer, record: MetadataRecord) -> None:
    """A metadata record the trace checker must know of: an unclean election permits a loss."""
    if tracer.enabled and isinstance(record, UncleanElection):
        tracer.emit(trace.Unclean(record.topic, record.partition, record.leader))
