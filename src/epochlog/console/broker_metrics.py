"""What the console reads from each broker's HTTP metrics endpoint (epochlog's `metrics.port`), when told
where it is: the Prometheus counters behind the throughput charts, and each replica's leader-epoch cache
(`GET /v1/leader-epochs`, served by epochlog brokers only).

The Kafka protocol does not advertise a metrics endpoint, so its address is given to the console:
`--metrics-port PORT` when every broker serves it on the same port of its advertised host (the usual
setup, one broker per machine), and `--metrics-port-map ID=PORT[,ID=HOST:PORT...]` for brokers that differ
(several brokers on one machine, or a metrics listener on another address). With neither, the console
reads what the Kafka protocol tells and the panels that need the endpoint say so.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

LEADER_EPOCHS_PATH = "/v1/leader-epochs"
# Counters summed per broker and per topic for the throughput charts (Kafka's BrokerTopicMetrics).
THROUGHPUT = {
    "kafka_server_brokertopicmetrics_bytesin": "bytes_in",
    "kafka_server_brokertopicmetrics_bytesout": "bytes_out",
    "kafka_server_brokertopicmetrics_messagesin": "messages_in",
}


class EndpointError(Exception):
    """The endpoint did not answer (down, or not an epochlog broker), as opposed to an answer that says no."""


def parse_port_map(spec: str | None) -> dict[int, tuple[str | None, int]]:
    """`1=9300,2=9301` or `1=host:9300`: {broker id: (host or None for the broker's own, port)}."""
    out: dict[int, tuple[str | None, int]] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        node, sep, where = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r}: expected BROKER_ID=PORT or BROKER_ID=HOST:PORT")
        host, _, port = where.rpartition(":")
        out[int(node)] = (host or None, int(port))
    return out


@dataclass
class MetricsEndpoints:
    """Where broker N's metrics endpoint is, from the flags and the broker's advertised host."""

    port: int | None = None
    port_map: dict[int, tuple[str | None, int]] = field(default_factory=dict)
    timeout: float = 2.0

    @property
    def configured(self) -> bool:
        return self.port is not None or bool(self.port_map)

    def base_url(self, node_id: int, broker_host: str) -> str | None:
        host, port = self.port_map.get(node_id, (None, self.port))
        if port is None:
            return None
        host = host or broker_host
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def _get(self, url: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as r:
                return int(r.status), r.read()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read()
        except (OSError, ValueError) as e:  # refused, timed out, unreachable
            raise EndpointError(f"{url}: {e}") from None

    def leader_epochs(self, base: str, topic: str, partition: int) -> dict[str, Any] | None:
        """The replica's epoch cache and offsets; None when the broker answers that it holds no replica.
        EndpointError when nothing answers or the answer is not epochlog's JSON (a Kafka broker's
        jmx_exporter, say)."""
        q = urllib.parse.urlencode({"topic": topic, "partition": partition})
        status, body = self._get(f"{base}{LEADER_EPOCHS_PATH}?{q}")
        try:
            data = json.loads(body)
        except ValueError:
            raise EndpointError(f"{base}{LEADER_EPOCHS_PATH}: not JSON (HTTP {status})") from None
        if status == 404:
            return None
        if status != 200 or not isinstance(data, dict) or "entries" not in data:
            raise EndpointError(f"{base}{LEADER_EPOCHS_PATH}: HTTP {status}: {data}")
        return data

    def metrics_text(self, base: str) -> str:
        """The broker's Prometheus page; EndpointError when it does not answer with one."""
        status, body = self._get(f"{base}/metrics")
        if status != 200:
            raise EndpointError(f"{base}/metrics: HTTP {status}")
        return body.decode("utf-8", "replace")

    def throughput(self, base: str) -> dict[str, Any]:
        """This broker's byte and record counters since it started, in all and per topic."""
        return throughput_of(self.metrics_text(base))


def throughput_of(text: str) -> dict[str, Any]:
    """Sums of the BrokerTopicMetrics counters in a Prometheus text page (pure, for tests)."""
    total = dict.fromkeys(THROUGHPUT.values(), 0.0)
    topics: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        key = THROUGHPUT.get(fam.name)
        if key is None:
            continue
        for s in fam.samples:
            if not s.name.endswith("_total"):
                continue  # the _created timestamps
            total[key] += s.value
            topic = s.labels.get("topic")
            if topic is not None:
                topics.setdefault(topic, dict.fromkeys(THROUGHPUT.values(), 0.0))[key] += s.value
    return {**total, "topics": topics}
