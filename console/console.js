// Switchboard team console. No framework, no build step: plain DOM calls.
//
// Rules this file keeps:
// * Every string that came from the server (and so from an agent) is put in the page as
//   text (`textContent`, text nodes), never parsed as HTML (no HTML-string sinks).
// * The credential lives in this tab's sessionStorage only, and is sent as a bearer
//   token to this origin's API: the same REST API every agent and operator uses.
// * Memory is bounded: the timeline keeps at most MAX_ENTRIES messages (the oldest go),
//   a paused timeline holds at most MAX_ENTRIES waiting ones.
"use strict";

const MAX_ENTRIES = 2000;
const TRAFFIC_POLL_MS = 250;
const BOARD_POLL_MS = 1000;
const TEAM_POLL_MS = 2000;
const HEALTH_POLL_MS = 3000;
const APPROVALS_POLL_MS = 1000;
const STATUSES = ["open", "in-progress", "input-required", "success", "failed", "canceled"];

const S = {
  cred: null, // the signed-in credential
  who: null, // whoami: {kind, team_id, agent_id}
  actor: null, // {token, agent_id}: who steps in
  after: null, // traffic cursor (team key)
  seen: new Set(), // message ids shown (agent token mode), bounded
  entries: [], // [{message, recipients}] oldest first, at most MAX_ENTRIES
  paused: false,
  pending: [],
  dropped: 0,
  tasks: new Map(), // key → task
  openTask: null,
  openMessage: null,
  health: { sent: null, at: 0 },
  stopped: false,
  generation: 0,
};

// ---- small helpers ------------------------------------------------------------------

const $ = (sel) => document.querySelector(sel);

/** An element with attributes and children; strings become text nodes. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("data-")) el.setAttribute(k, String(v));
    else if (k === "title") el.title = String(v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function text(el, value) {
  el.textContent = value === null || value === undefined ? "" : String(value);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function short(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleTimeString();
}

async function api(method, path, body, token) {
  const headers = { Authorization: "Bearer " + (token || S.cred) };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    return { ok: false, status: 0, body: { error_message: "the server did not answer: " + e } };
  }
  let parsed = null;
  try {
    parsed = await res.json();
  } catch (_) {
    parsed = {};
  }
  return { ok: res.ok, status: res.status, body: parsed };
}

const enc = encodeURIComponent;
const teamPath = () => "/v1/teams/" + enc(S.who.team_id);
const isKey = () => S.who && S.who.kind === "team";

function status(msg) {
  text($("#status-line"), msg);
}

// ---- sign in ------------------------------------------------------------------------

async function signIn(cred) {
  const res = await api("GET", "/v1/whoami", undefined, cred);
  if (!res.ok) {
    const why = res.body && res.body.error_message ? res.body.error_message : "status " + res.status;
    return "Sign-in failed: " + why;
  }
  if (res.body.kind === "admin") {
    return "Sign-in failed: this is the admin token; sign in with a team key or an agent token.";
  }
  S.cred = cred;
  S.who = res.body;
  sessionStorage.setItem("sb_console_credential", cred);
  if (res.body.kind === "agent") {
    S.actor = { token: cred, agent_id: res.body.agent_id };
  } else {
    const saved = sessionStorage.getItem("sb_console_actor");
    if (saved) {
      try {
        S.actor = JSON.parse(saved);
      } catch (_) {
        S.actor = null;
      }
    }
  }
  start();
  return null;
}

function signOut() {
  sessionStorage.removeItem("sb_console_credential");
  sessionStorage.removeItem("sb_console_actor");
  location.reload();
}

function start() {
  $("#signin").hidden = true;
  $("#app").hidden = false;
  $("#session").hidden = false;
  const who = isKey()
    ? "team " + S.who.team_id + " (team key)"
    : "agent " + S.who.agent_id + " of team " + S.who.team_id;
  text($("#who"), who);
  showActor();
  const gen = ++S.generation;
  loop(gen, pollTeam, TEAM_POLL_MS);
  loop(gen, pollTraffic, TRAFFIC_POLL_MS);
  loop(gen, pollBoard, BOARD_POLL_MS);
  loop(gen, pollHealth, HEALTH_POLL_MS);
  loop(gen, pollApprovals, APPROVALS_POLL_MS);
}

/** Runs `step` again and again, `ms` apart (at once while it says more is waiting). */
async function loop(gen, step, ms) {
  while (gen === S.generation) {
    let more = false;
    try {
      more = await step();
    } catch (e) {
      status("error: " + e);
    }
    if (!more) await sleep(ms);
  }
}

// ---- team ---------------------------------------------------------------------------

const visible = (view) => !$("#view-" + view).hidden;

async function pollTeam() {
  // A 1,000-agent team is a large answer: read it while someone looks at it.
  if (!visible("team") && $("#agents tbody").children.length) return false;
  const [agents, activity, metrics, leases] = await Promise.all([
    api("GET", teamPath() + "/agents"),
    api("GET", teamPath() + "/activity"),
    api("GET", teamPath() + "/metrics"),
    api("GET", teamPath() + "/leases"),
  ]);
  if (leases.ok) showLeases(leases.body.leases || []);
  if (!agents.ok) {
    status("agents: " + (agents.body.error_message || agents.status));
    return false;
  }
  const act = new Map();
  if (activity.ok) for (const a of activity.body.agents || []) act.set(a.agent_id, a);
  const met = new Map();
  if (metrics.ok) for (const a of metrics.body.agents || []) met.set(a.agent_id, a);
  const tbody = $("#agents tbody");
  const rows = new Map([...tbody.children].map((tr) => [tr.dataset.agent, tr]));
  let online = 0;
  for (const a of agents.body.agents) {
    let tr = rows.get(a.agent_id);
    if (!tr) {
      tr = h("tr", { "data-agent": a.agent_id });
      for (const c of ["agent-id", "role", "caps", "status", "conn", "stomp", "deaf", "unread", "open", "seen"]) {
        tr.append(h("td", { class: c }));
      }
      tbody.append(tr);
    }
    rows.delete(a.agent_id);
    const conn = [];
    if (a.connected) conn.push("WebSocket");
    if ((a.stomp_queues || []).length) conn.push("STOMP");
    if (a.mcp_sessions) conn.push("MCP ×" + a.mcp_sessions);
    if (a.a2a_streams) conn.push("A2A streams ×" + a.a2a_streams);
    if (conn.length) online++;
    const m = met.get(a.agent_id);
    const ac = act.get(a.agent_id);
    const cells = {
      "agent-id": a.agent_id,
      role: a.role,
      caps: (a.capabilities || []).join(", "),
      status: a.status + (a.communication_enabled ? "" : " (switched off)"),
      conn: conn.length ? "online: " + conn.join(", ") : "offline",
      stomp: (a.stomp_queues || []).join(", "),
      deaf: a.deaf ? "deaf" : "",
      unread: m ? m.unread : ac ? ac.unread_news : "",
      open: ac ? ac.open_tasks : "",
      seen: short(a.last_seen_at),
    };
    for (const [c, v] of Object.entries(cells)) {
      const td = tr.querySelector("td." + c);
      if (td.textContent !== String(v)) text(td, v);
    }
    tr.classList.toggle("online", conn.length > 0);
  }
  for (const tr of rows.values()) tr.remove();
  text(
    $("#team-summary"),
    agents.body.agents.length + " agents, " + online + " online" +
      (activity.ok ? ", " + activity.body.open_tasks + " open tasks, " + (activity.body.idle ? "idle" : "busy") : "")
  );
  return false;
}

// The team's live leases (docs/leases.md), oldest first, as the list answers them.
function showLeases(leases) {
  const tbody = $("#leases tbody");
  const rows = new Map([...tbody.children].map((tr) => [tr.dataset.lease, tr]));
  for (const l of leases) {
    let tr = rows.get(l.lease_id);
    if (!tr) {
      tr = h("tr", { "data-lease": l.lease_id });
      for (const c of ["resource", "holder", "kind", "reason", "ends"]) tr.append(h("td", { class: c }));
      tbody.append(tr);
    }
    rows.delete(l.lease_id);
    const cells = {
      resource: l.resource,
      holder: l.holder,
      kind: l.exclusive ? "exclusive" : "shared",
      reason: l.reason || "",
      ends: short(l.expires_at),
    };
    for (const [c, v] of Object.entries(cells)) {
      const td = tr.querySelector("td." + c);
      if (td.textContent !== String(v)) text(td, v);
    }
  }
  for (const tr of rows.values()) tr.remove();
  const n = leases.length;
  text($("#leases-summary"), n ? n + (n === 1 ? " live lease" : " live leases") : "no live leases");
}

// ---- traffic ------------------------------------------------------------------------

async function pollTraffic() {
  if (isKey()) {
    const q = S.after === null ? "?limit=100" : "?limit=100&after=" + S.after;
    const res = await api("GET", teamPath() + "/messages" + q);
    if (!res.ok) {
      status("traffic: " + (res.body.error_message || res.status));
      return false;
    }
    S.after = res.body.next_after;
    arrive(res.body.entries.map((e) => ({ message: e.message, recipients: e.recipient_agent_ids })));
    return res.body.more;
  }
  // An agent token sees its inbox: the newest page, merged by id.
  const res = await api("GET", "/v1/messages?limit=100&sort_order=newest_first");
  if (!res.ok) {
    status("inbox: " + (res.body.error_message || res.status));
    return false;
  }
  const fresh = res.body.messages.filter((m) => !S.seen.has(m.message_id)).reverse();
  for (const m of fresh) S.seen.add(m.message_id);
  if (S.seen.size > 4 * MAX_ENTRIES) S.seen = new Set([...S.seen].slice(-2 * MAX_ENTRIES));
  arrive(fresh.map((m) => ({ message: m, recipients: [S.who.agent_id] })));
  return false;
}

function arrive(entries) {
  if (!entries.length) return;
  if (S.paused) {
    S.pending.push(...entries);
    if (S.pending.length > MAX_ENTRIES) {
      S.dropped += S.pending.length - MAX_ENTRIES;
      S.pending.splice(0, S.pending.length - MAX_ENTRIES);
    }
    text($("#paused-count"), S.pending.length + " waiting" + (S.dropped ? " (" + S.dropped + " older not kept)" : ""));
    return;
  }
  render(entries);
}

function render(entries) {
  const list = $("#timeline");
  const frag = document.createDocumentFragment();
  for (const e of entries) {
    S.entries.push(e);
    frag.prepend(row(e));
  }
  list.prepend(frag);
  const extra = S.entries.length - MAX_ENTRIES;
  if (extra > 0) {
    S.entries.splice(0, extra);
    for (let i = 0; i < extra && list.lastChild; i++) list.lastChild.remove();
  }
  if (S.openMessage) refreshThread();
}

function tags(m) {
  const d = (m.content && m.content.data) || {};
  return [m.cause_by, d.update_type, d.type].filter(Boolean);
}

function row(e) {
  const m = e.message;
  const li = h(
    "li",
    { class: "entry kind-" + m.kind, "data-message-id": m.message_id },
    h("time", {}, short(m.timestamp)),
    h("span", { class: "sender" }, m.sender_agent_id),
    h("span", { class: "arrow" }, "→"),
    h("span", { class: "recipients" }, (e.recipients || []).join(", ")),
    h("span", { class: "kind" }, m.kind + (m.message_type ? " · " + m.message_type : "")),
    m.thread_id ? h("span", { class: "thread" }, "#" + m.thread_id) : null,
    h("span", { class: "text" }, (m.content && m.content.text) || "")
  );
  li.entry = e;
  li.hidden = !matches(e);
  li.addEventListener("click", () => openMessage(m.message_id, e));
  return li;
}

function matches(e) {
  const m = e.message;
  const agent = $("#f-agent").value.trim();
  const kind = $("#f-kind").value;
  const thread = $("#f-thread").value.trim();
  const tag = $("#f-tag").value.trim();
  if (agent && m.sender_agent_id !== agent && !(e.recipients || []).includes(agent)) return false;
  if (kind && m.kind !== kind) return false;
  if (thread && m.thread_id !== thread) return false;
  if (tag && !tags(m).includes(tag)) return false;
  return true;
}

function refilter() {
  for (const li of $("#timeline").children) li.hidden = !matches(li.entry);
}

function togglePause() {
  S.paused = !S.paused;
  text($("#pause"), S.paused ? "Resume" : "Pause");
  if (!S.paused) {
    const waiting = S.pending;
    S.pending = [];
    S.dropped = 0;
    text($("#paused-count"), "");
    render(waiting);
  }
}

async function openMessage(id, entry) {
  const res = await api("GET", "/v1/messages/" + enc(id));
  const body = $("#detail-body");
  body.replaceChildren();
  $("#detail").hidden = false;
  if (!res.ok) {
    body.append(h("p", { class: "error" }, res.body.error_message || "status " + res.status));
    S.openMessage = null;
    return;
  }
  const d = res.body;
  const m = d.message;
  S.openMessage = m;
  const rows = [
    ["id", m.message_id],
    ["kind", m.kind + " · " + m.message_type + " · " + m.priority],
    ["from", m.sender_agent_id + " (" + m.sender_role + ")"],
    ["to", (d.recipient_agent_ids || []).join(", ")],
    ["read by", d.read_by ? d.read_by.join(", ") || "nobody yet" : "(shown to its sender and the team key)"],
    ["sent", m.timestamp],
    ["thread", m.thread_id || ""],
    ["in reply to", m.in_reply_to || ""],
    ["route", m.route ? JSON.stringify(m.route) : "any transport"],
  ];
  const dl = h("dl", {});
  for (const [k, v] of rows) dl.append(h("dt", {}, k), h("dd", {}, v));
  body.append(dl, h("pre", { class: "content" }, (m.content && m.content.text) || ""));
  if (m.content && m.content.data && Object.keys(m.content.data).length) {
    body.append(h("pre", { class: "data" }, JSON.stringify(m.content.data, null, 2)));
  }
  const responses = d.responses || [];
  body.append(h("h4", {}, "Responses (" + responses.length + ")"));
  const ol = h("ol", {});
  for (const r of responses) {
    ol.append(h("li", {}, r.responder_agent_id + ": " + r.status + " at " + short(r.timestamp) + " (" + r.response_message_id + ")"));
  }
  body.append(ol);
  $("#thread-title").hidden = true;
  $("#thread").replaceChildren();
  if (entry === undefined) {
    // Jumped to: mark it in the timeline if it is there.
    for (const li of $("#timeline").children) li.classList.toggle("selected", li.dataset.messageId === id);
  }
}

function threadOf(m) {
  return m.thread_id || (m.in_reply_to ? "reply:" + m.in_reply_to : "reply:" + m.message_id);
}

function refreshThread() {
  if ($("#thread-title").hidden || !S.openMessage) return;
  const m = S.openMessage;
  const key = threadOf(m);
  const ol = $("#thread");
  const inThread = S.entries.filter((e) => {
    const x = e.message;
    if (m.thread_id) return x.thread_id === m.thread_id;
    return x.message_id === m.message_id || x.in_reply_to === m.message_id || x.message_id === m.in_reply_to || threadOf(x) === key;
  });
  ol.replaceChildren(
    ...inThread.map((e) =>
      h("li", { "data-message-id": e.message.message_id },
        h("span", { class: "sender" }, e.message.sender_agent_id + ": "),
        h("span", { class: "text" }, (e.message.content && e.message.content.text) || ""))
    )
  );
}

function openThread() {
  if (!S.openMessage) return;
  $("#thread-title").hidden = false;
  text($("#thread-title"), "Thread " + (S.openMessage.thread_id || "of replies"));
  refreshThread();
}

// ---- tasks --------------------------------------------------------------------------

const taskKey = (t) => t.task_id + "@" + t.originating_agent_id;

async function pollBoard() {
  const path = isKey() ? teamPath() + "/tasks?limit=100" : "/v1/tasks?limit=100";
  const res = await api("GET", path);
  if (!res.ok) {
    status("tasks: " + (res.body.error_message || res.status));
    return false;
  }
  for (const t of res.body.tasks) {
    const key = taskKey(t);
    const old = S.tasks.get(key);
    S.tasks.set(key, t);
    let card = document.querySelector('.card[data-task="' + CSS.escape(key) + '"]');
    if (!card) {
      card = h("div", { class: "card", "data-task": key });
      card.addEventListener("click", () => openTask(key));
    }
    const parts = [
      h("strong", {}, t.task_id),
      h("span", { class: "who" }, t.originating_agent_id + " → " + (t.assignee_agent_id || (t.assignee_role ? "any " + t.assignee_role : "nobody"))),
      h("span", { class: "desc" }, t.description),
    ];
    if (t.assignee_role) parts.push(h("span", { class: "role" }, claimText(t)));
    if (t.open_clarification) parts.push(h("span", { class: "question" }, "? " + t.open_clarification.question));
    card.replaceChildren(...parts);
    const column = document.querySelector('.column[data-status="' + t.status + '"] .cards');
    if (column && card.parentElement !== column) column.prepend(card);
    if (S.openTask === key && (!old || old.updated_at !== t.updated_at)) openTask(key);
  }
  showRoles();
  return false;
}

// A task offered to a role, on its card: the role, and its claims so far.
function claimText(t) {
  const tries = t.attempts ? " · attempt " + t.attempts : "";
  const back = t.status === "open" && t.attempts ? " · came back (a claim ended)" : "";
  return "role " + t.assignee_role + tries + back;
}

// Per role: open, claimed, and open again after a claim ended (docs/tasks.md).
function showRoles() {
  const roles = new Map();
  for (const t of S.tasks.values()) {
    if (!t.assignee_role) continue;
    const r = roles.get(t.assignee_role) || { open: 0, claimed: 0, back: 0 };
    if (t.status === "open") r.open++;
    if (t.status === "open" && t.attempts) r.back++;
    if (t.status === "in-progress" || t.status === "input-required") r.claimed++;
    roles.set(t.assignee_role, r);
  }
  const parts = [...roles].map(([role, r]) => `${role}: ${r.open} open, ${r.claimed} claimed, ${r.back} came back`);
  text($("#board-roles"), parts.length ? "Offered to roles — " + parts.join(" · ") : "");
}

async function openTask(key) {
  S.openTask = key;
  const res = await api("GET", "/v1/tasks/" + enc(key));
  $("#task-detail").hidden = false;
  const body = $("#task-body");
  body.replaceChildren();
  if (!res.ok) {
    body.append(h("p", { class: "error" }, res.body.error_message || "status " + res.status));
    return;
  }
  const t = res.body.task;
  text($("#task-title"), "Task " + t.task_id + " (" + t.status + ")");
  const dl = h("dl", {});
  for (const [k, v] of [
    ["description", t.description],
    ["originator", t.originating_agent_id],
    ["assignee", t.assignee_agent_id || ""],
    ["priority", t.priority],
    ["capabilities", (t.required_capabilities || []).join(", ")],
    ["callback", t.callback_url || ""],
    ["result", t.result_data === null ? "" : JSON.stringify(t.result_data)],
    ["updated", t.updated_at],
  ]) dl.append(h("dt", {}, k), h("dd", {}, v));
  body.append(dl);
  const q = t.open_clarification;
  $("#answer-box").hidden = !q;
  if (q) {
    text($("#answer-question"), q.question);
    $("#answer-box").dataset.clarification = q.clarification_id;
  }
  $("#task-history").replaceChildren(
    ...res.body.events.map((e) =>
      h("li", {}, short(e.timestamp) + " " + e.kind + " by " + (e.agent_id || "the server") + " → " + e.status +
        (Object.keys(e.data || {}).length ? " " + JSON.stringify(e.data) : ""))
    )
  );
  $("#task-callbacks").replaceChildren(
    ...(res.body.callbacks || []).map((c) =>
      h("li", {}, "delivery " + c.delivery_id + ": " + c.state + ", " + c.attempts + " attempts" +
        (c.last_status ? ", last status " + c.last_status : "") + (c.last_error ? ", " + c.last_error : ""))
    )
  );
}

async function taskAction(what) {
  const out = $("#task-action-result");
  if (!S.actor) return text(out, "Step in first: choose the agent you act as (Step in).");
  const key = S.openTask;
  if (!key) return;
  const base = "/v1/tasks/" + enc(key);
  let res;
  if (what === "answer") {
    const cid = $("#answer-box").dataset.clarification;
    res = await api("POST", base + "/clarifications/" + enc(cid) + "/answer", { answer: $("#answer-text").value }, S.actor.token);
  } else if (what === "cancel") {
    res = await api("POST", base + "/cancel", { reason: "canceled from the console by " + S.actor.agent_id }, S.actor.token);
  } else {
    res = await api("POST", base + "/handoff", { new_agent_id: $("#reassign-to").value.trim(), reason: "reassigned from the console" }, S.actor.token);
  }
  text(out, res.ok ? what + ": done, as " + S.actor.agent_id : what + " refused: " + (res.body.error_code || res.status) + " — " + (res.body.error_message || ""));
  if (res.ok) {
    if (what === "answer") $("#answer-text").value = "";
    openTask(key);
  }
}

// ---- step in ------------------------------------------------------------------------

function showActor() {
  text($("#actor-name"), S.actor ? S.actor.agent_id : "nobody yet");
  $("#register-operator").hidden = !isKey();
}

function keepActor(actor) {
  S.actor = actor;
  if (isKey()) sessionStorage.setItem("sb_console_actor", JSON.stringify(actor));
  showActor();
}

async function registerOperator() {
  const res = await api("POST", teamPath() + "/agents", {
    agent_id: "operator",
    role: "Operator (a person, through the console)",
    capabilities: [],
  });
  const out = $("#stepin-result");
  if (!res.ok) return text(out, "Registering refused: " + (res.body.error_code || res.status) + " — " + (res.body.error_message || ""));
  keepActor({ token: res.body.token, agent_id: res.body.agent.agent_id });
  text(out, "Registered \"operator\"; this tab acts as it. Its token is kept in this tab only.");
}

async function useActorToken() {
  const token = $("#actor-token").value.trim();
  const res = await api("GET", "/v1/whoami", undefined, token);
  const out = $("#stepin-result");
  if (!res.ok || res.body.kind !== "agent" || res.body.team_id !== S.who.team_id) {
    return text(out, "That is not an agent token of team " + S.who.team_id + ".");
  }
  $("#actor-token").value = "";
  keepActor({ token, agent_id: res.body.agent_id });
  text(out, "Acting as " + res.body.agent_id + ".");
}

async function sendMessage() {
  const out = $("#stepin-result");
  if (!S.actor) return text(out, "Choose the agent you act as first.");
  const to = $("#send-to").value.split(",").map((s) => s.trim()).filter(Boolean);
  const body = {
    sender_agent_id: S.actor.agent_id,
    recipient_agent_ids: to,
    message_type: $("#send-type").value,
    content: { text: $("#send-text").value },
  };
  const thread = $("#send-thread").value.trim();
  if (thread) body.thread_id = thread;
  const res = await api("POST", "/v1/messages", body, S.actor.token);
  text(out, res.ok ? "Sent " + res.body.message_id + " as " + S.actor.agent_id : "Refused: " + (res.body.error_code || res.status) + " — " + (res.body.error_message || ""));
  if (res.ok) $("#send-text").value = "";
}

async function broadcast() {
  const out = $("#stepin-result");
  if (!S.actor) return text(out, "Choose the agent you act as first.");
  const res = await api("POST", "/v1/broadcasts", {
    sender_agent_id: S.actor.agent_id,
    update_type: "progress",
    urgency: $("#bc-urgency").value,
    content: { summary: $("#bc-summary").value, details: "", impact: "", action_required: false },
  }, S.actor.token);
  text(out, res.ok ? "Broadcast " + res.body.broadcast_id : "Refused: " + (res.body.error_code || res.status) + " — " + (res.body.error_message || ""));
}

// ---- health -------------------------------------------------------------------------

// Each metric's sum over its labels, and each labelled series as `name{labels}`.
function parseMetrics(textBody) {
  const sums = {};
  for (const line of textBody.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3]);
    if (isNaN(v)) continue;
    sums[m[1]] = (sums[m[1]] || 0) + v;
    if (m[2]) sums[m[1] + m[2]] = v;
  }
  return sums;
}

// The team's loop guard in a line (docs/loop-guard.md).
function guardText(g) {
  const hops = g.max_hops ? `at most ${g.max_hops} hops` : "no hop limit";
  const cycle = g.cycle_messages
    ? `cycles stopped after ${g.cycle_messages} sends within ${g.cycle_window_seconds} s`
    : "no cycle rule";
  const boss = g.supervisor_agent_id ? `supervisor ${g.supervisor_agent_id}` : "no supervisor";
  return `${hops} · ${cycle} · ${boss}`;
}

// The budgets in force in a line (docs/loop-guard.md, "Budgets").
function budgetsText(b) {
  const set = Object.entries(b || {}).filter(([, v]) => v !== null && v !== undefined);
  return set.length ? set.map(([k, v]) => `${k.replaceAll("_", " ")}: ${v}`).join(" · ") : "none";
}

async function pollHealth() {
  if (!visible("health")) return false;
  const [metrics, server, team] = await Promise.all([
    api("GET", teamPath() + "/metrics"),
    fetch("/metrics", { cache: "no-store" }).then((r) => (r.ok ? r.text() : "")).catch(() => ""),
    api("GET", teamPath()),
  ]);
  const rows = [];
  if (team.ok && team.body.loop_guard) rows.push(["loop guard", guardText(team.body.loop_guard)]);
  if (team.ok) rows.push(["budgets in force", budgetsText(team.body.budgets_in_force)]);
  if (metrics.ok) {
    const agents = metrics.body.agents || [];
    const sent = agents.reduce((n, a) => n + a.sent, 0);
    const unread = agents.reduce((n, a) => n + a.unread, 0);
    const now = Date.now();
    let rate = "";
    if (S.health.sent !== null && now > S.health.at) {
      rate = ((sent - S.health.sent) / ((now - S.health.at) / 1000)).toFixed(1) + " messages/s";
    }
    S.health = { sent, at: now };
    rows.push(["team messages sent", sent], ["team rate", rate || "measuring…"], ["unread backlog", unread]);
  }
  let failed = 0;
  for (const t of S.tasks.values()) if (t.callback_delivery && t.callback_delivery.state === "failed") failed++;
  rows.push(["failed callbacks (tasks on the board)", failed]);
  const sums = parseMetrics(server);
  rows.push(
    ["server: STOMP bodies refused", sums.switchboard_stomp_refused_bodies_total || 0],
    ["server: deaf STOMP agents", sums.switchboard_stomp_deaf_agents || 0],
    ["server: callbacks failed", sums.switchboard_callbacks_failed_total || 0],
    ["server: chains stopped by the loop guard", sums.switchboard_loops_stopped_total || 0],
    ["server: sends refused by a budget", sums.switchboard_budgets_exhausted_total || 0],
    ["server: WebSocket connections", sums.switchboard_ws_connections || 0],
    ["server: live leases", sums.switchboard_leases_live || 0],
    ["server: lease conflicts", sums['switchboard_leases_total{outcome="conflict"}'] || 0],
    ["server: leases ended by their time", sums.switchboard_lease_expiries_total || 0]
  );
  const dl = $("#health");
  dl.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-figure": k }, v)]));
  return false;
}

// ---- search -------------------------------------------------------------------------

// Search over what the signed-in credential may read (docs/search.md), newest first; a
// result opens in the detail pane like a timeline entry.
async function search() {
  const q = $("#search").value.trim();
  const list = $("#search-results");
  list.replaceChildren();
  if (!q) {
    text($("#search-summary"), "");
    return;
  }
  const res = await api("GET", "/v1/search?sort=newest&limit=50&q=" + enc(q));
  const out = $("#search-summary");
  if (!res.ok) {
    out.classList.add("error");
    text(out, (res.body.error_code || "error") + " — " + (res.body.error_message || "status " + res.status));
    return;
  }
  out.classList.remove("error");
  const results = res.body.results || [];
  text(out, results.length ? results.length + (results.length === 1 ? " message found" : " messages found") : "nothing found");
  for (const r of results) {
    const m = r.message;
    const li = h(
      "li",
      { class: "entry", "data-search-id": m.message_id },
      h("time", {}, short(m.timestamp)),
      h("span", { class: "sender" }, m.sender_agent_id),
      h("span", { class: "recipients" }, "→ " + (r.recipient_agent_ids || []).join(", ")),
      h("span", { class: "text" }, (m.content && m.content.text) || "")
    );
    li.addEventListener("click", () => openMessage(m.message_id));
    list.append(li);
  }
}

// ---- approvals ----------------------------------------------------------------------

// The approvals queue (docs/approvals.md): pending ones, newest first. The team key
// decides from here; an agent token sees the approvals it asked and decides nothing.
async function pollApprovals() {
  const res = await api("GET", "/v1/approvals?status=pending&limit=100");
  if (!res.ok) return false;
  const pending = res.body.approvals || [];
  text($("#approvals-count"), pending.length ? "(" + pending.length + ")" : "");
  text(
    $("#approvals-summary"),
    pending.length
      ? pending.length + (pending.length === 1 ? " approval waits" : " approvals wait") + " for a decision"
      : "nothing waits for a decision"
  );
  const list = $("#approvals");
  const items = new Map([...list.children].map((li) => [li.dataset.approval, li]));
  for (const a of pending) {
    if (!items.has(a.approval_id)) list.append(approvalItem(a));
    items.delete(a.approval_id);
  }
  for (const li of items.values()) li.remove();
  // Newest first, as the list answers them.
  for (const a of pending) list.append(list.querySelector('[data-approval="' + CSS.escape(a.approval_id) + '"]'));
  return false;
}

function approvalItem(a) {
  const li = h("li", { class: "card approval", "data-approval": a.approval_id });
  li.append(
    h("strong", { class: "summary-line" }, a.summary),
    h("span", { class: "who" }, "asked by " + a.asked_by + " at " + short(a.created_at) + ", expires " + short(a.expires_at)),
    a.task_id ? h("span", { class: "role" }, "task " + a.task_id) : null,
    a.details ? h("pre", {}, a.details) : null
  );
  if (isKey()) {
    const comment = h("input", { class: "comment", placeholder: "comment (optional)", spellcheck: "false" });
    const buttons = a.options.map((o) => {
      const b = h("button", { type: "button", "data-decision": o }, o);
      b.addEventListener("click", () => decideApproval(a, o, comment.value.trim(), li));
      return b;
    });
    li.append(h("div", { class: "row" }, comment, buttons));
  }
  return li;
}

async function decideApproval(a, decision, comment, li) {
  const body = { decision };
  if (comment) body.comment = comment;
  const res = await api("POST", "/v1/approvals/" + enc(a.approval_id) + "/decision", body);
  const out = $("#approval-result");
  if (res.ok) {
    out.classList.remove("error");
    text(out, "Decided " + a.approval_id + ": " + decision);
    li.remove();
  } else {
    out.classList.add("error");
    text(out, (res.body.error_code || "error") + " — " + (res.body.error_message || "status " + res.status));
  }
}

// ---- wiring -------------------------------------------------------------------------

function show(view) {
  for (const b of document.querySelectorAll("nav button[data-view]")) b.classList.toggle("active", b.dataset.view === view);
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + view;
}

document.addEventListener("DOMContentLoaded", () => {
  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const cred = $("#credential").value.trim();
    text($("#signin-error"), "");
    const err = await signIn(cred);
    if (err) text($("#signin-error"), err);
    else $("#credential").value = "";
  });
  $("#signout").addEventListener("click", signOut);
  for (const b of document.querySelectorAll("nav button[data-view]")) b.addEventListener("click", () => show(b.dataset.view));
  for (const id of ["#f-agent", "#f-thread", "#f-tag"]) $(id).addEventListener("input", refilter);
  $("#f-kind").addEventListener("change", refilter);
  $("#pause").addEventListener("click", togglePause);
  $("#jump-go").addEventListener("click", () => {
    const id = $("#jump").value.trim();
    if (id) openMessage(id);
  });
  $("#open-thread").addEventListener("click", openThread);
  $("#search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    search();
  });
  $("#answer-send").addEventListener("click", () => taskAction("answer"));
  $("#cancel-task").addEventListener("click", () => taskAction("cancel"));
  $("#reassign").addEventListener("click", () => taskAction("reassign"));
  $("#register-operator").addEventListener("click", registerOperator);
  $("#actor-use").addEventListener("click", useActorToken);
  $("#send-go").addEventListener("click", sendMessage);
  $("#bc-go").addEventListener("click", broadcast);
  const saved = sessionStorage.getItem("sb_console_credential");
  if (saved) {
    signIn(saved).then((err) => {
      if (err) {
        sessionStorage.removeItem("sb_console_credential");
        text($("#signin-error"), err);
      }
    });
  }
});
