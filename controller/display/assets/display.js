// Table display. Fail-safe: nothing is shown as current unless the stream is live and has
// delivered a snapshot since it (re)connected; about 3 s without any event is a lost stream.
"use strict";

const STALE_MS = 3000;
const SVG = "http://www.w3.org/2000/svg";
const HEADLINES = {
  ready: "PLACE YOUR BETS", bets_closed: "NO MORE BETS", shaking: "SHAKING…",
  settling: "DICE SETTLING…", reading: "READING THE DICE…", drawing: "RNG DRAWING…",
  result: "RESULT", no_roll: "NO ROLL", fault: "FAULT — PLAY STOPPED",
  locked: "TABLE LOCKED — NO ROLL LIMIT",
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
const PIPS = { 1: [[50, 50]], 2: [[27, 27], [73, 73]], 3: [[27, 27], [50, 50], [73, 73]],
  4: [[27, 27], [73, 27], [27, 73], [73, 73]],
  5: [[27, 27], [73, 27], [50, 50], [27, 73], [73, 73]],
  6: [[27, 25], [73, 25], [27, 50], [73, 50], [27, 75], [73, 75]] };

const view = { live: false, current: null, trend: [], commitment: null, table: "", game: null };
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
    board(snap);
    render();
  });
  on("screen", (ev) => {
    if (!view.live) return;
    view.current = ev;
    board(ev);
    render();
  });
  on("board", (b) => { if (view.live) { board(b); render(); } });
  on("notice", (ev) => { if (view.live) notice(ev); });
  source.onerror = () => offline("The stream from the table controller was lost. Reconnecting…");
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

function render() {
  const cur = view.current;
  if (!view.live || !cur) {
    show("offline", true);
    show("live", false);
    text("offline-title", view.live ? "STARTING — NO RESULT" : "OFFLINE — NO RESULT");
    if (view.live) text("offline-detail", "Waiting for the table controller.");
    return;
  }
  const d = cur.data || {};
  const screen = cur.screen;
  show("offline", false);
  show("live", true);
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
  renderCommitment();
  window.displayLog.push({ screen, round: cur.round, id: cur.id, at: Date.now() });
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
  renderWagers(r);
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

function renderWagers(r) {
  const box = $("wagers");
  box.replaceChildren();
  if (!r.wagers) return;
  const w = r.wagers;
  const tile = (name, what, win) => {
    const el = document.createElement("div");
    el.className = "wager" + (win ? " win" : "");
    const n = document.createElement("span"); n.className = "name"; n.textContent = name;
    const t = document.createElement("span"); t.className = "what"; t.textContent = what;
    el.append(n, t);
    box.append(el);
  };
  const pays = (condition) => {
    for (const [name, p] of Object.entries(r.payouts || {})) {
      if (p.condition === condition && p.wins) return " " + p.pays + " (" + name + ")";
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
    const li = document.createElement("li");
    li.textContent = FAULT_WORDS[f] || String(f).replaceAll("_", " ");
    list.append(li);
  }
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
    const li = document.createElement("li");
    li.className = "cell" + (t.void ? " void" : "");
    const top = document.createElement("div"); top.className = "top";
    const rn = document.createElement("span"); rn.textContent = "R" + (t.round ?? "?");
    top.append(rn);
    if (t.dice) {
      const mini = document.createElement("span"); mini.className = "mini";
      for (const [v, cls] of [[t.dice.red, "r"], [t.dice.blue[0], "b"], [t.dice.blue[1], "b"]]) {
        const s = document.createElement("span"); s.className = cls; s.textContent = v; mini.append(s);
      }
      top.append(mini);
    } else {
      const rng = document.createElement("span"); rng.textContent = "RNG"; top.append(rng);
    }
    const num = document.createElement("div"); num.className = "num";
    num.textContent = t.total ?? t.count;
    const pos = document.createElement("div"); pos.className = "pos";
    pos.textContent = t.void ? "VOID" : shortPosition(t.starting_position);
    if (t.void) pos.classList.add("voidmark");
    li.append(top, num, pos);
    list.append(li);
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
  const el = $("notice");
  el.textContent = "REFUSED — " + ((ev.data && ev.data.reason) || "nothing changed");
  el.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { el.hidden = true; }, 5000);
}

render();
connect();
