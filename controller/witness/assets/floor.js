// The floor dashboard: every table's card and the alerts, kept live from /events (SSE).
// Every text that comes from a table or the witness is set with textContent, never as HTML.
"use strict";

const STALE_MS = 3500; // about three heartbeats missed: the stream is lost, say so
const MAX_CLOSED = 200;
const SEVERITY = { critical: 0, warning: 1, info: 2 };
// alerts by key ("w<number>" the witness's, "f<number>" the floor's own); the zone is the
// witness's (its TZ): every time is shown in it, whatever this screen's zone
const state = { version: -1, tables: new Map(), alerts: new Map(), nowMs: null, nowAt: 0, events: 0,
  zone: { name: "UTC", offset_ms: 0 } };
window.floorState = state;
let lastEvent = 0;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function words(text) {
  return String(text || "").replace(/_/g, " ");
}

function pad(n) {
  return String(n).padStart(2, "0");
}

// a moment (UNIX ms) on the witness's clock face: its zone's offset, read as UTC
function clockText(ms) {
  const date = new Date(ms + (state.zone.offset_ms || 0));
  return `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}`;
}

function timeText(text) {
  if (!text) return "—";
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? String(text) : clockText(date.getTime());
}

function nowMs() {
  return state.nowMs === null ? Date.now() : state.nowMs + (Date.now() - state.nowAt);
}

function agoText(ms) {
  if (ms === null || ms === undefined) return "never";
  const s = Math.max(0, Math.round((nowMs() - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
}

function fact(dl, name, className, parts) {
  dl.append(el("dt", null, name));
  const dd = el("dd", className);
  for (const part of parts) dd.append(typeof part === "string" ? document.createTextNode(part) : part);
  dl.append(dd);
  return dd;
}

function diceText(d) {
  return d && Array.isArray(d.blue) ? `Red ${d.red} · Blue ${d.blue.join(" ")}` : "?";
}

// The table's last result: the corrected one, marked, where a correction followed it; a round
// void shows no result (every wager returned); a result voided in an older log is marked.
function resultParts(r) {
  if (!r) return ["none yet"];
  const parts = [];
  const head = el("div", "result-head", `Round ${r.round ?? "?"}` + (r.attempt > 1 ? ` (attempt ${r.attempt})` : ""));
  parts.push(head);
  if (r.void) {
    const v = r.void;
    head.append(el("span", "tag tag-bad", "VOID"));
    parts.push(el("div", "result-dice", "No result: wagers returned"));
    const why = [v.reason ? words(v.reason) : "", v.reshuffle ? "tiles reshuffled" : "",
      v.employee ? `by ${v.employee}` : ""].filter(Boolean).join(" · ");
    if (why) parts.push(el("div", "result-start", why));
    return parts;
  }
  if (r.corrected) head.append(el("span", "tag tag-warn", "CORRECTED"));
  if (r.dice) {
    parts.push(el("div", "result-dice", `${diceText(r.dice)} · total ${r.total}`));
  } else {
    parts.push(el("div", "result-dice", `RNG number ${r.count ?? "?"}`));
  }
  parts.push(el("div", "result-start", `Start: ${r.starting_position ?? "?"} · bank ${r.bank ?? "?"}`));
  if (r.corrected) {
    const c = r.corrected;
    const why = [c.reason ? words(c.reason) : "", c.employee ? `by ${c.employee}` : ""].filter(Boolean).join(" ");
    parts.push(el("div", "result-corrected", `First read ${diceText(c.dice_read)}` + (why ? ` · ${why}` : "")));
  }
  if (r.wagers && r.wagers.length) {
    const ul = el("ul", "wagers");
    for (const line of r.wagers) ul.append(el("li", null, line));
    parts.push(ul);
  }
  if (r.voided) parts.push(el("div", "tag tag-warn", `VOIDED (${words(r.voided)})`));
  return parts;
}

function card(t) {
  const node = el("article", "card");
  node.dataset.table = t.table;
  node.classList.toggle("offline", t.presence === "offline");
  node.classList.toggle("unknown", t.presence === "unknown");
  node.classList.toggle("alerting", !!t.alerting);
  const head = el("header", "card-head");
  head.append(el("h2", "name", t.table));
  const presence = { online: "ONLINE", offline: "OFFLINE", unknown: "NO STATUS" }[t.presence] || "NO STATUS";
  head.append(el("span", `presence presence-${t.presence}`, presence));
  if (t.alerting) head.append(el("span", "alerting-tag", "⚠ ALERT"));
  node.append(head);

  if (t.alerts.length) {
    const ul = el("ul", "card-alerts");
    for (const a of t.alerts) {
      const li = el("li", `card-alert kind-${a.kind} sev-${a.severity}` + (a.source === "witness" ? " witness-alert" : ""));
      li.append(el("b", null, `${a.severity.toUpperCase()}: ${a.words.toUpperCase()}`),
        document.createTextNode(` at ${a.time_local || "?"} — ${a.detail}`));
      ul.append(li);
    }
    node.append(ul);
  }

  const dl = el("dl", "facts");
  fact(dl, "Screen", "screen", [words(t.screen) || "—", ...(t.service ? [el("span", "tag tag-warn", "SERVICE")] : [])]);
  fact(dl, "Mode", "mode", [[t.mode, t.game].filter(Boolean).join(" · ") || "—"]);
  fact(dl, "Round", "round", [t.round === null ? "—" : String(t.round)]);
  const low = t.alerts.some((a) => a.kind === "games_per_hour_low");
  const gph = [el("b", "big", t.games_per_hour)];
  if (low) gph.push(el("span", "tag tag-warn", "LOW"));
  if (t.min_games_per_hour > 0) gph.push(el("span", "muted", ` alert below ${t.min_games_per_hour}`));
  fact(dl, "Games / hour", "gph", gph);
  fact(dl, "Last result", "result", resultParts(t.last_result));
  if (t.faults.length) {
    const ul = el("ul", "fault-list");
    for (const f of t.faults) ul.append(el("li", null, words(f)));
    fact(dl, "Faults", "faults has-faults", [el("span", "tag tag-bad", `${t.faults.length} OPEN`), ul]);
  } else {
    fact(dl, "Faults", "faults", ["none"]);
  }
  if (t.dice_alarm) {
    const a = t.dice_alarm;
    const face = a.face === null ? "" : `, face ${a.face}`;
    fact(dl, "Dice monitor", "dice has-alarm", [el("span", "tag tag-bad", "ALARM"), ` ${a.test} test${face}, since round ${a.round ?? "?"}` + (a.locks ? " (table locks)" : "")]);
  } else {
    fact(dl, "Dice monitor", "dice", ["no alarm" + (t.dice_set ? ` · dice set ${t.dice_set}` : "")]);
  }
  const waiting = Math.max(0, t.log_size - t.anchored_size);
  const anchored = t.anchored_size ? `anchored ${t.anchored_size} (${t.anchored_local || timeText(t.anchored_time)})` : "none anchored yet";
  const u = t.unconfirmed;
  const log = [`${t.log_size} records · ${anchored}` + (waiting ? ` · ${waiting} waiting` : "")];
  if (u && u.count) {
    log.push(el("span", "tag tag-warn", `${u.count} UNCONFIRMED`));
    log.push(el("span", "muted", ` records ${u.first}–${u.last}, beyond the last signed checkpoint` + (u.contested ? " (another version of some came too)" : "")));
  }
  fact(dl, "Log", "log", log);
  if (u && u.result) {
    const parts = resultParts(u.result);
    parts[0].append(el("span", "tag tag-warn", "UNCONFIRMED"));
    fact(dl, "Next result", "result unconfirmed", parts);
  }
  const seen = fact(dl, "Last seen", "seen", [`${t.last_seen_local || timeText(t.last_seen)} · `, el("span", "ago", agoText(t.received_ms))]);
  seen.dataset.received = t.received_ms === null ? "" : String(t.received_ms);
  node.append(dl);
  return node;
}

function renderTables(changed) {
  const cards = document.getElementById("cards");
  for (const t of changed) {
    const fresh = card(t);
    const old = cards.querySelector(`article[data-table="${CSS.escape(t.table)}"]`);
    if (old) old.replaceWith(fresh);
  }
  // order by name, a stable place for every table; new tables are put in their place
  const names = [...state.tables.keys()].sort();
  const present = new Map([...cards.children].map((c) => [c.dataset.table, c]));
  let previous = null;
  for (const name of names) {
    let node = present.get(name);
    if (!node) node = card(state.tables.get(name));
    if (previous === null ? cards.firstChild !== node : previous.nextSibling !== node) {
      if (previous === null) cards.prepend(node); else previous.after(node);
    }
    previous = node;
  }
  document.getElementById("no-tables").hidden = names.length > 0;
  renderSummary();
}

function renderSummary() {
  const all = [...state.tables.values()];
  const offline = all.filter((t) => t.presence === "offline").length;
  const alerting = all.filter((t) => t.alerting).length;
  const summary = document.getElementById("summary");
  summary.textContent = `${all.length} table${all.length === 1 ? "" : "s"} · ${offline} offline · ${alerting} alerting`;
  summary.classList.toggle("bad", offline + alerting > 0);
}

function byTime(a) {
  const ms = new Date(a.time).getTime();
  return Number.isNaN(ms) ? 0 : ms;
}

// open: by severity, then the newest first; closed: the most recently closed first
function openAlerts() {
  return [...state.alerts.values()].filter((a) => a.open).sort((a, b) =>
    (SEVERITY[a.severity] ?? 9) - (SEVERITY[b.severity] ?? 9) || byTime(b) - byTime(a) || b.number - a.number);
}

function closedAlerts() {
  return [...state.alerts.values()].filter((a) => !a.open).sort((a, b) => b.version - a.version).slice(0, MAX_CLOSED);
}

function alertItem(a) {
  const li = el("li", `alert-item sev-${a.severity} source-${a.source}` + (a.open ? "" : " closed"));
  li.dataset.key = a.key;
  li.append(el("span", `severity severity-${a.severity}`, a.severity.toUpperCase()));
  li.append(el("time", "alert-time", a.time_local || timeText(a.time)));
  li.append(el("b", "alert-table", a.table));
  li.append(el("span", "alert-kind", a.words.toUpperCase()));
  li.append(el("span", "alert-source", a.source === "witness" ? "witness" : "floor"));
  li.append(el("div", "alert-detail", a.detail + (a.size ? ` (log size ${a.size})` : "")));
  if (a.acked_by) li.append(el("div", "alert-acked", `ACKNOWLEDGED by ${a.acked_by} at ${a.acked_local || a.acked_at}`));
  if (a.cleared) li.append(el("div", "alert-cleared", `CLEARED at ${a.cleared_local || a.cleared_at}`));
  if (a.ackable) li.append(ackForm(a));
  return li;
}

function ackForm(a) {
  const box = el("div", "ack");
  const name = el("input", "ack-user");
  name.type = "text";
  name.maxLength = 64;
  name.placeholder = "your name";
  name.setAttribute("aria-label", "who acknowledges");
  name.value = localStorage.getItem("floor.user") || "";
  const button = el("button", "ack-button", "ACKNOWLEDGE");
  button.type = "button";
  const said = el("span", "ack-said");
  button.addEventListener("click", () => acknowledge(a, name, button, said));
  box.append(name, button, said);
  return box;
}

async function acknowledge(a, name, button, said) {
  const user = name.value.trim();
  if (!user) { said.textContent = "say who you are"; name.focus(); return; }
  localStorage.setItem("floor.user", user);
  button.disabled = true;
  said.textContent = "…";
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const headers = { "Content-Type": "application/json" };
    const token = sessionStorage.getItem("floor.token");
    if (token) headers.Authorization = `Bearer ${token}`;
    let answer;
    try {
      answer = await fetch(`/alerts/${a.id}/ack`, { method: "POST", headers, body: JSON.stringify({ user }) });
    } catch (err) {
      said.textContent = "the witness did not answer";
      button.disabled = false;
      return;
    }
    if (answer.status === 401 && attempt === 0) {
      const given = window.prompt("The witness's acknowledgement token");
      if (!given) break;
      sessionStorage.setItem("floor.token", given.trim());
      continue;
    }
    if (answer.ok || answer.status === 409) {
      said.textContent = ""; // the stream brings the acknowledgement (who and when)
      return;
    }
    said.textContent = answer.status === 403 ? "not allowed from this screen" : `refused (${answer.status})`;
    break;
  }
  button.disabled = false;
}

function renderAlerts() {
  const open = openAlerts();
  const closed = closedAlerts();
  // an acknowledgement being typed is not thrown away by an update of another alert
  const list = document.getElementById("alert-list");
  const typing = document.activeElement && list.contains(document.activeElement) ? document.activeElement.closest("li") : null;
  list.replaceChildren(...open.map((a) => (typing && typing.dataset.key === a.key ? typing : alertItem(a))));
  document.getElementById("closed-list").replaceChildren(...closed.map(alertItem));
  document.getElementById("no-alerts").hidden = open.length > 0;
  document.getElementById("alert-count").textContent = open.length ? `(${open.length} open)` : "";
  if (typing && typing.isConnected) typing.querySelector("input")?.focus();
}

function setNow(ms) {
  if (typeof ms === "number") {
    state.nowMs = ms;
    state.nowAt = Date.now();
  }
}

function live() {
  lastEvent = Date.now();
  state.events += 1;
  document.getElementById("stale").hidden = true;
  document.body.classList.remove("stale");
  const stream = document.getElementById("stream");
  stream.textContent = "LIVE";
  stream.className = "stream stream-up";
}

function setZone(zone) {
  if (zone && typeof zone.offset_ms === "number") state.zone = zone;
}

function onSnapshot(view) {
  live();
  setNow(view.now_ms);
  setZone(view.zone);
  tick();
  state.version = view.version;
  state.tables = new Map(view.tables.map((t) => [t.table, t]));
  state.alerts = new Map([...view.alerts, ...(view.closed || [])].map((a) => [a.key, a]));
  document.getElementById("cards").replaceChildren();
  renderTables([]);
  renderAlerts();
}

function onDelta(delta) {
  live();
  setNow(delta.now_ms);
  setZone(delta.zone);
  state.version = delta.version;
  for (const t of delta.tables) state.tables.set(t.table, t);
  renderTables(delta.tables);
  if (delta.alerts.length) {
    for (const a of delta.alerts) state.alerts.set(a.key, a);
    const keep = new Set([...openAlerts(), ...closedAlerts()].map((a) => a.key));
    for (const key of [...state.alerts.keys()]) if (!keep.has(key)) state.alerts.delete(key);
    renderAlerts();
  }
}

function tick() {
  document.getElementById("clock").textContent = `${clockText(nowMs())} ${state.zone.name || ""}`.trim();
  for (const dd of document.querySelectorAll("dd.seen")) {
    const ms = dd.dataset.received ? Number(dd.dataset.received) : null;
    const ago = dd.querySelector(".ago");
    if (ago) ago.textContent = agoText(ms);
  }
  if (lastEvent && Date.now() - lastEvent > STALE_MS) {
    document.getElementById("stale").hidden = false;
    document.body.classList.add("stale");
    const stream = document.getElementById("stream");
    stream.textContent = "NOT LIVE";
    stream.className = "stream stream-down";
  }
}

function connect() {
  const source = new EventSource("/events");
  const parse = (handler) => (event) => {
    try {
      handler(JSON.parse(event.data));
    } catch (err) {
      console.error("floor: a bad event", err);
    }
  };
  source.addEventListener("snapshot", parse(onSnapshot));
  source.addEventListener("delta", parse(onDelta));
  source.addEventListener("heartbeat", parse((beat) => { live(); setNow(beat.now_ms); }));
  source.onerror = () => { lastEvent = lastEvent || Date.now() - STALE_MS; };
}

connect();
setInterval(tick, 500);
