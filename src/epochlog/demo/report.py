"""The demo's printed summary and its HTML report (an inline SVG chart; no scripts, nothing from the network)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from epochlog.demo.model import DemoResult


def _n(v: int) -> str:
    return f"{v:,}"


def summary_lines(res: DemoResult) -> list[str]:
    """The plain-text summary the demo prints at the end (also the report's table)."""
    out = [
        f"cluster: {res.controllers} controllers (a quorum) + {res.brokers} brokers; "
        f"topic {res.topic}: {res.partitions} partitions, replication factor 3, min.insync.replicas=2",
        f"produced for {res.duration:g} s at {res.rate:,} page views/s (acks=all, enable.idempotence=true); "
        f"whole run {res.wall_seconds:.0f} s",
        "leaders before: " + _leaders(res.leaders_before),
    ]
    steps: list[tuple[float, str]] = []
    if res.kill_t is not None:
        steps.append(
            (
                res.kill_t,
                f"kill -9 broker-{res.killed_broker} (leader of {res.topic}-0, epoch {res.killed_epoch}) and "
                f"{res.killed_controller} (the active controller)",
            )
        )
    if res.controller_failover_seconds is not None and res.kill_t is not None:
        steps.append((res.kill_t + res.controller_failover_seconds, f"{res.new_controller} is active"))
    for c in res.leader_changes:
        steps.append(
            (
                c.t,
                f"{res.topic}-{c.partition} leader broker-{c.old_leader} (epoch {c.old_epoch}) -> "
                f"broker-{c.new_leader} (epoch {c.new_epoch})",
            )
        )
    if res.restart_t is not None:
        steps.append((res.restart_t, f"broker-{res.killed_broker} and {res.killed_controller} restarted"))
    out += [f"at +{t:.1f} s: {text}" for t, text in sorted(steps, key=lambda s: s[0])]
    if res.controller_failover_seconds is not None:
        out.append(
            f"controller failover: {res.new_controller} active {res.controller_failover_seconds:.2f} s "
            "after the kill (quorum polled every 0.05 s)"
        )
    if res.failover_seconds is not None:
        out.append(
            f"partition failover: new leader of {res.topic}-0 seen {res.failover_seconds:.2f} s after the kill "
            "(metadata polled every 0.25 s)"
        )
    out.append("leaders after: " + _leaders(res.leaders_after))
    lat = res.ack_latency_ms
    errors = ", ".join(f"{k} x{v}" for k, v in res.produce_errors.items()) or "none"
    out += [
        f"records produced: {_n(res.produced)}",
        f"records acknowledged: {_n(res.acked)} (delivery errors: {errors}; ack latency p50 "
        f"{lat.get('p50', 0):.0f} ms, p99 {lat.get('p99', 0):.0f} ms, max {lat.get('max', 0):.0f} ms "
        f"at +{res.max_latency_at:.1f} s)",
        f"records in the log: {_n(res.in_log)} (acknowledged but missing: {res.log_lost}, "
        f"duplicated: {res.log_duplicated})",
        f"records in the output: {_n(res.in_output)} (Parquet, {res.output_batches} micro-batches; "
        f"per-window counts add up to {_n(res.aggregate_total)})",
    ]
    if res.unacked_in_output:
        out.append(f"in the output but never acknowledged: {res.unacked_in_output} (delivery reported failed)")
    if res.mismatched:
        out.append(f"acknowledged offsets holding a different event: {res.mismatched}")
    out.append(f"lost: {res.lost}")
    if res.lost_examples:
        out.append("  e.g. " + "; ".join(res.lost_examples))
    out.append(f"duplicated: {res.duplicated}")
    if res.duplicate_examples:
        out.append("  e.g. " + "; ".join(res.duplicate_examples))
    if res.eos_topic:
        out.append(
            f"exactly-once copy through the epochlog sink into {res.eos_topic}, read with read_committed: "
            f"{_n(max(res.eos_rows, 0))} records (lost: {res.eos_lost}, duplicated: {res.eos_duplicated}; "
            f"a read_uncommitted consumer sees {_n(max(res.eos_uncommitted_rows, 0))}, aborted attempts included)"
        )
        if res.eos_examples:
            out.append("  e.g. " + "; ".join(res.eos_examples))
        out.append(
            f"transactions committed: {_n(max(res.txn_committed, 0))}, aborted: {_n(max(res.txn_aborted, 0))} "
            "(the brokers' epochlog_transaction_coordinator_completed_total)"
        )
    out.append(
        f"trace invariants: {_n(res.trace_checks)} checks over {_n(res.trace_events)} events the brokers and "
        f"controllers traced, {len(res.trace_violations)} violations"
    )
    out += [f"  {v}" for v in res.trace_violations[:5]]
    for p in res.problems:
        out.append(f"PROBLEM: {p}")
    return out


def _leaders(d: dict[int, tuple[int, int]]) -> str:
    return ", ".join(f"p{p} broker-{leader} epoch {epoch}" for p, (leader, epoch) in sorted(d.items())) or "?"


# -- the chart ----------------------------------------------------------------------------------------


def throughput_svg(res: DemoResult, width: int = 860, height: int = 320) -> str:
    """Acknowledged records per second as a line, Spark's rows per micro-batch as bars, the failover marked."""
    left, right, top, bottom = 64, 20, 44, 44
    w, h = width - left - right, height - top - bottom
    # Whole seconds of producing only: the last, partial second would show as a fake drop.
    series = res.acked_per_second[: max(int(res.duration), 1)]
    t_max = max(len(series), res.duration, 1.0)
    spark_rate = []
    prev_t: float | None = None
    for b in res.batches:
        if b.rows and b.t > 0:
            # A micro-batch's rate is its rows over the time since the previous one finished; the first one
            # over its own run time (the query was idle before it).
            start = max(prev_t if prev_t is not None else b.t - b.seconds, 0.0)
            span = max(b.t - start, 0.5)
            spark_rate.append((b.t - span, b.t, b.rows / span))
        if b.t > 0:
            prev_t = b.t
    t_max = max(t_max, *(e for _, e, _ in spark_rate)) if spark_rate else t_max
    y_max = max([*series, *(r for _, _, r in spark_rate), 1])
    y_max = _nice(y_max * 1.1)

    def x(t: float) -> float:
        return left + w * t / t_max

    def y(v: float) -> float:
        return top + h - h * v / y_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for i in range(6):
        v = y_max * i / 5
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:,.0f}</text>')
    step = _nice(t_max / 10)
    t = 0.0
    while t <= t_max + 1e-9:
        parts.append(f'<text x="{x(t):.1f}" y="{top + h + 16}" text-anchor="middle">{t:g}</text>')
        t += step
    parts.append(
        f'<text x="{left + w / 2}" y="{height - 6}" text-anchor="middle">seconds since the producer started</text>'
    )
    parts.append(
        f'<text x="14" y="{top + h / 2}" text-anchor="middle" transform="rotate(-90 14 {top + h / 2})">'
        "records / s</text>"
    )
    for s, e, r in spark_rate:
        parts.append(
            f'<rect x="{x(s):.1f}" y="{y(r):.1f}" width="{max(x(e) - x(s) - 1, 1):.1f}" height="{top + h - y(r):.1f}" '
            f'fill="#f0b429" fill-opacity="0.35"><title>Spark micro-batch: {r:,.0f} rows/s</title></rect>'
        )
    if series:
        pts = " ".join(f"{x(i + 0.5):.1f},{y(v):.1f}" for i, v in enumerate(series))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#1f6feb" stroke-width="2"/>')
    marks = []
    if res.kill_t is not None:
        marks.append((res.kill_t, "#d1242f", f"kill -9 broker-{res.killed_broker} + {res.killed_controller}"))
    for c in res.leader_changes:
        marks.append((c.t, "#1a7f37", f"p{c.partition}: broker-{c.new_leader}, epoch {c.new_epoch}"))
    if res.restart_t is not None:
        marks.append((res.restart_t, "#6e7781", f"broker-{res.killed_broker} restarted"))
    for i, (t, color, label) in enumerate(marks):
        parts.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{top + h}" stroke="{color}" '
            f'stroke-width="1.5" stroke-dasharray="5,3"/>'
        )
        parts.append(f'<text x="{x(t) + 4:.1f}" y="{top + 14 + 13 * i}" fill="{color}">{html.escape(label)}</text>')
    ly = 16
    parts.append(f'<line x1="{left}" x2="{left + 20}" y1="{ly}" y2="{ly}" stroke="#1f6feb" stroke-width="2"/>')
    parts.append(f'<text x="{left + 26}" y="{ly + 4}">acknowledged records / s (producer, acks=all)</text>')
    parts.append(
        f'<rect x="{left + 300}" y="{ly - 5}" width="20" height="9" fill="#f0b429" fill-opacity="0.35"/>'
        f'<text x="{left + 326}" y="{ly + 4}">rows / s written to Parquet by Spark (per micro-batch)</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts)


def _nice(v: float) -> float:
    """A round number at or above v (1, 2, 5 x 10^k)."""
    if v <= 0:
        return 1.0
    import math

    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if m * exp >= v:
            return float(m * exp)
    return float(10 * exp)


# -- the page -----------------------------------------------------------------------------------------


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 960px;
       color: #1f2328; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { padding: 3px 10px; border-bottom: 1px solid #eee;
       text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #d1242f; font-weight: bold; }
.kill { color: #d1242f; } .leader { color: #1a7f37; } .restart { color: #6e7781; } .problem { color: #d1242f; }
code, pre { background: #f6f8fa; padding: 1px 4px; } pre { padding: 8px; overflow-x: auto; }
"""


def render_html(res: DemoResult) -> str:
    verdict = (
        '<span class="ok">lost: 0, duplicated: 0</span>'
        if res.ok
        else f'<span class="bad">lost: {res.lost}, duplicated: {res.duplicated}'
        f"{', problems: ' + str(len(res.problems)) if res.problems else ''}</span>"
    )
    rows = [
        ("records produced", _n(res.produced)),
        ("records acknowledged (acks=all)", _n(res.acked)),
        ("records in the log (read back from the brokers)", _n(res.in_log)),
        ("records in the Parquet output", _n(res.in_output)),
        ("micro-batches with data", str(res.output_batches)),
        ("lost (acknowledged, not in the output)", str(res.lost)),
        ("duplicated (extra copies in the output)", str(res.duplicated)),
        ("acknowledged offsets holding another event", str(res.mismatched)),
        (
            f"exactly-once copy in {res.eos_topic} (sink, read_committed)",
            f"{_n(max(res.eos_rows, 0))} records, lost {res.eos_lost}, duplicated {res.eos_duplicated}",
        ),
        ("the same topic read with read_uncommitted", _n(max(res.eos_uncommitted_rows, 0))),
        ("transactions committed / aborted (brokers' counters)", f"{res.txn_committed:,} / {res.txn_aborted:,}"),
        ("leader changes", str(len(res.leader_changes))),
        (
            "controller failover (active controller killed)",
            f"{res.controller_failover_seconds:.2f} s after the kill"
            if res.controller_failover_seconds is not None
            else "not seen",
        ),
        (
            "failover of partition 0",
            f"{res.failover_seconds:.2f} s after the kill" if res.failover_seconds is not None else "not seen",
        ),
        (
            "ack latency p50 / p99 / max",
            " / ".join(f"{res.ack_latency_ms.get(k, 0):.0f} ms" for k in ("p50", "p99", "max")),
        ),
    ]
    table = "\n".join(f"<tr><td>{html.escape(k)}</td><td class='num'>{html.escape(v)}</td></tr>" for k, v in rows)
    timeline = "\n".join(
        f"<tr class='{html.escape(e.kind)}'><td class='num'>+{e.t:.2f} s</td><td>{html.escape(e.kind)}</td>"
        f"<td>{html.escape(e.text)}</td></tr>"
        for e in res.timeline
    )
    leaders = "\n".join(
        f"<tr><td>{res.topic}-{p}</td><td>broker-{lb} / epoch {eb}</td><td>broker-{la} / epoch {ea}</td></tr>"
        for p, ((lb, eb), (la, ea)) in sorted(
            (p, (res.leaders_before.get(p, (-1, -1)), res.leaders_after.get(p, (-1, -1))))
            for p in set(res.leaders_before) | set(res.leaders_after)
        )
    )
    total = sum(v for _, v in res.top_countries) or 1
    countries = "\n".join(
        f"<tr><td>{html.escape(c)}</td><td class='num'>{v:,}</td><td class='num'>{100 * v / total:.1f}%</td></tr>"
        for c, v in res.top_countries
    )
    problems = (
        "<h2>Problems</h2><ul>" + "".join(f"<li class='bad'>{html.escape(p)}</li>" for p in res.problems) + "</ul>"
        if res.problems
        else ""
    )
    summary = html.escape("\n".join(summary_lines(res)))
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>epochlog demo report</title>
<style>{_CSS}</style></head>
<body>
<h1>epochlog demo: a leader killed under a live stream</h1>
<p>{res.controllers} controllers (a quorum) and {res.brokers} brokers on 127.0.0.1; topic
<code>{html.escape(res.topic)}</code> with {res.partitions} partitions, replication factor 3,
<code>min.insync.replicas=2</code>. A producer sent page views at
{res.rate:,}/s for {res.duration:g} s with <code>acks=all</code> and idempotence; a Spark Structured Streaming
query read them with the <code>epochlog</code> source and wrote raw events and per-country counts per 10-second
window to Parquet; a second query copied every record through the exactly-once <code>epochlog</code> sink (one
Kafka transaction per task and micro-batch) into <code>{html.escape(res.eos_topic)}</code>. Both read with
<code>isolation.level=read_committed</code>. The leader of partition 0 and the active controller were killed with
<code>kill -9</code> and restarted later.</p>
<p>Result: {verdict}</p>
<h2>Throughput</h2>
{throughput_svg(res)}
<h2>Summary</h2>
<table>{table}</table>
{problems}
<h2>Leaders and epochs</h2>
<table><tr><th>partition</th><th>before</th><th>after</th></tr>{leaders}</table>
<h2>Timeline</h2>
<table><tr><th>time</th><th>kind</th><th>what</th></tr>{timeline}</table>
<h2>Page views per country (from the aggregated Parquet)</h2>
<table><tr><th>country</th><th>views</th><th>share</th></tr>{countries}</table>
<h2>Printed summary</h2>
<pre>{summary}</pre>
<p><small>Generated {generated}; data directory {html.escape(res.data_dir)}
{"(kept)" if res.data_kept else "(removed)"}.</small></p>
</body></html>
"""


def write_report(res: DemoResult, path: Path) -> Path:
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    res.report_path = str(path)
    path.write_text(render_html(res))
    return path
