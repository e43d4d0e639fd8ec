"""Pictures of each replica's log (offsets, epochs, HW) as text and as a self-contained HTML/SVG file."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from epochlog.sim.world import World

_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]


def text_snapshot(label: str, view: dict[int, dict[str, Any]], max_cols: int = 24) -> str:
    lines = [f"-- {label}"]
    for bid, r in sorted(view.items()):
        entries = r["entries"]
        shown = entries[-max_cols:]
        skipped = len(entries) - len(shown)
        cells = " ".join(f"{v}/e{e}" for _o, e, v in shown)
        state = "down" if not r["alive"] else f"{r['role']} e{r['epoch']}"
        prefix = f"… {skipped} earlier … " if skipped else ""
        lines.append(f"  broker {bid} [{state:>12}] hw={r['hw']:<4} leo={len(entries):<4} | {prefix}{cells}")
        lines.append(f"  {'':>8} epochs {r['epochs']}")
    return "\n".join(lines)


def text_report(w: World) -> str:
    return "\n".join(text_snapshot(label, view) for label, view in w.snapshots)


def _svg(view: dict[int, dict[str, Any]], max_cols: int = 40) -> str:
    cell, row_h, left = 34, 34, 150
    longest = max((len(r["entries"]) for r in view.values()), default=0)
    start = max(0, longest - max_cols)
    width = left + cell * (min(longest, max_cols) + 1)
    height = row_h * len(view) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" '
        'font-size="10">'
    ]
    for o in range(start, longest):
        parts.append(f'<text x="{left + (o - start) * cell + 4}" y="12">{o}</text>')
    for i, (bid, r) in enumerate(sorted(view.items())):
        y = 20 + i * row_h
        state = "down" if not r["alive"] else f"{r['role']} e{r['epoch']}"
        parts.append(f'<text x="4" y="{y + 18}">b{bid} {html.escape(state)} hw={r["hw"]}</text>')
        for o, e, v in r["entries"]:
            if o < start:
                continue
            x = left + (o - start) * cell
            color = _COLORS[e % len(_COLORS)]
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{row_h - 6}" fill="{color}" '
                f'opacity="{1.0 if o < r["hw"] else 0.45}"><title>offset {o} epoch {e} {html.escape(v)}'
                f"</title></rect>"
            )
            parts.append(f'<text x="{x + 2}" y="{y + 17}" fill="white">{html.escape(v[:5])}</text>')
        hx = left + (r["hw"] - start) * cell - 2
        if r["hw"] >= start:
            parts.append(
                f'<line x1="{hx}" y1="{y - 2}" x2="{hx}" y2="{y + row_h - 4}" stroke="black" stroke-width="2"/>'
            )
    parts.append("</svg>")
    return "".join(parts)


def html_report(w: World, title: str, path: Path) -> Path:
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>mode: {w.mode.value}; seed {w.seed}; {w.events} events; "
        f"{len(w.violations)} violation(s), {len(w.checker.permitted)} permitted loss(es). "
        "Colour = leader epoch; faded = above the replica's HW; black bar = HW.</p>",
    ]
    for v in w.violations:
        body.append(
            f"<p style='color:#b00'>VIOLATION {html.escape(v.invariant)} at {v.at_ms} ms: {html.escape(v.detail)}</p>"
        )
    for v in w.checker.permitted:
        body.append(
            f"<p style='color:#a60'>permitted {html.escape(v.invariant)} at {v.at_ms} ms: {html.escape(v.detail)}</p>"
        )
    for label, view in w.snapshots:
        body.append(f"<h3>{html.escape(label)}</h3>{_svg(view)}")
    body.append("<h3>history</h3><pre>" + html.escape("\n".join(w.history[-400:])) + "</pre>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "<!doctype html><meta charset='utf-8'><title>" + html.escape(title) + "</title>"
        "<body style='font-family:sans-serif'>" + "".join(body) + "</body>"
    )
    return path
