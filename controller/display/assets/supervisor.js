// The supervisor's view (pit podium; never shown to players): the dice monitor's state and its
// alarm (issue 15), the dice set and the set of tiles with their warnings (proposed 621a.5(c);
// 621a.6(a), 621a.3(e)), the table's meters, the last corrections and voids with who made them,
// the face counts over the set and the shift with their p-values, and what the table shows now.
// Game recall and the stream are display.js's, which loads after this file and calls
// renderSupervisor.
// Everything from the stream is shown with textContent, never parsed as markup.
"use strict";

const SUP_TEST_WORDS = { red: "RED DIE", blue: "BLUE DICE (pooled)", total: "TOTAL OF THE DICE" };
const SUP_COLOURS = ["red", "blue"];

function renderSupervisor(cur) {
  const d = cur.data || {};
  text("table-name", (view.table || "").toUpperCase());
  text("round", cur.round ?? "–");
  supStatus(cur, d);
  supNow(cur, d);
  supDiceSet(view.dice);
  supTiles(view.tiles);
  supMeters(view.meters);
  supInterventions(view.interventions);
  const stats = view.stats && typeof view.stats === "object" ? view.stats : null;
  supAlarm(stats);
  supMonitor(stats);
  supCounts(stats);
}

// The table's status as `paigow-controller status` says it: every active fault or condition
// with its stable code, what it means, who may clear it and how (the table of
// controller/core/faults.py, served as /faults.json), and the LIVE indicator in its colour:
// red while play is stopped, amber for a notice, green otherwise.
let supFaultTable = null;
fetch("/faults.json", { cache: "no-store" })
  .then((r) => (r.ok ? r.json() : null))
  .then((table) => {
    supFaultTable = table && typeof table === "object" ? table : null;
    if (typeof render === "function" && view.current) render();  // display.js
  })
  .catch(() => {});

function supConditions(cur, d) {
  const found = [];
  if (cur.screen === "fault") {
    for (const f of Array.isArray(d.faults) ? d.faults : []) found.push(String(f));
  }
  if (cur.screen === "locked") found.push("reshake_limit");
  if (!d.service) {
    const life = (x, missing, expired) => {
      if (!x || typeof x !== "object") return;
      if (x.set == null) found.push(missing);
      else if (x.minutes_left === 0) found.push(expired);
    };
    life(view.dice, "dice_missing", "dice_expired");
    life(view.tiles, "tiles_missing", "tiles_expired");
  }
  if (view.clock && view.clock.synchronised === false) found.push("clock_unsynchronised");
  const rows = [...new Set(found)].map((name) => {
    const row = supFaultTable && supFaultTable[name] && typeof supFaultTable[name] === "object"
      ? supFaultTable[name] : {};
    return { name, code: row.code || "F??", meaning: row.meaning || "", who: row.who || "",
      how: row.how || "", stops: row.stops_play !== false };
  });
  return rows.sort((a, b) => (a.code < b.code ? -1 : a.code > b.code ? 1 : 0));
}

function supStatus(cur, d) {
  const rows = supConditions(cur, d);
  const stopped = rows.some((r) => r.stops);
  const stats = view.stats && typeof view.stats === "object" ? view.stats : null;
  const warned = rows.length > 0 || !!(stats && stats.alarm)
    || [view.dice, view.tiles].some((x) => x && typeof x === "object" && x.warning != null);
  const level = stopped ? "stopped" : warned ? "notice" : "ok";
  const line = $("status-line");
  line.dataset.level = level;
  $("live").dataset.level = level;  // supervisor.css: play stopped, the fault comes first
  line.classList.toggle("service", !!d.service && level === "ok");
  const codes = rows.filter((r) => r.stops).map((r) => r.code).join(" ");
  text("status-line", stopped ? "PLAY STOPPED — " + codes
    : d.service ? "SERVICE — TEST ROUNDS" : warned ? "LIVE — ATTENTION" : "LIVE");
  show("sup-faults", rows.length > 0);
  $("sup-faults").dataset.level = level;
  text("sup-faults-title", stopped
    ? (rows.length === 1 ? "PLAY STOPPED — 1 FAULT" : "PLAY STOPPED — " + rows.length + " FAULTS")
    : "NOTICE — PLAY GOES ON");
  const list = $("sup-fault-list");
  list.replaceChildren();
  for (const r of rows) {
    const li = el("li", "sup-fault" + (r.stops ? " stops" : ""));
    li.dataset.code = r.code;
    li.dataset.name = r.name;
    li.append(el("span", "sup-fault-code", r.code), el("span", "sup-fault-name", words(r.name)),
      el("span", "sup-fault-who", r.who ? "clears: " + r.who : ""));
    if (r.meaning) li.append(el("span", "sup-fault-meaning", r.meaning));
    if (r.how) li.append(el("span", "sup-fault-how", r.how));
    list.append(li);
  }
  const health = $("sup-health");
  health.replaceChildren();
  const c = view.clock;
  health.append(el("li", "", "Clock: " + (c ? (c.synchronised ? "synchronised" : "NOT synchronised") : "–")));
  const a = view.anchor && typeof view.anchor === "object" ? view.anchor : null;
  const at = a && Number.isInteger(a.timestamp)
    ? " at " + new Date(a.timestamp * 1000).toISOString().slice(11, 16) + " UTC" : "";
  health.append(el("li", "", a && Number.isInteger(a.size)
    ? "Witness: cosigned " + a.size + " records" + at : "Witness: no cosignature yet"));
}

function supNow(cur, d) {
  const screen = cur.screen;
  text("sup-screen", (d.service ? "SERVICE — " : "")
    + trOr("headline." + screen, {}, String(screen).toUpperCase()));  // display.js: the catalogue
  const list = $("sup-details");
  list.replaceChildren();
  const line = (words) => { if (words) list.append(el("li", "", words)); };
  if (d.mode) line("Mode: " + words(d.mode));
  if (d.bank != null) line("Bank: " + d.bank + (d.co_bank ? " — co-banking with the dealer" : ""));
  if (d.bank_refused != null) line("Bank refused: " + d.bank_refused);
  if (d.delivery_style != null) line("Delivery style: " + styleName(d.delivery_style));
  if (screen === "bets_closed" && d.mode === "rng") {
    line("The bank may choose the style of delivery (621a.11(i)); the dealer's dice-set key has the RNG draw.");
  }
  if (d.attempt != null) line("Attempt " + d.attempt);
  if (screen === "no_roll") line("No roll: " + (d.words || words(d.reason || "")));
  if (screen === "result" && d.result && typeof d.result === "object") {
    const r = d.result;
    line((r.dice ? "Dice " + diceText(r.dice) + " · total " + r.total : "RNG number " + r.count)
      + " · first hand " + positionName(r.starting_position));
    if (d.mode === "rng") line("An RNG round: no side wager settles (current 621a.5(e)(2)-(4)).");
    const c = d.corrected && typeof d.corrected === "object" ? d.corrected : null;
    if (c) {
      line("CORRECTED (" + words(c.reason || "") + ") by employee " + (c.employee || "?")
        + ": read " + diceText(c.dice_read) + ", the dice as they lie " + diceText(r.dice));
    }
  }
  // each fault is in the status box above, with its code and how to clear it
  if (screen === "fault" && d.fallback === "rng") line("The table can go on with its RNG (supervisor).");
  if (screen === "locked") line("The no-roll limit: a supervisor must clear the table.");
  if (d.rng_session) line("RNG session " + d.rng_session);
}

function supDiceSet(dice) {
  supLife("sup-set", dice, "— (shown with bets open; an RNG table has none)");
}

function supTiles(tiles) {
  supLife("sup-tiles", tiles, "— (shown with bets open at tiles)");
}

// A set in play and the core's warning, in its own words: none recorded, its life over (play
// stops until the supervisor acts), or the minutes it has left.
function supLife(id, life, unknown) {
  const known = life && typeof life === "object";
  text(id, known ? String(life.set ?? "NONE RECORDED") : unknown);
  $(id).classList.toggle("sup-dim", !known);
  const warning = known && life.warning != null ? String(life.warning) : "";
  const stopped = known && (life.set == null || life.minutes_left === 0);
  show(id + "-warning", !!warning);
  text(id + "-warning", (stopped ? "PLAY STOPPED — " : "") + warning);
  $(id + "-warning").classList.toggle("sup-stopped", stopped);
}

const SUP_METERS = [["games", "Games"], ["corrections", "Results corrected"],
  ["round_voids", "Rounds void"], ["lid_openings", "Lid openings"], ["tamper", "Tamper loop opened"],
  ["power_ups", "Power-ups"], ["service_mode", "Service mode entered"]];

function supMeters(meters) {
  const list = $("sup-meters");
  list.replaceChildren();
  const m = meters && typeof meters === "object" ? meters : null;
  if (!m) {
    list.append(el("div", "sup-dim", "No meters yet: they come with bets open."));
    text("sup-no-rolls", "");
    return;
  }
  for (const [key, name] of SUP_METERS) {
    const item = el("div", "sup-meter-item");
    item.dataset.meter = key;
    item.append(el("dt", "", name), el("dd", "", Number.isSafeInteger(m[key]) ? m[key] : "–"));
    list.append(item);
  }
  const reasons = m.no_rolls && typeof m.no_rolls === "object" ? Object.entries(m.no_rolls) : [];
  const counted = reasons.filter(([, n]) => Number.isSafeInteger(n));
  const all = counted.reduce((a, [, n]) => a + n, 0);
  const item = el("div", "sup-meter-item");
  item.dataset.meter = "no_rolls";
  item.append(el("dt", "", "No rolls"), el("dd", "", all));
  list.append(item);
  text("sup-no-rolls", counted.filter(([, n]) => n > 0)
    .map(([reason, n]) => words(reason) + " " + n).join(" · ") || "No no rolls.");
}

// Who corrected a result or voided a round lately, and why (N.J.A.C. 13:69E-1.28P; 621a.12).
function supInterventions(list) {
  const box = $("sup-interventions");
  box.replaceChildren();
  const items = Array.isArray(list) ? list.filter((i) => i && typeof i === "object") : [];
  if (!items.length) {
    box.append(el("li", "sup-dim", "None since the log's last records of them."));
    return;
  }
  for (const i of [...items].reverse()) {
    const li = el("li", "sup-intervention " + (i.kind === "void" ? "is-void" : "is-correction"));
    li.dataset.kind = String(i.kind);
    li.dataset.round = String(i.round ?? "");
    const what = i.kind === "void"
      ? "ROUND " + (i.round ?? "?") + " VOID — " + words(i.reason || "void") + ", wagers returned"
        + (i.reshuffle ? ", tiles reshuffled" : "")
      : "ROUND " + (i.round ?? "?") + " CORRECTED — " + words(i.reason || "") + ": read "
        + diceText(i.dice_read) + " → " + diceText(i.dice_seen)
        + (i.total != null ? " (total " + i.total + ")" : "");
    li.append(el("span", "sup-who", i.employee ? "employee " + i.employee : "no employee id"),
      el("span", "sup-what", what), el("span", "sup-when", clock(i.time)));
    if (i.note) li.append(el("span", "sup-note", "“" + i.note + "”"));
    box.append(li);
  }
}

// The alarm stands until the supervisor replaces the dice, or inspects and keeps them.
function supAlarm(stats) {
  const a = stats && stats.alarm && typeof stats.alarm === "object" ? stats.alarm : null;
  show("sup-alarm", !!a);
  if (!a) return;
  text("sup-alarm-what", (SUP_TEST_WORDS[a.test] || String(a.test).toUpperCase())
    + (a.face != null ? ", FACE " + a.face : "") + " LOOKS LOADED");
  text("sup-alarm-evidence", "Evidence ln E = " + a.log_e + " ≥ threshold " + a.threshold
    + " · raised in round " + a.round + ", after " + a.rolls + " rolls of these dice");
  text("sup-alarm-action", (stats.locks
    ? "The table locks after the round. "
    : "Play goes on (this table does not lock on an alarm). ")
    + "Replace the dice, or inspect them and keep them (supervisor key).");
}

// Each test's evidence against fair dice (ln of a test martingale) as a bar towards the
// threshold at which it raises the alarm (ln 1/alpha).
function supMonitor(stats) {
  const box = $("sup-tests");
  box.replaceChildren();
  const m = stats && stats.monitor && typeof stats.monitor === "object" ? stats.monitor : null;
  const rolls = m && m.rolls === 1 ? "1 roll" : (m ? m.rolls + " rolls" : "");
  text("sup-monitor-rolls", m ? "· " + rolls + " tested (since the set was put in or kept)" : "");
  text("sup-locks", stats ? (stats.locks ? "On an alarm the table locks after the round."
    : "On an alarm play goes on; the alarm is shown here.") : "");
  if (!m || !Array.isArray(m.tests)) {
    box.append(el("div", "sup-dim", "No dice statistics yet: they come with bets open (none in RNG mode)."));
    return;
  }
  const alarmed = stats.alarm && typeof stats.alarm === "object" ? stats.alarm.test : null;
  for (const t of m.tests) {
    const q = t && typeof t === "object" ? t : {};
    const logE = Number.parseFloat(q.log_e), threshold = Number.parseFloat(q.threshold);
    const share = threshold > 0 && Number.isFinite(logE) ? Math.min(1, Math.max(0, logE / threshold)) : 0;
    const over = Number.isFinite(logE) && logE >= threshold;
    const row = el("div", "sup-test" + (over || q.test === alarmed ? " over" : ""));
    row.dataset.test = String(q.test);
    row.append(el("span", "sup-test-name", SUP_TEST_WORDS[q.test] || String(q.test)));
    const track = el("span", "sup-track");
    const bar = el("span", "sup-meter");
    bar.style.width = (100 * share).toFixed(1) + "%";
    track.append(bar);
    row.append(track);
    row.append(el("span", "sup-test-figure", "ln E " + q.log_e + " / " + q.threshold));
    row.append(el("span", "sup-test-face", q.face != null ? "leans to face " + q.face : ""));
    box.append(row);
  }
}

function supCounts(stats) {
  const box = $("sup-counts");
  box.replaceChildren();
  if (!stats) {
    box.append(el("div", "sup-dim", "No counts yet."));
    return;
  }
  const p = stats.monitor && stats.monitor.p_values ? stats.monitor.p_values : {};
  for (const colour of SUP_COLOURS) {
    box.append(supTable(colour, colour === "red" ? "RED DIE" : "BLUE DICE (pooled)",
      [1, 2, 3, 4, 5, 6], stats, p[colour], 6));
  }
  box.append(supTable("total", "TOTAL", TOTAL_WAYS.map((_, k) => k + 3), stats, p.total, 16));
}

function supTable(key, title, heads, stats, pValue, size) {
  const table = el("table", "sup-table sup-table-" + key);
  table.dataset.counts = key;
  const caption = el("caption", "", title);
  table.append(caption);
  const head = el("tr");
  head.append(el("th", "", ""));
  for (const h of heads) {
    const th = el("th", "");
    th.append(key === "total" ? el("span", "", h) : el("span", "chip " + key, h));
    head.append(th);
  }
  head.append(el("th", "", "rolls"), el("th", "", "p"));
  table.append(head);
  for (const span of ["set", "shift"]) {
    const counts = stats[span] && stats[span][key];
    const ok = isCounts(counts, size);
    const n = ok ? sumOf(counts) : 0;
    const tr = el("tr");
    tr.dataset.window = span;
    tr.append(el("th", "", span === "set" ? "SET" : "SHIFT"));
    for (let k = 0; k < size; k += 1) {
      const td = el("td");
      if (ok) {
        td.append(el("b", "", counts[k]), el("span", "sup-pct", percent(counts[k], n)));
      } else {
        td.textContent = "–";
      }
      tr.append(td);
    }
    tr.append(el("td", "sup-rolls", ok ? (key === "blue" ? n + " dice" : String(n)) : "–"));
    tr.append(el("td", "sup-p", span === "set" && pValue != null ? String(pValue) : "–"));
    table.append(tr);
  }
  const fair = el("tr", "sup-fair");
  fair.append(el("th", "", "FAIR"));
  for (let k = 0; k < size; k += 1) {
    fair.append(el("td", "", key === "total" ? percent(TOTAL_WAYS[k], 216) : percent(1, 6)));
  }
  fair.append(el("td"), el("td"));
  table.append(fair);
  return table;
}
