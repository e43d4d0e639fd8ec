// epochlog console: renders each page from the JSON API; live pages follow /events/* (server-sent events).
// Plain DOM building with textContent only, so no broker-supplied string is ever parsed as HTML.
"use strict";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v; else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const dash = (v) => (v === null || v === undefined ? "–" : v);
const bytes = (n) => (n === null || n === undefined ? null
  : n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);
const num = (v, attrs) => el("td", Object.assign({ class: "num" }, attrs || {}), dash(v));
const app = () => document.getElementById("app");
const live = (state) => { const s = document.getElementById("live"); s.className = "live " + state; s.textContent = state === "on" ? "live" : state === "off" ? "reconnecting" : state; };

function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.startsWith("#") ? "num" : null }, h.replace(/^#/, ""))))),
    el("tbody", {}, rows));
}

function card(key, value, cls, id) {
  return el("div", { class: "card", "data-card": id }, el("div", { class: "v " + (cls || "") }, dash(value)), el("div", { class: "k" }, key));
}

function errorBox(msg) { return el("p", { class: "error", role: "alert" }, msg); }

async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await r.json();
  if (!r.ok || body.error) throw new Error(body.error || r.statusText);
  return body;
}

// Follows an SSE stream and re-renders on each event; the browser reconnects by itself after errors.
function follow(url, render) {
  const es = new EventSource(url);
  es.onopen = () => live("on");
  es.onerror = () => live("off");
  es.onmessage = (ev) => {
    const data = JSON.parse(ev.data);
    render(data);
  };
  window.addEventListener("pagehide", () => es.close());
  return es;
}

function mount(...nodes) { app().replaceChildren(...nodes); }

// ---- pages -------------------------------------------------------------------------------------------

// Rates from counters (bytes in/out, records in) between two overview events, per key ("broker 1",
// "topic orders"), each with its last `keep` samples for a chart. Counters restart at zero with their
// broker: a counter that went down gives no sample rather than a negative rate.
function counterRates(keep) {
  let last = null;
  const hist = {};
  return (counters, usable) => {
    const now = performance.now() / 1000;
    const out = {};
    for (const [key, c] of Object.entries(counters)) {
      const before = last && last.counters[key];
      const r = {};
      if (usable && before && now > last.t) {
        for (const [k, v] of Object.entries(c)) {
          if (typeof v === "number" && typeof before[k] === "number" && v >= before[k]) r[k] = (v - before[k]) / (now - last.t);
        }
      }
      const h = hist[key] || (hist[key] = { bytes_in: [], bytes_out: [], messages_in: [] });
      for (const k of Object.keys(h)) if (r[k] !== undefined) { h[k].push(r[k]); if (h[k].length > keep) h[k].shift(); }
      out[key] = { rate: r, hist: h };
    }
    if (usable) last = { t: now, counters };
    return out;
  };
}
const overviewRates = counterRates(60);

function rateCell(v, field) { return num(v === undefined ? null : v.toFixed(1), { "data-field": field }); }
const byteRate = (v) => (v === undefined ? null : bytes(Math.round(v)) + "/s");

function throughputTables(th, rates) {
  if (!th) return "";
  const metrics = th.source === "metrics";
  const row = (kind, id, counters) => {
    const r = rates[`${kind} ${id}`] || { rate: {}, hist: { bytes_in: [], bytes_out: [], messages_in: [] } };
    if (counters.error) return el("tr", { [`data-${kind}`]: id }, el("td", { class: kind === "topic" ? "" : "num" }, id), el("td", { colspan: metrics ? 5 : 3, class: "warn" }, counters.error));
    return el("tr", { [`data-${kind}`]: id },
      el("td", { class: kind === "topic" ? "" : "num" }, kind === "topic" ? el("a", { href: "/topics/" + encodeURIComponent(id) }, id) : id),
      metrics ? num(byteRate(r.rate.bytes_in), { "data-field": "bytes-in", "data-value": r.rate.bytes_in }) : null,
      metrics ? num(byteRate(r.rate.bytes_out), { "data-field": "bytes-out", "data-value": r.rate.bytes_out }) : null,
      rateCell(r.rate.messages_in, "records-in"),
      el("td", { class: "chart" }, sparkline(r.hist[metrics ? "bytes_in" : "messages_in"], 180, 26)),
      metrics ? el("td", { class: "chart" }, sparkline(r.hist.bytes_out, 180, 26)) : null);
  };
  const heads = metrics ? ["#bytes in/s", "#bytes out/s", "#records in/s", "in (last minute)", "out (last minute)"] : ["#records in/s", "records in (last minute)"];
  const brokers = Object.entries(th.brokers).sort((a, b) => Number(a[0]) - Number(b[0])).map(([id, c]) => row("broker", id, c));
  const topics = Object.entries(th.topics).sort((a, b) => a[0].localeCompare(b[0])).map(([id, c]) => row("topic", id, c));
  return el("section", { id: "throughput", "data-source": th.source },
    el("h2", {}, "Throughput"),
    el("p", { class: "note" }, metrics
      ? "From each broker's Prometheus counters (BrokerTopicMetrics BytesIn, BytesOut, MessagesIn), as rates between two refreshes."
      : "No metrics endpoint given (--metrics-port): records per second from the growth of the high watermarks, credited to each partition's leader."),
    table(["#broker", ...heads], brokers, { id: "broker-throughput" }),
    table(["topic", ...heads], topics, { id: "topic-throughput" }));
}

function renderOverview(d) {
  if (d.error) return mount(el("h1", {}, "Cluster"), errorBox(d.error));
  let rates = {};
  if (d.throughput) {
    const counters = {};
    for (const [id, c] of Object.entries(d.throughput.brokers)) if (!c.error) counters[`broker ${id}`] = c;
    for (const [id, c] of Object.entries(d.throughput.topics)) counters[`topic ${id}`] = c;
    rates = overviewRates(counters, !d.throughput.partial);
  }
  const states = Object.fromEntries((d.broker_states || []).map((s) => [s.node_id, s]));
  const brokers = d.brokers.map((b) => el("tr", { "data-broker": b.node_id, "data-state": "up" },
    el("td", { class: "num" }, b.node_id), el("td", { class: "ok", "data-field": "state" }, "up"),
    el("td", { class: "mono" }, `${b.host}:${b.port}`), el("td", {}, dash(b.rack)),
    el("td", {}, b.node_id === d.controller_id ? "Metadata's controller id" : ""),
    num(b.leaders, { "data-leaders": b.node_id }), num(b.replicas)));
  const listed = new Set(d.brokers.map((b) => b.node_id));
  const fenced = Object.values(states).filter((s) => !listed.has(s.node_id)).map((s) => el("tr", { "data-broker": s.node_id, "data-state": s.state },
    el("td", { class: "num" }, s.node_id), el("td", { class: "bad", "data-field": "state" }, s.state),
    el("td", { class: "muted", colspan: 5 }, s.caught_up_ms_ago === null || s.caught_up_ms_ago === undefined
      ? "not in Metadata; named by a replica list" : `not in Metadata; fetched the metadata log ${s.caught_up_ms_ago} ms ago`)));
  const nFenced = fenced.length;
  mount(
    el("h1", {}, "Cluster ", el("span", { class: "muted mono" }, dash(d.cluster_id))),
    el("div", { class: "cards" },
      card("brokers up", d.brokers.length, "", "brokers"),
      card("brokers fenced or down", nFenced, nFenced ? "bad" : "ok", "fenced"),
      // In a KRaft-style cluster (epochlog's too) Metadata's controller id names a live broker that takes
      // admin requests, not the quorum's active controller: labelled for what it is.
      card("controller id (Metadata)", d.controller_id < 0 ? "none" : d.controller_id, d.controller_id < 0 ? "bad" : "", "controller"),
      card("topics", d.topics, "", "topics"),
      card("partitions", d.partitions, "", "partitions"),
      card("under-replicated", d.under_replicated_partitions, d.under_replicated_partitions ? "warn" : "ok", "under-replicated"),
      card("offline", d.offline_partitions, d.offline_partitions ? "bad" : "ok", "offline")),
    el("h2", {}, "Brokers"),
    table(["#id", "state", "address", "rack", "role", "#leaders", "#replicas"], [...brokers, ...fenced], { id: "brokers" }),
    d.unknown_leaders.length ? errorBox(`leaders not among live brokers: ${d.unknown_leaders.join(", ")}`) : "",
    throughputTables(d.throughput, rates),
    d.quorum ? renderQuorum(d.quorum) : el("p", { class: "note" }, "Start the console with --bootstrap-controller to see the metadata quorum."));
}

function renderQuorum(q) {
  if (q.error) return el("section", { id: "quorum" }, el("h2", {}, "Metadata quorum"), errorBox(q.error));
  const rows = [...q.voters, ...q.observers].map((r) => el("tr", { "data-node": r.node_id, "data-role": r.role },
    num(r.node_id), el("td", {}, r.role), num(r.log_end_offset), num(r.lag, { class: "num " + (r.lag ? "warn" : "") }),
    num(r.caught_up_ms_ago === null ? null : `${r.caught_up_ms_ago} ms ago`)));
  return el("section", { id: "quorum" }, el("h2", {}, "Metadata quorum"),
    el("div", { class: "cards" },
      card("active controller", q.leader_id, "", "active-controller"), card("quorum epoch", q.leader_epoch, "", "quorum-epoch"),
      card("metadata high watermark", q.high_watermark, "", "quorum-hw")),
    table(["#node", "role", "#log end", "#lag", "#caught up"], rows, { id: "quorum-replicas" }));
}

function renderTopics(d) {
  const rows = d.topics.map((t) => el("tr", { "data-topic": t.name },
    el("td", {}, el("a", { href: "/topics/" + encodeURIComponent(t.name) }, t.name), t.internal ? el("span", { class: "muted" }, " internal") : ""),
    num(t.partitions), num(t.replication_factor),
    num(t.under_replicated, { class: "num " + (t.under_replicated ? "warn" : "") }),
    num(t.offline, { class: "num " + (t.offline ? "bad" : "") })));
  mount(el("h1", {}, "Topics"), table(["topic", "#partitions", "#replication", "#under-replicated", "#offline"], rows, { id: "topics" }));
}

function replicaList(ids, leader, isr) {
  return ids.map((r, i) => el("span", { class: (r === leader ? "ok " : "") + (isr && !isr.includes(r) ? "bad" : "") }, (i ? ", " : "") + r));
}

// Throughput from the high watermark's growth between two events (records per second). Only the browser
// keeps the history: the console's server holds no state between requests.
function rateTracker(keep) {
  let last = null;
  const samples = [];
  return (d) => {
    const now = performance.now() / 1000;
    const hws = Object.fromEntries(d.partitions.map((p) => [p.partition, p.high_watermark]));
    const rates = {};
    if (last) {
      const dt = now - last.t;
      for (const [p, hw] of Object.entries(hws)) {
        const before = last.hws[p];
        if (hw !== null && before !== null && before !== undefined && dt > 0) rates[p] = Math.max(hw - before, 0) / dt;
      }
    }
    last = { t: now, hws };
    const known = Object.values(rates);
    const total = known.length ? known.reduce((a, b) => a + b, 0) : null;
    if (total !== null) { samples.push(total); if (samples.length > keep) samples.shift(); }
    return { rates, total, samples: samples.slice() };
  };
}

function sparkline(values, width, height) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", width); svg.setAttribute("height", height); svg.setAttribute("class", "spark");
  if (values.length > 1) {
    const max = Math.max(...values, 1);
    const pts = values.map((v, i) => `${(i / (values.length - 1)) * width},${height - 2 - (v / max) * (height - 4)}`);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.join(" "));
    svg.append(line);
  }
  return svg;
}

const perSecond = (r) => (r === null || r === undefined ? null : r.toFixed(1));

function renderTopic(name, d, configs, tp) {
  tp = tp || { rates: {}, total: null, samples: [] };
  // A string is the console's own error (no broker answered); a number the topic's Kafka error code.
  if (typeof d.error === "string") return mount(el("h1", {}, "Topic ", name), errorBox(d.error));
  if (d.error && !d.partitions.length) return mount(el("h1", {}, "Topic ", name), errorBox(`error code ${d.error}`));
  const rows = d.partitions.map((p) => el("tr", { "data-partition": p.partition },
    el("td", { class: "num" }, el("a", { href: `/topics/${encodeURIComponent(name)}/${p.partition}` }, p.partition)),
    el("td", { class: "num " + (p.offline ? "bad" : ""), "data-field": "leader" }, p.leader < 0 ? "none" : p.leader),
    el("td", { class: "num", "data-field": "leader-epoch" }, p.leader_epoch),
    el("td", { "data-field": "replicas" }, replicaList(p.replicas, p.leader, p.isr)),
    el("td", { "data-field": "isr", class: p.under_replicated ? "warn" : "" }, p.isr.join(", ")),
    num(p.log_start_offset, { "data-field": "log-start" }),
    num(p.high_watermark, { "data-field": "high-watermark" }),
    num(p.last_stable_offset, { "data-field": "last-stable" }),
    num(bytes(p.size), { "data-field": "size", "data-bytes": p.size }),
    num(perSecond(tp.rates[p.partition]), { "data-field": "rate" }),
    el("td", {}, el("a", { href: `/messages?topic=${encodeURIComponent(name)}&partition=${p.partition}&offset=0` }, "browse"))));
  const cfg = configs ? table(["config", "value", "source"], configs.map((c) => el("tr", { class: c.is_default ? "muted" : "" },
    el("td", { class: "mono" }, c.name), el("td", { class: "mono" }, dash(c.value)), el("td", {}, c.source))), { id: "configs" }) : el("p", { class: "muted" }, "loading configs…");
  mount(el("h1", {}, "Topic ", el("span", { class: "mono" }, name)),
    el("div", { class: "cards" },
      el("div", { class: "card", "data-card": "rate" }, el("div", { class: "v" }, dash(perSecond(tp.total))),
        el("div", { class: "k" }, "records/s (last minute)"), sparkline(tp.samples, 160, 28))),
    table(["#partition", "#leader", "#leader epoch", "replicas", "ISR", "#log start", "#high watermark", "#last stable", "#size (leader)", "#records/s", ""], rows, { id: "partitions" }),
    el("h2", {}, "Configs"), cfg);
}

// One colour per epoch, the same on every page and every replica's column.
// Hues start at blue so epoch 0 is not read as an alarm.
const epochColour = (e) => `hsl(${(210 + e * 137.5) % 360}, 55%, 40%)`;

function renderPartition(topic, partition, d) {
  const title = el("h1", {}, "Partition ", el("span", { class: "mono" }, `${topic}-${partition}`));
  // A string is the console's own error; a number is the partition's Kafka error code (5, no leader),
  // and the page still has everything else to show.
  if (typeof d.error === "string") return mount(title, errorBox(d.error));
  const reps = d.lineage;
  const epochs = [...new Set(reps.flatMap((r) => r.entries.map((e) => e.epoch)))].sort((a, b) => a - b);
  const head = el("tr", {}, el("th", { class: "num" }, "epoch"), reps.map((r) => el("th", { "data-replica": r.broker },
    `broker ${r.broker}`, r.leader ? " (leader)" : "", d.isr.includes(r.broker) ? "" : " (not in ISR)")));
  const body = epochs.map((e) => el("tr", { "data-epoch": e }, num(e), reps.map((r) => {
    const entry = r.entries.find((x) => x.epoch === e);
    if (!entry) return el("td", { class: "missing", "data-replica": r.broker }, r.error ? "?" : "–");
    const diverged = r.diverges && e >= r.diverges.epoch;
    return el("td", { class: "epoch" + (diverged ? " diverged" : ""), style: `background:${epochColour(e)}`, "data-replica": r.broker,
      title: `epoch ${e} starts at offset ${entry.start_offset}` }, entry.start_offset);
  })));
  const notes = reps.map((r) => el("li", { "data-replica": r.broker }, `broker ${r.broker}`,
    r.size === undefined ? ": " : ` (${bytes(r.size)} on disk): `,
    r.error ? el("span", { class: "warn" }, r.error)
      : r.leader ? `the leader's lineage, from ${r.source}`
      : r.diverges ? el("span", { class: "bad" }, `diverges from the leader at offset ${r.diverges.offset} (epoch ${r.diverges.epoch}): it must truncate there`)
      : `follows the leader's lineage (from ${r.source})`,
    r.endpoint_error ? el("span", { class: "muted" }, ` (metrics endpoint did not answer: ${r.endpoint_error})`) : ""));
  mount(title,
    el("div", { class: "cards" },
      card("leader", d.leader < 0 ? "none" : d.leader, d.leader < 0 ? "bad" : "", "leader"),
      card("leader epoch", d.leader_epoch, "", "leader-epoch"),
      card("ISR", d.isr.join(", "), d.under_replicated ? "warn" : "", "isr"),
      card("log start", d.log_start_offset, "", "log-start"), card("high watermark", d.high_watermark, "", "high-watermark")),
    el("h2", {}, "Leader-epoch lineage per replica"),
    el("p", { class: "note" }, "Each cell is the offset at which that epoch starts in that replica's log (epoch → start offset). A red outline marks epochs past the point where a replica parts from the leader."),
    epochs.length ? table([], [], { id: "lineage", class: "lineage" }) : el("p", { class: "muted" }, "No epochs known."),
    el("ul", { id: "lineage-notes" }, notes));
  const t = document.getElementById("lineage");
  if (t) t.replaceChildren(el("thead", {}, head), el("tbody", {}, body));
}

function renderGroups(d) {
  const rows = d.groups.map((g) => el("tr", { "data-group": g.group_id },
    el("td", {}, el("a", { href: "/groups/" + encodeURIComponent(g.group_id) }, g.group_id)), el("td", {}, g.state),
    el("td", { "data-field": "type" }, g.type || (g.simple ? "simple" : "classic"))));
  mount(el("h1", {}, "Consumer groups"), rows.length ? table(["group", "state", "type"], rows, { id: "groups" }) : el("p", { class: "muted" }, "No groups."),
    d.errors.length ? errorBox(d.errors.join("; ")) : "");
}

function renderGroup(id, d, target) {
  const put = (...nodes) => target.replaceChildren(...nodes);
  if (d.error) return put(el("h1", {}, "Group ", id), errorBox(d.error));
  // A consumer-protocol (KIP-848) group: each member's epoch, and its target assignment beside what it owns.
  const kip848 = d.type === "consumer";
  // A share group (KIP-932): members have epochs too, several may share a partition, and a partition's place
  // is the share-partition's start offset rather than a committed offset.
  const share = d.type === "share";
  const epoched = kip848 || share;
  const tps = (list) => (list || []).map((a) => `${a.topic}-${a.partition}`).join(", ");
  const members = d.members.map((m) => el("tr", { "data-member": m.member_id }, el("td", { class: "mono" }, m.member_id), el("td", {}, m.client_id), el("td", {}, m.host),
    ...(epoched ? [num(m.member_epoch, { "data-field": "member-epoch" })] : []),
    el("td", {}, tps(m.assignment)), ...(kip848 ? [el("td", { "data-field": "target" }, tps(m.target_assignment))] : [])));
  const epochs = epoched ? [card("group epoch", d.group_epoch, "", "group-epoch"), card("assignment epoch", d.assignment_epoch, "", "assignment-epoch")] : [];
  const parts = d.partitions.map((p) => el("tr", { "data-tp": `${p.topic}-${p.partition}` },
    el("td", {}, el("a", { href: "/topics/" + encodeURIComponent(p.topic) }, p.topic)), num(p.partition),
    num(p.committed_offset, { "data-field": "committed" }), num(p.end_offset, { "data-field": "end" }),
    num(p.lag, { "data-field": "lag" }), el("td", { class: "mono" }, dash(p.member_id))));
  put(el("h1", {}, "Group ", el("span", { class: "mono" }, id)),
    el("div", { class: "cards" }, card("type", d.type, "", "type"), card("state", d.state, "", "state"), card("members", d.members.length, "", "members"),
      card("coordinator", d.coordinator, "", "coordinator"), card("assignor", d.protocol, "", "assignor"), ...epochs,
      card("total lag", d.total_lag, "", "total-lag")),
    el("h2", {}, "Partitions"), table(["topic", "#partition", share ? "#start offset" : "#committed", "#end offset", "#lag", share ? "members" : "member"], parts, { id: "group-partitions" }),
    el("h2", {}, "Members"), members.length ? table(kip848 ? ["member", "client", "host", "#epoch", "assignment", "target"] : share ? ["member", "client", "host", "#epoch", "assignment"] : ["member", "client", "host", "assignment"], members, { id: "members" }) : el("p", { class: "muted" }, "No members."));
}

function resetForm(group) {
  const out = el("p", { id: "reset-result", class: "note" });
  const form = el("form", { class: "query", id: "reset" },
    el("label", {}, "topic", el("input", { name: "topic", size: 14 })),
    el("label", {}, "partition", el("input", { name: "partition", value: "all", size: 5 })),
    el("label", {}, "to", el("input", { name: "to", value: "earliest", size: 10, title: "earliest, latest or an offset" })),
    el("button", { type: "submit" }, "Reset offsets"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = Object.fromEntries(new FormData(form));
    out.textContent = "Resetting…";
    try {
      const r = await fetch(`/api/groups/${encodeURIComponent(group)}/offsets`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(f) });
      const body = await r.json();
      out.textContent = r.ok ? "Reset " + body.reset.map((x) => `${x.topic}-${x.partition} to ${x.offset}`).join(", ") : body.error;
      out.className = r.ok ? "note ok" : "note bad";
    } catch (e) {
      out.textContent = e.message;
      out.className = "note bad";
    }
  });
  return el("section", {}, el("h2", {}, "Reset committed offsets"),
    el("p", { class: "note" }, "Only while the group has no members, as kafka-consumer-groups.sh --reset-offsets."), form, out);
}

// Client quotas: what each entity is allowed (its own quotas, or a default's, muted and named) beside what
// each broker measures for it. A quota holds on each broker separately, so the live figures stay per broker.
const QUOTA_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"];
const THROTTLES = { produce_throttle_ms: "produce", fetch_throttle_ms: "fetch", request_throttle_ms: "request", mutation_throttle_ms: "mutations" };

function quotaCell(row, key) {
  const a = row.applied[key];
  if (!a) return num(null, { "data-field": key });
  return el("td", { class: "num" + (a.own ? "" : " muted"), "data-field": key, "data-value": a.value, "data-from": a.from },
    String(a.value), a.own ? "" : el("div", { class: "from" }, `from ${a.from}`));
}

function perBrokerCell(row, field, fmt) {
  const per = Object.entries(row.brokers).filter(([, f]) => f[field] !== undefined);
  if (!per.length) return num(null, { "data-field": field });
  return el("td", { class: "num", "data-field": field, "data-value": row.total[field] },
    per.map(([b, f]) => el("div", {}, fmt(f[field]), el("span", { class: "muted" }, ` (broker ${b})`))));
}

function throttleCell(row) {
  const t = row.total;
  if (!t) return num(null, { "data-field": "throttle" });
  const kinds = Object.entries(THROTTLES).filter(([f]) => t[f]);
  const per = Object.entries(row.brokers).map(([b, f]) => `broker ${b}: ${Object.keys(THROTTLES).reduce((a, k) => a + (f[k] || 0), 0)} ms`);
  return el("td", { class: "num" + (t.throttle_ms ? " warn" : ""), "data-field": "throttle", "data-value": t.throttle_ms, title: per.join("\n") },
    kinds.length ? kinds.map(([f, k]) => el("div", {}, `${k} ${Math.round(t[f])} ms`)) : "0 ms");
}

function renderQuotas(d) {
  if (d.error) return mount(el("h1", {}, "Quotas"), errorBox(d.error));
  const rows = d.entities.map((r) => el("tr", { "data-entity": r.name },
    el("td", { class: "mono" }, r.name), QUOTA_KEYS.map((k) => quotaCell(r, k)),
    perBrokerCell(r, "produce_byte_rate", byteRate), perBrokerCell(r, "fetch_byte_rate", byteRate),
    perBrokerCell(r, "request_time", (v) => `${v.toFixed(1)} %`), throttleCell(r)));
  const ip = d.ip.map((r) => el("tr", { "data-entity": r.name }, el("td", { class: "mono" }, r.name), num(dash(r.configured.connection_creation_rate))));
  const errs = Object.entries(d.endpoint_errors).map(([b, e]) => el("li", { "data-broker": b }, `broker ${b}: ${e}`));
  mount(el("h1", {}, "Quotas"),
    el("p", { class: "note" }, d.metrics
      ? "Configured quotas from DescribeClientQuotas; live figures from each broker's quota metrics (byte rates and request time over the quota window, throttle time handed out since the broker started). An entity's quota holds on each broker separately."
      : "Configured quotas from DescribeClientQuotas. Start the console with --metrics-port or --metrics-port-map to see each broker's byte rates and throttle times per entity."),
    d.configured_error ? errorBox(`configured quotas: ${d.configured_error}`) : "",
    errs.length ? el("ul", { id: "endpoint-errors", class: "warn" }, errs) : "",
    rows.length ? table(["entity", ...QUOTA_KEYS.map((k) => "#" + k.replace(/_/g, "_\u200b")), "#produce", "#fetch", "#request time", "#throttle time"], rows, { id: "quotas" })
      : el("p", { class: "muted", id: "no-quotas" }, "No client quotas configured, and none measured."),
    ip.length ? el("section", {}, el("h2", {}, "Connection rate per IP"), table(["entity", "#connection_creation_rate"], ip, { id: "ip-quotas" })) : "");
}

function showPayload(p) {
  if (!p || p.as === "null") return el("span", { class: "muted" }, "null");
  if (p.as === "json") return el("pre", { class: "mono json" }, p.data);
  return el("span", { class: "mono " + (p.as === "hex" ? "hex" : "") }, p.data);
}

function renderMessages() {
  const q = new URLSearchParams(location.search);
  const field = (name, label, value, type) => el("label", {}, label, el("input", { name, value: value || "", type: type || "text", size: 12 }));
  const format = el("select", { name: "format" }, ["text", "json", "hex"].map((f) => el("option", { value: f, selected: q.get("format") === f }, f)));
  const form = el("form", { class: "query", id: "browse" },
    field("topic", "topic", q.get("topic")), field("partition", "partition", q.get("partition") || "0", "number"),
    field("offset", "from offset", q.get("offset"), "number"), field("timestamp", "or from timestamp (ms)", q.get("timestamp"), "number"),
    el("label", {}, "or from time (local)", el("input", { name: "from_time", type: "datetime-local", step: 1 })),
    field("limit", "limit", q.get("limit") || "50", "number"), el("label", {}, "show as", format), el("button", { type: "submit" }, "Read"));
  const out = el("div", { id: "results" });
  mount(el("h1", {}, "Messages"), form, out);
  live("idle");
  const run = async () => {
    const params = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v !== "" && k !== "from_time") params.set(k, v);
    // A time picked in the browser's own time zone becomes the epoch milliseconds ListOffsets takes.
    const picked = form.elements.from_time.value;
    if (picked) { params.set("timestamp", String(new Date(picked).getTime())); params.delete("offset"); }
    history.replaceState(null, "", "/messages?" + params);
    out.replaceChildren(el("p", { class: "muted" }, "Reading…"));
    try {
      const d = await getJSON("/api/messages?" + params);
      const rows = d.messages.map((m) => el("tr", { "data-offset": m.offset },
        num(m.offset), el("td", {}, m.timestamp === null ? "–" : new Date(m.timestamp).toISOString()), num(m.leader_epoch),
        el("td", { "data-field": "key" }, showPayload(m.key)), el("td", { "data-field": "value" }, showPayload(m.value)),
        el("td", {}, m.headers.map((h, i) => el("span", {}, (i ? "; " : "") + h.key + "=", showPayload(h.value))))));
      out.replaceChildren(el("p", { class: "muted", id: "count" }, `${d.messages.length} messages from offset ${dash(d.start)}`),
        table(["#offset", "timestamp", "#epoch", "key", "value", "headers"], rows, { id: "messages" }));
    } catch (e) {
      out.replaceChildren(errorBox(e.message));
    }
  };
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  if (q.get("topic")) run();
}

async function main() {
  const page = document.body.dataset.page;
  const args = JSON.parse(document.body.dataset.args || "{}");
  const nav = { topic: "topics", partition: "topics", group: "groups" }[page] || page;
  document.querySelectorAll(`[data-nav="${nav}"]`).forEach((a) => a.classList.add("current"));
  if (page === "overview") follow("/events/overview", renderOverview);
  else if (page === "topics") {
    live("idle");
    try { renderTopics(await getJSON("/api/topics")); } catch (e) { mount(el("h1", {}, "Topics"), errorBox(e.message)); }
  } else if (page === "topic") {
    const enc = encodeURIComponent(args.topic);
    let configs = null, last = null, tp = null;
    const track = rateTracker(60);
    follow("/events/topics/" + enc, (d) => {
      last = d;
      if (!d.error) tp = track(d);
      renderTopic(args.topic, d, configs, tp);
    });
    try { configs = (await getJSON("/api/topics/" + enc)).configs; } catch (e) { configs = []; }
    if (last) renderTopic(args.topic, last, configs, tp);
  } else if (page === "partition") {
    follow(`/events/topics/${encodeURIComponent(args.topic)}/partitions/${args.partition}`, (d) => renderPartition(args.topic, args.partition, d));
  } else if (page === "groups") {
    live("idle");
    try { renderGroups(await getJSON("/api/groups")); } catch (e) { mount(el("h1", {}, "Consumer groups"), errorBox(e.message)); }
  } else if (page === "group") {
    // The reset form lives outside the part each event redraws, so typing in it survives the refreshes.
    const liveBox = el("div", { id: "group-live" });
    const form = resetForm(args.group);
    mount(liveBox, form);
    follow("/events/groups/" + encodeURIComponent(args.group), (d) => {
      renderGroup(args.group, d, liveBox);
      const topic = form.querySelector("input[name=topic]");
      if (!topic.value && d.partitions && d.partitions.length) topic.value = d.partitions[0].topic;
    });
  }
  else if (page === "quotas") follow("/events/quotas", renderQuotas);
  else if (page === "messages") renderMessages();
}

main();
