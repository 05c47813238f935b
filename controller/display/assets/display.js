// Table display. Fail-safe: nothing is shown as current unless the stream is live and has
// delivered a snapshot since it (re)connected; about 3 s without any event is a lost stream.
// The same script runs the supervisor's page (supervisor.html, with supervisor.js before it):
// the stream, the offline rule and game recall are shared; each page renders the rest its way.
// Everything from the stream is shown with textContent, never parsed as markup.
"use strict";

const STALE_MS = 3000;
const SVG = "http://www.w3.org/2000/svg";
const PAGE = document.body.dataset.page === "supervisor" ? "supervisor" : "table";
const HEADLINES = {
  ready: "PLACE YOUR BETS", bets_closed: "NO MORE BETS", shaking: "SHAKING…",
  settling: "DICE SETTLING…", reading: "READING THE DICE…", drawing: "RNG DRAWING…",
  result: "RESULT", no_roll: "NO ROLL", fault: "FAULT — PLAY STOPPED",
  locked: "TABLE LOCKED — NO ROLL LIMIT", recall: "GAME RECALL",
};
const FAULT_WORDS = {
  tamper: "the shaker was moved or opened", motor_overrun: "the shaker motor ran too long",
  sensor_timeout: "the dice sensor did not answer", sensor_lost: "the dice sensor is disconnected",
  sensor_hardware: "the dice sensor reports a hardware failure",
  rng_failure: "the random number generator failed its test", storage: "the audit log cannot be written",
  internal: "internal error",
};
// 621a.8(d), 621a.9(1)-(4): the delivery styles in the words of the rule text.
const STYLE_WORDS = {
  standard: "Standard (621a.8(d))", "house-way-left": "House Way From the Left",
  "cup-say-right": "Cup Say From the Right", "cup-say-left": "Cup Say From the Left",
  "jung-quat": "Jung Quat",
};
// controller/core/dice.py NoRollReason.plain_words (a recalled record has the reason only).
const NO_ROLL_WORDS = {
  not_flat: "a die is not flat", die_out: "a die is out of the shaker",
  missing_die: "a die is missing", extra_die: "an extra object is in the shaker",
  wrong_colours: "the dice are not one red and two blue",
  low_confidence: "the dice could not be read with confidence", unreadable: "a die could not be read",
  reads_disagree: "the dice moved while being read", dice_did_not_move: "the dice did not move",
  too_few_cycles: "the shaker did not shake three times", lid_opened: "the lid was opened during the shake",
};
const PIPS = { 1: [[50, 50]], 2: [[27, 27], [73, 73]], 3: [[27, 27], [50, 50], [73, 73]],
  4: [[27, 27], [73, 27], [27, 73], [73, 73]],
  5: [[27, 27], [73, 27], [50, 50], [27, 73], [73, 73]],
  6: [[27, 25], [73, 25], [27, 50], [73, 50], [27, 75], [73, 75]] };
// The three dice's totals 3..18: the ways out of 216 each comes up with fair dice.
const TOTAL_WAYS = [1, 3, 6, 10, 15, 21, 25, 27, 27, 25, 21, 15, 10, 6, 3, 1];

const view = { live: false, current: null, trend: [], commitment: null, table: "", game: null,
  stats: null, dice: null, settings: { stats_panel: false } };
let source = null;
let lastEventAt = 0;
let lastId = "";
let noticeTimer = null;
// For tests and surveillance: every state rendered as current, in order.
window.displayLog = [];

const $ = (id) => document.getElementById(id);

function connect() {
  if (source) source.close();
  const url = lastId ? "/events?last=" + encodeURIComponent(lastId) : "/events";
  source = new EventSource(url);
  lastEventAt = performance.now();
  const on = (name, handler) => source.addEventListener(name, (e) => {
    lastEventAt = performance.now();
    if (e.lastEventId) lastId = e.lastEventId;
    handler(e.data ? JSON.parse(e.data) : {});
  });
  on("heartbeat", () => {});
  on("replay", (ev) => { if (ev.screen === "result") addTrend(ev); });
  on("snapshot", (snap) => {
    view.live = true;
    view.current = snap.current;
    if (snap.settings && typeof snap.settings === "object") {
      view.settings = { stats_panel: snap.settings.stats_panel === true };
    }
    if (snap.stats !== undefined) view.stats = snap.stats;
    if (snap.dice !== undefined) view.dice = snap.dice;
    board(snap);
    render();
  });
  on("screen", (ev) => {
    if (!view.live) return;
    view.current = ev;
    keep(ev.data || {});
    board(ev);
    render();
  });
  on("board", (b) => { if (view.live) { board(b); render(); } });
  on("notice", (ev) => { if (view.live) notice(ev); });
  source.onerror = () => offline("The stream from the table controller was lost. Reconnecting…");
}

// What some screens carry and later screens do not repeat (as the hub keeps it): the dice's
// statistics (bets open; issue 15) and the dice set (bets open, bets closed, a no roll).
function keep(d) {
  if (d.mode === "rng") { view.stats = null; view.dice = null; }  // an RNG table has no dice
  if (d.stats !== undefined) view.stats = d.stats;
  if (d.dice !== undefined) view.dice = d.dice;
}

function board(b) {
  if (Array.isArray(b.trend)) view.trend = b.trend;
  if (b.commitment !== undefined) view.commitment = b.commitment;
  if (b.table !== undefined) view.table = b.table;
}

function addTrend(ev) {
  const r = ev.data && ev.data.result;
  if (!r || view.trend.some((t) => t.seq === ev.seq)) return;
  view.trend.push({ seq: ev.seq, round: ev.round, total: r.total ?? null, count: r.count,
    dice: r.dice || null, starting_position: r.starting_position, bank: r.bank, void: false });
  view.trend = view.trend.slice(-20);
}

function offline(why) {
  const was = view.live;
  view.live = false;
  view.current = null;  // never shown again: the next snapshot decides what is current
  $("offline-detail").textContent = why;
  render();
  if (was) window.displayLog.push({ screen: "offline", round: null, at: Date.now() });
}

setInterval(() => {
  if (performance.now() - lastEventAt > STALE_MS) {
    offline("No word from the table controller. Reconnecting…");
    connect();
  }
}, 250);

function text(id, value) { $(id).textContent = value; }
function show(id, on) { $(id).hidden = !on; }

// An element with its class and its text (always as text).
function el(tag, className, content) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (content !== undefined && content !== null) e.textContent = String(content);
  return e;
}

function render() {
  const cur = view.current;
  if (!view.live || !cur) {
    show("offline", true);
    show("live", false);
    show("recall", false);
    text("offline-title", view.live ? "STARTING — NO RESULT" : "OFFLINE — NO RESULT");
    if (view.live) text("offline-detail", "Waiting for the table controller.");
    return;
  }
  show("offline", false);
  const entry = { screen: cur.screen, round: cur.round, id: cur.id, at: Date.now() };
  if (cur.screen === "recall") {
    // AGCO 13.1.1: a past round, marked as such on its own background; never the live view.
    show("live", false);
    show("recall", true);
    entry.back = renderRecall($("recall"), cur, PAGE === "supervisor");
  } else {
    show("recall", false);
    show("live", true);
    if (PAGE === "supervisor") renderSupervisor(cur);  // supervisor.js
    else renderTablePage(cur);
  }
  window.displayLog.push(entry);
}

function renderTablePage(cur) {
  const d = cur.data || {};
  const screen = cur.screen;
  text("table-name", (view.table || "").toUpperCase());
  text("round", cur.round ?? "–");
  // 9 NYCRR 5319.58: in service mode every screen says so; its results are test results.
  text("status-line", d.service ? "SERVICE — TEST ROUNDS, NOT LIVE" : "LIVE");
  $("status-line").classList.toggle("service", !!d.service);
  const head = $("headline");
  head.className = "headline " + screen.replace("_", "-");
  let headline = HEADLINES[screen] || screen.toUpperCase();
  let sub = "";
  if (screen === "no_roll") {
    headline = d.words ? "NO ROLL — " + d.words : "NO ROLL";
    sub = "Reshake." + (d.attempt ? " Next attempt: " + d.attempt : "");
  } else if (screen === "locked") {
    sub = "A supervisor must clear the table.";
  } else if (screen === "fault") {
    sub = "Call a supervisor. The fault stays until it is cleared.";
    if (d.fallback === "rng") sub += " The table can go on with its RNG (supervisor).";
  } else if (d.voided) {  // N.J.A.C. 13:69E-1.28P: the supervisor voided the result
    sub = "Result voided (" + String(d.voided).replace(/_/g, " ") + "): the round is played again.";
  } else if (screen === "ready") {
    sub = "Round " + (cur.round ?? "") + (d.mode === "rng" ? " — computerized RNG" : "");
  }
  head.textContent = d.service ? "SERVICE — " + headline : headline;
  text("subline", sub);
  const result = screen === "result" ? d.result : null;
  renderBank(screen === "ready" ? d : null);
  renderStyle(screen === "bets_closed" ? d.delivery_style : null);
  renderDiceWarning(["ready", "bets_closed", "no_roll"].includes(screen) ? d.dice : null);
  renderResult(result);
  renderDealing(screen === "result" ? d.dealing_plan : null);
  renderFaults(screen === "fault" ? d.faults : null);
  renderTable(result);
  renderTrend();
  renderStats();
  renderCommitment();
}

function renderResult(r) {
  show("outcome", !!r);
  show("starting", !!r);
  show("wagers", !!(r && r.wagers));
  const dice = $("dice");
  dice.replaceChildren();
  if (!r) return;
  if (r.dice) {
    dice.append(die(r.dice.red, "red"), die(r.dice.blue[0], "blue"), die(r.dice.blue[1], "blue"));
  }
  show("dice", !!r.dice);
  show("rng-number", !r.dice);
  text("rng-value", r.dice ? "" : r.count);
  text("total", r.dice ? r.total : "");
  show("total-box", !!r.dice);
  text("starting-label", positionName(r.starting_position));
  renderWagers($("wagers"), r);
}

// The dice's 24 hours on the table (621a.5(c)): the warning from 23 hours, the refusal at 24.
function renderDiceWarning(dice) {
  const warning = dice && dice.warning != null ? String(dice.warning) : "";
  show("dice-warning", !!warning);
  text("dice-warning", warning ? "DICE — " + warning : "");
}

// Who banks the round about to be played, and the rule that refuses it (621a.11(b), (c)).
function renderBank(d) {
  const bank = d && d.bank != null ? String(d.bank) : "";
  const refused = d && d.bank_refused != null ? String(d.bank_refused) : "";
  show("bank-line", !!bank);
  const coBank = d && d.co_bank ? " — co-banking with the dealer" : "";  // 645a.12(e)
  text("bank-line", bank ? "Bank: " + bank + coBank : "");
  show("bank-refused", !!refused);
  text("bank-refused", refused ? "BANK REFUSED — " + refused : "");
}

function styleName(style) {
  return STYLE_WORDS[style] || String(style);
}

function renderStyle(style) {
  show("delivery-style", style != null);
  text("delivery-style-name", style != null ? styleName(style) : "");
}

function stacksOf(tiles) {
  if (!Array.isArray(tiles)) return "";
  return tiles.map((t) => {
    const stack = String(t && t.stack);
    return t && t.part !== "whole" ? stack + " " + String(t.part) : stack;
  }).join(" + ");
}

// Which stacks go to which position, in dealing order (621a.8(d), 621a.9); tiles only.
function renderDealing(plan) {
  const list = $("dealing-plan");
  list.replaceChildren();
  const entries = plan && Array.isArray(plan.plan) ? plan.plan : null;
  show("dealing", !!entries);
  $("right").classList.toggle("with-plan", !!entries);
  text("dealing-style", entries ? styleName(plan.style) : "");
  if (!entries) return;
  entries.forEach((e, k) => {
    const li = document.createElement("li");
    if (k === 0) li.className = "first";
    const n = document.createElement("span"); n.className = "order"; n.textContent = String(k + 1);
    const t = document.createElement("span"); t.className = "delivery";
    t.textContent = String(e && e.position) + ": " + stacksOf(e && e.tiles);
    li.append(n, t);
    list.append(li);
  });
}

function die(face, colour) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 100 100");
  svg.setAttribute("class", "die die-" + colour);
  svg.setAttribute("aria-label", colour + " die " + face);
  svg.setAttribute("data-face", String(face));
  const body = document.createElementNS(SVG, "rect");
  for (const [k, v] of Object.entries({ x: 3, y: 3, width: 94, height: 94, rx: 16,
    fill: colour === "red" ? "#d01c1c" : "#1f4fd1", stroke: "#fff", "stroke-width": 3 })) {
    body.setAttribute(k, v);
  }
  svg.append(body);
  for (const [cx, cy] of PIPS[face] || []) {
    const pip = document.createElementNS(SVG, "circle");
    pip.setAttribute("cx", cx); pip.setAttribute("cy", cy); pip.setAttribute("r", 9.5);
    pip.setAttribute("fill", "#fff");
    svg.append(pip);
  }
  return svg;
}

function renderWagers(box, r) {
  box.replaceChildren();
  if (!r.wagers) return;
  const w = r.wagers;
  const tile = (name, what, win) => {
    const e = el("div", "wager" + (win ? " win" : ""));
    e.append(el("span", "name", name), el("span", "what", what));
    box.append(e);
  };
  const pays = (condition) => {
    for (const [name, p] of Object.entries(r.payouts || {})) {
      if (p && p.condition === condition && p.wins) return " " + p.pays + " (" + name + ")";
    }
    return "";
  };
  const sum = w.sum || {};
  tile("SUM 8·16·17", sum["8-16-17"] ? "WIN" + pays("8-16-17") : "—", sum["8-16-17"]);
  tile("SUM 3·8·9", sum["3-8-9"] ? "WIN" + pays("3-8-9") : "—", sum["3-8-9"]);
  const triple = Object.values(w.match || {}).some((n) => n === 3);
  tile("SUM PAIR", sum.pair ? (triple ? "TRIPLE" : "PAIR") + pays("pair") : "—", sum.pair);
  tile("SUM SERIES", sum.series ? "WIN" + pays("series") : "—", sum.series);
  const matched = Object.entries(w.match || {}).filter(([, n]) => n >= 2);
  tile("MATCH", matched.length ? matched.map(([v, n]) => (n === 3 ? "three " : "two ") + v + "s").join(", ") : "—", matched.length > 0);
  const beat = w.beat_it || {};
  tile("BEAT IT · RED", beat.red ? "WIN" + pays("red") : "—", beat.red);
  tile("BEAT IT · ANY", beat.any ? "WIN" + pays("any") : "—", beat.any);
}

function renderFaults(faults) {
  const list = $("faults");
  list.replaceChildren();
  show("faults", !!(faults && faults.length));
  for (const f of faults || []) {
    list.append(el("li", "", faultWords(f)));
  }
}

function faultWords(f) {
  return FAULT_WORDS[f] || String(f).replaceAll("_", " ");
}

function positionName(label) {
  if (label === "dealer") return "DEALER";
  if (label === "dead hand") return "DEAD HAND";
  return String(label || "").toUpperCase();
}

function positionsOf(game) {
  const seats = [1, 2, 3, 4, 5, 6].map((n) => "seat " + n);
  return game === "poker" ? ["dealer", ...seats] : ["dealer", ...seats, "dead hand"];
}

// The table seen from above, the dealer at the top; positions counted counterclockwise.
function renderTable(result) {
  const svg = $("table");
  svg.replaceChildren();
  if (result && result.game) view.game = result.game;
  const game = view.game || "tiles";
  const cx = 400, cy = 300, rx = 300, ry = 215;
  const felt = document.createElementNS(SVG, "ellipse");
  for (const [k, v] of Object.entries({ cx, cy, rx: rx - 70, ry: ry - 70, class: "felt" })) {
    felt.setAttribute(k, v);
  }
  svg.append(felt);
  const note = document.createElementNS(SVG, "text");
  note.setAttribute("x", cx); note.setAttribute("y", cy + 8); note.setAttribute("class", "table-note");
  note.textContent = "counted ↺ from " + (result && result.bank !== "dealer" ? "the bank" : "the dealer");
  svg.append(note);
  const positions = positionsOf(game);
  positions.forEach((label, k) => {
    const a = Math.PI / 2 + (2 * Math.PI * k) / positions.length;
    const x = cx + rx * Math.cos(a), y = cy - ry * Math.sin(a);
    const g = document.createElementNS(SVG, "g");
    const first = result && result.starting_position === label;
    g.setAttribute("class", "spot" + (first ? " first" : ""));
    g.setAttribute("data-position", label);
    const c = document.createElementNS(SVG, "circle");
    c.setAttribute("cx", x); c.setAttribute("cy", y); c.setAttribute("r", 62);
    g.append(c);
    const words = label === "dealer" ? ["DEALER"] : label === "dead hand" ? ["DEAD", "HAND"] : [label.slice(5)];
    words.forEach((w, i) => {
      const t = document.createElementNS(SVG, "text");
      t.setAttribute("x", x);
      t.setAttribute("y", y + 10 + (i - (words.length - 1) / 2) * 28);
      if (w.length > 2) t.setAttribute("class", "small");
      t.textContent = w;
      g.append(t);
    });
    if (result && result.bank === label && label !== "dealer") {
      const b = document.createElementNS(SVG, "text");
      b.setAttribute("x", x); b.setAttribute("y", y + 44); b.setAttribute("class", "bank");
      b.textContent = "BANK";
      g.append(b);
    }
    svg.append(g);
  });
}

function shortPosition(label) {
  if (label === "dealer") return "DEALER";
  if (label === "dead hand") return "DEAD H.";
  return label ? "SEAT " + String(label).slice(5) : "";
}

function renderTrend() {
  const list = $("trend");
  list.replaceChildren();
  for (const t of [...view.trend].reverse()) {
    const li = el("li", "cell" + (t.void ? " void" : ""));
    const top = el("div", "top");
    top.append(el("span", "", "R" + (t.round ?? "?")));
    if (t.dice) {
      const mini = el("span", "mini");
      for (const [v, cls] of [[t.dice.red, "r"], [t.dice.blue[0], "b"], [t.dice.blue[1], "b"]]) {
        mini.append(el("span", cls, v));
      }
      top.append(mini);
    } else {
      top.append(el("span", "", "RNG"));
    }
    const num = el("div", "num", t.total ?? t.count);
    const pos = el("div", "pos", t.void ? "VOID" : shortPosition(t.starting_position));
    if (t.void) pos.classList.add("voidmark");
    li.append(top, num, pos);
    list.append(li);
  }
}

// --- the players' statistics panel (issue 15; [display] stats_panel) ------------------------
// Over the current shift: the hot and cold totals (against their exact chances), the faces of
// the red die and of the blue dice pooled, and the first hands of the trend board's results.
// Never the dice monitor's evidence or its alarm: those are for the supervisor only.

function isCounts(list, size) {
  return Array.isArray(list) && list.length === size
    && list.every((n) => Number.isSafeInteger(n) && n >= 0);
}

function shiftCounts(stats) {
  const s = stats && stats.shift;
  if (!s || !isCounts(s.red, 6) || !isCounts(s.blue, 6) || !isCounts(s.total, 16)) return null;
  return s;
}

const sumOf = (list) => list.reduce((a, b) => a + b, 0);

function percent(count, of) {
  return of ? (100 * count / of).toFixed(1) + "%" : "–";
}

// The totals seen most and least often against their exact expected frequency (ways out of
// 216). Compared exactly in whole numbers; among equal ratios the total expected more often
// first (it is the more telling). Only totals above (hot) or below (cold) their expectation.
function hotAndCold(total) {
  const rolls = sumOf(total);
  if (!rolls) return { hot: [], cold: [] };
  const items = total.map((count, k) => ({ total: k + 3, count, ways: TOTAL_WAYS[k],
    expected: rolls * TOTAL_WAYS[k] / 216 }));
  const ratio = (a, b) => a.count * b.ways - b.count * a.ways;  // sign of a's ratio - b's
  const hot = items.filter((i) => i.count * 216 > rolls * i.ways)
    .sort((a, b) => ratio(b, a) || b.ways - a.ways).slice(0, 3);
  const cold = items.filter((i) => i.count * 216 < rolls * i.ways)
    .sort((a, b) => ratio(a, b) || b.ways - a.ways).slice(0, 3);
  return { hot, cold };
}

function renderStats() {
  const counts = shiftCounts(view.stats);
  const on = view.settings.stats_panel && !!counts;
  show("stats", on);
  $("live").classList.toggle("with-stats", on);
  if (!on) return;
  const rolls = sumOf(counts.red);
  text("stats-rolls", rolls === 1 ? "1 roll" : rolls + " rolls");
  const { hot, cold } = hotAndCold(counts.total);
  renderTotals($("stats-hot"), hot, "hot");
  renderTotals($("stats-cold"), cold, "cold");
  renderFaces($("stats-red"), counts.red, "red");
  renderFaces($("stats-blue"), counts.blue, "blue");
  renderFirstHands();
}

function renderTotals(box, items, kind) {
  box.replaceChildren();
  if (!items.length) { box.append(el("span", "stats-none", "—")); return; }
  for (const i of items) {
    const chip = el("span", "total-chip " + kind);
    chip.dataset.total = String(i.total);
    chip.append(el("b", "", i.total));
    const what = el("span", "seen");
    what.append(el("span", "", "seen " + i.count), el("span", "", "exp. " + i.expected.toFixed(1)));
    chip.append(what);
    box.append(chip);
  }
}

// A bar for each face's share of the rolls, the fair share (1 in 6) marked across them.
function renderFaces(box, counts, colour) {
  box.replaceChildren();
  const n = sumOf(counts);
  const top = Math.max(1 / 3, ...counts.map((c) => (n ? c / n : 0)));
  counts.forEach((c, k) => {
    const face = el("div", "face");
    face.dataset.face = String(k + 1);
    const track = el("span", "track");
    const bar = el("span", "face-bar " + colour);
    bar.style.width = (n ? (100 * c / n / top) : 0).toFixed(1) + "%";
    const fair = el("span", "fair");
    fair.style.left = (100 / 6 / top).toFixed(1) + "%";
    track.append(bar, fair);
    face.append(el("span", "chip " + colour, k + 1), track, el("span", "count", c),
      el("span", "pct", percent(c, n)));
    box.append(face);
  });
}

// How often each position had the first hand in the trend board's results (voids left out).
function renderFirstHands() {
  const box = $("stats-first");
  box.replaceChildren();
  const results = view.trend.filter((t) => !t.void && t.starting_position);
  text("stats-first-title", "FIRST HAND · LAST " + results.length);
  for (const label of positionsOf(view.game || "tiles")) {
    const count = results.filter((t) => t.starting_position === label).length;
    const item = el("span", "first-item");
    item.dataset.position = label;
    item.append(el("span", "who", shortPosition(label)), el("b", "", count));
    box.append(item);
  }
}

function renderCommitment() {
  const c = view.commitment;
  show("commitment", !!c);
  if (!c) return;
  text("commit-session", c.session || "");
  text("commit-value", (c.commitment || "").match(/.{1,8}/g)?.join(" ") || "");
}

function notice(ev) {
  const e = $("notice");
  e.textContent = "REFUSED — " + ((ev.data && ev.data.reason) || "nothing changed");
  e.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { e.hidden = true; }, 5000);
}

// --- game recall (AGCO 13.1.1) --------------------------------------------------------------
// A past round as controller/audit/recall.py gives it: its readings, its result and what the
// dealer and the supervisor did in it, in the order recorded. Shown on its own background
// under a banner that says it is not live. Returns ``back`` as rendered.

const OUTCOME_WORDS = { closed: "CLOSED", result: "RESULT — NOT CLOSED", void: "VOID",
  "in play": "IN PLAY" };
const KIND_WORDS = {
  round_opened: "Round opened", no_more_bets: "No more bets", bank_selected: "Bank selected",
  delivery_style: "Delivery style", shuffle: "Tiles shuffled", shake: "Shake", no_roll: "No roll",
  result: "Result", result_voided: "Result voided", void: "Round void", close: "Round closed",
  reshake_limit: "No-roll limit", fault: "Fault", fault_cleared: "Fault cleared",
  supervisor_action: "Supervisor", dice_replaced: "Dice replaced", mode_changed: "Mode changed",
  shift_change: "Shift change", service_mode: "Service mode", service_test: "Service test",
  sensor: "Dice sensor", interrupted: "Interrupted", rng_draw: "RNG draw", recovery: "Recovery",
  power_on: "Power on", shutdown: "Shutdown", dice_alarm: "DICE ALARM",
};
// Never on the players' page: the monitor's alarm and its evidence (issue 15).
const SUPERVISOR_ONLY_KINDS = new Set(["dice_alarm"]);
const SUPERVISOR_ONLY_FIELDS = new Set(["alarm", "alarm_cleared", "counts", "log_e", "threshold"]);

function words(value) {
  return String(value).replaceAll("_", " ");
}

function clock(time) {
  // "2026-11-30T22:34:06.598Z" -> "22:34:06.598" (the records' time is UTC)
  const m = /T(\d\d:\d\d:\d\d(?:\.\d+)?)/.exec(String(time || ""));
  return m ? m[1] : String(time || "");
}

function dateOf(time) {
  const m = /^(\d{4}-\d\d-\d\d)T/.exec(String(time || ""));
  return m ? m[1] : "";
}

function diceText(dice) {
  if (!dice || typeof dice !== "object") return "";
  const blue = Array.isArray(dice.blue) ? dice.blue.join(" ") : "";
  return "red " + dice.red + ", blue " + blue;
}

function renderRecall(box, cur, forSupervisor) {
  box.replaceChildren();
  box.classList.remove("dense");
  const d = cur.data || {};
  const rounds = Array.isArray(d.rounds) ? d.rounds : [];
  const back = Number.isSafeInteger(d.back) ? d.back : null;
  // The controller sends the round recalled alone, with how many it can recall (``count``);
  // a list of them all (``rounds`` without ``count``) is read as well.
  const n = Number.isSafeInteger(d.count) ? d.count : rounds.length;
  const inRange = back !== null && back >= 1 && back <= n;
  const game = !inRange ? null : Number.isSafeInteger(d.count)
    ? (rounds.length === 1 ? rounds[0] : null)
    : rounds[n - back];
  const banner = el("header", "recall-banner");
  banner.append(el("div", "recall-title", "RECALL — PAST GAME " + (back ?? "?") + " OF " + n
    + " — NOT LIVE"));
  const gameRound = game && Number.isSafeInteger(game.round) ? game.round : null;
  const first = game && Array.isArray(game.records) && game.records.length ? game.records[0].time : "";
  banner.append(el("div", "recall-sub", [
    gameRound !== null ? "Round " + gameRound : "Round not in the log",
    (view.table || "").toUpperCase(),
    "the live table waits at round " + (cur.round ?? "–"),
    "times UTC" + (dateOf(first) ? " " + dateOf(first) : ""),
  ].filter(Boolean).join(" · ")));
  box.append(banner);
  if (!game) {
    box.append(el("div", "recall-missing", "There is no such round in the recall."));
    return back;
  }
  const records = Array.isArray(game.records) ? game.records : [];
  const body = el("div", "recall-body");
  body.append(recallGame(game, records), recallRecords(records, forSupervisor));
  box.append(body);
  fitRecall(box);
  return back;
}

function recallGame(game, records) {
  const col = el("section", "recall-game");
  const head = el("div", "recall-head");
  const number = el("b", "", game.round);
  number.id = "recall-round";
  const label = el("span", "recall-round");
  label.append("ROUND ", number);
  const outcome = el("span", "recall-outcome " + String(game.outcome).replace(" ", "-"),
    OUTCOME_WORDS[game.outcome] || String(game.outcome).toUpperCase());
  outcome.id = "recall-outcome";
  head.append(label, outcome);
  col.append(head);
  const r = game.result && typeof game.result === "object" ? game.result : null;
  if (!r) {
    col.append(el("div", "recall-noresult", "NO RESULT IN THIS ROUND"));
    return col;
  }
  const at = records.filter((x) => x.kind === "result").pop();
  col.append(el("div", "recall-meta", ["Result", r.attempt != null ? "attempt " + r.attempt : "",
    at ? clock(at.time) : "", r.game ? String(r.game) : ""].filter(Boolean).join(" · ")));
  const outcomeBox = el("div", "recall-outcome-box");
  if (r.dice && typeof r.dice === "object") {
    const dice = el("div", "recall-dice");
    dice.id = "recall-dice";
    const blue = Array.isArray(r.dice.blue) ? r.dice.blue : [];
    dice.append(die(r.dice.red, "red"), ...blue.map((f) => die(f, "blue")));
    const total = el("div", "recall-total");
    total.append(el("span", "label", "TOTAL"), el("b", "", r.total));
    total.lastChild.id = "recall-total";
    outcomeBox.append(dice, total);
  } else {
    const number = el("div", "recall-total");
    number.append(el("span", "label", "RNG NUMBER"), el("b", "", r.count));
    number.lastChild.id = "recall-total";
    outcomeBox.append(number);
  }
  col.append(outcomeBox);
  const starting = el("div", "recall-starting");
  const who = el("b", "", positionName(r.starting_position));
  who.id = "recall-starting";
  starting.append("FIRST HAND: ", who);
  col.append(starting);
  col.append(el("div", "recall-meta", "Bank: " + (r.bank ?? "dealer")));
  if (r.wagers) {
    const wagers = el("div", "wagers recall-wagers");
    renderWagers(wagers, r);
    col.append(wagers);
  }
  const payouts = Object.entries(r.payouts || {});
  if (payouts.length) {
    const list = el("ul", "recall-payouts");
    for (const [name, p] of payouts) {
      const q = p && typeof p === "object" ? p : {};
      const what = [q.wager, q.condition].filter((x) => x != null).map(String).join(" ");
      list.append(el("li", q.wins ? "wins" : "", "Paytable " + name + " · " + what + " — "
        + (q.wins ? "WINS, pays " + q.pays : "no win")));
    }
    col.append(list);
  }
  return col;
}

function recallRecords(records, forSupervisor) {
  const col = el("section", "recall-records");
  const readings = records.filter((x) => x.kind === "reading");
  col.append(el("h2", "recall-h", "READINGS (" + readings.length + ")"));
  const list = el("div", "recall-readings");
  list.id = "recall-readings";
  for (const x of readings) list.append(recallReading(x));
  if (!readings.length) list.append(el("div", "recall-none", "No reading in this round."));
  col.append(list);
  const actions = records.filter((x) => x.kind !== "reading"
    && (forSupervisor || !SUPERVISOR_ONLY_KINDS.has(x.kind)));
  col.append(el("h2", "recall-h", "WHAT HAPPENED, IN ORDER (" + actions.length + ")"));
  const timeline = el("ol", "recall-actions");
  timeline.id = "recall-actions";
  for (const x of actions) {
    const li = el("li", "kind-" + String(x.kind));
    li.dataset.kind = String(x.kind);
    li.append(el("span", "at", clock(x.time)), el("span", "kind", KIND_WORDS[x.kind] || words(x.kind)),
      el("span", "what", recordDetail(String(x.kind), x.data || {}, forSupervisor)));
    timeline.append(li);
  }
  col.append(timeline);
  return col;
}

function recallReading(x) {
  const data = x.data || {};
  const box = el("div", "reading" + (data.verdict === "valid" ? "" : " not-valid"));
  const head = el("div", "reading-head");
  head.append(el("span", "at", clock(x.time)), el("span", "", "#" + x.seq),
    el("span", "", "attempt " + (data.attempt ?? "–")),
    el("span", "verdict", String(data.verdict ?? "–").toUpperCase().replaceAll("_", " ")));
  const digest = el("span", "digest mono", "image " + String(data.image_digest ?? "–"));
  head.append(digest);
  box.append(head);
  const dice = el("div", "reading-dice");
  for (const d of Array.isArray(data.dice) ? data.dice : []) {
    const q = d && typeof d === "object" ? d : {};
    const colour = q.colour === "red" || q.colour === "blue" ? q.colour : "other";
    const cell = el("span", "reading-die");
    cell.append(el("span", "chip " + colour, q.face ?? "?"));
    cell.append(el("span", "", String(q.colour ?? "?")));
    cell.append(el("span", q.flat ? "" : "bad", q.flat ? "flat" : "NOT FLAT"));
    cell.append(el("span", q.inside ? "" : "bad", q.inside ? "inside" : "OUT"));
    cell.append(el("span", "", "conf " + (q.confidence ?? "?") + "%"));
    if (Array.isArray(q.position)) cell.append(el("span", "", "(" + q.position.join(", ") + ")"));
    dice.append(cell);
  }
  box.append(dice);
  return box;
}

// The key data of one record, in words; anything not known is shown as its fields.
function recordDetail(kind, d, forSupervisor) {
  const att = d.attempt != null ? "attempt " + d.attempt : "";
  const join = (...parts) => parts.filter((p) => p !== "" && p != null).join(" · ");
  switch (kind) {
    case "round_opened": return "";
    case "no_more_bets": return join("bank " + (d.bank ?? "dealer"), d.mode ? "mode " + d.mode : "",
      d.co_bank ? "co-banking" : "");
    case "bank_selected": return join("bank " + d.bank, d.co_bank ? "co-banking" : "",
      d.refused ? "refused: " + d.refused : "");
    case "delivery_style": return join(styleName(d.style), d.section);
    case "shake": return join(att, d.cycles != null ? d.cycles + " cycles" : "",
      d.delay_ms != null ? "delay " + d.delay_ms + " ms" : "");
    case "no_roll": return join(att, NO_ROLL_WORDS[d.reason] || words(d.reason));
    case "result": return join(att, d.dice ? diceText(d.dice) : "RNG " + d.count,
      d.total != null ? "total " + d.total : "", "first hand " + positionName(d.starting_position));
    case "result_voided": return join(att, words(d.reason), d.detail);
    case "void": return join(d.state ? "in " + words(d.state) : "",
      d.supervisor ? "by the supervisor" : "", d.detail);
    case "fault": return join(faultWords(d.fault), d.detail);
    case "fault_cleared": return join((Array.isArray(d.faults) ? d.faults : []).map(faultWords).join(", "),
      d.supervisor ? "by the supervisor" : "");
    case "supervisor_action": return join(words(d.action), d.detail,
      forSupervisor && d.alarm ? "alarm " + alarmWords(d.alarm) : "");
    case "dice_replaced": return join("set " + d.dice_set, d.previous != null ? "was " + d.previous : "",
      forSupervisor && d.alarm_cleared ? "alarm cleared (" + d.alarm_cleared + ")" : "");
    case "mode_changed": return join(words(d.previous) + " → " + words(d.mode),
      Array.isArray(d.cleared) && d.cleared.length ? "cleared " + d.cleared.map(faultWords).join(", ") : "");
    case "dice_alarm": return forSupervisor ? alarmWords(d) : "";
    default: return fieldsOf(d, forSupervisor);
  }
}

function alarmWords(a) {
  if (!a || typeof a !== "object") return "";
  return [a.test, a.face != null ? "face " + a.face : "", "ln E " + a.log_e + " ≥ " + a.threshold]
    .filter(Boolean).join(" · ");
}

function fieldsOf(d, forSupervisor) {
  return Object.entries(d)
    .filter(([k, v]) => k !== "round" && v !== null && typeof v !== "object"
      && (forSupervisor || !SUPERVISOR_ONLY_FIELDS.has(k)))
    .map(([k, v]) => words(k) + " " + String(v)).join(" · ");
}

// A round with many readings or records: smaller type first; then the oldest readings left
// out, down to the one that decided; then the oldest records; each with a line that says how
// many (the result is always there; paigow-controller recall prints everything).
function fitRecall(box) {
  const col = box.querySelector(".recall-records");
  if (!col) return;
  const overflows = () => col.scrollHeight > col.clientHeight + 1;
  if (!overflows()) return;
  box.classList.add("dense");
  trimOldest(box.querySelector(".recall-readings"), ".reading", "earlier reading", overflows);
  trimOldest(box.querySelector(".recall-actions"), "li:not(.recall-none)", "earlier record", overflows);
}

function trimOldest(list, selector, what, overflows) {
  let dropped = 0;
  let note = null;
  while (list && overflows() && list.querySelectorAll(selector).length > 1) {
    list.querySelector(selector).remove();
    dropped += 1;
    if (!note) {
      note = el(list.tagName === "OL" ? "li" : "div", "recall-none recall-left-out");
      list.prepend(note);
    }
    note.textContent = dropped + " " + what + (dropped > 1 ? "s" : "")
      + " not shown here (paigow-controller recall has them all)";
  }
}

render();
connect();
