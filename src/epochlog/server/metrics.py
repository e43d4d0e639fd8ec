"""Broker and controller metrics in Prometheus format, named after Kafka's JMX metrics as jmx_exporter
spells them (kafka_<domain>_<type>_<name>, lower case; *PerSec meters become *_total counters).

Gauges are computed from the live state at scrape time (a partition's ISR, a connection's queue), never
set by hand, so they cannot drift from what the broker does. Served over HTTP on ``metrics.port`` (0, the
default, turns the endpoint off); a combined node serves its controller's metrics on the same endpoint.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs
from wsgiref.simple_server import make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app, start_http_server
from prometheus_client.exposition import ThreadingWSGIServer, _get_best_family, _SilentHandler

from epochlog.clock import now_ms
from epochlog.replication.types import Role
from epochlog.server.sendfile_writer import REGION_BYTES

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

# Request latencies in milliseconds, as Kafka's TotalTimeMs.
LATENCY_BUCKETS_MS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
FLUSH_BUCKETS_MS = (0.1, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000)


# Clients choose their own ids: a hostile or churning one must not grow a per-client metric without end. Past
# this many ids, new ones are counted together under OTHER_CLIENTS.
MAX_CLIENT_IDS = 1000
OTHER_CLIENTS = "(other)"


class _Children:
    """A labelled metric's children by their label values. prometheus_client's ``labels()`` converts,
    validates and takes a lock on every call; the request path asks for the same few children over and over,
    and with small requests that lookup was 2-5% of the broker's CPU (docs/performance-profile.md). The key
    sets are bounded: topics that exist, served API versions, request names."""

    __slots__ = ("_by", "_metric")

    def __init__(self, metric: Counter | Histogram) -> None:
        self._metric = metric
        self._by: dict[tuple[object, ...], Any] = {}

    def __call__(self, *values: object) -> Any:
        child = self._by.get(values)
        if child is None:
            child = self._by[values] = self._metric.labels(*(str(v) for v in values))
        return child


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._client_ids: set[str] = set()
        r = self.registry
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records appended", ["topic"], registry=r
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Record bytes appended", ["topic"], registry=r
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Record bytes fetched", ["topic"], registry=r
        )
        # Per consumer client id: which replica a consumer reads from shows here (KIP-392, client.rack).
        self.client_bytes_out = Counter(
            "kafka_server_fetch_client_bytes", "Record bytes fetched by consumers", ["client_id", "topic"], registry=r
        )
        self.failed_produce = Counter(
            "kafka_server_brokertopicmetrics_failedproducerequests",
            "Produce partitions answered with an error",
            ["topic"],
            registry=r,
        )
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests handled", ["request", "version"], registry=r
        )
        self.request_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from a request read to its answer queued for the socket",
            ["request"],
            buckets=LATENCY_BUCKETS_MS,
            registry=r,
        )
        self.isr_shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions this broker leads", registry=r
        )
        self.isr_expands = Counter(
            "kafka_server_replicamanager_isrexpands", "ISR expansions of partitions this broker leads", registry=r
        )
        # No Kafka JMX metric counts finished transactions; this one is epochlog's own.
        self.txn_completed = Counter(
            "epochlog_transaction_coordinator_completed",
            "Transactions this broker's coordinator completed (the CompleteCommit/CompleteAbort record is durable)",
            ["result"],
            registry=r,
        )
        self.log_flush = Histogram(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Milliseconds each log flush (fsync) took",
            buckets=FLUSH_BUCKETS_MS,
            registry=r,
        )
        self.messages_in_of = _Children(self.messages_in)
        self.bytes_in_of = _Children(self.bytes_in)
        self.bytes_out_of = _Children(self.bytes_out)
        self.failed_produce_of = _Children(self.failed_produce)
        self.requests_of = _Children(self.requests)
        self._request_time_of = _Children(self.request_time)
        self._client_bytes_out_of = _Children(self.client_bytes_out)
        # Where consumers' record bytes went (server/sendfile_writer.py): file to socket, or through memory.
        Gauge(
            "epochlog_fetch_sendfile_bytes", "Record bytes sent from segment files with sendfile", registry=r
        ).set_function(lambda: REGION_BYTES.sent)
        Gauge(
            "epochlog_fetch_region_read_bytes", "File-region record bytes read into memory to be sent", registry=r
        ).set_function(lambda: REGION_BYTES.read)
        self._broker: Broker | None = None
        self._gauges: dict[str, Gauge] = {}
        for name, doc in (
            ("kafka_server_socketservermetrics_connection_count", "Open client connections"),
            ("kafka_network_requestchannel_requestqueuesize", "Requests read and not yet answered"),
            ("kafka_server_replicamanager_partitioncount", "Partitions hosted"),
            ("kafka_server_replicamanager_leadercount", "Partitions led"),
            ("kafka_server_replicamanager_underreplicatedpartitions", "Led partitions whose ISR is short of replicas"),
            ("kafka_server_replicamanager_underminisrpartitioncount", "Led partitions with ISR below min.insync"),
            ("kafka_server_replicamanager_atminisrpartitioncount", "Led partitions with ISR at min.insync"),
            ("kafka_log_logmanager_offlinelogdirectorycount", "Log directories taken offline by I/O errors"),
            ("kafka_log_logcleaner_max_dirty_percent", "Highest dirty share of a compacted log, percent"),
            ("kafka_log_logcleaner_max_clean_time_secs", "Seconds the last cleaning took"),
            ("kafka_log_logcleaner_cleaner_recopy_percent", "Share of the bytes read that the last cleaning kept"),
            ("kafka_log_logcleanermanager_uncleanable_partitions_count", "Logs a corrupt batch stopped cleaning"),
            ("kafka_log_logcleanermanager_time_since_last_run_ms", "Milliseconds since a cleaning last finished"),
            ("kafka_server_fetchsessioncache_numincrementalfetchsessions", "KIP-227 fetch sessions cached"),
            ("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", "Partitions in those sessions"),
            ("kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total", "Sessions evicted for others"),
        ):
            self._gauges[name] = Gauge(name, doc, registry=r)

    def client_fetched(self, client_id: str, topic: str | None, size: int) -> None:
        if client_id not in self._client_ids:
            if len(self._client_ids) >= MAX_CLIENT_IDS:
                client_id = OTHER_CLIENTS
            else:
                self._client_ids.add(client_id)
        self._client_bytes_out_of(client_id, topic).inc(size)

    def observe_request(self, request: str, started: float) -> None:
        self._request_time_of(request).observe((time.monotonic() - started) * 1000)

    def txn_completed_one(self, committed: bool) -> None:
        self.txn_completed.labels("commit" if committed else "abort").inc()

    def observe_flush(self, seconds: float) -> None:
        self.log_flush.observe(seconds * 1000)

    def bind(self, broker: Broker) -> None:
        """Gauges read the broker's state at scrape time."""
        g = self._gauges
        self._broker = broker

        def led() -> list[Any]:
            return [p.replica for p in list(broker.partitions.values()) if p.replica.role is Role.LEADER]

        g["kafka_server_socketservermetrics_connection_count"].set_function(lambda: len(broker.connections))
        g["kafka_network_requestchannel_requestqueuesize"].set_function(
            lambda: sum(len(c.pending) for c in list(broker.connections))
        )
        g["kafka_server_replicamanager_partitioncount"].set_function(lambda: len(broker.partitions))
        g["kafka_server_replicamanager_leadercount"].set_function(lambda: len(led()))
        g["kafka_server_replicamanager_underreplicatedpartitions"].set_function(
            lambda: sum(1 for r in led() if len(r.isr) < len(r.replicas))
        )
        g["kafka_server_replicamanager_underminisrpartitioncount"].set_function(
            lambda: sum(1 for r in led() if len(r.isr) < r.min_isr)
        )
        g["kafka_server_replicamanager_atminisrpartitioncount"].set_function(
            lambda: sum(1 for r in led() if len(r.isr) == r.min_isr)
        )
        g["kafka_log_logmanager_offlinelogdirectorycount"].set_function(broker.offline_log_dir_count)
        sessions = broker.fetch_sessions
        g["kafka_server_fetchsessioncache_numincrementalfetchsessions"].set_function(lambda: len(sessions.sessions))
        g["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"].set_function(
            lambda: sessions.cached_partitions
        )
        g["kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"].set_function(
            lambda: sessions.evictions
        )
        cleaner = broker.cleaner

        def last(attr: str) -> float:
            stats = cleaner.last_stats
            return float(getattr(stats, attr)) if stats is not None else 0.0

        g["kafka_log_logcleaner_max_dirty_percent"].set_function(lambda: 100 * cleaner.max_dirty_ratio)
        g["kafka_log_logcleaner_max_clean_time_secs"].set_function(lambda: last("seconds"))
        g["kafka_log_logcleaner_cleaner_recopy_percent"].set_function(
            lambda: 100 * last("bytes_written") / max(last("bytes_read"), 1.0)
        )
        g["kafka_log_logcleanermanager_uncleanable_partitions_count"].set_function(lambda: cleaner.uncleanable_count)
        g["kafka_log_logcleanermanager_time_since_last_run_ms"].set_function(lambda: now_ms() - cleaner.last_run_ms)

    def isr_changed(self, before: frozenset[int], after: frozenset[int], leading: bool) -> None:
        """A led partition's ISR moved (AlterPartition answered, or the metadata said so)."""
        if not leading or before == after:
            return
        if after - before:
            self.isr_expands.inc()
        if before - after:
            self.isr_shrinks.inc()

    def leader_epochs(self, topic: str, partition: int) -> dict[str, Any] | None:
        """This broker's replica of topic-partition as the epoch cache and the replication core hold it now
        (None when the broker holds no replica of it). Called from the HTTP server's threads: each field is
        one read of the live state, the entries one copy of the cache's list."""
        broker = self._broker
        part = broker.partitions.get((topic, partition)) if broker is not None else None
        if broker is None or part is None:
            return None
        replica = part.replica
        plog = part.log
        return {
            "node_id": broker.config.node_id,
            "topic": topic,
            "partition": partition,
            "role": replica.role.value,
            "leader_id": replica.leader_id,
            "leader_epoch": replica.leader_epoch,
            "entries": [{"epoch": e.epoch, "start_offset": e.start_offset} for e in plog.epoch_cache.entries()],
            "log_start_offset": plog.log_start_offset,
            "log_end_offset": plog.log_end_offset,
            "high_watermark": replica.high_watermark,
            "offline": bool(part.offline),
        }

    def wsgi_app(self) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
        """Prometheus text on every path (as prometheus_client serves it), the leader-epoch JSON on its own."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != LEADER_EPOCHS_PATH:
                return metrics_app(environ, start_response)  # type: ignore[no-any-return]
            status, body = self._leader_epochs_answer(environ.get("QUERY_STRING", ""))
            data = json.dumps(body).encode()
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
            return [data]

        return app

    def _leader_epochs_answer(self, query: str) -> tuple[str, dict[str, Any]]:
        q = parse_qs(query)
        try:
            topic = q["topic"][0]
            partition = int(q["partition"][0])
        except (KeyError, IndexError, ValueError):
            return "400 Bad Request", {"error": "ask with ?topic=NAME&partition=N"}
        view = self.leader_epochs(topic, partition)
        if view is None:
            return "404 Not Found", {"error": f"this broker holds no replica of {topic}-{partition}"}
        return "200 OK", view

    def serve(self, host: str, port: int) -> None:
        """As prometheus_client's start_http_server (a daemon thread, IPv6 hosts too), with the JSON route."""

        class Server(ThreadingWSGIServer):
            pass

        Server.address_family, addr = _get_best_family(host, port)  # type: ignore[no-untyped-call]
        httpd = make_server(addr, port, self.wsgi_app(), Server, handler_class=_SilentHandler)
        threading.Thread(target=httpd.serve_forever, name="metrics-http", daemon=True).start()


LEADER_EPOCHS_PATH = "/v1/leader-epochs"


class ControllerMetrics:
    """The controller's: offline partitions, whether it is active, elections (from its own records)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.offline = Gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader", registry=r
        )
        self.active = Gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the controller that serves the cluster's metadata",
            registry=r,
        )
        self.unclean = Counter(
            "kafka_controller_controllerstats_uncleanleaderelections", "Unclean leader elections", registry=r
        )
        self.elections = Counter(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Leader elections (a partition's leader or leader epoch changed)",
            registry=r,
        )
        self.activations = Counter(
            "kafka_server_raft_metrics_activations",
            "Times this controller became the active one (it won a quorum election and replayed the log)",
            registry=r,
        )

    def bind(self, server: Any) -> None:
        def offline() -> int:
            return sum(1 for t in server.core.topics.values() for st in t.partitions.values() if st.leader < 0)

        self.offline.set_function(offline)
        self.active.set_function(lambda: 1 if server.active else 0)

    def failovers_seen(self) -> None:
        self.activations.inc()

    def records_persisted(self, records: list[Any], before: dict[tuple[str, int], int]) -> None:
        """Count elections from the decisions just proposed: an UncleanElection record, or a
        PartitionChange that gives a partition a new leader epoch (``before`` holds the epochs it had)."""
        from epochlog.controller.records import PartitionChange, UncleanElection

        for r in records:
            if isinstance(r, UncleanElection):
                self.unclean.inc()
            elif isinstance(r, PartitionChange):
                key = (r.topic, r.partition)
                if key in before and r.leader_epoch != before[key]:
                    self.elections.inc()
                before[key] = r.leader_epoch

    def serve(self, host: str, port: int) -> None:
        start_http_server(port, addr=host, registry=self.registry)

    def collectors(self) -> list[Any]:
        return [self.offline, self.active, self.unclean, self.elections, self.activations]
