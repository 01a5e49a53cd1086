// The agent's live page: polls /members and /events every second and
// renders them. Everything from the network is inserted as text, never as
// HTML: member names and metadata come from other members.
"use strict";

const POLL_MS = 1000;
const KEEP_EVENTS = 100;
// The default order puts what needs attention first.
const STATE_ORDER = { suspect: 0, dead: 1, alive: 2, left: 3 };

let view = null;           // the last /members body
let fetchedAt = 0;         // performance.now() when it arrived
let events = [];           // newest first, at most KEEP_EVENTS
let lastSeq = 0;
let sortKey = "state";
let sortDesc = false;
let refreshes = 0;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function badge(state) {
  return el("span", { class: "badge state-" + state }, state);
}

function fmtDuration(ms) {
  if (ms < 0) return "final check";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  const m = Math.floor(ms / 60000);
  return m + " min " + Math.round((ms % 60000) / 1000) + " s";
}

function fmtRTT(ms) {
  if (ms === null || ms === undefined) return "—";
  return ms < 10 ? ms.toFixed(2) + " ms" : ms.toFixed(1) + " ms";
}

function fmtTime(iso) {
  const d = new Date(iso);
  const p = (n, w) => String(n).padStart(w, "0");
  return p(d.getHours(), 2) + ":" + p(d.getMinutes(), 2) + ":" + p(d.getSeconds(), 2) + "." + p(d.getMilliseconds(), 3);
}

function metaCell(m) {
  const td = el("td", {});
  if (m.labels) {
    for (const k of Object.keys(m.labels).sort()) {
      td.append(el("span", { class: "label mono" }, k + "=" + m.labels[k]));
    }
  } else if (m.meta) {
    td.append(el("span", { class: "mono" }, m.meta));
  } else if (m.meta_base64) {
    td.append(el("span", { class: "mono", title: "binary metadata, base64" }, m.meta_base64));
  }
  return td;
}

function compare(a, b) {
  let d = 0;
  switch (sortKey) {
    case "state": d = STATE_ORDER[a.state] - STATE_ORDER[b.state]; break;
    case "incarnation": d = a.incarnation - b.incarnation; break;
    case "rtt": d = (a.rtt_ms ?? Infinity) - (b.rtt_ms ?? Infinity); break;
    case "addr": d = a.addr.localeCompare(b.addr); break;
    case "meta": d = (a.meta || "").localeCompare(b.meta || ""); break;
  }
  if (d === 0 || Number.isNaN(d)) d = a.name.localeCompare(b.name);
  return sortDesc ? -d : d;
}

function renderMembers() {
  const tbody = document.querySelector("#members tbody");
  const rows = view.members.slice().sort(compare).map((m) => {
    const tr = el("tr", {
      "data-member": m.name, "data-state": m.state,
      class: "row-" + m.state + (m.local ? " local" : ""),
    });
    tr.append(
      el("td", { class: "name" }, m.name),
      el("td", {}, badge(m.state)),
      el("td", { class: "n" }, m.incarnation),
      el("td", { class: "n" }, fmtRTT(m.rtt_ms)),
      el("td", { class: "mono" }, m.addr),
      metaCell(m),
    );
    return tr;
  });
  tbody.replaceChildren(...rows);
  for (const th of document.querySelectorAll("#members th[data-key]")) {
    th.classList.toggle("sorted", th.dataset.key === sortKey);
    th.classList.toggle("desc", th.dataset.key === sortKey && sortDesc);
  }
  const counts = { alive: 0, suspect: 0, dead: 0, left: 0 };
  for (const m of view.members) counts[m.state] = (counts[m.state] || 0) + 1;
  for (const s of Object.keys(counts)) {
    document.getElementById("count-" + s).textContent = counts[s];
  }
  const h = document.getElementById("health");
  h.textContent = view.health.score + " / " + view.health.max;
  h.classList.toggle("unhealthy", view.health.score > 0);
  document.getElementById("self").textContent = view.self + " (" + view.state + ")";
  document.getElementById("members-note").textContent =
    view.members.length + " in this member's table; dead and left ones stay a while";
}

function renderSuspicions() {
  const tbody = document.querySelector("#suspicions tbody");
  const elapsed = performance.now() - fetchedAt;
  const rows = view.suspicions.map((s) => {
    const since = Date.parse(view.time) - Date.parse(s.since) + elapsed;
    return el("tr", { "data-suspect": s.name },
      el("td", { class: "name" }, s.name),
      el("td", { class: "n" }, s.incarnation),
      el("td", {}, s.from),
      el("td", { class: "n" }, s.confirmations),
      el("td", { class: "n" }, fmtDuration(since)),
      el("td", { class: "n remaining" }, fmtDuration(s.remaining_ms - elapsed)),
    );
  });
  tbody.replaceChildren(...rows);
  document.getElementById("suspicions").hidden = rows.length === 0;
  document.getElementById("no-suspicions").hidden = rows.length > 0;
}

function renderEvents() {
  const tbody = document.querySelector("#events tbody");
  tbody.replaceChildren(...events.map((e) => el("tr", { "data-event": e.kind, "data-node": e.node },
    el("td", { class: "n" }, e.seq),
    el("td", { class: "mono" }, fmtTime(e.time)),
    el("td", {}, e.kind),
    el("td", { class: "name" }, e.node),
    el("td", {}, badge(e.state)),
    el("td", { class: "n" }, e.incarnation),
  )));
  document.getElementById("events").hidden = events.length === 0;
  document.getElementById("no-events").hidden = events.length > 0;
}

function setConn(cls, text) {
  const c = document.getElementById("conn");
  c.className = "conn " + cls;
  c.textContent = text;
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

async function refresh() {
  try {
    const [members, ev] = await Promise.all([getJSON("members"), getJSON("events?after=" + lastSeq)]);
    view = members;
    fetchedAt = performance.now();
    if (ev.last_seq < lastSeq) {
      // The agent restarted and numbers its events from 1 again: start
      // over at the next poll.
      events = [];
      lastSeq = 0;
    } else {
      events = ev.events.slice().reverse().concat(events).slice(0, KEEP_EVENTS);
      lastSeq = ev.last_seq;
    }
    renderMembers();
    renderSuspicions();
    renderEvents();
    refreshes++;
    document.body.dataset.refreshes = String(refreshes);
    document.body.removeAttribute("data-error");
    setConn("conn-ok", "live · " + fmtTime(view.time));
  } catch (err) {
    document.body.dataset.error = String(err.message || err);
    setConn("conn-err", "agent unreachable: " + (err.message || err));
  } finally {
    setTimeout(refresh, POLL_MS);
  }
}

for (const th of document.querySelectorAll("#members th[data-key]")) {
  th.addEventListener("click", () => {
    if (sortKey === th.dataset.key) sortDesc = !sortDesc;
    else { sortKey = th.dataset.key; sortDesc = false; }
    if (view) renderMembers();
  });
}
// The countdowns move between polls.
setInterval(() => { if (view) renderSuspicions(); }, 250);
refresh();
