"""`epochlog chaos --report`: one self-contained HTML page (inline SVG, no scripts, nothing from the network):
the faults, leaders, epochs and active controller on one time axis, throughput and latency under them, and
each anomaly with the records around it."""

from __future__ import annotations

import html
import math
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from epochlog.chaos.checkers import KINDS

if TYPE_CHECKING:
    from epochlog.chaos.run import ChaosResult

WIDTH, LEFT, RIGHT = 900, 90, 20
FAULT_COLORS = {"kill": "#d1242f", "pause": "#bf8700", "partition": "#8250df"}
NODE_COLORS = ["#1f6feb", "#1a7f37", "#cf222e", "#8250df", "#bf8700", "#0598bc", "#6e7781", "#e16f24", "#4c2889"]


def _esc(s: object) -> str:
    return html.escape(str(s))


def _nice(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if m * exp >= v:
            return float(m * exp)
    return float(10 * exp)


class _Axis:
    def __init__(self, t_max: float) -> None:
        self.t_max = max(t_max, 1.0)
        self.w = WIDTH - LEFT - RIGHT

    def x(self, t: float) -> float:
        return LEFT + self.w * max(0.0, min(t, self.t_max)) / self.t_max

    def ticks(self, y: float) -> list[str]:
        out, step, t = [], _nice(self.t_max / 10), 0.0
        while t <= self.t_max + 1e-9:
            out.append(f'<text x="{self.x(t):.1f}" y="{y:.1f}" text-anchor="middle">{t:g}</text>')
            t += step
        return out


LABEL_ROWS = 3
LABEL_CHAR_PX = 5.6  # a 10 px sans-serif character, wide enough that estimated labels never touch


def _fault_bands(res: ChaosResult, ax: _Axis, top: float, h: float, labels: bool) -> list[str]:
    out = []
    # Each label goes in the first row where it clears the one before it; with none free it is left out (the
    # band's tooltip and the Faults table still name the fault): a 10-minute run has ~80 faults, and labels
    # laid over each other named none of them.
    row_ends = [float("-inf")] * LABEL_ROWS
    for f in res.history.faults:
        end = f.healed_s if f.healed_s is not None else ax.t_max
        color = FAULT_COLORS.get(f.kind, "#6e7781")
        out.append(
            f'<rect x="{ax.x(f.at_s):.1f}" y="{top:.1f}" width="{max(ax.x(end) - ax.x(f.at_s), 1):.1f}" '
            f'height="{h:.1f}" fill="{color}" fill-opacity="0.13"><title>{_esc(f.kind)} {_esc(f.target)} '
            f"({_esc(f.why)}) {f.at_s:.1f}-{end:.1f} s</title></rect>"
        )
        if labels:
            x, text = ax.x(f.at_s) + 2, f"{f.kind} {f.target}"
            row = next((r for r, e in enumerate(row_ends) if e < x), None)
            if row is None:
                continue
            row_ends[row] = x + len(text) * LABEL_CHAR_PX + 4
            out.append(
                f'<text x="{x:.1f}" y="{top + 11 + 11 * row:.1f}" fill="{color}" font-size="10">{_esc(text)}</text>'
            )
    return out


def _network_line(res: ChaosResult) -> str:
    if res.partition_backend == "netns":
        return "each in a network namespace of its own, links between nodes cut by iptables"
    return "on 127.0.0.1, links between nodes through proxies the command controls"


def timeline_svg(res: ChaosResult) -> str:
    """Faults as bands; per partition its leader (colour) and epoch (label) over time; the active controller."""
    h = res.history
    ax = _Axis(max(h.workload_end_s, res.opts.duration))
    leaders: dict[int, list[tuple[float, int, int]]] = defaultdict(list)
    ctrl: list[tuple[float, int, int]] = []
    for o in h.observations:
        (ctrl if o.what == "controller" else leaders[o.partition]).append((o.t, o.node, o.epoch))
    lanes = [(f"p{p}", leaders[p]) for p in sorted(leaders)] + [("controller", ctrl)]
    lane_h, top = 22, 46
    height = top + lane_h * len(lanes) + 40
    nodes = sorted({n for _, rows in lanes for _, n, _ in rows if n >= 0})
    color = {n: NODE_COLORS[i % len(NODE_COLORS)] for i, n in enumerate(nodes)}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="11">',
        *_fault_bands(res, ax, top - 36, lane_h * len(lanes) + 36, labels=True),
    ]
    for i, (name, rows) in enumerate(lanes):
        y = top + i * lane_h
        parts.append(f'<text x="{LEFT - 6}" y="{y + 15}" text-anchor="end">{_esc(name)}</text>')
        for j, (t, node, epoch) in enumerate(rows):
            end = rows[j + 1][0] if j + 1 < len(rows) else ax.t_max
            c = color.get(node, "#d0d7de")
            who = f"node {node}" if node >= 0 else "none"
            label = (f"{node}" if node >= 0 else "none") + (f" e{epoch}" if epoch >= 0 else "")
            parts.append(
                f'<rect x="{ax.x(t):.1f}" y="{y + 3}" width="{max(ax.x(end) - ax.x(t), 1):.1f}" height="{lane_h - 6}" '
                f'fill="{c}" fill-opacity="0.55" stroke="#fff"><title>{_esc(name)}: {who}'
                f"{f', epoch {epoch}' if epoch >= 0 else ''} from {t:.1f} s</title></rect>"
            )
            if ax.x(end) - ax.x(t) > 28:
                parts.append(f'<text x="{ax.x(t) + 3:.1f}" y="{y + 15}" font-size="10">{_esc(label)}</text>')
    bottom = top + lane_h * len(lanes)
    parts += ax.ticks(bottom + 14)
    parts.append(
        f'<text x="{LEFT + ax.w / 2}" y="{bottom + 32}" text-anchor="middle">seconds since the workload started '
        "(lanes: leader node and epoch of each partition, the active controller; bands: faults)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)


def _series_svg(res: ChaosResult, series: list[tuple[str, str, list[float]]], unit: str) -> str:
    height, top, bottom = 240, 30, 40
    ph = height - top - bottom
    h = res.history
    ax = _Axis(max(h.workload_end_s, res.opts.duration))
    y_max = _nice(max([v for _, _, vals in series for v in vals] + [1.0]) * 1.1)

    def y(v: float) -> float:
        return top + ph - ph * v / y_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect x="{LEFT}" y="{top}" width="{ax.w}" height="{ph}" fill="#fafafa" stroke="#ccc"/>',
        *_fault_bands(res, ax, top, ph, labels=False),
    ]
    for i in range(6):
        v = y_max * i / 5
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + ax.w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:,.0f}</text>')
    parts += ax.ticks(top + ph + 16)
    parts.append(
        f'<text x="14" y="{top + ph / 2}" text-anchor="middle" transform="rotate(-90 14 {top + ph / 2})">'
        f"{_esc(unit)}</text>"
    )
    for k, (label, c, vals) in enumerate(series):
        if vals:
            pts = " ".join(f"{ax.x(i + 0.5):.1f},{y(v):.1f}" for i, v in enumerate(vals))
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="1.6"/>')
        lx = LEFT + 10 + 250 * k
        parts.append(f'<line x1="{lx}" x2="{lx + 20}" y1="14" y2="14" stroke="{c}" stroke-width="2"/>')
        parts.append(f'<text x="{lx + 26}" y="18">{_esc(label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def per_second(res: ChaosResult) -> tuple[list[float], list[float], list[float], list[float]]:
    """Acknowledged and failed sends per second (by when the outcome came), and ack latency p50/max (ms)."""
    h = res.history
    n = int(max(h.workload_end_s, res.opts.duration)) + 1
    acked, failed = [0.0] * n, [0.0] * n
    lat: list[list[float]] = [[] for _ in range(n)]
    for s in h.sends:
        if s.t_done is None:
            continue
        i = min(int(s.t_done), n - 1)
        if s.ok:
            acked[i] += 1
            lat[i].append(1000 * (s.t_done - s.t_sent))
        else:
            failed[i] += 1
    p50 = [sorted(v)[len(v) // 2] if v else 0.0 for v in lat]
    top = [max(v) if v else 0.0 for v in lat]
    return acked, failed, p50, top


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 960px;
       color: #1f2328; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { padding: 3px 10px; border-bottom: 1px solid #eee;
       text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #d1242f; font-weight: bold; }
tr.here td { background: #ffebe9; font-weight: bold; }
code, pre { background: #f6f8fa; padding: 1px 4px; } pre { padding: 8px; overflow-x: auto; }
"""


def summary_lines(res: ChaosResult) -> list[str]:
    v = res.verdict
    kinds = ", ".join(f"{k} {v.counts[k]}" for k in KINDS)
    by_kind: dict[str, int] = {}
    for f in res.history.faults:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
    lines = [
        f"seed {res.seed}; {len(res.history.faults)} faults ("
        + (", ".join(f"{k} x{n}" for k, n in sorted(by_kind.items())) or "none")
        + ")",
        f"writes: {v.attempted:,} attempted, {v.acked:,} acknowledged, {v.failed:,} failed "
        f"({v.failed_write_share:.1%}); final read {v.read_final:,} records",
        f"longest window without an acknowledgement: {v.longest_unavailable_s:.2f} s "
        f"(from {v.longest_unavailable_from_s:.1f} s)",
        f"anomalies: {v.anomalies} ({kinds})",
        f"trace checker: {res.trace_checks:,} checks over {res.trace_events:,} events, "
        f"{len(res.trace_violations)} violations",
    ]
    txn = res.as_json()["txn"]
    if txn is not None:
        lines.insert(
            2,
            f"transactions: {txn['committed']:,} committed, {txn['aborted']:,} aborted, {txn['unknown']:,} unknown; "
            f"final read (read_committed) {txn['read_final']:,} records",
        )
    lines.append(f"partitions: {res.partition_backend} ({res.partition_backend_why})")
    lines += [f"skipped: {s['what']} ({s['why']})" for s in res.skipped]
    lines += [f"PROBLEM: {p}" for p in res.problems]
    for a in v.examples[:10]:
        lines.append(f"ANOMALY {a.kind}: {a.detail}")
    lines.append("verdict: " + ("valid" if res.ok else "INVALID"))
    return lines


def _at(t: float | None) -> str:
    return "" if t is None else f"{t:.2f}"


def _anomalies_html(res: ChaosResult) -> str:
    if not res.verdict.examples:
        return "<p class='ok'>None.</p>"
    out = []
    for a in res.verdict.examples:
        rows = "".join(
            f"<tr class='{'here' if r['here'] else ''}'><td class='num'>{r['partition']}</td>"
            f"<td class='num'>{r['offset']}</td><td>{_esc(r['value'])}</td><td class='num'>{_at(r['at_s'])}</td></tr>"
            for r in a.around
        )
        table = (
            "<table class='around'><tr><th>partition</th><th>offset</th><th>value</th><th>read at (s)</th></tr>"
            f"{rows}</table>"
            if rows
            else ""
        )
        out.append(f"<div class='anomaly'><h3>{_esc(a.kind)}</h3><p>{_esc(a.detail)}</p>{table}</div>")
    return "\n".join(out)


def _workloads_rows(res: ChaosResult) -> str:
    j = res.as_json()
    rows = []
    if j["txn"] is not None:
        t = j["txn"]
        rows.append(
            ("transactions committed / aborted / unknown", f"{t['committed']:,} / {t['aborted']:,} / {t['unknown']:,}")
        )
    if j["groups"] is not None:
        g = j["groups"]
        rows.append(
            (
                "group members joined / records handed out / commits",
                f"{g['members_joined']} / {g['reads']:,} / {g['commits']:,}",
            )
        )
    return "".join(f"<tr><td>{_esc(k)}</td><td class='num'>{_esc(v)}</td></tr>" for k, v in rows)


def render_html(res: ChaosResult) -> str:
    v = res.verdict
    acked, failed, p50, worst = per_second(res)
    verdict = (
        "<span class='ok'>valid: no anomaly</span>"
        if res.ok
        else f"<span class='bad'>INVALID: {v.anomalies} anomalies, {len(res.problems)} problems</span>"
    )
    counts = "".join(f"<tr><td>{_esc(k)}</td><td class='num'>{v.counts[k]}</td></tr>" for k in KINDS)
    faults = "".join(
        f"<tr><td class='num'>{f.at_s:.2f}</td><td class='num'>"
        f"{'' if f.healed_s is None else f'{f.healed_s:.2f}'}</td><td>{_esc(f.kind)}</td><td>{_esc(f.target)}</td>"
        f"<td>{_esc(f.why)}</td><td class='num'>"
        f"{'-' if f.first_ack_after_s is None else f'{f.first_ack_after_s:.3f}'}</td></tr>"
        for f in res.history.faults
    )
    skipped = "".join(f"<li>{_esc(s['what'])}: {_esc(s['why'])}</li>" for s in res.skipped)
    problems = "".join(f"<li class='bad'>{_esc(p)}</li>" for p in res.problems)
    unsafe = ", ".join(res.opts.unsafe)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>epochlog chaos report</title>
<style>{_CSS}</style></head>
<body>
<h1>epochlog chaos: {_esc(", ".join(res.opts.workloads))} under {_esc(", ".join(res.opts.nemeses))}</h1>
<p>{res.opts.controllers} controllers and {res.opts.brokers} brokers, {_esc(_network_line(res))};
seed <code>{res.seed}</code>; {res.opts.duration:g} s of faults, then every fault
healed, the cluster left to settle and every partition read from the beginning.
{f"<b class='bad'>Unsafe on purpose: {_esc(unsafe)}.</b>" if unsafe else ""}</p>
<p id="verdict">Result: {verdict}</p>
{f"<h2>Problems</h2><ul>{problems}</ul>" if problems else ""}
<h2>Faults, leaders, epochs and the active controller</h2>
{timeline_svg(res)}
<h2>Throughput</h2>
{_series_svg(res, [("acknowledged sends / s", "#1f6feb", acked), ("failed sends / s", "#d1242f", failed)], "sends / s")}
<h2>Acknowledgement latency</h2>
{_series_svg(res, [("p50 (ms)", "#1a7f37", p50), ("max (ms)", "#bf8700", worst)], "ms")}
<h2>Checkers</h2>
<table><tr><th>checker</th><th>anomalies</th></tr>{counts}
<tr><td>writes attempted / acknowledged / failed</td><td class='num'>{v.attempted:,} / {v.acked:,} / {v.failed:,}
</td></tr>
<tr><td>failed write share</td><td class='num'>{v.failed_write_share:.2%}</td></tr>
<tr><td>longest window without an acknowledgement</td><td class='num'>{v.longest_unavailable_s:.2f} s
(from {v.longest_unavailable_from_s:.1f} s)</td></tr>
{_workloads_rows(res)}
<tr><td>trace checker (checks / events / violations)</td><td class='num'>{res.trace_checks:,} /
{res.trace_events:,} / {len(res.trace_violations)}</td></tr></table>
<h2>Anomalies, with the records around them (final read)</h2>
{_anomalies_html(res)}
<h2>Faults</h2>
<table><tr><th>at (s)</th><th>healed (s)</th><th>kind</th><th>target</th><th>aimed at</th>
<th>first ack after (s)</th></tr>{faults}</table>
<h2>Skipped</h2><ul>{skipped}</ul>
<h2>Printed summary</h2>
<pre>{_esc(chr(10).join(summary_lines(res)))}</pre>
<p><small>Generated {generated}.</small></p>
</body></html>
"""


def write_report(res: ChaosResult, path: Path) -> Path:
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(res))
    return path
