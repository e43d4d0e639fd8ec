"""Pictures of each replica's log (offsets, epochs, HW) as text and as a self-contained HTML/SVG file.

The HTML report uses the web console's look (its style sheet, inlined so the file opens anywhere with no
network) and its epoch colours, names the brokers as the scenario's narrative does (A, B, C), and steps
through the snapshots one at a time. `epochlog sim --open` serves it from the console's app.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from importlib.resources import files
from pathlib import Path
from typing import Any

from epochlog.console.lineage import EpochStart, divergence
from epochlog.sim.world import World

View = dict[int, dict[str, Any]]


def epoch_colour(epoch: int) -> str:
    """The console's colour for an epoch (console.js epochColour): the same epoch, the same colour."""
    return f"hsl({(210 + epoch * 137.5) % 360:g}, 55%, 40%)"


def _name(names: dict[int, str] | None, bid: int) -> str:
    return f"{names[bid]} (broker {bid})" if names and bid in names else f"broker {bid}"


def text_snapshot(label: str, view: View, max_cols: int = 24, names: dict[int, str] | None = None) -> str:
    lines = [f"-- {label}"]
    for bid, r in sorted(view.items()):
        entries = r["entries"]
        shown = entries[-max_cols:]
        skipped = len(entries) - len(shown)
        cells = " ".join(f"{v}/e{e}" for _o, e, v in shown)
        state = "down" if not r["alive"] else f"{r['role']} e{r['epoch']}"
        prefix = f"… {skipped} earlier … " if skipped else ""
        lines.append(f"  {_name(names, bid)} [{state:>12}] hw={r['hw']:<4} leo={len(entries):<4} | {prefix}{cells}")
        lines.append(f"  {'':>8} epochs {r['epochs']}")
    return "\n".join(lines)


def text_report(w: World, names: dict[int, str] | None = None) -> str:
    return "\n".join(text_snapshot(label, view, names=names) for label, view in w.snapshots)


def _state(r: dict[str, Any]) -> str:
    return "down" if not r["alive"] else f"{r['role']} e{r['epoch']}"


def _svg(view: View, names: dict[int, str], max_cols: int = 40) -> str:
    cell, row_h, left = 34, 34, 250
    longest = max((len(r["entries"]) for r in view.values()), default=0)
    start = max(0, longest - max_cols)
    width = left + cell * (min(longest, max_cols) + 1)
    height = row_h * len(view) + 30
    parts = [
        f'<svg class="logs" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="ui-monospace, monospace" font-size="11">'
    ]
    for o in range(start, longest):
        parts.append(f'<text x="{left + (o - start) * cell + 4}" y="12" fill="#667">{o}</text>')
    for i, (bid, r) in enumerate(sorted(view.items())):
        y = 20 + i * row_h
        label = f"{names[bid]} · broker {bid} · {_state(r)} · hw={r['hw']}"
        parts.append(
            f'<g class="replica" data-broker="{bid}" data-name="{html.escape(names[bid])}">'
            f'<text class="label" x="4" y="{y + 18}" font-weight="600">{html.escape(label)}</text>'
        )
        for o, e, v in r["entries"]:
            if o < start:
                continue
            x = left + (o - start) * cell
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{row_h - 6}" fill="{epoch_colour(e)}" '
                f'data-epoch="{e}" opacity="{1.0 if o < r["hw"] else 0.45}"><title>{html.escape(names[bid])}: '
                f"offset {o} epoch {e} {html.escape(v)}</title></rect>"
            )
            parts.append(f'<text x="{x + 2}" y="{y + 17}" fill="white">{html.escape(v[:5])}</text>')
        if r["hw"] >= start:
            hx = left + (r["hw"] - start) * cell - 2
            parts.append(
                f'<line x1="{hx}" y1="{y - 2}" x2="{hx}" y2="{y + row_h - 4}" stroke="#1b1f24" stroke-width="2"/>'
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _lineage_table(view: View, names: dict[int, str]) -> str:
    """Each replica's epoch -> start offset side by side, as the console's partition page draws it, with
    the epochs past a replica's divergence from the leader outlined."""
    ids = sorted(view)
    lineages = {b: [EpochStart(e, s) for e, s in view[b]["epochs"]] for b in ids}
    leader = next((b for b in ids if view[b]["alive"] and view[b]["role"] == "leader"), None)
    parts = {b: divergence(lineages[leader], lineages[b]) if leader is not None and b != leader else None for b in ids}
    epochs = sorted({e.epoch for lin in lineages.values() for e in lin})
    if not epochs:
        return '<p class="muted">No epochs known.</p>'
    head = "".join(
        f'<th data-replica="{b}">{html.escape(names[b])} (broker {b}){" (leader)" if b == leader else ""}</th>'
        for b in ids
    )
    rows = []
    for e in epochs:
        cells = []
        for b in ids:
            start = next((x.start_offset for x in lineages[b] if x.epoch == e), None)
            if start is None:
                cells.append(f'<td class="missing" data-replica="{b}">\N{EN DASH}</td>')
                continue
            d = parts[b]
            cls = "epoch diverged" if d is not None and e >= d["epoch"] else "epoch"
            cells.append(
                f'<td class="{cls}" data-replica="{b}" style="background:{epoch_colour(e)}" '
                f'title="epoch {e} starts at offset {start}">{start}</td>'
            )
        rows.append(f'<tr data-epoch="{e}"><td class="num">{e}</td>{"".join(cells)}</tr>')
    notes = "".join(
        f'<li data-replica="{b}">{html.escape(names[b])}: <span class="bad">diverges from the leader at offset '
        f"{parts[b]['offset']} (epoch {parts[b]['epoch']})</span></li>"  # type: ignore[index]
        for b in ids
        if parts[b] is not None
    )
    return (
        f'<table class="lineage"><thead><tr><th class="num">epoch</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>" + (f'<ul class="notes">{notes}</ul>' if notes else "")
    )


def _names_in(text: str, names: dict[int, str]) -> str:
    """The simulator's log says "broker 2"; the report says "A (broker 2)" as the narrative does."""
    text = re.sub(r"\bbroker (\d+)\b", lambda m: _name(names, int(m.group(1))), text)
    return re.sub(r"\bleader([ =])(\d+)\b", lambda m: f"leader{m.group(1)}{_name(names, int(m.group(2)))}", text)


REPORT_CSS = """
main { max-width: none; }
.narrative { max-width: 70rem; white-space: pre-wrap; margin: 0 0 1rem; }
.legend { display: flex; gap: 1rem; flex-wrap: wrap; margin-bottom: .8rem; }
.legend span.swatch { display: inline-block; width: 1rem; height: 1rem; vertical-align: middle; margin-right: .3rem; }
nav.steps { display: flex; align-items: center; gap: .6rem; margin: .6rem 0 1rem; flex-wrap: wrap; }
nav.steps ol { display: flex; gap: .3rem; list-style: none; padding: 0; margin: 0; flex-wrap: wrap; }
nav.steps ol button { background: #fff; color: var(--accent); border: 1px solid var(--line); }
nav.steps ol button.current { background: var(--accent); color: #fff; }
section.step h2 { margin-top: .4rem; }
svg.logs { display: block; margin-bottom: 1rem; }
pre.history { background: var(--bg); padding: .6rem; max-height: 30rem; overflow: auto; }
"""

# Step-through: one snapshot at a time; arrows, buttons or the step list move it, and #step-N in the URL
# opens a given step (so a link can point at the moment that matters).
REPORT_JS = """
"use strict";
(function () {
  const steps = [...document.querySelectorAll("section.step")];
  const buttons = [...document.querySelectorAll("nav.steps ol button")];
  const pos = document.getElementById("step-pos");
  let at = 0;
  function show(i) {
    at = Math.max(0, Math.min(steps.length - 1, i));
    steps.forEach((s, j) => { s.hidden = j !== at; });
    buttons.forEach((b, j) => b.classList.toggle("current", j === at));
    pos.textContent = `step ${at + 1} of ${steps.length}: ${steps[at].dataset.label}`;
    document.getElementById("prev").disabled = at === 0;
    document.getElementById("next").disabled = at === steps.length - 1;
    history.replaceState(null, "", "#step-" + (at + 1));
  }
  document.getElementById("prev").addEventListener("click", () => show(at - 1));
  document.getElementById("next").addEventListener("click", () => show(at + 1));
  buttons.forEach((b, j) => b.addEventListener("click", () => show(j)));
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft") show(at - 1);
    if (e.key === "ArrowRight") show(at + 1);
  });
  const m = /^#step-(\\d+)$/.exec(location.hash);
  if (steps.length) show(m ? Number(m[1]) - 1 : 0);
})();
"""


def _console_asset(name: str) -> str:
    return (files("epochlog.console") / "static" / name).read_text(encoding="utf-8")


def _favicon() -> str:
    # Inlined like the style sheet: a browser asks for /favicon.ico otherwise, a 404 in its console.
    return "data:image/svg+xml," + urllib.parse.quote(_console_asset("favicon.svg").strip())


def html_report(
    w: World, title: str, path: Path, narrative: str | None = None, names: dict[int, str] | None = None
) -> Path:
    ids = sorted(w.brokers)
    names = names or {b: chr(ord("A") + i) for i, b in enumerate(ids)}
    esc = html.escape
    cards = [
        ("truncation", w.mode.value, ""),
        ("seed", str(w.seed), ""),
        ("events", str(w.events), ""),
        ("violations", str(len(w.violations)), "bad" if w.violations else "ok"),
        ("permitted losses", str(len(w.checker.permitted)), "warn" if w.checker.permitted else "ok"),
    ]
    body = [
        f"<h1>{esc(title)}</h1>",
        '<div class="cards">'
        + "".join(
            f'<div class="card" data-card="{esc(k)}"><div class="v {c}">{esc(v)}</div>'
            f'<div class="k">{esc(k)}</div></div>'
            for k, v, c in cards
        )
        + "</div>",
    ]
    if narrative:
        body.append(f'<p class="narrative" id="narrative">{esc(narrative)}</p>')
    body.append(
        '<p class="note" id="names">'
        + ", ".join(f'<span data-broker="{b}">{esc(names[b])} = broker {b}</span>' for b in ids)
        + ". Colour = leader epoch (the console's colours); faded = above the replica's high watermark;"
        " black bar = high watermark.</p>"
    )
    for v in w.violations:
        detail = esc(_names_in(v.detail, names))
        body.append(f'<p class="error">VIOLATION {esc(v.invariant)} at {v.at_ms} ms: {detail}</p>')
    for v in w.checker.permitted:
        detail = esc(_names_in(v.detail, names))
        body.append(f'<p class="note warn">permitted {esc(v.invariant)} at {v.at_ms} ms: {detail}</p>')
    views = [view for _, view in w.snapshots]
    epochs = sorted(
        {x[1] for v in views for r in v.values() for x in r["entries"]}
        | {x[0] for v in views for r in v.values() for x in r["epochs"]}
    )
    if epochs:
        body.append(
            '<div class="legend">'
            + "".join(
                f'<span data-epoch="{e}"><span class="swatch" style="background:{epoch_colour(e)}"></span>'
                f"epoch {e}</span>"
                for e in epochs
            )
            + "</div>"
        )
    steps = "".join(
        f'<li><button type="button" title="{esc(lbl)}">{i + 1}</button></li>' for i, (lbl, _) in enumerate(w.snapshots)
    )
    body.append(
        '<nav class="steps" aria-label="timeline">'
        '<button type="button" id="prev">\N{BLACK LEFT-POINTING TRIANGLE} prev</button>'
        f'<ol>{steps}</ol><button type="button" id="next">next \N{BLACK RIGHT-POINTING TRIANGLE}</button>'
        '<span id="step-pos" class="muted"></span></nav>'
    )
    for i, (label, view) in enumerate(w.snapshots):
        body.append(
            f'<section class="step" id="step-{i + 1}" data-label="{esc(label)}">'
            f"<h2>{i + 1}. {esc(label)}</h2>{_svg(view, names)}"
            f"<h3>Leader-epoch lineage per replica</h3>{_lineage_table(view, names)}</section>"
        )
    body.append(
        '<h2>History</h2><pre class="history" id="history">'
        + esc(_names_in("\n".join(w.history[-400:]), names))
        + "</pre>"
    )
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)} · epochlog simulator</title>"
        f'<link rel="icon" href="{_favicon()}" type="image/svg+xml">'
        f"<style>{_console_asset('console.css')}{REPORT_CSS}</style></head>"
        f'<body data-page="sim-report" data-names="{esc(json.dumps({str(k): v for k, v in names.items()}))}">'
        '<header><span class="brand">epochlog</span><nav><a href="./" data-nav="reports">Simulator reports</a></nav>'
        "</header><main>" + "".join(body) + f"</main><script>{REPORT_JS}</script></body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
