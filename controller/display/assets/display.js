// Table display. Fail-safe: nothing is shown as current unless the stream is live and has
// delivered a snapshot since it (re)connected; about 3 s without any event is a lost stream.
// The same script runs the supervisor's page (supervisor.html, with supervisor.js before it):
// the stream, the offline rule and game recall are shared; each page renders the rest its way.
// Everything from the stream is shown with textContent, never parsed as markup.
// Every word a player reads comes from the message catalogue (/messages.json, loaded once at
// start), in the languages the controller's settings name: one, or English and Traditional
// Chinese together (a line each, or "EN / 中文" for a short label). This file holds none.
"use strict";

const STALE_MS = 3000;
const SVG = "http://www.w3.org/2000/svg";
const PAGE = document.body.dataset.page === "supervisor" ? "supervisor" : "table";
const LANGUAGES = ["en", "zh-Hant"];
const PIPS = { 1: [[50, 50]], 2: [[27, 27], [73, 73]], 3: [[27, 27], [50, 50], [73, 73]],
  4: [[27, 27], [73, 27], [27, 73], [73, 73]],
  5: [[27, 27], [73, 27], [50, 50], [27, 73], [73, 73]],
  6: [[27, 25], [73, 25], [27, 50], [73, 50], [27, 75], [73, 75]] };
// The three dice's totals 3..18: the ways out of 216 each comes up with fair dice.
const TOTAL_WAYS = [1, 3, 6, 10, 15, 21, 25, 27, 27, 25, 21, 15, 10, 6, 3, 1];
const WAGER_KEYS = ["table", "sum", "match", "beat_it"];
// The side wagers: current 621a.5(e)(2)-(4) has them on the physical dice, so an RNG round shows
// none of them (their limits, paytables or outcomes); the table's own wager stays.
const SIDE_WAGERS = new Set(["sum", "match", "beat_it"]);
// The statistics panel names hot and cold totals only from this many rolls of the shift on (the
// page says so below it): a handful of rolls tells nothing about a total.
const HOT_COLD_MIN_ROLLS = 50;
// Each page its stream: the players' page is sent only what players read (no refusal's operator
// words, no alarm, no meters, no employee id: controller/display/events.py for_players).
const STREAM = PAGE === "table" ? "/table/events" : "/events";
// The dealing order on the felt: letters in squares, so that they are never read as the seats'
// numbers in circles ("A" deals first).
const TURNS = "ABCDEFGH";

const view = { live: false, current: null, trend: [], commitment: null, anchor: null, table: "", game: null,
  bank: "dealer", stats: null, dice: null, tiles: null, meters: null, interventions: [], mode: null,
  settings: readSettings({}), settingsKnown: false, instance: null, clock: null };
let catalogue = null;
let source = null;
let lastEventAt = 0;
let lastId = "";
let noticeTimer = null;
let offlineWhy = "offline.connecting";
const NOTICE = document.getElementById("notice");
// For tests and surveillance: every state rendered as current, in order.
window.displayLog = [];

const $ = (id) => document.getElementById(id);

// --- the message catalogue ------------------------------------------------------------------

function langs() {
  if (PAGE === "supervisor") return ["en"];  // the pit podium's own page is in English
  return view.settingsKnown ? view.settings.languages : LANGUAGES;
}

// One message in one language; ``vars`` values may be functions of the language (a position's
// name inside a sentence is in the sentence's language). An unknown key gives "".
function msg1(lang, key, vars) {
  const table = catalogue && catalogue[lang];
  const template = table && Object.hasOwn(table, key) ? table[key] : null;
  if (typeof template !== "string") return "";
  return template.replace(/\{(\w+)\}/g, (_, name) => {
    const v = vars ? vars[name] : undefined;
    if (typeof v === "function") return v(lang);
    return v === undefined || v === null ? "" : String(v);
  });
}

// The message in each language shown, the same text once.
function msgs(key, vars, languages) {
  const out = [];
  for (const lang of languages || langs()) {
    const text = msg1(lang, key, vars);
    if (text && !out.some((m) => m.text === text)) out.push({ lang, text });
  }
  return out;
}

function known(key) {
  return !!(catalogue && catalogue.en && Object.hasOwn(catalogue.en, key));
}

// A short label: "EN / 中文" on one line.
function tr(key, vars) {
  return msgs(key, vars).map((m) => m.text).join(" / ");
}

// As ``tr``, or ``fallback`` (data from the stream, shown as it came) for an unknown key.
function trOr(key, vars, fallback) {
  return known(key) ? tr(key, vars) : String(fallback);
}

// A function of the language, for ``vars``.
const inLang = (key, vars, fallback) => (lang) => (known(key) ? msg1(lang, key, vars)
  : String(fallback ?? ""));

// A sentence: one line per language, each marked with its language.
function lines(e, key, vars) {
  e.replaceChildren(...msgs(key, vars).map(line));
  return e;
}

function line(m) {
  const span = el("span", "ln", m.text);
  span.lang = m.lang;
  return span;
}

function bilingual() {
  return langs().length > 1;
}

// --- the stream ------------------------------------------------------------------------------

function readSettings(s) {
  const languages = Array.isArray(s.languages)
    ? s.languages.filter((l, i) => LANGUAGES.includes(l) && s.languages.indexOf(l) === i) : [];
  return {
    stats_panel: s.stats_panel === true,
    languages: languages.length ? languages : ["en"],  // in the order configured
    brand: typeof s.brand === "string" ? s.brand : "",
    limits: s.limits && typeof s.limits === "object" ? s.limits : null,
    paytables: Array.isArray(s.paytables)
      ? s.paytables.filter((p) => p && typeof p === "object" && p.pays && typeof p.pays === "object")
      : [],
  };
}

// The box's clock: its offset from this browser's at receipt, so the browser's own does not matter.
function readClock(c) {
  if (!c || typeof c !== "object" || !Number.isFinite(c.now_ms)) return;
  view.clock = {
    offset: c.now_ms - Date.now(),
    tz: Number.isFinite(c.tz_offset_min) ? c.tz_offset_min : null,
    synchronised: c.synchronised === true,
  };
}

function connect() {
  if (source) source.close();
  const url = lastId ? STREAM + "?last=" + encodeURIComponent(lastId) : STREAM;
  source = new EventSource(url);
  lastEventAt = performance.now();
  const on = (name, handler) => source.addEventListener(name, (e) => {
    lastEventAt = performance.now();
    if (e.lastEventId) lastId = e.lastEventId;
    handler(e.data ? JSON.parse(e.data) : {});
  });
  on("heartbeat", (beat) => { readClock(beat && beat.clock ? beat.clock : beat); renderClock(); });
  on("replay", (ev) => {
    if (ev.screen === "result") addTrend(ev);
    else if (ev.screen === "void") voidTrend(ev);
  });
  on("snapshot", (snap) => {
    const s = snap.settings && typeof snap.settings === "object" ? snap.settings : null;
    if (s && typeof s.instance === "string") {
      // A restarted controller: a fresh page, with whatever it serves now.
      if (view.instance !== null && s.instance !== view.instance) { location.reload(); return; }
      view.instance = s.instance;
    }
    view.live = true;
    view.current = snap.current;
    if (s) {
      view.settings = readSettings(s);
      view.settingsKnown = true;
      readClock(s.clock);
    }
    for (const key of KEPT_KEYS) if (snap[key] !== undefined) view[key] = snap[key];
    if (snap.current && snap.current.data) keepMode(snap.current);
    board(snap);
    clearNotice();  // a new screen: nothing covers it
    render();
  });
  on("screen", (ev) => {
    if (!view.live) return;
    view.current = ev;
    keep(ev);
    board(ev);
    clearNotice();
    render();
  });
  on("board", (b) => { if (view.live) { board(b); render(); } });
  on("notice", (ev) => { if (view.live) notice(ev); });
  source.onerror = () => offline("offline.lost");
}

// What some screens carry and later screens do not repeat (as the hub keeps it): the dice's
// statistics (bets open; issue 15), the dice set (bets open, bets closed, a no roll), the set of
// tiles and the table's meters (bets open); and the mode the table plays in.
const KEPT_KEYS = ["stats", "dice", "tiles", "meters"];

function keep(ev) {
  const d = ev.data || {};
  if (d.mode === "rng") { view.stats = null; view.dice = null; }  // an RNG table has no dice
  for (const key of KEPT_KEYS) if (d[key] !== undefined) view[key] = d[key];
  keepMode(ev);
}

// Bets open, bets closed and a result say the mode; the RNG's draw is the RNG's; a screen that
// does not say (a shake, a fault) is in the mode last said.
function keepMode(ev) {
  const d = ev.data || {};
  if (typeof d.mode === "string") view.mode = d.mode;
  else if (ev.screen === "drawing") view.mode = "rng";
}

function isRng() {
  return view.mode === "rng";
}

function board(b) {
  if (Array.isArray(b.trend)) view.trend = b.trend;
  if (b.commitment !== undefined) view.commitment = b.commitment;
  if (b.anchor !== undefined) view.anchor = b.anchor;
  if (b.table !== undefined) view.table = b.table;
  if (Array.isArray(b.interventions)) view.interventions = b.interventions;
}

// A result replayed from the log, as the hub's trend board has it (the snapshot that follows
// brings the board itself): a result shown again is its cell; a correction takes its place.
function addTrend(ev) {
  const d = ev.data || {};
  const r = d.result;
  if (!r || typeof r !== "object" || view.trend.some((t) => t.seq === ev.seq)) return;
  const cell = { seq: ev.seq, round: ev.round, attempt: d.attempt ?? null, total: r.total ?? null,
    count: r.count, dice: r.dice || null, starting_position: r.starting_position, bank: r.bank,
    void: false, corrected: !!(d.corrected && typeof d.corrected === "object"), wagers_returned: false };
  if (view.trend.some((t) => t.wagers_returned && t.round === ev.round)) return;
  const k = view.trend.findIndex((t) => t.round === ev.round && t.attempt != null
    && t.attempt === cell.attempt && !t.void);
  if (k >= 0) {
    if (cell.corrected) view.trend[k] = cell;
    return;
  }
  view.trend.push(cell);
  view.trend = view.trend.slice(-20);
}

// A round void replayed from the log: its result's cell (or a new one) is VOID, wagers returned.
function voidTrend(ev) {
  if (view.trend.some((t) => t.wagers_returned && t.round === ev.round)) return;
  const cell = { seq: ev.seq, round: ev.round, attempt: null, total: null, count: null, dice: null,
    starting_position: null, bank: null, void: true, corrected: false, wagers_returned: true };
  const k = view.trend.map((t) => t.round === ev.round && !t.void).lastIndexOf(true);
  if (k >= 0) view.trend[k] = cell;
  else view.trend = [...view.trend, cell].slice(-20);
}

function offline(why) {
  const was = view.live;
  view.live = false;
  view.current = null;  // never shown again: the next snapshot decides what is current
  offlineWhy = why;
  clearNotice();
  render();
  if (was) window.displayLog.push({ screen: "offline", round: null, at: Date.now() });
}

function tick() {
  if (source && performance.now() - lastEventAt > STALE_MS) {
    offline("offline.silent");
    connect();
  }
  renderClock();
}

function text(id, value) { $(id).textContent = value; }
function show(id, on) { $(id).hidden = !on; }

// An element with its class and its text (always as text).
function el(tag, className, content) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (content !== undefined && content !== null) e.textContent = String(content);
  return e;
}

function svgEl(tag, attributes, content) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attributes || {})) e.setAttribute(k, v);
  if (content !== undefined && content !== null) e.textContent = String(content);
  return e;
}

function render() {
  const cur = view.current;
  document.body.classList.toggle("bilingual", bilingual());
  if (!view.live || !cur) {
    show("offline", true);
    show("live", false);
    show("recall", false);
    if (catalogue) {
      lines($("offline-title"), view.live ? "offline.starting" : "offline.title");
      lines($("offline-detail"), view.live ? "offline.waiting" : offlineWhy);
    }
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

// --- the players' page --------------------------------------------------------------------

function renderTablePage(cur) {
  const d = cur.data || {};
  const screen = String(cur.screen);
  const live = $("live");
  live.dataset.screen = screen;
  // A fault or a locked table: what is wrong takes the drawing's place too.
  live.classList.toggle("wide-main", screen === "fault" || screen === "locked");
  renderHeader(cur, d);
  // 9 NYCRR 5319.58: service mode is a test of the equipment, said across the page (a band
  // round it, TEST in the header and as the headline); it never invites bets.
  live.classList.toggle("service", !!d.service);
  const result = screen === "result" && d.result && typeof d.result === "object" ? d.result : null;
  const notReady = isNotReady(screen, d);
  renderHeadline(cur, d, result, notReady);
  renderCorrected(result && d.corrected && typeof d.corrected === "object" ? d.corrected : null);
  renderBank(screen === "ready" ? d : result ? { bank: result.bank ?? "dealer" } : null);
  renderStyle(["bets_closed", "drawing"].includes(screen) ? d.delivery_style : null);
  renderNotReady(notReady && screen !== "ready");
  renderResult(result, !!d.service);
  const plan = result && d.dealing_plan && Array.isArray(d.dealing_plan.plan) ? d.dealing_plan : null;
  renderDealing(plan);
  renderFaults(screen === "fault" ? d.faults : null, d.returns, !!d.restart);
  // While the table waits: its limits (and with bets open the paytables) fill the space.
  renderLimits(!d.service && ["ready", "bets_closed", "shaking", "settling", "reading", "drawing",
    "no_roll"].includes(screen));
  renderPaytables(!d.service && screen === "ready" && !isRng());
  renderTable(result, plan, screen === "ready" ? d : null);
  renderTrend();
  renderStats(!!d.service);
  renderCommitment();
  renderAnchor();
  // What the table waits with gives way, in this order, to what it must say (a bank refused,
  // the table not ready, service mode) where a column has no room for both; then the dice, the
  // total and the first hand are drawn smaller (a correction over a result, a board of voids),
  // then the bank's line goes (the drawing rings the bank), then the line under the headline,
  // and last the side wagers' outcomes: nothing is ever drawn over the board below.
  live.classList.remove("compact");
  if (!fit($("main"), ["limits"])) {
    live.classList.add("compact");
    fit($("main"), ["bank-line", "subline", "wagers"]);
  }
  fit($("right"), ["paytables"]);
}

// Whether ``column`` fits, once the ``optional`` elements it needed to leave out are hidden.
function fit(column, optional) {
  const fits = () => column.scrollHeight <= column.clientHeight + 1;
  for (const id of optional) {
    if (fits()) return true;
    $(id).hidden = true;
  }
  return fits();
}

function renderHeader(cur, d) {
  const brand = view.settings.brand;
  show("brand", !!brand);
  text("brand", brand);
  text("table-name", (view.table || "").toUpperCase());
  text("round-label", tr("header.round"));
  text("round", cur.round ?? "–");
  // 9 NYCRR 5319.58: in service mode every screen says so; its results are test results.
  show("status-line", !!d.service);
  if (d.service) lines($("status-line"), "status.service");
  $("status-line").classList.toggle("service", !!d.service);
  renderClock();
}

function renderClock() {
  if (PAGE !== "table" || !catalogue) return;
  const c = view.clock;
  const on = !!(c && c.tz !== null);
  show("clock-box", on);
  if (!on) return;
  const local = new Date(Date.now() + c.offset + c.tz * 60000);
  const hhmm = String(local.getUTCHours()).padStart(2, "0") + ":"
    + String(local.getUTCMinutes()).padStart(2, "0");
  if ($("clock").textContent !== hhmm) text("clock", hhmm);
  show("clock-warning", !c.synchronised);
  if (!c.synchronised && !$("clock-warning").childElementCount) {
    lines($("clock-warning"), "clock.unsynchronised");
  }
  if (c.synchronised) $("clock-warning").replaceChildren();
}

function headlineKey(screen) {
  return known("headline." + screen) ? "headline." + screen : null;
}

function renderHeadline(cur, d, result, notReady) {
  const screen = String(cur.screen);
  const head = $("headline");
  head.className = "headline " + screen.replace("_", "-");
  const sub = $("subline");
  sub.replaceChildren();
  // The outcome is the headline of a result: the dice (or the RNG number), the total and the
  // first hand; the word RESULT is not (in service mode SERVICE — RESULT says what it is).
  let key = headlineKey(screen);
  let vars = {};
  if (screen === "no_roll" && (known("no_roll." + d.reason) || d.words)) {
    key = "headline.no_roll_why";
    vars = { words: (lang) => noRollWords(lang, d) };
  }
  if (result && !d.service) key = null;
  if (screen === "ready" && notReady) key = "headline.not_ready";  // bets are not taken
  if (d.service) { key = "headline.test"; vars = {}; }  // never an invitation to bet
  if (key) lines(head, key, vars);
  else head.replaceChildren(...(result ? [] : [el("span", "ln", screen.toUpperCase())]));
  head.hidden = !head.childElementCount;
  if (d.service) {
    lines(sub, "sub.test");
  } else if (screen === "no_roll") {
    lines(sub, d.attempt ? "sub.reshake_attempt" : "sub.reshake", { n: d.attempt });
  } else if (screen === "locked") {
    lines(sub, "sub.locked");
  } else if (screen === "fault") {
    lines(sub, "sub.fault");
    if (d.fallback === "rng") sub.append(...msgs("sub.fault_rng").map(line));
  } else if (screen === "ready" && notReady) {
    lines(sub, "sub.not_ready");
  } else if (screen === "ready" && d.mode === "rng") {
    lines(sub, "sub.mode_rng");
  } else if (screen === "bets_closed" && d.mode === "rng" && d.delivery_style != null) {
    lines(sub, "sub.rng_closed");  // 621a.11(i): the style chosen before the RNG draws
  }
  sub.hidden = !sub.childElementCount;
}

function noRollWords(lang, d) {
  if (known("no_roll." + d.reason)) return msg1(lang, "no_roll." + d.reason);
  return String(d.words || words(d.reason || ""));
}

// ``test``: a test round of service mode, which has no wagers (what would have won is not said).
function renderResult(r, test) {
  show("outcome", !!r);
  show("starting", !!r);
  show("wagers", !!(r && r.wagers) && !isRng() && !test);
  const dice = $("dice");
  dice.replaceChildren();
  if (!r) return;
  const hasDice = !!(r.dice && typeof r.dice === "object");
  if (hasDice) {
    const blue = Array.isArray(r.dice.blue) ? r.dice.blue : [];
    dice.append(die(r.dice.red, "red"), ...blue.map((f) => die(f, "blue")));
  }
  show("dice", hasDice);
  show("rng-number", !hasDice);
  text("rng-label", tr("label.rng_number"));
  text("rng-value", hasDice ? "" : r.count);
  text("total-label", tr("label.total"));
  text("total", hasDice ? r.total : "");
  show("total-box", hasDice);
  text("starting-title", tr("label.first_hand"));
  text("starting-label", positionName(r.starting_position));
  renderWagers($("wagers"), r);
}

// The dice in the shaker (proposed 621a.5(c): 24 hours) and the set of tiles (621a.6(a),
// 621a.3(e): inspected, changed every 12 hours) stop play when none is recorded or its life is
// over: the shake, or "no more bets", is refused until the supervisor acts. Their warnings are
// the supervisor's (supervisor.js); the players read only that the table is not ready.
function stops(life) {
  if (!life || typeof life !== "object") return false;
  // the players' stream says only whether it stops play (events.players_data)
  if (typeof life.stops === "boolean") return life.stops;
  return life.set == null || life.minutes_left === 0;
}

function isNotReady(screen, d) {
  if (d.service) return false;  // service mode tests with any dice
  const dice = ["ready", "bets_closed", "no_roll"].includes(screen) && stops(d.dice);
  return dice || (screen === "ready" && stops(d.tiles));
}

function renderNotReady(on) {
  show("not-ready", on);
  if (on) lines($("not-ready"), "not_ready.line");
  else $("not-ready").replaceChildren();
}

// A result corrected to the dice as they lie (N.J.A.C. 13:69E-1.28P(d)): said over the
// corrected outcome, with the dice first read. Why, and who, are the supervisor's.
function renderCorrected(c) {
  const box = $("corrected");
  box.replaceChildren();
  show("corrected", !!c);
  if (!c) return;
  const read = c.dice_read && typeof c.dice_read === "object" ? c.dice_read : null;
  const first = el("span", "corrected-read");
  first.append(el("span", "first-read", tr("corrected.first_read")), miniDice(read));
  box.append(el("b", "corrected-word", tr("corrected.word")), first);
}

// The dice as the trend board draws them: a small red chip, then the blue.
function miniDice(dice) {
  const mini = el("span", "mini");
  if (!dice || typeof dice !== "object") return mini;
  const blue = Array.isArray(dice.blue) ? dice.blue : [];
  for (const [v, cls] of [[dice.red, "r"], ...blue.map((b) => [b, "b"])]) {
    mini.append(el("span", cls, v));
  }
  return mini;
}

// The dice as words in one language: "red 3, blue 4 5".
function diceIn(lang, dice) {
  if (!dice) return "–";
  const blue = Array.isArray(dice.blue) ? dice.blue.join(" ") : "";
  return msg1(lang, "dice.text", { red: dice.red, blue });
}

// The bank rules the controller names (621a.11(b), (c)), in the page's own words.
const BANK_RULES = {
  after_shuffle: "bank_rule.after_shuffle",
  twice_in_a_row: "bank_rule.twice_in_a_row",
};

// Who banks the round about to be played, and the rule that refuses it (621a.11(b), (c)).
function renderBank(d) {
  const bank = d && d.bank != null ? String(d.bank) : "";
  const refused = !!(d && d.bank_refused != null && d.bank_refused !== false);
  show("bank-line", !!bank);
  const who = positionOf(bank, "who");
  text("bank-line", bank ? tr(d.co_bank ? "bank.line_co" : "bank.line", { who }) : "");  // 645a.12(e)
  const rule = d && d.bank_refused_rule;
  const key = rule && Object.hasOwn(BANK_RULES, rule.rule) && Number.isInteger(rule.seat)
    ? BANK_RULES[rule.rule] : null;
  const words = key ? tr(key, { who: positionOf("seat " + rule.seat, "who") })
    : tr("bank.not_allowed");
  show("bank-refused", refused);
  text("bank-refused", refused ? tr("bank.refused") + " — " + words : "");
}

function styleName(style) {
  return trOr("style." + style, {}, style);
}

function renderStyle(style) {
  show("delivery-style", style != null);
  text("delivery-label", tr("delivery.label"));
  text("delivery-style-name", style != null ? styleName(style) : "");
}

// Which tiles go to which position, in dealing order (621a.8(d), 621a.9); tiles only. Each
// turn's number is drawn at its position on the table; here each turn has its stacks (numbered
// from the dealer's right) and, unless it takes whole stacks, which of their tiles it takes
// (1 the top tile), once for all the stacks of the turn when they are the same levels, as they
// are in every style of 621a.9: "1+2: 1–2". The words are said once, in a key after the style's
// name, so that no word is repeated on every line. A style of whole stacks (621a.8(d),
// 621a.9(1)) takes no tiles apart and has no key.
function renderDealing(plan) {
  const list = $("dealing-plan");
  list.replaceChildren();
  show("dealing", !!plan);
  show("dealing-key", false);
  $("right").classList.toggle("with-plan", !!plan);
  text("dealing-label", tr("dealing.label"));
  text("dealing-style", plan ? styleName(plan.style) : "");
  if (!plan) return;
  const turns = plan.plan.map((e) => [String(e && e.position), dealingGroups(e)]);
  const whole = turns.every(([, groups]) => groups.every((g) => g.levels === ""));
  list.dataset.columns = whole ? "4" : "2";
  // the key in each language shown, each unbroken: "tiles: 1 = top / 張：1 = 頂"
  const key = $("dealing-key");
  key.replaceChildren();
  show("dealing-key", !whole);
  if (!whole) {
    msgs("dealing.key").forEach((m, i) => {
      const span = el("span", "", m.text);
      span.lang = m.lang;
      key.append(...(i ? [" / ", span] : [span]));
    });
  }
  turns.forEach(([position, groups], k) => {
    const li = el("li", k === 0 ? "first" : "");
    li.dataset.position = position;
    li.dataset.levels = groups.map((g) => g.levels).join(" ");
    li.append(el("span", "order", TURNS[k] || k + 1));
    for (const g of groups) {
      const group = el("span", "group");
      group.append(el("span", "stacks", g.stacks));
      if (g.levels) group.append(": ", el("span", "levels", g.levels));
      li.append(group);
    }
    list.append(li);
  });
}

// One position's delivery, its items in the order the dealer takes them, as groups of stacks
// that give the same levels: the stacks ("1+2", or "1–4" for a run of three or more) and
// the levels ("1–2", "3"; "" for whole stacks).
function dealingGroups(e) {
  const groups = [];
  for (const t of e && Array.isArray(e.tiles) ? e.tiles : []) {
    const stack = t && Number.isInteger(t.stack) ? t.stack : "?";
    const levels = t && Array.isArray(t.levels) ? t.levels.map(String).join(",") : "?";
    const last = groups[groups.length - 1];
    if (last && last.levels === levels) last.stacks.push(stack);
    else groups.push({ stacks: [stack], levels });
  }
  return groups.map((g) => ({
    stacks: g.stacks.length >= 3 ? run(g.stacks, "+") : g.stacks.join("+"),
    levels: g.levels === "1,2,3,4" ? "" : run(g.levels.split(","), ","),
  }));
}

// Numbers one apart, up or down, as "first–last"; otherwise each, joined.
function run(list, joiner) {
  const n = list.map(Number);
  const step = n.length >= 2 ? n[1] - n[0] : 0;
  const isRun = Math.abs(step) === 1 && n.every((v, i) => i === 0 || v - n[i - 1] === step);
  return isRun ? list[0] + "–" + list[list.length - 1] : list.join(joiner);
}

function die(face, colour) {
  const svg = svgEl("svg", { viewBox: "0 0 100 100", class: "die die-" + colour,
    role: "img", "aria-label": tr("die.aria", { colour: inLang("die." + colour, {}, colour), face }),
    "data-face": String(face) });
  svg.append(svgEl("rect", { x: 3, y: 3, width: 94, height: 94, rx: 16,
    fill: colour === "red" ? "#c8102e" : "#1f4fd1", stroke: "#fff", "stroke-width": 3 }));
  for (const [cx, cy] of PIPS[face] || []) {
    svg.append(svgEl("circle", { cx, cy, r: 9.5, fill: "#fff" }));
  }
  return svg;
}

function oddsText(pays) {
  const m = /^(\d+) to (\d+)$/.exec(String(pays));
  if (!m) return String(pays);
  return tr(bilingual() ? "odds.short" : "odds", { win: m[1], stake: m[2] });
}

// The side wagers of the result (621a.5(e)(2)-(4)): what won, each with what its paytable
// pays; a wager with no win says so.
function renderWagers(box, r) {
  box.replaceChildren();
  if (!r.wagers) return;
  const w = r.wagers;
  const pays = (condition) => {
    for (const [name, p] of Object.entries(r.payouts || {})) {
      if (p && p.condition === condition && p.wins) {
        return tr("value.pays", { odds: oddsText(p.pays), name });
      }
    }
    return "";
  };
  const group = (wager, wins) => {
    const g = el("div", "wager-group");
    g.dataset.wager = wager;
    g.append(el("span", "wager-name", tr("wager." + wager)));
    const row = el("div", "wager-cells");
    for (const [name, what] of wins) {
      const cell = el("div", "wager win");
      if (name) cell.append(el("span", "name", name));
      cell.append(el("span", "what", what));
      row.append(cell);
    }
    if (!wins.length) row.append(el("div", "wager", tr("value.no_win")));
    g.append(row);
    box.append(g);
  };
  const won = (list) => list.filter(([on]) => on).map(([, name, what]) => [name, what]);
  const win = (condition) => [tr("value.win"), pays(condition)].filter(Boolean).join(" ");
  const sum = w.sum || {};
  const triple = Object.values(w.match || {}).some((n) => n === 3);
  group("sum", won([
    [sum["8-16-17"], tr("cond.8-16-17"), win("8-16-17")],
    [sum["3-8-9"], tr("cond.3-8-9"), win("3-8-9")],
    [sum.pair, tr("cond.pair"),
      triple ? [tr("value.triple"), pays("pair")].filter(Boolean).join(" ") : win("pair")],
    [sum.series, tr("cond.series"), win("series")],
  ]));
  const matched = Object.entries(w.match || {}).filter(([, n]) => n >= 2);
  group("match", matched.map(([v, n]) => ["", tr(n === 3 ? "match.three" : "match.two", { v })]));
  const beat = w.beat_it || {};
  group("beat_it", won([
    [beat.red, tr("cond.red"), win("red")],
    [beat.any, tr("cond.any"), win("any")],
  ]));
}

// ``returns``: how many times in a row each fault came back within a minute of its clear (it
// is held: no key clears it for a while); ``restart``: one came back so often that the
// controller is being restarted.
function renderFaults(faults, returns, restart) {
  const list = $("faults");
  list.replaceChildren();
  show("faults", !!(faults && faults.length));
  const back = returns && typeof returns === "object" ? returns : {};
  for (const f of faults || []) {
    const li = el("li", "");
    // the players' stream names a fault by its kind (events.PLAYER_FAULTS)
    if (known("player_fault." + f)) lines(li, "player_fault." + f);
    else if (known("fault." + f)) lines(li, "fault." + f);
    else lines(li, "player_fault.table");
    const n = Number(back[f]);
    if (Number.isInteger(n) && n > 0) li.append(...msgs("faults.returns", { n }).map(line));
    list.append(li);
  }
  if (faults && faults.length && restart) list.append(lines(el("li", ""), "faults.restart"));
}

function faultWords(f) {
  // the players' stream names a fault by its kind (events.PLAYER_FAULTS)
  if (PAGE === "table" && known("player_fault." + f)) return tr("player_fault." + f);
  return trOr("fault." + f, {}, words(f));
}

// --- positions ------------------------------------------------------------------------------

// "dealer", "seat 3", "dead hand": the key of its name in the form wanted (pos: a label,
// who: within a sentence, short: the trend board), or null for a label not known.
function positionKey(label, form) {
  if (label === "dealer") return [form + ".dealer", {}];
  if (label === "dead hand") return [form + ".dead_hand", {}];
  const m = /^seat (\d+)$/.exec(String(label || ""));
  return m ? [form + ".seat", { n: m[1] }] : null;
}

function positionText(label, form) {
  const k = positionKey(label, form);
  return k ? tr(k[0], k[1]) : String(label || "").toUpperCase();
}

function positionOf(label, form) {
  const k = positionKey(label, form);
  return (lang) => (k ? msg1(lang, k[0], k[1]) : String(label || ""));
}

function positionName(label) {
  return positionText(label, "pos");
}

function shortPosition(label) {
  return positionText(label, "short");
}

function positionsOf(game) {
  const seats = [1, 2, 3, 4, 5, 6].map((n) => "seat " + n);
  return game === "poker" ? ["dealer", ...seats] : ["dealer", ...seats, "dead hand"];
}

// --- limits and paytables (while bets are open) ---------------------------------------------

const isAmount = (n) => Number.isSafeInteger(n) && n >= 0;
const amount = (n) => n.toLocaleString("en-US");

function renderLimits(on) {
  const box = $("limits");
  box.replaceChildren();
  const limits = view.settings.limits;
  const rows = limits ? WAGER_KEYS.filter((k) => limits[k] && typeof limits[k] === "object"
    && isAmount(limits[k].min) && isAmount(limits[k].max) && !(isRng() && SIDE_WAGERS.has(k))) : [];
  show("limits", on && rows.length > 0);
  if (!on || !rows.length) return;
  const title = el("div", "limits-title", tr("limits.title"));
  if (typeof limits.currency === "string" && limits.currency) {
    title.append(" ", el("span", "currency", limits.currency));
  }
  const grid = el("div", "limits-grid");
  for (const k of rows) {
    const row = [el("span", "limits-name", tr("wager." + k)),
      el("span", "num", amount(limits[k].min)), el("span", "dash", tr("limits.to")),
      el("span", "num", amount(limits[k].max))];
    row.forEach((c) => { c.dataset.wager = k; });
    grid.append(...row);
  }
  box.append(title, grid);
}

function paysKey(key) {
  if (/^\d+$/.test(key)) return ["pays.total", { n: key }];
  return known("pays." + key) ? ["pays." + key, {}] : null;
}

function renderPaytables(on) {
  const box = $("paytables");
  box.replaceChildren();
  const tables = view.settings.paytables;
  show("paytables", on && tables.length > 0);
  if (!on || !tables.length) return;
  box.append(el("div", "paytables-title", tr("paytable.title")));
  for (const p of tables) {
    const card = el("div", "paytable");
    card.dataset.name = String(p.name ?? "");
    const wager = known("wager." + p.wager) ? tr("wager." + p.wager) : String(p.wager ?? "");
    const condition = p.condition == null ? "" : trOr("cond." + p.condition, {}, p.condition);
    card.append(el("div", "paytable-name", [wager, condition, p.name == null ? "" : "· " + p.name]
      .filter(Boolean).join(" ")));
    const list = el("div", "paytable-pays");
    const byKey = (a, b) => (/^\d+$/.test(a) && /^\d+$/.test(b) ? Number(a) - Number(b) : 0);
    for (const [key, odds] of Object.entries(p.pays).sort(([a], [b]) => byKey(a, b))) {
      const k = paysKey(key);
      const item = el("span", "pays");
      item.append(el("b", "", k ? tr(k[0], k[1]) : key), el("span", "", oddsText(odds)));
      list.append(item);
    }
    card.append(list);
    box.append(card);
  }
}

// --- the table drawing ----------------------------------------------------------------------

// The half-moon table seen from above, as the players see it: the dealer on the straight side
// (top), the Dead Hand on the dealer's left (621a.2(b)(3)): the right of the picture; the seats
// on the curved side, counted counterclockwise from the dealer (621a.8(c)): seat 1 at the
// dealer's right (the picture's upper left) round to seat 6. The first hand is filled, the bank
// ringed; with a dealing plan each position carries its turn (621a.8(d), 621a.9).
function renderTable(result, plan, ready) {
  const svg = $("table");
  svg.replaceChildren();
  if (result && result.game) view.game = result.game;
  const game = view.game || "tiles";
  // the bank of the round: as bets open says it, until the result says it again
  if (ready && ready.bank != null) view.bank = String(ready.bank);
  if (result) view.bank = String(result.bank ?? "dealer");
  const bank = view.bank;
  const first = result ? String(result.starting_position) : "";
  const turns = {};
  (plan ? plan.plan : []).forEach((e, k) => { turns[String(e && e.position)] = k + 1; });
  const two = bilingual();
  const lineH = 76;
  // The straight side's boxes hold the dealer's and the Dead Hand's names, a line each
  // language; the Dead Hand's box reaches past the felt, on the dealer's left.
  const dealerLines = msgs("pos.dealer").map((m) => m.text);
  const deadLines = msgs("pos.dead_hand").map((m) => m.text);
  const boxLines = Math.max(dealerLines.length, game === "poker" ? 1 : deadLines.length);
  const top = 20 + boxLines * lineH + 28;  // the straight side
  const rx = 480, ry = 390;
  const height = top + ry + 16;
  svg.setAttribute("viewBox", "0 0 1100 " + height);
  svg.setAttribute("aria-label", tr("table.aria") + " · "
    + tr(bank !== "dealer" ? "table.counted_bank" : "table.counted_dealer"));
  svg.append(svgEl("path", { class: "felt",
    d: `M ${500 - rx} ${top} A ${rx} ${ry} 0 0 0 ${500 + rx} ${top} Z` }));
  // ↺: the direction of the count, inside the seats
  const arc = (a) => [500 + rx * 0.3 * Math.cos(a), top + ry * 0.3 * Math.sin(a)];
  const [ax, ay] = arc(Math.PI * 0.9), [bx, by] = arc(Math.PI * 0.1);
  svg.append(svgEl("path", { class: "arrow", "marker-end": "url(#head)",
    d: `M ${ax} ${ay} A ${rx * 0.3} ${ry * 0.3} 0 0 0 ${bx} ${by}` }));
  const defs = svgEl("defs");
  const head = svgEl("marker", { id: "head", viewBox: "0 0 10 10", refX: 5, refY: 5,
    markerWidth: 4, markerHeight: 4, orient: "auto-start-reverse" });
  head.append(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }));
  defs.append(head);
  svg.append(defs);
  const place = (label, shape, x, y, textLines, turnAt) => {
    const g = svgEl("g", { class: "spot" + (label === first ? " first" : "")
      + (label === bank ? " bank" : ""), "data-position": label });
    g.append(shape);
    textLines.forEach((t, i) => {
      g.append(svgEl("text", { x, y: y + 23 + (i - (textLines.length - 1) / 2) * lineH,
        class: /^\d+$/.test(t) ? "seat" : "name" }, t));
    });
    if (turns[label]) {
      const [tx, ty] = turnAt;
      const badge = svgEl("g", { class: "turn", "data-turn": String(turns[label]) });
      badge.append(svgEl("rect", { x: tx - 42, y: ty - 42, width: 84, height: 84, rx: 10 }),
        svgEl("text", { x: tx, y: ty + 23 }, TURNS[turns[label] - 1] || turns[label]));
      g.append(badge);
    }
    svg.append(g);
  };
  const boxH = boxLines * lineH + 16;
  const rect = (x, w) => svgEl("rect", { x, y: top - boxH - 10, width: w, height: boxH, rx: 18 });
  const boxMid = top - 10 - boxH / 2;
  place("dealer", rect(355, 290), 500, boxMid, dealerLines, [500, top + 62]);
  if (game !== "poker") {
    place("dead hand", rect(665, 425), 877, boxMid, deadLines, [1046, top + 62]);
  }
  for (let n = 1; n <= 6; n += 1) {
    const a = Math.PI * (1 - (n - 0.5) / 6);  // 165° .. 15°: left, round the bottom, right
    const x = 500 + rx * 0.8 * Math.cos(a), y = top + ry * 0.8 * Math.sin(a);
    const t = [500 + rx * 0.5 * Math.cos(a), top + ry * 0.5 * Math.sin(a)];
    place("seat " + n, svgEl("circle", { cx: x, cy: y, r: 64 }), x, y, [String(n)], t);
  }
  svg.classList.toggle("two", two);
}

// --- the trend board ------------------------------------------------------------------------

function renderTrend() {
  text("trend-title", tr("trend.title"));
  const list = $("trend");
  list.replaceChildren();
  for (const t of [...view.trend].reverse()) list.append(trendCell(t));
  // the mark of a corrected result, said once beside the board's title while a cell shows it
  // (the board shows fewer cells on a narrow screen)
  const marked = [...list.querySelectorAll(".cell.corrected")].some((c) => c.offsetParent !== null);
  text("trend-hint", tr(marked ? "trend.hint_corrected" : "trend.hint"));
}

// One round on the board: its number and total, the dice (or RNG), the first hand. A corrected
// result is marked (N.J.A.C. 13:69E-1.28P(d)); a round void is VOID, wagers returned, and shows
// no result (621a.12(c),(e)); a result voided in an older log keeps its dice, struck out.
function trendCell(t) {
  const returned = !!t.wagers_returned;
  const corrected = !!t.corrected && !t.void;
  const li = el("li", "cell" + (t.void ? " void" : "") + (returned ? " returned" : "")
    + (corrected ? " corrected" : ""));
  li.dataset.round = String(t.round ?? "");
  const top = el("div", "top");
  top.append(el("span", "rnd", tr(corrected ? "trend.round_corrected" : "trend.round",
    { n: t.round ?? "?" })));
  const mid = el("div", "mid");
  const pos = el("div", "pos");
  if (returned) {
    // VOID where the total stands, in the first language, and under it in the others
    const [first, ...others] = msgs("trend.void");
    if (first) {
      const word = line(first);
      word.classList.add("voidword");
      top.append(word);
    }
    mid.classList.add("voidmark");
    mid.replaceChildren(...others.map(line));
    pos.classList.add("returned-words");
    lines(pos, "trend.returned");
  } else {
    top.append(el("span", "num", t.total ?? t.count));
    if (t.dice) mid.append(miniDice(t.dice));
    else mid.append(el("span", "rng", tr("trend.rng")));
    if (t.void) {
      pos.classList.add("voidmark");
      pos.textContent = tr("trend.void");
    } else {
      const k = positionKey(t.starting_position, "short");
      pos.replaceChildren(...(k ? msgs(k[0], k[1]).map(line)
        : [el("span", "ln", String(t.starting_position ?? ""))]));
    }
  }
  if (mid.childElementCount) li.append(top, mid, pos);
  else li.append(top, pos);
  return li;
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

// ``test``: service mode, whose test rounds are not counted: the live shift's panel waits.
function renderStats(test) {
  const counts = shiftCounts(view.stats);
  const on = view.settings.stats_panel && !!counts && !test;
  show("stats", on);
  $("live").classList.toggle("with-stats", on);
  if (!on) return;
  $("stats").setAttribute("aria-label", tr("stats.aria"));
  text("stats-title", tr("stats.title"));
  text("stats-red-label", tr("stats.red"));
  text("stats-blue-label", tr("stats.blue"));
  text("stats-legend", tr("stats.legend"));
  const rolls = sumOf(counts.red);
  text("stats-rolls", rolls === 1 ? tr("stats.roll") : tr("stats.rolls", { n: rolls }));
  const enough = rolls >= HOT_COLD_MIN_ROLLS;
  const { hot, cold } = enough ? hotAndCold(counts.total) : { hot: [], cold: [] };
  show("stats-hot", enough);
  show("stats-cold", enough);
  show("stats-hot-cold-min", !enough);
  text("stats-hot-cold-min", enough ? "" : tr("stats.after", { n: HOT_COLD_MIN_ROLLS }));
  renderTotals($("stats-hot"), hot, "hot");
  renderTotals($("stats-cold"), cold, "cold");
  renderFaces($("stats-red"), counts.red, "red");
  renderFaces($("stats-blue"), counts.blue, "blue");
  renderFirstHands();
}

// Each total a column: the total, how often it was seen, how often it was expected; the
// row names stand at the left of the row.
function renderTotals(box, items, kind) {
  box.replaceChildren();
  const keys = el("span", "total-keys");
  keys.append(el("b", "stats-label " + kind, tr("stats." + kind)), el("span", "", tr("stats.seen")),
    el("span", "", tr("stats.expected")));
  box.append(keys);
  if (!items.length) { box.append(el("span", "stats-none", tr("stats.none"))); return; }
  for (const i of items) {
    const chip = el("span", "total-chip " + kind);
    chip.dataset.total = String(i.total);
    chip.append(el("b", "", i.total), el("span", "seen-n", i.count),
      el("span", "expected-n", i.expected.toFixed(1)));
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
  text("stats-first-title", tr("stats.first", { n: results.length }));
  for (const label of positionsOf(view.game || "tiles")) {
    const count = results.filter((t) => t.starting_position === label).length;
    const item = el("span", "first-item");
    item.dataset.position = label;
    const k = positionKey(label, "mini");
    const who = el("span", "who");
    who.replaceChildren(...(k ? msgs(k[0], k[1]).map(line) : []));
    item.append(who, el("b", "", count));
    box.append(item);
  }
}

function renderCommitment() {
  const c = view.commitment;
  show("commitment", !!c);
  if (!c) return;
  text("commit-session-label", tr("commit.session"));
  text("commit-value-label", tr("commit.value"));
  text("commit-session", c.session || "");
  text("commit-value", (c.commitment || "").match(/.{1,8}/g)?.join(" ") || "");
}

// How far the casino's witness anchors the log (the fleet): its size and the witness's time, in
// the box's local time.
function renderAnchor() {
  const box = $("anchor");
  if (PAGE !== "table" || !catalogue || !box) return;
  const a = view.anchor;
  const on = !!(a && Number.isInteger(a.size) && Number.isInteger(a.timestamp));
  box.hidden = !on;
  if (!on) return;
  const tz = view.clock && view.clock.tz !== null ? view.clock.tz : 0;
  const local = new Date(a.timestamp * 1000 + tz * 60000);
  const hhmm = String(local.getUTCHours()).padStart(2, "0") + ":"
    + String(local.getUTCMinutes()).padStart(2, "0");
  lines(box, "anchor.line", { n: a.size, time: hhmm });
}

// --- notices --------------------------------------------------------------------------------
// A refused key, for 5 s: over the trend board (never over the dice, the total, the first hand
// or the wagers), or at the head of a recall's records; the next screen clears it at once.

function notice(ev) {
  const d = ev.data || {};
  if (PAGE === "table") {
    // the players' message, chosen by the refusal's code (events.PLAYER_REFUSALS): never the
    // operator's words, which name states, events and rules
    lines(NOTICE, known("refused." + d.code) ? "refused." + d.code : "refused.no_change");
  } else {
    const reason = d.reason || "";
    NOTICE.textContent = tr("notice.refused") + " — "
      + (reason ? String(reason) : tr("notice.nothing"));
  }
  NOTICE.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { NOTICE.hidden = true; placeNotice(); }, 5000);
  placeNotice();
}

function clearNotice() {
  clearTimeout(noticeTimer);
  NOTICE.hidden = true;
}

function placeNotice() {
  if (PAGE !== "table") return;
  if (!$("recall").hidden && view.current && view.current.screen === "recall") {
    renderRecall($("recall"), view.current, false);  // the records give it room
  } else if (NOTICE.parentElement !== $("live")) {
    $("live").append(NOTICE);
  }
}

// --- game recall (AGCO 13.1.1) --------------------------------------------------------------
// A past round as controller/audit/recall.py gives it: its readings, its result and what the
// dealer and the supervisor did in it, in the order recorded. Shown on its own background
// under a banner that says it is not live. Returns ``back`` as rendered.

// Never on the players' page: the monitor's alarm and its evidence (issue 15).
const SUPERVISOR_ONLY_KINDS = new Set(["dice_alarm"]);
// Never on the players' page either: who did it (an employee id, an account) and a person's note.
const SUPERVISOR_ONLY_FIELDS = new Set(["alarm", "alarm_cleared", "counts", "log_e", "threshold",
  "employee", "uid", "dealer", "note"]);

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
  return tr("dice.text", { red: dice.red, blue });
}

function renderRecall(box, cur, forSupervisor) {
  box.replaceChildren();
  box.classList.remove("dense");
  box.setAttribute("aria-label", tr("recall.aria"));
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
  lines(banner.appendChild(el("div", "recall-title")), "recall.title", { back: back ?? "?", n });
  const gameRound = game && Number.isSafeInteger(game.round) ? game.round : null;
  const first = game && Array.isArray(game.records) && game.records.length ? game.records[0].time : "";
  banner.append(el("div", "recall-sub", [
    gameRound !== null ? "" : tr("recall.round_missing"),  // the round's number heads its column
    (view.table || "").toUpperCase(),
    tr("recall.waits", { n: cur.round ?? "–" }),
    tr("recall.times_utc") + (dateOf(first) ? " " + dateOf(first) : ""),
  ].filter(Boolean).join(" · ")));
  box.append(banner);
  if (!game) {
    box.append(lines(el("div", "recall-missing"), "recall.missing"));
    if (!forSupervisor && !NOTICE.hidden) box.append(NOTICE);
    return back;
  }
  const records = Array.isArray(game.records) ? game.records : [];
  const body = el("div", "recall-body");
  body.append(recallGame(game, records), recallRecords(records, forSupervisor));
  box.append(body);
  if (PAGE === "table" && !NOTICE.hidden) body.querySelector(".recall-records").prepend(NOTICE);
  fitRecall(box);
  return back;
}

// The result that stands in a recalled round: the last correction's (N.J.A.C. 13:69E-1.28P(d):
// the dice as they lie, with the dice first read), else the round's result; none for a round
// void (621a.12(c),(e)), whatever result it had. Read from the round's records, so a recall
// that names its correction, or gives the corrected result as its result, reads the same.
function recalledResult(game, records) {
  const isVoid = game.outcome === "void" || records.some((x) => x.kind === "void");
  if (isVoid) return { isVoid, r: null, correction: null, at: null };
  const correction = records.filter((x) => x.kind === "result_corrected"
    && x.data && typeof x.data.result === "object" && x.data.result).pop() || null;
  if (correction) {
    const d = correction.data;
    return { isVoid, r: { ...d.result, attempt: d.attempt }, correction: d, at: correction };
  }
  const r = game.result && typeof game.result === "object" ? game.result : null;
  return { isVoid, r, correction: null, at: records.filter((x) => x.kind === "result").pop() };
}

function recallGame(game, records) {
  const col = el("section", "recall-game");
  const head = el("div", "recall-head");
  const number = el("b", "", game.round);
  number.id = "recall-round";
  const label = el("span", "recall-round");
  label.append(tr("recall.round_label"), number);
  const { isVoid, r, correction, at } = recalledResult(game, records);
  const word = isVoid ? "void" : String(game.outcome);
  const outcome = el("span", "recall-outcome " + word.replace(" ", "-"),
    trOr("outcome." + word, {}, word.toUpperCase()));
  outcome.id = "recall-outcome";
  head.append(label, outcome);
  if (correction) {
    const mark = el("span", "recall-outcome corrected", tr("corrected.word"));
    mark.id = "recall-corrected";
    head.append(mark);
  }
  col.append(head);
  if (isVoid) {
    const box = el("div", "recall-void");
    box.id = "recall-void";
    box.append(lines(el("div", "recall-void-title"), "recall.void"),
      lines(el("div", "recall-void-returned"), "recall.returned"));
    col.append(box);
    return col;
  }
  if (!r) {
    col.append(el("div", "recall-noresult", tr("recall.no_result")));
    return col;
  }
  col.append(el("div", "recall-meta", [tr("recall.result"),
    r.attempt != null ? tr("recall.attempt", { n: r.attempt }) : "",
    at ? clock(at.time) : "", r.game ? String(r.game) : "",
    correction ? tr("recall.first_read", { dice: (lang) => diceIn(lang, correction.dice_read) }) : ""]
    .filter(Boolean).join(" · ")));
  const outcomeBox = el("div", "recall-outcome-box");
  if (r.dice && typeof r.dice === "object") {
    const dice = el("div", "recall-dice");
    dice.id = "recall-dice";
    const blue = Array.isArray(r.dice.blue) ? r.dice.blue : [];
    dice.append(die(r.dice.red, "red"), ...blue.map((f) => die(f, "blue")));
    const total = el("div", "recall-total");
    total.append(el("span", "label", tr("label.total")), el("b", "", r.total));
    total.lastChild.id = "recall-total";
    outcomeBox.append(dice, total);
  } else {
    const number = el("div", "recall-total");
    number.append(el("span", "label", tr("label.rng_number")), el("b", "", r.count));
    number.lastChild.id = "recall-total";
    outcomeBox.append(number);
  }
  col.append(outcomeBox);
  const starting = el("div", "recall-starting");
  const who = el("b", "", positionName(r.starting_position));
  who.id = "recall-starting";
  starting.append(el("span", "label", tr("label.first_hand")), who);
  col.append(starting);
  col.append(el("div", "recall-meta",
    tr("recall.bank", { who: positionOf(r.bank ?? "dealer", "who") })));
  if (r.wagers) {
    const wagers = el("div", "wagers recall-wagers");
    renderWagers(wagers, r);
    col.append(wagers);
  }
  return col;
}

function recallRecords(records, forSupervisor) {
  const col = el("section", "recall-records");
  const readings = records.filter((x) => x.kind === "reading");
  col.append(el("h2", "recall-h", tr("recall.readings", { n: readings.length })));
  const list = el("div", "recall-readings");
  list.id = "recall-readings";
  for (const x of readings) list.append(recallReading(x));
  if (!readings.length) list.append(el("div", "recall-none", tr("recall.no_reading")));
  col.append(list);
  const actions = records.filter((x) => x.kind !== "reading"
    && (forSupervisor || !SUPERVISOR_ONLY_KINDS.has(x.kind)));
  col.append(el("h2", "recall-h", tr("recall.actions", { n: actions.length })));
  const timeline = el("ol", "recall-actions");
  timeline.id = "recall-actions";
  for (const x of actions) {
    const li = el("li", "kind-" + String(x.kind));
    li.dataset.kind = String(x.kind);
    li.append(el("span", "at", clock(x.time)),
      el("span", "kind", trOr("kind." + x.kind, {}, words(x.kind))),
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
  const verdict = data.verdict == null ? "–" : trOr("verdict." + data.verdict, {},
    String(data.verdict).toUpperCase().replaceAll("_", " "));
  head.append(el("span", "at", clock(x.time)), el("span", "", tr("reading.seq", { n: x.seq })),
    el("span", "", tr("recall.attempt", { n: data.attempt ?? "–" })),
    el("span", "verdict", verdict));
  const digest = el("span", "digest mono",
    tr("reading.image") + " " + String(data.image_digest ?? "–"));
  head.append(digest);
  box.append(head);
  const dice = el("div", "reading-dice");
  for (const d of Array.isArray(data.dice) ? data.dice : []) {
    const q = d && typeof d === "object" ? d : {};
    const colour = q.colour === "red" || q.colour === "blue" ? q.colour : "other";
    const cell = el("span", "reading-die");
    cell.append(el("span", "chip " + colour, q.face ?? "?"));
    cell.append(el("span", "", trOr("die." + q.colour, {}, q.colour ?? "?")));
    cell.append(el("span", q.flat ? "" : "bad", tr(q.flat ? "die.flat" : "die.not_flat")));
    cell.append(el("span", q.inside ? "" : "bad", tr(q.inside ? "die.inside" : "die.out")));
    cell.append(el("span", "", tr("die.confidence") + " " + (q.confidence ?? "?") + "%"));
    if (Array.isArray(q.position)) cell.append(el("span", "", "(" + q.position.join(", ") + ")"));
    dice.append(cell);
  }
  box.append(dice);
  return box;
}

// The key data of one record, in words; anything not known is shown as its fields.
function recordDetail(kind, d, forSupervisor) {
  const att = d.attempt != null ? tr("recall.attempt", { n: d.attempt }) : "";
  const join = (...parts) => parts.filter((p) => p !== "" && p != null).join(" · ");
  const who = (label) => positionOf(label, "who");
  const faults = (list) => (Array.isArray(list) ? list : []).map(faultWords).join(", ");
  switch (kind) {
    case "round_opened": return "";
    case "no_more_bets": return join(tr("detail.bank", { who: who(d.bank ?? "dealer") }),
      d.mode ? tr("detail.mode", { mode: modeOf(d.mode) }) : "", d.co_bank ? tr("detail.co_bank") : "");
    case "bank_selected": return join(tr("detail.bank", { who: who(d.bank) }),
      d.co_bank ? tr("detail.co_bank") : "", typeof d.refused === "string"
        ? tr("detail.refused", { why: d.refused }) : d.refused ? tr("bank.refused") : "");
    case "delivery_style": return join(styleName(d.style), d.section);
    case "shake": return join(att, d.cycles != null ? tr("detail.cycles", { n: d.cycles }) : "",
      d.delay_ms != null ? tr("detail.delay", { n: d.delay_ms }) : "");
    case "no_roll": return join(att, trOr("no_roll." + d.reason, {}, words(d.reason)));
    case "result": return join(att, d.dice ? diceText(d.dice) : tr("detail.rng", { n: d.count }),
      d.total != null ? tr("detail.total", { n: d.total }) : "",
      tr("detail.first_hand", { who: positionOf(d.starting_position, "pos") }));
    case "result_voided": return join(att, trOr("void." + d.reason, {}, words(d.reason)), d.detail);
    case "result_corrected": {
      const r = d.result && typeof d.result === "object" ? d.result : {};
      return join(att, d.reason ? trOr("correction." + d.reason, {}, words(d.reason)) : "",
        tr("detail.read_seen", { read: diceText(d.dice_read), seen: diceText(d.dice_seen) }),
        r.total != null ? tr("detail.total", { n: r.total }) : "",
        r.starting_position ? tr("detail.first_hand", { who: positionOf(r.starting_position, "pos") }) : "",
        by(d, forSupervisor));
    }
    case "void": return join(d.state ? tr("detail.in_state", { state: words(d.state) }) : "",
      d.reason ? trOr("void." + d.reason, {}, words(d.reason)) : "",
      d.wagers === "returned" ? tr("detail.returned") : "",
      d.reshuffle === true ? tr("detail.reshuffle") : "",
      d.supervisor ? tr("detail.by_supervisor") : "", d.detail, by(d, forSupervisor));
    case "lid": return join(tr(d.opened ? "detail.lid_opened" : "detail.lid_closed"),
      d.state ? tr("detail.in_state", { state: words(d.state) }) : "");
    case "tamper_loop": return join(tr(d.closed ? "detail.loop_closed" : "detail.loop_opened"),
      d.state ? tr("detail.in_state", { state: words(d.state) }) : "");
    case "tiles_shuffled": return join(d.reason ? trOr("shuffle." + d.reason, {}, words(d.reason)) : "",
      by(d, forSupervisor));
    case "tiles_inspected": return join(tr("detail.set", { id: d.tile_set }),
      d.previous != null ? tr("detail.was", { id: d.previous }) : "", by(d, forSupervisor));
    case "fault": return join(faultWords(d.fault), d.detail);
    case "fault_cleared": return join(faults(d.faults), d.supervisor ? tr("detail.by_supervisor") : "");
    case "supervisor_action": return join(words(d.action), d.detail,
      forSupervisor && d.alarm ? "alarm " + alarmWords(d.alarm) : "");
    case "dice_replaced": return join(tr("detail.set", { id: d.dice_set }),
      d.previous != null ? tr("detail.was", { id: d.previous }) : "",
      forSupervisor && d.alarm_cleared ? "alarm cleared (" + d.alarm_cleared + ")" : "");
    case "mode_changed": return join(
      tr("detail.mode_change", { previous: modeOf(d.previous), mode: modeOf(d.mode) }),
      Array.isArray(d.cleared) && d.cleared.length
        ? tr("detail.cleared", { faults: faults(d.cleared) }) : "");
    case "dice_alarm": return forSupervisor ? alarmWords(d) : "";
    default: return fieldsOf(d, forSupervisor);
  }
}

const modeOf = (mode) => inLang("mode." + mode, {}, words(mode));

// Who did it and their note: on the supervisor's page only.
function by(d, forSupervisor) {
  if (!forSupervisor) return "";
  return [d.employee ? "employee " + d.employee : "", d.note ? "“" + d.note + "”" : ""]
    .filter(Boolean).join(" · ");
}

// The supervisor's page only (never shown to players): the monitor's alarm in its own terms.
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
  trimOldest(box.querySelector(".recall-readings"), ".reading", "recall.left_out_reading", overflows);
  trimOldest(box.querySelector(".recall-actions"), "li:not(.recall-none)", "recall.left_out_record",
    overflows);
}

function trimOldest(list, selector, key, overflows) {
  let dropped = 0;
  let note = null;
  while (list && overflows() && list.querySelectorAll(selector).length > 1) {
    list.querySelector(selector).remove();
    dropped += 1;
    if (!note) {
      note = el(list.tagName === "OL" ? "li" : "div", "recall-none recall-left-out");
      list.prepend(note);
    }
    note.textContent = tr(dropped > 1 ? key + "s" : key, { n: dropped });
  }
}

// --- start ----------------------------------------------------------------------------------

async function loadCatalogue() {
  // Once at start; until it has loaded the page shows the offline screen it was served with.
  for (;;) {
    try {
      const response = await fetch("/messages.json", { cache: "no-store" });
      if (response.ok) {
        const body = await response.json();
        if (body && typeof body === "object" && body.en && typeof body.en === "object") return body;
      }
    } catch (e) {
      // the controller is not there (yet): the page stays offline and asks again
    }
    await new Promise((resolve) => { setTimeout(resolve, 1000); });
  }
}

// The page's own fonts (display.css, @font-face), every face loaded before the first layout:
// what fits in a column is measured in them, never in a fallback face.
function loadFonts() {
  const faces = ["Table Sans", "Table Sans CJK TC", "Table Symbols", "Table Math", "Table Mono"]
    .flatMap((family) => [400, 700].map((weight) => document.fonts.load(`${weight} 16px "${family}"`)));
  return Promise.all(faces).catch(() => null);  // a face that fails: the page still runs
}

// --- kiosk ----------------------------------------------------------------------------------
// The kiosk (hw/kiosk): the players' page takes no touch, so a long press opens no menu (the
// CSS's kiosk block turns off the cursor and selection); and a service worker keeps the kiosk's
// waiting page, shown in place of the browser's error page when the page is loaded while the
// controller does not answer (kiosk-sw.js; http://127.0.0.1 is a secure context).
function kiosk() {
  if (PAGE === "table") {
    document.addEventListener("contextmenu", (e) => { e.preventDefault(); });
  }
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/kiosk-sw.js", { scope: "/" }).catch(() => null);
  }
}

kiosk();

Promise.all([loadCatalogue(), loadFonts()]).then(([body]) => {
  catalogue = body;
  render();
  connect();
  setInterval(tick, 250);
});
