"""The `epochlog` Spark data source: batch and micro-batch reads with Spark's Kafka options, plus the sink.

Driver side: resolve partitions and offsets (AdminClient), validate saved positions with
OffsetsForLeaderEpoch before every micro-batch, and plan offset ranges. Worker side: reader.read_split.

Checkpointed offsets are {"topic": {"partition": {"offset": next_offset, "epoch": leader_epoch}}}. The
epoch is the one the broker returned with the offset (ListOffsets v4+), i.e. the epoch of the leader whose
log held every record below that offset; validating it later with OffsetsForLeaderEpoch detects any
truncation of those records (see docs/spark.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from epochlog.client.admin import EARLIEST, LATEST, TopicGoneError, admin_client, list_offsets, resolve_partitions
from epochlog.client.epochs import LeaderEpochClient, Position, TopicPartition, Truncation
from epochlog.spark.options import OffsetLimit, OptionError, SourceOptions, parse_source_options
from epochlog.spark.planning import OffsetRange, backlog, rate_limit, should_delay, split_ranges
from epochlog.spark.reader import SPARK_DDL, SPARK_DDL_HEADERS, DataLossError, RangeSplit, read_split

log = logging.getLogger("epochlog.spark")

FAIL_HINT = (
    ' If you want your streaming query to continue on such cases, set the source option "failOnDataLoss" to "false".'
)


class LogTruncationError(DataLossError):
    """Saved positions are past the current leader's log for their epoch (KIP-320)."""

    def __init__(self, truncations: Sequence[Truncation]) -> None:
        self.truncations = list(truncations)
        parts = "; ".join(t.describe() for t in truncations)
        super().__init__(f"Log truncation detected by leader-epoch validation: {parts}.{FAIL_HINT}")


# -- offsets in the checkpoint -----------------------------------------------------------------------


def offsets_to_json(positions: Mapping[TopicPartition, Position]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (t, p), pos in sorted(positions.items()):
        out.setdefault(t, {})[str(p)] = {"offset": int(pos.offset), "epoch": int(pos.epoch)}
    return out


def offsets_from_json(obj: Mapping[str, Any]) -> dict[TopicPartition, Position]:
    """Also reads Spark's own {"topic": {"0": 23}} form, as positions without an epoch."""
    out: dict[TopicPartition, Position] = {}
    for t, parts in obj.items():
        for p, v in parts.items():
            if isinstance(v, Mapping):
                out[(t, int(p))] = Position(int(v["offset"]), int(v.get("epoch", -1)))
            else:
                out[(t, int(p))] = Position(int(v), -1)
    return out


# -- driver-side offset resolution -------------------------------------------------------------------


class _Driver:
    """Cluster access for the driver process; never pickled to workers."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.conf: dict[str, Any] = {"bootstrap.servers": opts.bootstrap, **opts.kafka}
        self._admin: Any = None
        self._epochs: LeaderEpochClient | None = None

    @property
    def admin(self) -> Any:
        if self._admin is None:
            admin_conf = {k: v for k, v in self.conf.items() if k not in ("group.id", "isolation.level")}
            self._admin = admin_client(admin_conf)
        return self._admin

    @property
    def epochs(self) -> LeaderEpochClient:
        if self._epochs is None:
            self._epochs = LeaderEpochClient(self.opts.bootstrap)
        return self._epochs

    def close(self) -> None:
        if self._epochs is not None:
            self._epochs.close()
            self._epochs = None
        self._admin = None

    def partitions(self) -> list[TopicPartition]:
        o = self.opts
        last: Exception | None = None
        for attempt in range(o.fetch_retries):
            try:
                return resolve_partitions(self.admin, assign=o.assign, subscribe=o.subscribe, pattern=o.pattern)
            except Exception as e:  # metadata can fail transiently while leaders move
                last = e
                if attempt + 1 < o.fetch_retries:
                    time.sleep(o.fetch_retry_interval_ms / 1000)
        raise RuntimeError(f"cannot read topic metadata from {o.bootstrap}: {last}")

    def positions(
        self, specs: Mapping[TopicPartition, int], timestamps: bool = False
    ) -> dict[TopicPartition, Position]:
        return list_offsets(self.admin, specs, self.conf, timestamps=timestamps, retries=self.opts.fetch_retries)

    def existing(self, tps: Sequence[TopicPartition]) -> list[TopicPartition]:
        """The subset of tps that exist now (for deleted-topic detection)."""
        if not tps:
            return []
        md = self.admin.list_topics(timeout=10)
        out = []
        for t, p in tps:
            tm = md.topics.get(t)
            if tm is not None and tm.error is None and p in tm.partitions:
                out.append((t, p))
        return out

    def resolve(self, limit: OffsetLimit, starting: bool, tps: list[TopicPartition]) -> dict[TopicPartition, Position]:
        """Turn a starting/ending option into concrete positions for the given partitions."""
        o = self.opts
        if limit.kind == "earliest":
            return self.positions(dict.fromkeys(tps, EARLIEST))
        if limit.kind == "latest":
            return self.positions(dict.fromkeys(tps, LATEST))
        if limit.kind == "offsets":
            given = dict(limit.offsets or {})
            if o.assign is not None and set(given) != set(tps):
                raise OptionError(
                    "If startingOffsets/endingOffsets contains specific offsets, you must specify all "
                    f"TopicPartitions. Use -1 for latest, -2 for earliest. Specified: {sorted(given)} "
                    f"Assigned: {sorted(tps)}"
                )
            missing = [tp for tp in given if tp not in set(tps)]
            if missing:
                raise OptionError(f"Offsets were given for partitions that do not exist: {sorted(missing)}")
            # Partitions a subscription covers but the JSON does not name start from the default.
            specs = {tp: given.get(tp, EARLIEST if starting else LATEST) for tp in tps}
            special = {tp: v for tp, v in specs.items() if v in (EARLIEST, LATEST)}
            resolved = self.positions(special)
            return {tp: resolved[tp] if tp in resolved else Position(v, -1) for tp, v in specs.items()}
        # Timestamps: per partition, or one for all.
        if limit.kind == "timestamp":
            ts = dict.fromkeys(tps, int(limit.timestamp or 0))
        else:
            ts = dict(limit.offsets or {})
            if set(ts) != set(tps):
                raise OptionError(
                    "If startingOffsetsByTimestamp/endingOffsetsByTimestamp is given, it must name every "
                    f"partition read. Specified: {sorted(ts)} Assigned: {sorted(tps)}"
                )
        found = self.positions(ts, timestamps=True)
        out: dict[TopicPartition, Position] = {}
        unmatched = [tp for tp, pos in found.items() if pos.offset < 0]
        if unmatched:
            if starting and o.timestamp_strategy == "error":
                tp = unmatched[0]
                raise OptionError(
                    f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp {ts[tp]}."
                )
            found.update(self.positions(dict.fromkeys(unmatched, LATEST)))
        out.update(found)
        return out


# -- batch -------------------------------------------------------------------------------------------


def _split(r: OffsetRange, opts: SourceOptions, conf: Mapping[str, str]) -> RangeSplit:
    return RangeSplit(
        topic=r.topic,
        partition=r.partition,
        from_offset=r.from_offset,
        until_offset=r.until_offset,
        conf=dict(conf),
        include_headers=opts.include_headers,
        fail_on_data_loss=opts.fail_on_data_loss,
        poll_timeout_ms=opts.poll_timeout_ms,
        group_id_prefix=opts.group_id_prefix,
        reader=opts.reader,
    )


class EpochlogBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        d = _Driver(self.opts)
        try:
            tps = d.partitions()
            start = d.resolve(self.opts.starting, True, tps)
            end = d.resolve(self.opts.ending, False, tps)
        finally:
            d.close()
        if set(start) != set(end):
            raise RuntimeError(f"different topic partitions for starting {sorted(start)} and ending {sorted(end)}")
        ranges = []
        for tp in sorted(start):
            f, u = start[tp].offset, end[tp].offset
            if f > u:
                raise OptionError(
                    f"Beginning offset {f} is after the ending offset {u} for topic {tp[0]} partition {tp[1]}. "
                    "This may happen if the offsets were specified explicitly"
                )
            ranges.append(OffsetRange(tp[0], tp[1], f, u))
        parts = [_split(r, self.opts, self.opts.kafka) for r in split_ranges(ranges, self.opts.min_partitions)]
        # Spark requires at least one partition; an empty split reads nothing.
        return parts or [RangeSplit("", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangeSplit)
        if not partition.topic:
            return iter(())
        return read_split(partition)


# -- streaming ---------------------------------------------------------------------------------------


class EpochlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._driver: _Driver | None = None
        self._available_now: dict[TopicPartition, Position] | None = None
        self._is_available_now = False
        self._last_trigger_ms = 0
        # Truncations already acted on, so a replanned batch does not re-read the same records twice.
        self._handled: dict[tuple[TopicPartition, int, int], int] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_driver"] = None
        return state

    @property
    def driver(self) -> _Driver:
        if self._driver is None:
            self._driver = _Driver(self.opts)
        return self._driver

    def _report(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + "." + FAIL_HINT)
        log.warning("%s; continuing because failOnDataLoss=false", message)

    def initialOffset(self) -> dict[str, Any]:
        tps = self.driver.partitions()
        positions = self.driver.resolve(self.opts.starting, True, tps)
        log.info("initial offsets %s", positions)
        return offsets_to_json(positions)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._is_available_now = True

    def _latest(self) -> dict[TopicPartition, Position]:
        tps = self.driver.partitions()
        try:
            return self.driver.positions(dict.fromkeys(tps, LATEST))
        except TopicGoneError:
            # A topic vanished between the metadata and the lookup; ask again with what exists now.
            tps = self.driver.partitions()
            return self.driver.positions(dict.fromkeys(tps, LATEST))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        start_pos = offsets_from_json(start)
        if self._is_available_now:
            # availableNow: the target is fixed once, at the first call, and never moves.
            if self._available_now is None:
                self._available_now = self._latest()
            latest = dict(self._available_now)
        else:
            latest = self._latest()
        start_off = {tp: p.offset for tp, p in start_pos.items()}
        latest_off = {tp: p.offset for tp, p in latest.items()}

        o = self.opts
        if not isinstance(limit, ReadAllAvailable) and not self._is_available_now:
            if o.min_offsets_per_trigger is not None:
                now = int(time.time() * 1000)
                if should_delay(
                    o.min_offsets_per_trigger,
                    backlog(start_off, latest_off),
                    now,
                    self._last_trigger_ms,
                    o.max_trigger_delay_ms,
                ):
                    return start
                self._last_trigger_ms = now
        end_off = latest_off
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is not None and not isinstance(limit, ReadAllAvailable):
            new = [tp for tp in latest_off if tp not in start_off]
            from_new = (
                {tp: p.offset for tp, p in self.driver.positions(dict.fromkeys(new, EARLIEST)).items()} if new else {}
            )
            begin = {**from_new, **start_off}
            end_off = rate_limit(int(max_rows), {tp: begin[tp] for tp in latest_off if tp in begin}, latest_off)
        end: dict[TopicPartition, Position] = {}
        for tp, off in end_off.items():
            prev = start_pos.get(tp)
            if prev is not None and prev.offset == off:
                # Unchanged offset keeps its epoch: a leader change alone must not make a new (empty) batch.
                end[tp] = prev
            else:
                end[tp] = Position(off, latest[tp].epoch)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def _validate(
        self, start: dict[TopicPartition, Position], until: dict[TopicPartition, Position]
    ) -> dict[TopicPartition, int]:
        """KIP-320 check of the batch's start positions; returns where each truncated partition resumes."""
        if not self.opts.validate_epochs:
            return {}
        to_check = {
            tp: pos
            for tp, pos in start.items()
            if tp in until and pos.epoch >= 0 and (tp, pos.offset, pos.epoch) not in self._handled
        }
        if not to_check:
            return {
                tp: self._handled[(tp, p.offset, p.epoch)]
                for tp, p in start.items()
                if (tp, p.offset, p.epoch) in self._handled
            }
        report = self.driver.epochs.validate(to_check)
        for tp, why in report.unchecked.items():
            log.debug("position of %s-%s not validated: %s", tp[0], tp[1], why)
        resume: dict[TopicPartition, int] = {}
        if report.truncations:
            if self.opts.fail_on_data_loss:
                raise LogTruncationError(report.truncations)
            for t in report.truncations:
                tp = (t.topic, t.partition)
                at = t.divergence_offset if t.divergence_offset is not None else t.position.offset
                log.warning("%s; resuming at offset %s because failOnDataLoss=false", t.describe(), at)
                resume[tp] = at
                self._handled[(tp, t.position.offset, t.position.epoch)] = at
        for tp, p in start.items():
            key = (tp, p.offset, p.epoch)
            if key in self._handled:
                resume[tp] = self._handled[key]
        return resume

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        start_pos = offsets_from_json(start)
        end_pos = offsets_from_json(end)
        d = self.driver

        new = [tp for tp in end_pos if tp not in start_pos]
        from_new: dict[TopicPartition, int] = {}
        if new:
            live = d.existing(new)
            if live:
                from_new = {tp: p.offset for tp, p in d.positions(dict.fromkeys(live, EARLIEST)).items()}
            gone_new = sorted(set(new) - set(from_new))
            if gone_new:
                self._report(f"Cannot find earliest offsets of {gone_new}. Some data may have been missed")
            for tp, off in sorted(from_new.items()):
                if off != 0:
                    self._report(
                        f"Added partition {tp[0]}-{tp[1]} starts from {off} instead of 0. "
                        "Some data may have been missed"
                    )
            log.info("partitions added: %s", from_new)

        gone = sorted(tp for tp in start_pos if tp not in end_pos)
        if gone:
            self._report(f"{gone} are gone. Some data may have been missed")

        resume = self._validate(start_pos, end_pos)

        # Positions below the log start were removed by retention or deleteRecords.
        tps = [tp for tp in end_pos if tp in start_pos or tp in from_new]
        live = d.existing(tps) if tps else []
        log_start = {tp: p.offset for tp, p in d.positions(dict.fromkeys(live, EARLIEST)).items()} if live else {}

        ranges: list[OffsetRange] = []
        for tp in sorted(tps):
            f = resume.get(tp, start_pos[tp].offset if tp in start_pos else from_new[tp])
            u = end_pos[tp].offset
            if tp not in resume and u < f:
                self._report(
                    f"Partition {tp[0]}-{tp[1]}'s offset was changed from {f} to {u}, some data may have been missed"
                )
            ls = log_start.get(tp)
            if ls is not None and f < ls < u:
                self._report(
                    f"Offsets [{f}, {ls}) of {tp[0]}-{tp[1]} are below the log start offset {ls} (deleted by retention)"
                )
                f = ls
            ranges.append(OffsetRange(tp[0], tp[1], f, u))
        return [_split(r, self.opts, self.opts.kafka) for r in split_ranges(ranges, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangeSplit)
        return read_split(partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Like Spark's connector: progress lives in the checkpoint, nothing is committed to the cluster.
        return None

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None


# -- the data source ---------------------------------------------------------------------------------


class EpochlogDataSource(DataSource):
    """Register with spark.dataSource.register(EpochlogDataSource); use format("epochlog")."""

    @classmethod
    def name(cls) -> str:
        return "epochlog"

    def schema(self) -> str:
        headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return SPARK_DDL_HEADERS if headers else SPARK_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return EpochlogBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return EpochlogStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        from epochlog.spark.sink import EpochlogBatchWriter

        return EpochlogBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        from epochlog.spark.sink import EpochlogStreamWriter

        return EpochlogStreamWriter(self.options, schema)
