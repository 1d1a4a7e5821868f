// zkraft console: plain script, no framework, nothing fetched but the
// member's own /console/api. Every view is polled once a second, so a
// change made by any client shows without a reload.
"use strict";

const API = "api/";
const POLL_MS = 1000;
const KEEP = 120; // chart samples
const $ = (sel) => document.querySelector(sel);

const state = {
  view: "tree",
  path: "/",
  pages: [""],   // "after" of each page visited; the last is shown
  next: "",
  fmt: "text",
  busy: false,
  samples: [],   // figures, oldest first
  node: null,
};

function authInfo() { return sessionStorage.getItem("zkraft-auth") || ""; }

async function api(name, params, body) {
  const url = new URL(API + name, location.href);
  for (const [k, v] of Object.entries(params || {})) url.searchParams.set(k, v);
  const opts = { headers: {} };
  const auth = authInfo();
  if (auth) opts.headers["Authorization"] = auth;
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(url, opts);
  let data = null;
  try { data = await resp.json(); } catch (e) { data = { error: "not JSON (" + resp.status + ")" }; }
  return { status: resp.status, data: data };
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}

function setStatus(text, bad) {
  const s = $("#status");
  s.textContent = text;
  s.className = bad ? "bad" : "";
}

// ---- routing ----

function route() {
  const h = decodeURIComponent(location.hash.slice(1));
  let view = h, path = "/";
  if (h.startsWith("tree:")) { view = "tree"; path = h.slice(5) || "/"; }
  if (!["tree", "sessions", "watches", "members", "charts"].includes(view)) view = "tree";
  if (view === "tree" && path !== state.path) { state.path = path; state.pages = [""]; }
  state.view = view;
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("on", a.dataset.view === view);
  refresh();
}

function childPath(parent, name) { return parent === "/" ? "/" + name : parent + "/" + name; }

// ---- tree ----

function bytesOf(b64) {
  const s = atob(b64 || "");
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function formatData(bytes, fmt) {
  if (fmt === "hex") {
    const lines = [];
    for (let i = 0; i < bytes.length; i += 16) {
      const row = Array.from(bytes.slice(i, i + 16), (b) => b.toString(16).padStart(2, "0"));
      lines.push(i.toString(16).padStart(8, "0") + "  " + row.join(" "));
    }
    return lines.join("\n");
  }
  const text = new TextDecoder("utf-8").decode(bytes);
  if (fmt === "json") {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return "(not JSON: " + e.message + ")"; }
  }
  return text;
}

function renderData() {
  const n = state.node;
  $("#data").textContent = n ? formatData(bytesOf(n.data), state.fmt) : "";
}

async function refreshTree() {
  const path = state.path;
  const after = state.pages[state.pages.length - 1];
  const [kids, node] = await Promise.all([api("children", { path: path, after: after }), api("node", { path: path })]);
  if (path !== state.path) return;
  // breadcrumbs
  const crumbs = $("#crumbs");
  crumbs.replaceChildren(el("a", { href: "#tree:/" }, "/"));
  let acc = "";
  path.split("/").filter(Boolean).forEach((part, i) => {
    acc += "/" + part;
    crumbs.append(i ? "/" : "", el("a", { href: "#tree:" + acc }, part));
  });
  $("#node-path").textContent = path;
  if (kids.data.error) {
    $("#children").replaceChildren(el("li", { class: "err" }, kids.data.error));
    $("#children-total").textContent = "?";
  } else {
    const list = kids.data.children.map((c) => el("li", {}, el("a", { href: "#tree:" + childPath(path, c) }, c)));
    $("#children").replaceChildren(...list);
    $("#children-total").textContent = kids.data.total;
    $("#children-range").textContent = kids.data.children.length
      ? "(" + kids.data.children[0] + " … " + kids.data.children[kids.data.children.length - 1] + ")" : "";
    state.next = kids.data.next;
    $("#next-page").disabled = !kids.data.next;
    $("#first-page").disabled = state.pages.length === 1;
  }
  if (node.data.error) {
    state.node = null;
    $("#node-error").textContent = node.data.error;
    renderData();
    $("#stat tbody").replaceChildren();
    $("#acl tbody").replaceChildren();
    $("#quota tbody").replaceChildren();
    return;
  }
  $("#node-error").textContent = "";
  state.node = node.data;
  renderData();
  const st = node.data.stat;
  $("#data-size").textContent = st.dataLength + " bytes";
  const rows = [["czxid", st.czxid], ["mzxid", st.mzxid], ["pzxid", st.pzxid],
    ["ctime", st.ctime + " (" + new Date(st.ctime).toISOString() + ")"],
    ["mtime", st.mtime + " (" + new Date(st.mtime).toISOString() + ")"],
    ["version", st.version], ["cversion", st.cversion], ["aversion", st.aversion],
    ["ephemeralOwner", st.ephemeralOwner], ["dataLength", st.dataLength], ["numChildren", st.numChildren]];
  $("#stat tbody").replaceChildren(...rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { id: "stat-" + k }, v))));
  $("#acl tbody").replaceChildren(...node.data.acl.map((a) => el("tr", {}, el("td", {}, a.scheme), el("td", {}, a.id), el("td", {}, a.perms))));
  const q = node.data.quota;
  $("#quota tbody").replaceChildren(...(q
    ? [el("tr", {}, el("th", {}, "on"), el("td", { id: "quota-path" }, q.path)),
       el("tr", {}, el("th", {}, "limits"), el("td", { id: "quota-limits" }, q.limits)),
       el("tr", {}, el("th", {}, "usage"), el("td", { id: "quota-usage" }, q.usage || ""))]
    : [el("tr", {}, el("td", { id: "quota-none" }, "no quota"))]));
}

// ---- sessions, watches, members ----

function list(items) { return items.length ? items.join("\n") : "–"; }

async function refreshSessions() {
  const r = await api("sessions");
  if (r.data.error) return setStatus(r.data.error, true);
  $("#sessions-count").textContent = "(" + r.data.sessions.length + ")";
  $("#sessions tbody").replaceChildren(...r.data.sessions.map((s) => el("tr", { "data-session": s.id },
    el("td", { class: "mono" }, s.id), el("td", {}, s.remote || "(another member)"), el("td", {}, s.timeout_ms + " ms"),
    el("td", {}, s.last_heard_ms_ago === undefined ? "?" : s.last_heard_ms_ago + " ms ago"),
    el("td", { class: "paths" }, list(s.ephemerals)), el("td", { class: "paths" }, list(s.watches)),
    el("td", {}, el("button", { type: "button", class: "kill", "data-session": s.id }, "Kill")))));
}

async function refreshWatches() {
  const r = await api("watches");
  if (r.data.error) return setStatus(r.data.error, true);
  $("#watches tbody").replaceChildren(...r.data.watches.map((w) => el("tr", {},
    el("td", { class: "mono" }, w.path), el("td", { class: "mono" }, w.sessions.join(" ")))));
}

async function refreshMembers() {
  const r = await api("members");
  if (r.data.error) return setStatus(r.data.error, true);
  const m = r.data;
  const rows = [["role", m.role], ["leader", m.leader || "–"], ["term", m.term], ["applied index", m.applied],
    ["apply lag (entries)", m.lag === undefined ? "?" : m.lag], ["last zxid", m.zxid], ["serving", m.serving ? "yes" : "no"]];
  $("#raft tbody").replaceChildren(...rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { id: "raft-" + k.split(" ")[0] }, v))));
  $("#members tbody").replaceChildren(...m.members.map((x) => el("tr", {},
    el("td", {}, x.id), el("td", {}, x.role), el("td", {}, x.raft || "–"), el("td", {}, x.client || "–"), el("td", {}, x.self ? "this member" : ""))));
}

// ---- charts ----

const charts = [
  { id: "requests", title: "Requests/s by op", rate: true, series: (v) => Object.keys(v).filter((k) => k.startsWith("zkraft_requests_total{")).map((k) => [k.slice(26, -2), k]) },
  { id: "latency", title: "Latency (ms)", series: () => [["read p50", 'readlatency{quantile="0.5"}'], ["read p99", 'readlatency{quantile="0.99"}'],
    ["update p50", 'updatelatency{quantile="0.5"}'], ["update p99", 'updatelatency{quantile="0.99"}']] },
  { id: "commit", title: "Proposal commit and apply (ms)", scale: 1000, series: () => [["p50", 'zkraft_proposal_commit_seconds{quantile="0.5"}'], ["p99", 'zkraft_proposal_commit_seconds{quantile="0.99"}']] },
  { id: "outstanding", title: "Outstanding requests", series: () => [["outstanding", "outstanding_requests"]] },
  { id: "connections", title: "Connections", series: () => [["connections", "num_alive_connections"]] },
  { id: "znodes", title: "Znodes", series: () => [["znodes", "znode_count"]] },
];
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function renderCharts() {
  const box = $("#charts");
  if (!box.childElementCount) {
    for (const c of charts) {
      box.append(el("figure", { id: "chart-" + c.id }, el("figcaption", {}, c.title), svg("svg", { viewBox: "0 0 480 170", width: 480, height: 170 }), el("div", { class: "legend" })));
    }
  }
  const s = state.samples;
  if (s.length < 2) return;
  const last = s[s.length - 1].values;
  for (const c of charts) {
    const fig = $("#chart-" + c.id);
    const names = c.series(last);
    const lines = names.map(([label, key]) => {
      const pts = [];
      for (let i = 1; i < s.length; i++) {
        let v = s[i].values[key];
        if (v === undefined) continue;
        if (c.rate) {
          const p = s[i - 1].values[key] || 0;
          v = Math.max(0, (v - p) / ((s[i].time_ms - s[i - 1].time_ms) / 1000));
        }
        pts.push([s[i].time_ms, v * (c.scale || 1)]);
      }
      return { label: label, pts: pts };
    });
    const t0 = s[0].time_ms, t1 = s[s.length - 1].time_ms;
    let ymax = 0;
    for (const l of lines) for (const p of l.pts) ymax = Math.max(ymax, p[1]);
    ymax = ymax > 0 ? ymax * 1.1 : 1;
    const g = fig.querySelector("svg");
    g.replaceChildren(svg("line", { x1: 40, y1: 150, x2: 475, y2: 150, class: "axis" }), svg("line", { x1: 40, y1: 5, x2: 40, y2: 150, class: "axis" }));
    const top = svg("text", { x: 36, y: 14, class: "tick", "text-anchor": "end" }); top.textContent = fmtNum(ymax);
    const zero = svg("text", { x: 36, y: 150, class: "tick", "text-anchor": "end" }); zero.textContent = "0";
    const span = svg("text", { x: 475, y: 165, class: "tick", "text-anchor": "end" }); span.textContent = Math.round((t1 - t0) / 1000) + " s";
    g.append(top, zero, span);
    const legend = fig.querySelector(".legend");
    legend.replaceChildren();
    lines.forEach((l, i) => {
      const color = COLORS[i % COLORS.length];
      if (l.pts.length) {
        const d = l.pts.map((p) => (40 + 435 * (p[0] - t0) / Math.max(1, t1 - t0)).toFixed(1) + "," + (150 - 145 * p[1] / ymax).toFixed(1)).join(" ");
        g.append(svg("polyline", { points: d, fill: "none", stroke: color, "stroke-width": 1.5 }));
      }
      const now = l.pts.length ? l.pts[l.pts.length - 1][1] : 0;
      const item = el("span", { class: "item", "data-series": l.label }, el("i", {}), l.label + " " + fmtNum(now));
      item.firstChild.style.background = color;
      legend.append(item);
    });
  }
}

function fmtNum(v) {
  if (v >= 100) return Math.round(v).toString();
  if (v >= 1) return v.toFixed(1);
  return v.toPrecision(2);
}

async function sample() {
  const r = await api("figures");
  if (r.data.error) return;
  state.samples.push(r.data);
  if (state.samples.length > KEEP) state.samples.shift();
}

// ---- actions ----

async function act(name, body) {
  const r = await api(name, {}, body);
  const out = $("#action-result");
  const ok = r.status === 200 && !r.data.error;
  out.textContent = ok ? name + ": done " + JSON.stringify(r.data) : name + " refused (" + r.status + "): " + r.data.error;
  out.className = ok ? "ok" : "bad";
  setStatus(out.textContent, !ok);
  refresh();
  return ok;
}

// ---- auth ----

async function refreshWho() {
  const r = await api("whoami");
  const who = $("#whoami");
  who.textContent = (r.data.admin ? "admin " : "viewer ") + (r.data.user || "");
  who.className = r.data.admin ? "admin" : "";
  if (r.data.refused) who.textContent += " (" + r.data.refused + ")";
  document.body.classList.toggle("is-admin", !!r.data.admin);
}

// ---- loop ----

async function refresh() {
  if (state.busy) return;
  state.busy = true;
  try {
    if (state.view === "tree") await refreshTree();
    else if (state.view === "sessions") await refreshSessions();
    else if (state.view === "watches") await refreshWatches();
    else if (state.view === "members") await refreshMembers();
    else if (state.view === "charts") renderCharts();
    document.body.dataset.refreshed = String(Date.now());
  } catch (e) {
    setStatus("cannot reach the member: " + e.message, true);
  } finally {
    state.busy = false;
  }
}

function start() {
  window.addEventListener("hashchange", route);
  for (const r of document.querySelectorAll("input[name=fmt]")) r.addEventListener("change", () => { state.fmt = r.value; renderData(); });
  $("#next-page").addEventListener("click", () => { if (state.next) { state.pages.push(state.next); refresh(); } });
  $("#first-page").addEventListener("click", () => { state.pages = [""]; refresh(); });
  $("#auth").addEventListener("submit", (e) => { e.preventDefault(); sessionStorage.setItem("zkraft-auth", $("#auth-info").value.trim()); $("#auth-info").value = ""; refreshWho(); });
  $("#auth-clear").addEventListener("click", () => { sessionStorage.removeItem("zkraft-auth"); refreshWho(); });
  $("#create-form").addEventListener("submit", (e) => {
    e.preventDefault();
    act("create", { path: childPath(state.path, $("#create-name").value), data: $("#create-data").value,
      sequential: $("#create-seq").checked, container: $("#create-container").checked });
  });
  $("#set-form").addEventListener("submit", (e) => {
    e.preventDefault();
    act("set", { path: state.path, data: $("#set-data").value, version: parseInt($("#set-version").value, 10) });
  });
  $("#delete-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const path = state.path;
    if (await act("delete", { path: path, version: parseInt($("#delete-version").value, 10) })) {
      location.hash = "#tree:" + (path.slice(0, path.lastIndexOf("/")) || "/");
    }
  });
  $("#sessions").addEventListener("click", (e) => {
    const b = e.target.closest("button.kill");
    if (b) act("kill", { session: b.dataset.session });
  });
  refreshWho();
  route();
  sample();
  setInterval(() => { sample().then(() => { if (state.view === "charts") renderCharts(); }); }, POLL_MS);
  setInterval(() => { if (state.view !== "charts") refresh(); }, POLL_MS);
}

start();
