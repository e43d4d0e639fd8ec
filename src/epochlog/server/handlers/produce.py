"""Produce: validate, append as leader, answer with offsets (acks 0, 1 and all)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.protocol.codec import RequestHeader
from epochlog.protocol.errors import Err
from epochlog.protocol.log_validator import Buffer, TopicRules, ValidationError, validate_produce_batch
from epochlog.protocol.produce_request import parse_produce
from epochlog.protocol.produce_response_writer import encode_produce_response
from epochlog.protocol.record_batch import read_header
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.authz import session_of
from epochlog.server.handlers.leader_hints import add_hint
from epochlog.server.partition import Partition
from epochlog.server.quota_enforcement import PRODUCE
from epochlog.server.responses import NO_RESPONSE, Waiting
from epochlog.transactions import verification
from epochlog.transactions.verification import Unverified, by_producer, needs_verification

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

log = logging.getLogger("epochlog.produce")


def _rules(cfg: Any) -> TopicRules:
    return TopicRules(
        compacted="compact" in cfg.cleanup_policy,
        log_append_time=cfg.log_append_time,
        timestamp_before_max_ms=cfg.timestamp_before_max_ms,
        timestamp_after_max_ms=cfg.timestamp_after_max_ms,
        max_message_bytes=cfg.max_message_bytes,
    )


def _append(
    broker: Broker, part: Partition, records: Buffer | None, acks: int, epoch: int, transactional_id: str | None
) -> tuple[dict[str, Any], int]:
    """The partition's response row, and the last offset an acks=all answer must wait for (-1: none)."""
    out: dict[str, Any] = {
        "index": part.partition,
        "base_offset": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
        "log_append_time": -1,
    }
    plog = part.log
    # The core's rules (leadership, the KIP-359 epoch, min.insync.replicas for acks=all) asked before the
    # bytes are looked at, Kafka's order: a follower answers NOT_LEADER whatever it was sent. The core's
    # append below applies them again at the moment of writing.
    now = now_ms()
    code = Err(part.replica.check_produce(acks, now, epoch))
    if code:
        out["error_code"] = code
        return out, -1
    if records is None or len(records) == 0:
        out["error_code"] = Err.INVALID_RECORD
        out["error_message"] = "no record batch in the partition data"
        return out, -1
    try:
        records = validate_produce_batch(records, _rules(plog.config), now)
    except ValidationError as e:
        log.info("produce to %s-%d refused (%s): %s", part.topic, part.partition, e.code.name, e.message)
        out["error_code"] = e.code
        out["error_message"] = e.message[:500]
        out["record_errors"] = [{"batch_index": i, "batch_index_error_message": m[:500]} for i, m in e.record_errors]
        broker.metrics.failed_produce_of(part.topic).inc()
        return out, -1
    if read_header(records).is_transactional and transactional_id is None:
        # No coordinator could ever decide such a batch: it would open a transaction nothing closes and
        # hold every read_committed reader at its first offset. Kafka refuses it the same way.
        out["error_code"] = Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        out["error_message"] = "transactional records need the request's transactional id"
        return out, -1
    try:
        result = part.append(records, now, acks, epoch)
    except Exception as e:
        refused = getattr(e, "error_code", None)
        if refused is None:
            log.exception("append to %s-%d failed", part.topic, part.partition)
            refused = Err.UNKNOWN_SERVER_ERROR
        else:
            log.info("produce to %s-%d refused (%s): %s", part.topic, part.partition, Err(refused).name, e)
        out["error_code"] = refused
        out["error_message"] = str(e)[:500]
        broker.metrics.failed_produce_of(part.topic).inc()
        out["log_start_offset"] = plog.log_start_offset
        return out, -1
    if result.error:
        out["error_code"] = Err(result.error)
        return out, -1
    if not result.duplicate:
        broker.metrics.messages_in_of(part.topic).inc(result.record_count)
        broker.metrics.bytes_in_of(part.topic).inc(len(records))
    out["error_code"] = Err.NONE
    out["base_offset"] = result.first_offset
    out["log_append_time"] = result.log_append_time_ms
    out["log_start_offset"] = plog.log_start_offset
    return out, result.wait_offset


def _answer(broker: Broker, header: RequestHeader, responses: list[dict[str, Any]]) -> bytes:
    """The response frame, with KIP-951 leader hints on rows whose error calls for them."""
    nodes: dict[int, dict[str, Any]] = {}
    for topic in responses:
        for row in topic["partition_responses"]:
            add_hint(broker, topic["name"], row["index"], row, nodes, session_of(header).listener)
    return encode_produce_response(
        header.api_version, header.correlation_id, responses, list(nodes.values()), header.throttle_ms
    )


async def _await_acks(
    broker: Broker,
    header: RequestHeader,
    responses: list[dict[str, Any]],
    waits: list[tuple[dict[str, Any], Partition, int]],
    timeout_ms: int,
    acks: int,
) -> bytes:
    """acks=all: answer once the HW passes each append (acks=1 under flush.messages=1: once the leader
    synced it), or REQUEST_TIMED_OUT after timeout_ms."""
    futs = [part.wait_committed(last, acks) for _row, part, last in waits]
    # Each future awaited directly under one deadline: its answer wakes this task in the next event-loop
    # turn (asyncio.wait adds a turn, and each turn on a busy leader is other work first).
    try:
        async with asyncio.timeout(max(timeout_ms, 0) / 1000):
            for fut in futs:
                await fut
    except TimeoutError:
        pass
    for (row, _part, last), fut in zip(waits, futs, strict=True):
        if fut.done() and not fut.cancelled():
            row["error_code"] = fut.result()
        else:
            fut.cancel()
            row["error_code"] = Err.REQUEST_TIMED_OUT
            row["error_message"] = f"the ISR did not replicate offset {last} within {timeout_ms} ms"
        if row["error_code"]:
            row["base_offset"] = -1
    return _answer(broker, header, responses)


def _unverified(broker: Broker, req: Any, denied: set[str]) -> list[Unverified]:
    """The writes KIP-890 part 1 holds for the coordinator (the rule is verification.needs_verification),
    each with its producer's marker count on the partition now."""
    out = []
    for topic in req.topics:
        name = broker.topic_name_for_id(topic.topic_id) if topic.topic_id is not None else topic.name
        if not name or name in denied:
            # An unknown topic is answered with its own error below; a denied one TOPIC_AUTHORIZATION_FAILED.
            # No coordinator is asked about either.
            continue
        for pd in topic.partitions:
            part = broker.partition(name, pd.index)
            if part is None or pd.records is None or len(pd.records) < 61:
                continue  # answered with the partition's own error below
            try:
                h = read_header(pd.records)
            except ValueError:
                continue  # validation answers it
            state = part.log.producer_state
            entry = state.last_entry(h.producer_id) if h.has_producer_id else None
            if needs_verification(h.is_transactional, h.has_producer_id, h.producer_epoch, entry):
                markers = state.markers_applied.get(h.producer_id, 0)
                out.append(Unverified(name, pd.index, h.producer_id, h.producer_epoch, markers))
    return out


async def _verify_then_produce(
    broker: Broker, header: RequestHeader, req: Any, unverified: list[Unverified], denied: set[str]
) -> Any:
    answers: dict[tuple[str, int], Err] = {}
    for (pid, epoch), tps in by_producer(unverified).items():
        codes = await broker.txn.verify_anywhere(req.transactional_id, pid, epoch, tps)
        answers.update((tp, codes.get(tp, Err.COORDINATOR_NOT_AVAILABLE)) for tp in tps)
    refused: dict[tuple[str, int], Err] = {}
    for u in unverified:
        part = broker.partition(u.topic, u.partition)
        markers_now = u.markers if part is None else part.log.producer_state.markers_applied.get(u.producer_id, 0)
        tp = (u.topic, u.partition)
        code = verification.answer(answers.get(tp), u.markers, markers_now, header.api_version)
        if code:
            refused[tp] = code
    # Appended now, before the connection handles the next request; only an acks=all wait goes on meanwhile.
    return _produce(broker, header, req, refused, denied)


_NO_DENIED: set[str] = set()


def _denied(broker: Broker, header: RequestHeader, req: Any) -> set[str] | None:
    """The topics this principal may not write (one check per topic, not per partition); None when the
    request's transactional id may not be written, which fails every partition (Kafka's order: the
    transactional id first, then each topic, before anything about the topic is looked at)."""
    if req.transactional_id is not None and not authz.txn_allowed(
        broker, header, Operation.WRITE, req.transactional_id
    ):
        return None
    names = (broker.topic_name_for_id(t.topic_id) if t.topic_id is not None else t.name for t in req.topics)
    return authz.denied_topics(broker, header, Operation.WRITE, names)


def handle_produce(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = parse_produce(frame[header.size :], header.api_version)
    # producer_byte_rate: the request's bytes count whatever becomes of them, as in Kafka.
    broker.client_quotas.record(PRODUCE, header, len(frame))
    denied = _NO_DENIED
    if authz.enabled(broker):
        checked = _denied(broker, header, req)
        if checked is None:
            return _txn_id_refused(broker, header, req)
        denied = checked
    if (
        req.transactional_id is not None
        and req.acks in (0, 1, -1)
        and broker.config.transaction_partition_verification_enable
    ):
        unverified = _unverified(broker, req, denied)
        if unverified:
            return _verify_then_produce(broker, header, req, unverified, denied)
    return _produce(broker, header, req, {}, denied)


def _txn_id_refused(broker: Broker, header: RequestHeader, req: Any) -> Any:
    if req.acks == 0:
        return NO_RESPONSE
    code = Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    responses = [
        {
            "name": t.name or "",
            "topic_id": t.topic_id,
            "partition_responses": [{"index": pd.index, "error_code": code, "base_offset": -1} for pd in t.partitions],
        }
        for t in req.topics
    ]
    return _answer(broker, header, responses)


def _produce(
    broker: Broker, header: RequestHeader, req: Any, refused: dict[tuple[str, int], Err], denied: set[str]
) -> Any:
    responses = []
    waits: list[tuple[dict[str, Any], Partition, int]] = []
    bad_acks = req.acks not in (0, 1, -1)
    for topic in req.topics:
        name = topic.name
        if topic.topic_id is not None:
            name = broker.topic_name_for_id(topic.topic_id)
        parts_out = []
        if name in denied:
            # Before any existence check: the answer must not tell whether the topic exists.
            code = Err.TOPIC_AUTHORIZATION_FAILED
            parts_out = [{"index": pd.index, "error_code": code, "base_offset": -1} for pd in topic.partitions]
            responses.append({"name": name, "topic_id": topic.topic_id, "partition_responses": parts_out})
            continue
        for pd in topic.partitions:
            part = broker.partition(name, pd.index) if name else None
            if bad_acks:
                parts_out.append({"index": pd.index, "error_code": Err.INVALID_REQUIRED_ACKS, "base_offset": -1})
            elif (name, pd.index) in refused:
                parts_out.append(
                    {
                        "index": pd.index,
                        "error_code": refused[(name, pd.index)],
                        "base_offset": -1,
                        "error_message": "the partition is not in the producer's ongoing transaction",
                    }
                )
            elif part is None:
                code = (
                    Err.UNKNOWN_TOPIC_ID
                    if topic.topic_id is not None and name is None
                    else Err.UNKNOWN_TOPIC_OR_PARTITION
                )
                if (name, pd.index) in broker.image.states:
                    code = Err.NOT_LEADER_OR_FOLLOWER  # it exists, just not here
                parts_out.append({"index": pd.index, "error_code": code, "base_offset": -1})
            else:
                row, last = _append(broker, part, pd.records, req.acks, pd.current_leader_epoch, req.transactional_id)
                parts_out.append(row)
                if last >= 0:
                    waits.append((row, part, last))
        responses.append({"name": name or "", "topic_id": topic.topic_id, "partition_responses": parts_out})
    if req.acks == 0:
        return NO_RESPONSE
    if waits:
        return Waiting(_await_acks(broker, header, responses, waits, req.timeout_ms, req.acks))
    return _answer(broker, header, responses)
