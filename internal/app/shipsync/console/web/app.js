// shipsync console: a small single-page app over /api/v1. Every value from
// the API is put into the page as text (textContent), never as HTML.
"use strict";

const TOKEN_KEY = "shipsync-token";
const page = () => document.getElementById("page");

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// ME is who is signed in ({actor, role}).
let ME = null;
const isAdmin = () => ME && ME.role === "admin";

function bytes(n) {
  if (n === undefined || n === null) return "—";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

// etaText is an ETA in one line: P50/P90 or why it cannot be given.
function etaText(e) {
  if (!e) return "not reported";
  if (!e.predictable) return "cannot predict: " + (e.reason || "unknown");
  if (e.remaining_bytes === 0) return "nothing to send";
  return "P50 " + when(e.p50) + (e.p90 ? " · P90 " + when(e.p90) : "") + (e.low_confidence ? " (low confidence)" : "");
}

// etaInputs is the table of what an ETA was computed from.
function etaInputs(e, id) {
  if (!e) return el("p", { id }, "The node has not reported its backlog yet.");
  const rows = [["estimate", etaText(e)], ["why low confidence", e.why.join("; ") || "—"],
    ["remaining (compressed estimate)", bytes(e.remaining_bytes)], ["compression ratio", e.ratio.toFixed(3)],
    ["effective throughput", bytes(Math.round(e.effective_bps)) + "/s"], ["physical throughput", bytes(Math.round(e.physical_bps)) + "/s"],
    ["incoming", bytes(Math.round(e.incoming_bps)) + "/s"], ["net drain", bytes(Math.round(e.net_bps)) + "/s"],
    ["active transfer time", Math.round(e.active_seconds) + " s"], ["rate limit", e.rate_limit_bps ? bytes(e.rate_limit_bps) + "/s" : "none"],
    ["link availability", (100 * e.availability).toFixed(0) + " %"], ["transfer window", e.window || "always"],
    ["computed at", when(e.computed_at)]];
  return table(["ETA input", "value"], rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))), id);
}

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

class APIError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

// api calls the management API with the token; a 401 signs out.
async function api(path, opts = {}) {
  const headers = { "Authorization": "Bearer " + token() };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  if (opts.key) headers["Idempotency-Key"] = opts.key;
  const res = await fetch("/api/v1" + path, {
    method: opts.method || "GET", headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    credentials: "omit", cache: "no-store",
  });
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (res.status === 401) { signOut(); throw new APIError(401, "signed out: the token was refused"); }
  if (!res.ok) throw new APIError(res.status, (data && data.error) || ("HTTP " + res.status));
  return data;
}

// el builds an element: attrs are properties or attributes, children are
// nodes or text.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k in e && typeof v !== "string") e[k] = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(headers, rows, id) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function when(t) {
  if (!t) return "—";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toISOString().replace(".000Z", "Z");
}

function card(k, v, cls) {
  return el("div", { class: "card" }, el("div", { class: "v " + (cls || "") }, String(v)), el("div", { class: "k" }, k));
}

function show(...nodes) {
  page().replaceChildren(...nodes);
}

function showError(err) {
  show(el("p", { class: "error", id: "page-error" }, String(err.message || err)));
}

// ---- pages ----

async function nodesPage() {
  const o = await api("/overview");
  const rows = o.node_list.map((n) => el("tr", { "data-node": n.id },
    el("td", {}, el("a", { href: "#/node/" + encodeURIComponent(n.id) }, n.id)),
    el("td", { class: n.online ? "ok" : "bad" }, n.online ? "online" : "offline"),
    el("td", {}, n.state),
    el("td", {}, (n.health || "—").replace("HEALTH_STATE_", "")),
    el("td", { class: "num" }, n.config_version),
    el("td", { class: "num" }, n.ship_backlog ? n.ship_backlog.events + " / " + bytes(n.ship_backlog.raw_bytes) : "—"),
    el("td", { class: "num" }, n.ship_backlog && n.ship_backlog.disk_bytes ? bytes(n.ship_backlog.disk_bytes) : "—"),
    el("td", { class: "num" }, n.backlog),
    el("td", { class: "num" }, n.commands_issued - n.commands_acked),
    el("td", { class: "num" }, n.throughput.toFixed(2)),
    el("td", {}, etaText(n.ship_backlog && n.ship_backlog.eta)),
    el("td", {}, n.alerts.length ? el("ul", { class: "alerts" }, n.alerts.map((a) => el("li", { class: "warn" }, a))) : "—"),
  ));
  show(
    el("h2", {}, "Node overview"),
    el("div", { class: "cards" },
      card("nodes", o.nodes), card("online", o.online, o.online === o.nodes ? "ok" : "bad"),
      card("ship backlog (events)", o.ship_backlog), card("ship backlog (raw)", bytes(o.ship_backlog_bytes)),
      card("shore pending (events)", o.backlog), card("downlink outstanding (commands)", o.commands_outstanding),
      card("throughput (results/s, " + o.throughput_window + ")", o.throughput.toFixed(2)),
      card("conflicts waiting", o.pending_manual, o.pending_manual ? "warn" : "ok")),
    el("h3", {}, "Alerts"),
    o.alerts.length ? el("ul", { class: "alerts", id: "alerts" }, o.alerts.map((a) => el("li", { class: "warn" }, a)))
      : el("p", { id: "alerts" }, "none"),
    el("h3", {}, "Nodes"),
    table(["node", "link", "state", "health", "config", "ship backlog", "disk", "shore pending", "commands out", "throughput/s", "ETA", "alerts"], rows, "nodes"),
    el("p", { class: "note" }, "Ship backlog is what the node last reported it has not finished sending (events / raw bytes); " +
      "shore pending is what the shore received and has not finished (no terminal result yet). The ETA's inputs are on " +
      "each node's page."),
  );
}

async function nodePage(id) {
  const d = await api("/nodes/" + encodeURIComponent(id));
  const n = d.node;
  const kv = [["state", n.state], ["link", n.online ? "online" : "offline"], ["last heartbeat", when(n.last_heartbeat)],
    ["health", (n.health || "—").replace("HEALTH_STATE_", "")], ["config version", n.config_version], ["events received", n.received],
    ["backlog (no result yet)", n.backlog], ["applied", n.applied], ["conflict recorded", n.conflicts],
    ["rejected", n.rejected], ["throughput (results/s)", n.throughput.toFixed(2)],
    ["commands issued", n.commands_issued], ["commands acknowledged", n.commands_acked]];
  show(
    el("h2", {}, "Node ", el("code", {}, n.id)),
    table(["", ""], kv.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { class: "num" }, String(v)))), "node-detail"),
    el("h3", {}, "Alerts"), n.alerts.length ? el("ul", { class: "alerts" }, n.alerts.map((a) => el("li", {}, a))) : el("p", {}, "none"),
    el("h3", {}, "Backlog on the ship, by direction, rule, priority and state"),
    n.ship_backlog ? table(["direction", "rule", "priority", "state", "events", "raw", "estimated compressed",
      "captured (oldest – newest)", "business time (oldest – newest)", "reported"],
      n.ship_backlog.rules.map((r) => el("tr", {}, el("td", {}, r.direction || "—"), el("td", {}, r.rule),
        el("td", { class: "num" }, r.priority), el("td", {}, r.state || "—"), el("td", { class: "num" }, r.events),
        el("td", { class: "num" }, bytes(r.raw_bytes)), el("td", { class: "num" }, bytes(r.estimated_bytes)),
        el("td", {}, when(r.oldest_captured) + " – " + when(r.newest_captured)),
        el("td", {}, when(r.oldest_business) + " – " + when(r.newest_business)), el("td", {}, when(r.reported_at)))),
      "ship-backlog") : el("p", {}, "not reported"),
    n.ship_backlog ? el("p", {}, "Not yet read from its topics: " + n.ship_backlog.unread_events + " events (≈" +
      bytes(n.ship_backlog.unread_raw_bytes) + " raw). Platform state on disk: " + bytes(n.ship_backlog.disk_bytes) + ".") : "",
    el("h3", {}, "ETA and its inputs"), etaInputs(n.ship_backlog && n.ship_backlog.eta, "eta-inputs"),
    el("h3", {}, "Certificates"),
    table(["fingerprint", "state", "not before", "not after"], d.certs.map((c) => el("tr", {},
      el("td", {}, el("code", {}, c.fingerprint.slice(0, 16) + "…")), el("td", {}, c.state), el("td", {}, when(c.not_before)),
      el("td", {}, when(c.not_after))))),
    el("h3", {}, "Rules it may upload"),
    table(["rule", "version"], d.rules.map((r) => el("tr", {}, el("td", {}, r.rule), el("td", { class: "num" }, r.version)))),
    el("h3", {}, "Source streams"),
    table(["connector", "partition", "next sequence", "held", "gap since"], d.streams.map((s) => el("tr", {},
      el("td", {}, s.connector), el("td", {}, s.partition), el("td", { class: "num" }, s.next_sequence),
      el("td", { class: "num" }, s.held), el("td", {}, when(s.gap_since))))),
    el("h3", {}, "Snapshot baselines received"),
    d.snapshots.length ? table(["task", "rule", "version", "received", "applied", "conflicts", "rejected", "first", "latest"],
      d.snapshots.map((b) => el("tr", {}, el("td", {}, b.task), el("td", {}, b.rule), el("td", { class: "num" }, b.rule_version),
        el("td", { class: "num" }, b.received), el("td", { class: "num" }, b.applied), el("td", { class: "num" }, b.conflicts),
        el("td", { class: "num" }, b.rejected), el("td", {}, when(b.first)), el("td", {}, when(b.last)))), "snapshots")
      : el("p", { id: "snapshots" }, "none: the node has sent no snapshot (its tasks' own states are on the ship: relay shipsync snapshot list)"),
  );
}

async function rulesPage() {
  const [d, r] = await Promise.all([api("/rules"), api("/rule-releases")]);
  const parts = [
    el("h2", {}, "Rules"),
    table(["rule", "version", "source → target", "key", "columns", "conflict policy"], d.rules.map((x) => el("tr", {},
      el("td", {}, x.id), el("td", { class: "num" }, x.version),
      el("td", {}, x.source_table + " → " + x.target_table), el("td", {}, x.key_columns.join(", ")),
      el("td", {}, x.columns.join(", ")), el("td", {}, x.policy + (x.time_column ? " (" + x.time_column + ")" : "")))), "rules"),
    el("h3", {}, "Releases"),
    r.releases.length ? table(["rule", "version", "state", "revision", "targets", "author", "approver", "nodes", "failure"],
      r.releases.map((x) => el("tr", { "data-release": x.rule + "@" + x.version },
        el("td", {}, x.rule), el("td", { class: "num" }, x.version), el("td", {}, x.state), el("td", { class: "num" }, x.revision),
        el("td", {}, x.targets.join(", ")), el("td", {}, x.author), el("td", {}, x.approver || "—"),
        el("td", {}, x.nodes.map((n) => n.node + ": " + n.state + (n.problem ? " (" + n.problem + ")" : "")).join("; ") || "—"),
        el("td", {}, x.failure || "—"))), "releases")
      : el("p", { id: "releases" }, "No release yet: rule versions registered directly run where they are allowed. " +
        "Draft a release below (or with relay shipsync rule draft)."),
  ];
  if (isAdmin()) parts.push(releaseForms(r.releases));
  else parts.push(el("p", { class: "note" }, "Release steps and rollbacks need role admin."));
  show(...parts);
}

// NEXT is the step an admin takes a release to from its state.
const NEXT = { DRAFT: "VALIDATED", VALIDATED: "APPROVED", APPROVED: "DISTRIBUTING" };

// releaseForms are the admin's release-step and rollback forms.
function releaseForms(releases) {
  const open = releases.filter((x) => NEXT[x.state]);
  const msg = el("p", { id: "release-result" });
  const report = (p) => p.then((x) => { msg.textContent = "Done: " + x.rule + "@" + x.version + " is " + x.state + "."; msg.className = "ok"; })
    .catch((e) => { msg.textContent = "Refused: " + e.message; msg.className = "error"; });
  const key = newKey();
  const pick = el("select", { id: "release-pick" }, open.map((x, i) => el("option", { value: String(i) },
    x.rule + "@" + x.version + " " + x.state + " → " + NEXT[x.state])));
  const reason = el("input", { id: "release-reason", placeholder: "reason (required, audited)" });
  const stepForm = el("form", { class: "inline", id: "release-form" }, el("label", {}, "release", pick), el("label", {}, "reason", reason),
    el("button", { type: "submit" }, "Take the step"));
  stepForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const x = open[Number(pick.value)];
    if (!x) return;
    report(api("/rule-releases/" + encodeURIComponent(x.rule) + "/" + x.version + "/transition",
      { method: "POST", key, body: { to: NEXT[x.state], expect_revision: x.revision, reason: reason.value } }));
  });
  const rules = [...new Set(releases.map((x) => x.rule))];
  const rbKey = newKey();
  const rbRule = el("select", { id: "rollback-rule" }, rules.map((x) => el("option", { value: x }, x)));
  const rbTo = el("input", { id: "rollback-to", placeholder: "version (empty: the last good one)" });
  const rbReason = el("input", { id: "rollback-reason", placeholder: "reason (required, audited)" });
  const rbForm = el("form", { class: "inline", id: "rollback-form" }, el("label", {}, "rule", rbRule), el("label", {}, "to version", rbTo),
    el("label", {}, "reason", rbReason), el("button", { type: "submit" }, "Roll back"));
  rbForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const cur = releases.filter((x) => x.rule === rbRule.value && ["ACTIVE", "DISTRIBUTING", "ROLLBACK_TARGET"].includes(x.state))
      .sort((a, b) => b.version - a.version)[0];
    report(api("/rules/" + encodeURIComponent(rbRule.value) + "/rollback", { method: "POST", key: rbKey,
      body: { to_version: Number(rbTo.value) || 0, expect_revision: cur ? cur.revision : 0, reason: rbReason.value } }));
  });
  const dKey = newKey();
  const dRule = el("input", { id: "draft-rule", placeholder: "rule id" });
  const dVersion = el("input", { id: "draft-version", placeholder: "registered version" });
  const dTargets = el("input", { id: "draft-targets", placeholder: "node ids, comma-separated" });
  const dShip = el("textarea", { id: "draft-ship-rule", placeholder: '{"id": "…", "version": n, "direction": "BOTH", …} (the node-side rule)' });
  const dReason = el("input", { id: "draft-reason", placeholder: "reason (required, audited)" });
  const draftForm = el("form", { class: "stack", id: "draft-form" }, el("label", {}, "rule", dRule), el("label", {}, "version", dVersion),
    el("label", {}, "targets", dTargets), el("label", {}, "node-side rule (JSON)", dShip), el("label", {}, "reason", dReason),
    el("button", { type: "submit" }, "Draft the release"));
  draftForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    let ship;
    try { ship = JSON.parse(dShip.value); } catch (e) { msg.textContent = "The node-side rule is not JSON."; msg.className = "error"; return; }
    report(api("/rule-releases", { method: "POST", key: dKey, body: { rule: dRule.value, version: Number(dVersion.value) || 0,
      ship_rule: ship, targets: dTargets.value.split(",").map((x) => x.trim()).filter((x) => x), reason: dReason.value } }));
  });
  return el("div", {}, el("h3", {}, "Release a version (admin)"), open.length ? stepForm : el("p", {}, "No release waits for a step."),
    el("h3", {}, "Roll back (admin)"), rules.length ? rbForm : el("p", {}, "No released rule."),
    el("h3", {}, "Draft a release (admin)"), draftForm, msg);
}

async function conflictsPage() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  const state = q.get("state") || "";
  const d = await api("/conflicts?limit=500" + (state ? "&state=" + encodeURIComponent(state) : ""));
  const states = ["", "PENDING_MANUAL", "DETECTED", "DECIDED", "DISPATCHED", "ACKNOWLEDGED", "EXPIRED", "CANCELLED"];
  const select = el("select", { id: "conflict-state", onchange: (e) => {
    location.hash = "#/conflicts" + (e.target.value ? "?state=" + e.target.value : "");
  } }, states.map((s) => el("option", { value: s, selected: s === state }, s || "all states")));
  show(
    el("h2", {}, "Conflict centre"),
    el("form", { class: "inline" }, el("label", {}, "state", select)),
    table(["case", "state", "rule", "record", "evidence", "updated", "why"], d.conflicts.map((c) => el("tr", { "data-state": c.state },
      el("td", {}, el("a", { href: "#/conflict/" + c.id, class: "case-link" }, c.id.slice(0, 8) + "…")),
      el("td", { class: c.state === "PENDING_MANUAL" ? "warn" : "" }, c.state), el("td", {}, c.rule),
      el("td", {}, el("code", {}, "#" + c.key_ref)), el("td", { class: "num" }, c.evidence), el("td", {}, when(c.updated)),
      el("td", {}, c.reason))), "conflicts"),
  );
}

async function conflictPage(id) {
  const c = await api("/conflicts/" + encodeURIComponent(id));
  const parts = [
    el("h2", {}, "Conflict ", el("code", {}, c.id)),
    table(["", ""], [["state", c.state + (c.reason ? " — " + c.reason : "")], ["rule", c.rule + (c.policy ? " (" + c.policy + ")" : "")],
      ["record", c.key || "#" + c.key_ref], ["created", when(c.created)], ["updated", when(c.updated)],
      ["manual deadline (SLA)", when(c.manual_due)], ["case version", c.version]]
      .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { id: "case-" + k.split(" ")[0] }, v)))),
  ];
  if (c.diff) {
    parts.push(el("h3", {}, "Evidence: ship vs shore"),
      el("p", {}, "node ", el("code", {}, c.node.node), " revision ", el("code", {}, c.node.revision || "none"),
        c.node.exists ? "" : " (deleted)", " · shore revision now ", el("code", {}, c.shore.revision || "none"),
        c.shore.exists ? "" : " (no row)", " · evidence recorded against ", el("code", {}, c.evidence_shore_revision || "none")),
      c.shore_moved ? el("p", { class: "warn" }, "The shore's row changed since the evidence: a decision would be refused " +
        "until newer evidence arrives.") : "",
      c.values_visible ? "" : el("p", { class: "note" }, "Values are masked: your role may not see row values."),
      table(["column", "ship (node " + c.node.node + ")", "shore"], c.diff.map((x) => el("tr", { class: x.changed ? "changed" : "" },
        el("td", { class: "col" }, x.column), el("td", {}, x.in_node ? x.node : "—"), el("td", {}, x.in_shore ? x.shore : "—"))),
      "diff"));
  } else if (c.versions_error) {
    parts.push(el("p", { class: "error" }, "The two versions could not be read: " + c.versions_error));
  }
  parts.push(el("h3", {}, "Evidence"),
    table(["at", "found in", "from", "operation", "base → result", "met revision"], c.evidence.map((e) => el("tr", {},
      el("td", {}, when(e.at)), el("td", {}, e.found_in), el("td", {}, e.origin), el("td", {}, e.operation),
      el("td", {}, el("code", {}, (e.base || "none") + " → " + e.result)),
      el("td", {}, el("code", {}, (e.current_revision || "none") + (e.current_tombstone ? " (deleted)" : "") +
        (e.current_origin ? " of " + e.current_origin : "")))))));
  if (c.decision) {
    const d = c.decision;
    parts.push(el("h3", {}, "Decision"), el("p", { id: "decision" }, d.choice + " (" + d.policy + ") by " + d.decided_by + " at " +
      when(d.at) + ": " + d.reason));
  }
  if (c.state === "PENDING_MANUAL") parts.push(decisionForm(c));
  show(...parts);
}

// decisionForm is the manual-decision form; its Idempotency-Key is made
// once per form, so a double submit is one decision.
function decisionForm(c) {
  const key = newKey();
  const msg = el("p", { id: "decide-result" });
  const choice = el("select", { id: "decide-choice", name: "choice" },
    [["SHORE", "keep the shore's version"], ["NODE", "take the ship's version"], ["VALUE", "enter the complete row"],
      ["DELETE", "delete the record"]].map(([v, t]) => el("option", { value: v }, v + " — " + t)));
  const value = el("textarea", { id: "decide-value", placeholder: '{"column": "value", …} (VALUE only)' });
  const reason = el("textarea", { id: "decide-reason", required: true, placeholder: "why (required, audited)" });
  const form = el("form", { class: "stack", id: "decide-form" },
    el("h3", {}, "Manual decision"),
    el("label", {}, "Choice", choice), el("label", {}, "Value (VALUE)", value), el("label", {}, "Reason", reason),
    el("button", { type: "submit", id: "decide-submit" }, "Decide"), msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { choice: choice.value, reason: reason.value, seen_version: c.version };
    if (c.shore) body.seen_shore_revision = c.shore.exists ? c.shore.revision : "";
    if (choice.value === "VALUE") {
      try { body.value = JSON.parse(value.value); } catch (e) { msg.textContent = "The value is not JSON."; msg.className = "error"; return; }
    }
    try {
      const r = await api("/conflicts/" + encodeURIComponent(c.id) + "/decision", { method: "POST", body, key });
      msg.textContent = "Decided: " + r.choice + " (revision " + r.revision + "). The arbiter writes and sends it.";
      msg.className = "ok";
    } catch (e) {
      msg.textContent = (e.status === 409 ? "Refused (refresh the case): " : "Refused: ") + e.message;
      msg.className = "error";
    }
  });
  return form;
}

async function backlogPage() {
  const d = await api("/backlogs");
  const rows = [];
  for (const n of d.nodes) {
    const b = n.backlog;
    if (!b || !b.rules.length) {
      rows.push(el("tr", {}, el("td", {}, n.node), el("td", {}, "—"), el("td", {}, "nothing reported"), el("td", {}), el("td", {}),
        el("td", {}, etaText(b && b.eta))));
      continue;
    }
    for (const r of b.rules) rows.push(el("tr", {}, el("td", {}, n.node), el("td", {}, r.rule), el("td", { class: "num" }, r.events),
      el("td", { class: "num" }, bytes(r.raw_bytes) + " (≈" + bytes(r.estimated_bytes) + ")"), el("td", {}, when(r.oldest_captured)),
      el("td", {}, etaText(b.eta))));
  }
  const parts = [
    el("h2", {}, "Backlog disposal"),
    el("p", {}, "What each node reports it has not delivered yet, by rule. Data of a one-way rule that is no longer worth " +
      "sending may be expired by an admin: its events captured before a fixed boundary end EXPIRED_APPROVED (not applied) " +
      "on the node, and the approval is immutable and audited."),
    table(["node", "rule", "events", "raw (compressed estimate)", "oldest captured", "node ETA"], rows, "backlogs"),
    el("h3", {}, "Expiry approvals"),
    table(["approved", "node", "rule", "captured before", "estimate", "business owner", "by", "reason", "node reported"],
      d.approvals.map((a) => el("tr", {}, el("td", {}, when(a.created)), el("td", {}, a.node), el("td", {}, a.rule + "@" + a.rule_version),
        el("td", {}, when(a.captured_before)), el("td", {}, a.events_estimate + " events / " + bytes(a.bytes_estimate)),
        el("td", {}, a.business_owner), el("td", {}, a.actor), el("td", {}, a.reason),
        el("td", {}, a.reported ? when(a.reported) + ": " + a.expired_events + " events, " + bytes(a.expired_bytes) : "not yet"))),
      "approvals"),
  ];
  if (isAdmin()) parts.push(expiryForm());
  else parts.push(el("p", { class: "note", id: "backlog-admin-note" }, "Expiry approvals need role admin."));
  show(...parts);
}

// expiryForm is the admin's expiry approval form.
function expiryForm() {
  const key = newKey();
  const f = Object.fromEntries(["node", "rule", "captured_before", "events_estimate", "bytes_estimate", "business_owner", "reason"]
    .map((k) => [k, el("input", { id: "expiry-" + k, placeholder: k === "captured_before" ? "2026-12-01T00:00:00Z" : "" })]));
  const msg = el("p", { id: "expiry-result" });
  const form = el("form", { class: "stack", id: "expiry-form" }, el("h3", {}, "Approve an expiry (admin)"),
    Object.entries(f).map(([k, i]) => el("label", {}, k.replace("_", " "), i)), el("button", { type: "submit" }, "Approve"), msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const a = await api("/expiry-approvals", { method: "POST", key, body: { node: f.node.value, rule: f.rule.value,
        captured_before: f.captured_before.value, events_estimate: Number(f.events_estimate.value) || 0,
        bytes_estimate: Number(f.bytes_estimate.value) || 0, business_owner: f.business_owner.value, reason: f.reason.value } });
      msg.textContent = "Approved (" + a.id + "); offered to " + a.node + " with its next config."; msg.className = "ok";
    } catch (e) { msg.textContent = "Refused: " + e.message; msg.className = "error"; }
  });
  return form;
}

async function auditPage() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  const fields = ["actor", "action", "object_type", "object_id", "from", "to"];
  const inputs = Object.fromEntries(fields.map((f) => [f, el("input", { id: "audit-" + f, name: f, value: q.get(f) || "",
    placeholder: f === "from" || f === "to" ? "2026-12-03T06:00:00Z" : "" })]));
  const form = el("form", { class: "inline", id: "audit-form" }, fields.map((f) => el("label", {}, f.replace("_", " "), inputs[f])),
    el("button", { type: "submit", id: "audit-search" }, "Search"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const f of fields) if (inputs[f].value) p.set(f, inputs[f].value);
    location.hash = "#/audit?" + p.toString();
  });
  const p = new URLSearchParams();
  for (const f of fields.concat(["before"])) if (q.get(f)) p.set(f, q.get(f));
  p.set("limit", "50");
  const d = await api("/audit-events?" + p.toString());
  const more = d.next_before ? (() => { const n = new URLSearchParams(p); n.set("before", d.next_before); n.delete("limit");
    return el("a", { href: "#/audit?" + n.toString(), id: "audit-next" }, "older entries →"); })() : "";
  show(el("h2", {}, "Audit search"), form,
    table(["at", "actor", "action", "object", "before", "after", "reason", "trace"], d.events.map((e) => el("tr", { "data-action": e.action },
      el("td", {}, when(e.at)), el("td", {}, e.actor), el("td", {}, e.action),
      el("td", {}, e.object_type + " " + e.object_id), el("td", {}, e.before), el("td", {}, e.after), el("td", {}, e.reason),
      el("td", {}, el("code", {}, e.trace_id)))), "audit"),
    more);
}

// ---- routing ----

const routes = [
  [/^#\/nodes/, () => nodesPage(), "nodes"],
  [/^#\/node\/([^?]+)/, (m) => nodePage(decodeURIComponent(m[1])), "nodes"],
  [/^#\/rules/, () => rulesPage(), "rules"],
  [/^#\/conflicts/, () => conflictsPage(), "conflicts"],
  [/^#\/conflict\/([0-9a-f-]+)/, (m) => conflictPage(m[1]), "conflicts"],
  [/^#\/backlog/, () => backlogPage(), "backlog"],
  [/^#\/audit/, () => auditPage(), "audit"],
];

async function route() {
  if (!token()) { signOut(); return; }
  const h = location.hash || "#/nodes";
  for (const [re, f, nav] of routes) {
    const m = h.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.id === "nav-" + nav);
    document.body.dataset.page = "loading";
    try { await f(m); } catch (e) { showError(e); }
    document.body.dataset.page = nav;
    return;
  }
  location.hash = "#/nodes";
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("nav").hidden = true;
  document.getElementById("who").replaceChildren();
  document.getElementById("login").hidden = false;
  page().replaceChildren();
  document.body.dataset.page = "login";
}

async function signedIn() {
  const me = await api("/me");
  ME = me;
  document.getElementById("login").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("who").replaceChildren(el("span", { id: "whoami" }, me.actor + " (" + me.role + ")"),
    el("button", { type: "button", onclick: signOut }, "Sign out"));
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    document.getElementById("token").value = "";
    try {
      await signedIn();
      document.getElementById("login-error").textContent = "";
      await route();
    } catch (e) {
      signOut();
      document.getElementById("login-error").textContent = "Sign-in failed: " + e.message;
    }
  });
  window.addEventListener("hashchange", route);
  if (!token()) { signOut(); return; }
  try { await signedIn(); await route(); } catch (e) { signOut(); }
});
