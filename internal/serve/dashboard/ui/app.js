// Spillway dashboard: polls /ui/state once a second and renders it. The
// admin token, when the listener needs one, comes from the URL fragment
// (#token=...), which browsers never send to the server, or from the
// controls' token field; it lives in this page's memory only (no cookie,
// no storage).
"use strict";

const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const tokenField = document.getElementById("ctl-token");
tokenField.value = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const authHeaders = () => (tokenField.value ? { Authorization: "Bearer " + tokenField.value } : {});

// el builds an element. Styles go through the CSSOM (attrs.css), which
// the page's Content-Security-Policy allows, not style attributes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else if (k === "css") Object.assign(e.style, v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

const pct = (x) => (100 * x).toFixed(1) + "%";

function bar(shares, zones) {
  const b = el("div", { class: "bar" });
  shares.forEach((s, i) => {
    if (s <= 0) return;
    b.append(el("span", { css: { width: `${(100 * s).toFixed(2)}%`, background: palette[i % palette.length] }, title: `${zones[i]} ${pct(s)}` }));
  });
  return b;
}

// spark draws a series as an SVG polyline (w×h), with its maximum.
function spark(values, w, h, max, color) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  if (values.length > 1) {
    const m = max || Math.max(...values, 1e-9);
    const pts = values.map((v, i) => `${(i * (w - 2)) / (values.length - 1) + 1},${h - 1 - (v / m) * (h - 2)}`).join(" ");
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts);
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", color);
    line.setAttribute("stroke-width", "1.5");
    svg.append(line);
  }
  return svg;
}

function renderRegions(regions) {
  const box = document.getElementById("regions");
  box.replaceChildren(...regions.map((r) =>
    el("div", { class: "region", "data-region": r.name },
      el("h3", { text: r.name }),
      ...r.zones.map((z) => el("span", { class: "zone", "data-zone": z.zone, "data-state": z.state, text: `${z.zone} ${z.healthy}/${z.members}` })))));
}

function renderServices(services, step) {
  const box = document.getElementById("services");
  box.replaceChildren(...services.map((s) => {
    const zones = s.backends.map((b) => b.zone);
    const rows = s.backends.map((b, i) =>
      el("tr", { "data-group": b.group, "data-zone": b.zone, "data-state": b.state },
        el("td", {}, el("span", { css: { color: palette[i % palette.length] }, text: "■ " }), b.group),
        el("td", { text: b.zone }),
        el("td", { text: b.preference }),
        el("td", { class: "num", text: `${b.healthy}/${b.members}` }),
        el("td", {}, el("span", { class: "badge", "data-state": b.state, text: b.state })),
        el("td", { class: "num", text: b.capacity < 0 ? "—" : b.capacity.toFixed(0) + " rps" }),
        el("td", { class: "num split", text: pct(b.share) }),
        el("td", { class: "num measured", "data-measured": s.measured ? b.measured.toFixed(4) : "", text: s.measured ? pct(b.measured) : "—" }),
        el("td", { class: "num rate", "data-rate": b.rate.toFixed(3), text: b.rate.toFixed(1) }),
        el("td", { class: "num errors", "data-errors": String(b.errors5xx), text: String(b.errors5xx) }),
        el("td", { class: "details", text: details(b.details) }),
        el("td", { class: "num latency", "data-p50": b.p50.toFixed(3), "data-p95": b.p95.toFixed(3), "data-p99": b.p99.toFixed(3), text: latency(b) }),
        el("td", { class: "num inflight", text: String(b.inFlight) })));
    const rate = s.rate.length ? s.rate[s.rate.length - 1] : 0;
    const err = s.errorRate.length ? s.errorRate[s.errorRate.length - 1] : 0;
    return el("div", { class: "service", "data-service": s.name },
      el("h3", { text: s.name }),
      el("div", { class: "meta", text: `${s.loadBalancingAlgorithm} · failover threshold ${s.failoverHealthThreshold}% · auto-capacity drain ${s.autoCapacityDrain ? "on" : "off"}` }),
      el("div", { class: "bars" },
        el("span", { class: "meta", text: "split" }), bar(s.backends.map((b) => b.share), zones),
        el("span", { class: "meta", text: "measured" }), s.measured ? bar(s.backends.map((b) => b.measured), zones) : el("span", { class: "meta", text: "no requests in the last 10 s" })),
      el("table", {},
        el("thead", {}, el("tr", {}, ...["group", "zone", "preference", "healthy", "state", "capacity", "split", "measured", "req/s", "5xx", "other answers", "p50 / p95 / p99 ms", "in flight"].map((h) => el("th", { text: h })))),
        el("tbody", {}, ...rows)),
      s.lbDetails ? el("div", { class: "meta lb-details", text: "answered by the balancer, no backend reached: " + details(s.lbDetails) }) : null,
      el("div", { class: "charts" },
        el("div", { class: "chart", "data-points": String(s.rate.length) }, el("div", { class: "label", text: `requests/s, last ${s.rate.length} × ${step}: now ${rate.toFixed(1)}` }), spark(s.rate, 300, 50, 0, "#1f77b4")),
        el("div", { class: "chart" }, el("div", { class: "label", text: `5xx share: now ${pct(err)}` }), spark(s.errorRate, 300, 50, 1, "#b3261e"))));
  }));
}

// details lists statusDetails counts ("backend_timeout 3, …").
function details(d) {
  if (!d) return "";
  return Object.entries(d).map(([k, v]) => `${k} ${v}`).join(", ");
}

const ms = (x) => (x < 0 ? "—" : x < 10 ? x.toFixed(2) : x.toFixed(0));
const latency = (b) => (b.p50 < 0 ? "—" : `${ms(b.p50)} / ${ms(b.p95)} / ${ms(b.p99)}`);

// renderInfo fills the header: instance, version, config hash, uptime,
// client connections.
function renderInfo(info, now) {
  const box = document.getElementById("info");
  box.hidden = !info;
  if (!info) return;
  const up = Math.max(0, (new Date(now) - new Date(info.started)) / 1000);
  const h = Math.floor(up / 3600), m = Math.floor((up % 3600) / 60), sec = Math.floor(up % 60);
  box.dataset.uptime = String(Math.floor(up));
  box.dataset.configHash = info.configHash;
  box.textContent = [`instance ${info.instance || "?"}`, `version ${info.version}`, `config ${info.configHash}`,
    `up ${h}h${String(m).padStart(2, "0")}m${String(sec).padStart(2, "0")}s`, `client connections: ${info.activeConnections} open, ${info.acceptedConnections} accepted`].join(" · ");
}

// renderFrontends lists the frontends and their URL maps' weighted
// splits: configured weights against the measured share.
function renderFrontends(fes) {
  const sec = document.getElementById("frontends-section");
  sec.hidden = !fes || fes.length === 0;
  if (sec.hidden) return;
  document.getElementById("frontends").replaceChildren(...fes.map((f) =>
    el("div", { class: "service frontend", "data-frontend": f.name },
      el("h3", { text: `${f.name} · ${f.protocol} ${f.address} · URL map ${f.urlMap || "—"} · ${f.inFlight} in flight` }),
      ...(f.splits || []).map((sp) => {
        const names = sp.services.map((w) => w.service);
        return el("div", { class: "split-box", "data-source": sp.source },
          el("div", { class: "meta", text: sp.source }),
          el("div", { class: "bars" },
            el("span", { class: "meta", text: "configured" }), bar(sp.services.map((w) => w.configured), names),
            el("span", { class: "meta", text: "measured" }), sp.measured ? bar(sp.services.map((w) => w.measured), names) : el("span", { class: "meta", text: "no requests in the last 10 s" })),
          el("table", {},
            el("thead", {}, el("tr", {}, ...["backend service", "weight", "configured", "measured"].map((h) => el("th", { text: h })))),
            el("tbody", {}, ...sp.services.map((w, i) => el("tr", { "data-split-service": w.service },
              el("td", {}, el("span", { css: { color: palette[i % palette.length] }, text: "■ " }), w.service),
              el("td", { class: "num", text: String(w.weight) }),
              el("td", { class: "num configured", text: pct(w.configured) }),
              el("td", { class: "num measured", "data-measured": sp.measured ? w.measured.toFixed(4) : "", text: sp.measured ? pct(w.measured) : "—" }))))));
      }))));
}

// renderEndpoints lists every endpoint's request rate.
function renderEndpoints(eps) {
  const sec = document.getElementById("endpoints-section");
  sec.hidden = !eps || eps.length === 0;
  if (sec.hidden) return;
  document.querySelector("#endpoints tbody").replaceChildren(...eps.map((e) =>
    el("tr", { "data-endpoint": e.address, "data-group": e.group },
      el("td", { text: e.group }),
      el("td", { text: e.zone }),
      el("td", { text: e.instance ? `${e.instance} (${e.address})` : e.address }),
      el("td", { class: "num rate", "data-rate": e.rate.toFixed(3), text: e.rate.toFixed(1) }),
      el("td", { class: "num", text: pct(e.errorRate) }),
      el("td", { class: "num", text: String(e.inFlight) }))));
}

// renderCDN lists the CDN-enabled backend services and buckets with
// their cache hit ratio (hits over hits and misses; "—" without lookups).
function renderCDN(rows) {
  const sec = document.getElementById("cdn-section");
  sec.hidden = !rows || rows.length === 0;
  if (sec.hidden) return;
  document.querySelector("#cdn tbody").replaceChildren(...rows.map((c) =>
    el("tr", { "data-cdn-backend": c.backend, "data-kind": c.kind },
      el("td", { text: c.backend }),
      el("td", { text: c.kind }),
      el("td", { class: "num hit-ratio", "data-ratio": c.hitRatio < 0 ? "" : c.hitRatio.toFixed(4), text: c.hitRatio < 0 ? "—" : pct(c.hitRatio) }),
      el("td", { class: "num", text: c.lookups.toFixed(1) }),
      el("td", { class: "num hits", text: String(c.hits) }),
      el("td", { class: "num misses", text: String(c.misses) }),
      el("td", {}, spark((c.series || []).map((v) => (v < 0 ? 0 : v)), 200, 24, 1, "#2ca02c")))));
}

// setOptions replaces a select's options (after its first, "any") when
// they changed, keeping the selection.
function setOptions(sel, values) {
  const have = [...sel.options].slice(1).map((o) => o.value);
  if (have.length === values.length && have.every((v, i) => v === values[i])) return;
  const keep = sel.value;
  sel.replaceChildren(sel.options[0], ...values.map((v) => el("option", { value: v, text: v })));
  sel.value = values.includes(keep) ? keep : "";
}

// renderControlTargets offers the services, groups and endpoints of the
// state as the controls' targets.
function renderControlTargets(st) {
  const uniq = (xs) => [...new Set(xs)].sort();
  const services = st.backendServices || [];
  setOptions(document.getElementById("ctl-service"), uniq(services.map((s) => s.name)));
  setOptions(document.getElementById("ctl-group"), uniq(services.flatMap((s) => s.backends.map((b) => b.group))));
  setOptions(document.getElementById("ctl-endpoint"), uniq((st.endpoints || []).map((e) => e.address)));
}

// control sends one overlay change (POST ../overlay) with the token
// typed in, and shows the answer.
async function control(op) {
  const v = (id) => document.getElementById(id).value.trim();
  const req = { op, actor: v("ctl-actor") || "dashboard" };
  for (const [k, id] of [["service", "ctl-service"], ["group", "ctl-group"], ["endpoint", "ctl-endpoint"], ["reason", "ctl-reason"], ["for", "ctl-for"]]) {
    if (v(id) && !(op === "undrain" && k === "for")) req[k] = v(id);
  }
  if (op === "set") req.capacityScaler = parseFloat(v("ctl-scaler"));
  const out = document.getElementById("ctl-result");
  out.dataset.state = "pending";
  out.textContent = `${op}…`;
  try {
    const res = await fetch("../overlay", { method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() }, body: JSON.stringify(req), cache: "no-store" });
    const text = (await res.text()).trim();
    out.dataset.state = res.ok ? "ok" : "error";
    out.textContent = res.ok ? `${op}: done` : `${op}: ${res.status} ${text}`;
  } catch (e) {
    out.dataset.state = "error";
    out.textContent = `${op}: ${e.message}`;
  }
  tick();
}

document.getElementById("ctl-drain").addEventListener("click", () => control("drain"));
document.getElementById("ctl-undrain").addEventListener("click", () => control("undrain"));
document.getElementById("ctl-scale").addEventListener("click", () => control("set"));

function renderDNS(names) {
  const sec = document.getElementById("dns-section");
  sec.hidden = !names || names.length === 0;
  if (sec.hidden) return;
  document.querySelector("#dns tbody").replaceChildren(...names.map((n) =>
    el("tr", { "data-name": n.name },
      el("td", { text: n.name }),
      el("td", { text: n.answers && n.answers.length ? n.answers.map((a) => `${a.member || "?"} (${a.address}${a.region ? ", " + a.region : ""})`).join(", ") : "no answer" }),
      el("td", { class: "num", text: String(n.members) }))));
}

// renderSecurity lists the security policy rules that decided the most
// requests (preview rules marked: they would have).
function renderSecurity(rules) {
  const sec = document.getElementById("security-section");
  sec.hidden = !rules || rules.length === 0;
  if (sec.hidden) return;
  document.querySelector("#security tbody").replaceChildren(...rules.map((r) =>
    el("tr", { "data-rule": `${r.policy}/${r.priority}/${r.result}` },
      el("td", { text: r.policy }),
      el("td", { class: "num", text: String(r.priority) }),
      el("td", { text: r.preview ? `${r.result} (preview)` : r.result }),
      el("td", { class: "num", text: String(r.count) }))));
}

// renderOverlay lists the runtime overlay's entries (drains, capacity
// scalers, weights set with spillway ctl) and its problems.
function renderOverlay(ov) {
  const sec = document.getElementById("overlay-section");
  sec.hidden = !ov;
  if (!ov) return;
  const when = (t) => t ? new Date(t).toLocaleTimeString() : "cleared";
  document.querySelector("#overlay tbody").replaceChildren(...(ov.entries || []).map((e) =>
    el("tr", { "data-id": e.id },
      el("td", { text: e.action === "DRAIN" ? e.id : `${e.id} = ${e.value}` }),
      el("td", { text: e.actor || "" }),
      el("td", { text: when(e.set) }),
      el("td", { text: e.expires ? when(e.expires) : "cleared" }),
      el("td", { text: e.reason || "" }))));
  document.getElementById("overlay-problems").replaceChildren(...(ov.problems || []).map((p) =>
    el("li", { text: p })));
}

let lastTransitions = [];

// renderTransitions lists the transitions that pass the filters (kind,
// and a service name or any text of the line).
function renderTransitions(ts) {
  lastTransitions = ts;
  const box = document.getElementById("transitions");
  const kind = document.getElementById("filter-kind").value;
  const text = document.getElementById("filter-text").value.trim().toLowerCase();
  const shown = ts.filter((t) => (!kind || t.kind === kind) &&
    (!text || (t.service || "").toLowerCase() === text || `${t.what} ${t.detail || ""}`.toLowerCase().includes(text)));
  if (!shown.length) {
    box.replaceChildren(el("li", { text: ts.length ? "none matches the filter" : "none since the dashboard started" }));
    return;
  }
  box.replaceChildren(...shown.map((t) =>
    el("li", { "data-kind": t.kind, "data-service": t.service || "" },
      el("time", { datetime: t.time, text: new Date(t.time).toLocaleTimeString() }),
      el("span", { class: "kind", "data-kind": t.kind, text: t.kind }),
      t.what, t.detail ? el("span", { class: "meta", text: " — " + t.detail }) : null)));
}

// renderFleet shows how a fleet instance stands (docs/fleet.md): its
// name, config revision, the control loop's leader and its probing share,
// and, loudly, when it has lost etcd and serves its last good view.
function renderFleet(f) {
  const box = document.getElementById("fleet");
  box.hidden = !f;
  if (!f) return;
  const parts = [`fleet instance ${f.instance}`, `config revision ${f.configRevision}`];
  if (f.control) parts.push(f.control.leading ? "leads the control loop" : `leader ${f.control.leader || "unknown"}`);
  if (f.probing) parts.push(`probes ${f.probing.probing} of ${f.probing.targets} targets`);
  if (f.stale) parts.push(`STALE since ${new Date(f.staleSince).toLocaleTimeString()}: ${f.staleWhy || "etcd lost"}`);
  box.dataset.stale = String(!!f.stale);
  box.textContent = parts.join(" · ");
}

// renderBGP shows the anycast view (spillway.bgp): each session with a
// router and each prefix's state with its reason (docs/global.md).
function renderBGP(b) {
  const sec = document.getElementById("bgp-section");
  sec.hidden = !b;
  if (!b) return;
  const when = (t) => t ? new Date(t).toLocaleTimeString() : "-";
  document.getElementById("bgp-meta").textContent = `local AS ${b.localAsn} · router ID ${b.routerId}` + (b.error ? ` · error: ${b.error}` : "");
  document.querySelector("#bgp-sessions tbody").replaceChildren(...(b.sessions || []).map((s) =>
    el("tr", { "data-neighbor": s.neighbor },
      el("td", { text: s.neighbor }),
      el("td", { class: "num", text: String(s.peerAsn) }),
      el("td", {}, el("span", { class: "badge", "data-state": s.state === "ESTABLISHED" ? "serving" : "unhealthy", text: s.state })),
      el("td", { text: when(s.since) }),
      el("td", { class: "num", text: String(s.flaps) }),
      el("td", { class: "num", text: String(s.advertised) }))));
  const badge = { ANNOUNCED: "serving", DEGRADED: "degraded", WITHDRAWN: "unhealthy" };
  document.querySelector("#bgp-prefixes tbody").replaceChildren(...(b.prefixes || []).map((p) => {
    let state = p.state;
    if (p.state === "DEGRADED" && p.asPathPrepend) state += ` (prepend ${p.asPathPrepend})`;
    if (p.state === "DEGRADED" && p.med != null) state += ` (MED ${p.med})`;
    return el("tr", { "data-prefix": p.prefix, "data-state": p.state, "data-reason": p.reason },
      el("td", { text: p.prefix }),
      el("td", { text: (p.frontends || []).join(", ") }),
      el("td", {}, el("span", { class: "badge", "data-state": badge[p.state] || "unhealthy", text: state })),
      el("td", { text: p.reason }),
      el("td", { class: "num", text: p.healthyPercent.toFixed(1) + "%" }),
      el("td", { text: when(p.since) }),
      el("td", { class: "details", text: p.detail }));
  }));
}

for (const id of ["filter-kind", "filter-text"]) document.getElementById(id).addEventListener("input", () => renderTransitions(lastTransitions));

async function tick() {
  const status = document.getElementById("status");
  try {
    const res = await fetch("state", { headers: authHeaders(), cache: "no-store" });
    if (!res.ok) throw new Error(res.status + " " + (await res.text()).trim());
    const st = await res.json();
    renderInfo(st.info, st.time);
    renderFrontends(st.frontends);
    renderEndpoints(st.endpoints);
    renderControlTargets(st);
    renderRegions(st.regions || []);
    renderServices(st.backendServices || [], st.step);
    renderCDN(st.cdn);
    renderDNS(st.dns);
    renderSecurity(st.securityRules);
    renderTransitions(st.transitions || []);
    renderFleet(st.fleet);
    renderBGP(st.bgp);
    renderOverlay(st.overlay);
    status.dataset.state = "live";
    status.textContent = `state version ${st.version} · ${new Date(st.time).toLocaleTimeString()}`;
  } catch (e) {
    status.dataset.state = "stale";
    status.textContent = "not updating: " + e.message;
  }
}

tick();
setInterval(tick, 1000);
