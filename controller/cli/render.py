"""What the reading commands print on a terminal: pure functions, the command's JSON document
in, text out. No I/O: the command decides at its edge (``sys.stdout.isatty()``, ``--json``)
whether a person or a program reads, and prints either this text or the JSON unchanged.

Times in the log are UTC; a person reads them in the machine's own time zone. Every function
that shows a time takes ``zone``: a ``tzinfo``, or None for the machine's zone as TZ or
/etc/localtime say it (``datetime.astimezone()``, which knows each instant's daylight saving).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, tzinfo
from typing import Any

from controller.core.dice_monitor import TOTALS
from controller.core.records import RecordKind

# --- columns ---------------------------------------------------------------------------------


def clean(text: str) -> str:
    """``text`` safe to put on a terminal, in one line: a line break or tab becomes a space,
    any other control character (an escape sequence from a log's data) is shown escaped."""
    return "".join(c if c.isprintable() else " " if c in "\n\r\t" else repr(c)[1:-1] for c in text)


def columns(headers: Sequence[str], rows: Iterable[Sequence[object]], *, right: str = "") -> str:
    """Rows under their headers in aligned columns, two spaces apart. ``right`` holds one
    character per column: ``r`` right-aligns it (numbers), anything else left-aligns it."""
    cells = [
        [clean(str(h)) for h in headers],
        *[["-" if c is None else clean(str(c)) for c in r] for r in rows],
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            cell.rjust(width) if right[i : i + 1] == "r" else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _fields(pairs: Iterable[tuple[str, object]]) -> list[str]:
    """``name  value`` lines, the values aligned, indented by two."""
    pairs = list(pairs)
    width = max((len(name) for name, _ in pairs), default=0)
    return [f"  {name.ljust(width)}  {clean(_value(value))}" for name, value in pairs]


def _value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value(v)}" for k, v in value.items()) if value else "none"
    return str(value)


# --- times -----------------------------------------------------------------------------------


def local_time(utc_text: str, zone: tzinfo | None) -> datetime | str:
    """A record's UTC time (``2026-11-30T19:03:12.345Z``) in ``zone``; a time that is not
    one (a damaged copy of a log: verify-log names it) as it was written."""
    try:
        moment = datetime.fromisoformat(utc_text)
    except ValueError:
        return utc_text
    return moment.astimezone(zone) if moment.tzinfo is not None else utc_text


def zone_label(moment: datetime) -> str:
    """The zone of an aware time as a reader knows it: ``EST (UTC-05:00)``."""
    offset = moment.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    name = moment.tzname() or ""
    utc = f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    return f"{name} ({utc})" if name and name != utc else utc


def _clock(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


# --- recall ----------------------------------------------------------------------------------

RECALL_HEADERS = (
    "round",
    "opened",
    "red",
    "blue",
    "total",
    "start",
    "bank",
    "attempt",
    "read as",
    "voids",
    "no rolls",
    "faults",
    "outcome",
)
_VOIDS = frozenset({RecordKind.VOID, RecordKind.RESULT_VOIDED})


def correction_of(game: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The round's ``result_corrected`` record's data (N.J.A.C. 13:69E-1.28P(d)), if its
    result was corrected to the dice as they lie."""
    found = None
    for record in game["records"]:
        if record["kind"] == RecordKind.RESULT:
            found = None  # a log from before corrections: a result decided again
        elif record["kind"] == RecordKind.RESULT_CORRECTED and isinstance(record["data"], dict):
            found = record["data"]
    return found


def standing_result(game: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The result the round stands on: the corrected one (the dice seen), else its result."""
    correction = correction_of(game)
    corrected = None if correction is None else correction.get("result")
    return corrected if isinstance(corrected, dict) else game.get("result")


def void_of(game: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The round's ``void`` record's data, if the whole round is void."""
    for record in game["records"]:
        if record["kind"] == RecordKind.VOID and isinstance(record["data"], dict):
            return record["data"]
    return None


def round_opened_at(game: Mapping[str, Any]) -> str | None:
    """The UTC time the round opened (its ``round_opened`` record; else its first record)."""
    records = game["records"]
    for record in records:
        if record["kind"] == RecordKind.ROUND_OPENED:
            return str(record["time"])
    return str(records[0]["time"]) if records else None


def round_counts(game: Mapping[str, Any]) -> dict[str, int]:
    """The round's voids (of the round or of a result), no rolls and faults."""
    kinds = [record["kind"] for record in game["records"]]
    return {
        "voids": sum(kind in _VOIDS for kind in kinds),
        "no rolls": kinds.count(RecordKind.NO_ROLL),
        "faults": kinds.count(RecordKind.FAULT),
    }


def _dice(result: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    dice = None if result is None else result.get("dice")
    if not isinstance(dice, dict):
        return None, None  # no result yet, or an RNG draw in position mode (no dice)
    blue = dice.get("blue")
    shown = " ".join(str(face) for face in blue) if isinstance(blue, list) else None
    return str(dice.get("red")), shown


def _total(result: Mapping[str, Any] | None) -> object:
    if result is None:
        return None
    return result.get("total", result.get("count"))


def recall_row(game: Mapping[str, Any], zone: tzinfo | None) -> list[object]:
    """One round: the result it stands on (a corrected one's dice seen, with the dice the
    sensor read under "read as"), its voids, no rolls and faults, and its outcome (a void's
    reason with it)."""
    result = game.get("result")
    standing = standing_result(game)
    correction = correction_of(game)
    opened = round_opened_at(game)
    red, blue = _dice(standing)
    counts = round_counts(game)
    voided = void_of(game)
    outcome = str(game["outcome"])
    if voided is not None and voided.get("reason") is not None:
        outcome = f"{outcome} ({voided.get('reason')})"
    return [
        game["round"],
        None if opened is None else local_time(opened, zone),
        red,
        blue,
        _total(standing),
        None if standing is None else standing.get("starting_position"),
        None if standing is None else standing.get("bank"),
        None if result is None else result.get("attempt"),
        None if correction is None else _faces_text(correction.get("dice_read")),
        counts["voids"],
        counts["no rolls"],
        counts["faults"],
        outcome,
    ]


def _faces_text(dice: object) -> str | None:
    """Dice as the table row shows them: ``3 4 5`` (red, blue, blue)."""
    red, blue = _dice({"dice": dice})
    return None if red is None else f"{red} {blue}"


def recall_table(rounds: Sequence[Mapping[str, Any]], *, heading: str, zone: tzinfo | None) -> str:
    """The rounds, one line each, oldest first, under ``heading``. The times are local: the
    zone is named under the heading, and on every time when the rounds span two (daylight
    saving began or ended between them)."""
    if not rounds:
        return f"{heading}: no rounds\n"
    rows = [recall_row(game, zone) for game in rounds]
    moments = [row[1] for row in rows if isinstance(row[1], datetime)]
    labels = list(dict.fromkeys(zone_label(moment) for moment in moments))
    for row in rows:
        moment = row[1]
        if isinstance(moment, datetime):
            row[1] = _clock(moment) if len(labels) == 1 else f"{_clock(moment)} {moment.tzname()}"
    zones = f"times are local: {' then '.join(labels)}" if labels else "no times recorded"
    table = columns(RECALL_HEADERS, rows, right="r_rrr__r_rrr_")
    return f"{heading}\n{zones}\n\n{table}\n"


def round_report(game: Mapping[str, Any], *, zone: tzinfo | None) -> str:
    """One round in detail: what ``recall`` shows of it, then each of its records in order."""
    opened = recall_row(game, zone)[1]
    when = (
        f"opened {_clock(opened)} {zone_label(opened)}"
        if isinstance(opened, datetime)
        else "no time recorded"
        if opened is None
        else f"opened {opened} (not a time)"
    )
    lines = [clean(f"round {game['round']} ({game['outcome']}), {when}")]
    result = game.get("result")
    standing = standing_result(game)
    figures: list[tuple[str, object]] = [("result", "none yet")]
    if result is not None and standing is not None:
        figures = [
            ("dice", _dice_text(standing)),
            ("total", _total(standing)),
            ("starting position", standing.get("starting_position")),
            ("bank", standing.get("bank")),
            ("result's attempt", result.get("attempt")),
            ("side wagers", _payouts(standing.get("payouts"))),
        ]
    correction = correction_of(game)
    if correction is not None:
        figures.append(("corrected", _correction_text(correction)))
    voided = void_of(game)
    if voided is not None and "reason" in voided:
        figures.append(("void", _void_text(voided)))
    lines += _fields([*figures, *round_counts(game).items()])
    times = [local_time(str(record["time"]), zone) for record in game["records"]]
    days = {moment.date() if isinstance(moment, datetime) else moment for moment in times}
    shown = "%H:%M:%S.%f" if len(days) <= 1 else "%Y-%m-%d %H:%M:%S.%f"
    records = [
        [
            record["seq"],
            moment.strftime(shown)[:-3] if isinstance(moment, datetime) else moment,
            record["kind"],
            record_text(str(record["kind"]), record["data"]),
        ]
        for record, moment in zip(game["records"], times, strict=True)
    ]
    lines += ["", columns(["record", "time", "kind", "what"], records, right="r")]
    return "\n".join(lines) + "\n"


def _dice_text(result: Mapping[str, Any]) -> str:
    red, blue = _dice(result)
    return "-" if red is None else f"red {red}, blue {blue}"


def _payouts(payouts: object) -> str:
    if not isinstance(payouts, dict) or not payouts:
        return "none"
    shown = []
    for name, payout in payouts.items():
        if isinstance(payout, dict) and payout.get("wins"):
            shown.append(f"{name} wins ({payout.get('outcome')}, pays {payout.get('pays')})")
        else:
            shown.append(f"{name} loses")
    return "; ".join(shown)


def _who(data: Mapping[str, Any]) -> str:
    """Who did it: the employee id, or the panel's key with no dealer signed on; the
    operating system's account of a terminal command."""
    employee = data.get("employee")
    who = f"by {employee}" if employee is not None else "by the panel, no dealer signed on"
    return who if data.get("uid") is None else f"{who} (uid {data.get('uid')})"


def _correction_text(data: Mapping[str, Any]) -> str:
    """N.J.A.C. 13:69E-1.28P(d): the dice read, the dice seen, why and who."""
    read, seen = (
        _dice_text({"dice": data.get("dice_read")}),
        _dice_text({"dice": data.get("dice_seen")}),
    )
    note = f"; note {data.get('note')}" if data.get("note") else ""
    return f"dice read {read} -> dice seen {seen}: {data.get('reason')}, {_who(data)}{note}"


def _void_text(data: Mapping[str, Any]) -> str:
    """621a.12(c),(e): why the whole round is void, who, and what became of the wagers."""
    wagers = "every wager returned" if data.get("wagers") == "returned" else "wagers not returned"
    reshuffle = ", the tiles reshuffled (a new game)" if data.get("reshuffle") else ""
    note = f"; note {data.get('note')}" if data.get("note") else ""
    return f"{data.get('reason')}, {_who(data)}: {wagers}{reshuffle}{note}"


def record_text(kind: str, data: Mapping[str, Any]) -> str:
    """A record's data in a line: the reading's dice and verdict, the result's dice and
    position, a correction's dice read and seen, a void's reason; who did it first (an
    operator's action); any other record's fields as ``name value`` (the round number left
    out, it is the round's own)."""
    said = _KIND_TEXT.get(kind)
    text = None if said is None else said(data)
    return _fields_text(data) if text is None else text


def _reading_text(data: Mapping[str, Any]) -> str:
    dice = data.get("dice")
    faces = []
    for die in dice if isinstance(dice, list) else []:
        if isinstance(die, dict):
            posture = "" if die.get("flat", True) else " not flat"
            where = "" if die.get("inside", True) else " outside"
            faces.append(f"{die.get('colour')} {die.get('face')}{posture}{where}")
    return f"attempt {data.get('attempt')}: {', '.join(faces)} ({data.get('verdict')})"


def _result_text(data: Mapping[str, Any]) -> str:
    return (
        f"attempt {data.get('attempt')}: {_dice_text(data)}, total {_total(data)},"
        f" start {data.get('starting_position')}, bank {data.get('bank')}"
    )


def _corrected_text(data: Mapping[str, Any]) -> str:
    corrected = data.get("result")
    standing = corrected if isinstance(corrected, dict) else {}
    return (
        f"attempt {data.get('attempt')}: {_correction_text(data)}; total"
        f" {_total(standing)}, start {standing.get('starting_position')}"
    )


def _void_record_text(data: Mapping[str, Any]) -> str | None:
    """A round voided by a supervisor (with its reason); None for any other void."""
    if "reason" not in data:
        return None
    return f"attempt {data.get('attempt')}, {data.get('state')}: {_void_text(data)}"


def _fields_text(data: Mapping[str, Any]) -> str:
    """Any other record: who did it first, then its fields as ``name value``."""
    if "employee" not in data:
        return ", ".join(f"{k} {_value(v)}" for k, v in data.items() if k != "round")
    fields = ", ".join(
        f"{k} {_value(v)}" for k, v in data.items() if k not in ("round", "employee", "uid")
    )
    return f"{_who(data)}: {fields}" if fields else _who(data)


# --- verify-log, selftest, paytables, check-config, dice-stats -------------------------------


def verify_report(doc: Mapping[str, Any]) -> str:
    """``verify-log``'s report; a failure names the first bad record."""
    if not doc.get("ok"):
        return (
            clean(f"audit log NOT verified: record {doc.get('record')}: {doc.get('error')}") + "\n"
        )
    lines = ["audit log verified"]
    lines += _fields(
        [
            ("records", doc.get("records")),
            ("signed checkpoints", doc.get("checkpoints")),
            ("results recomputed", doc.get("results_recomputed")),
            ("origin", doc.get("origin")),
            ("key", doc.get("key")),
            ("RNG", doc.get("rng")),
            ("extends checkpoint", doc.get("extends_checkpoint")),
            ("RNG sessions revealed without draws", doc.get("rng_sessions_revealed_without_draws")),
            ("RNG sessions never revealed", doc.get("rng_sessions_never_revealed")),
            ("RNG sessions escrowed, not revealed", doc.get("rng_sessions_escrowed_not_revealed")),
            ("RNG sessions ended by a restart", doc.get("rng_sessions_interrupted")),
            ("RNG sessions revealed by the auditor", doc.get("rng_sessions_revealed_by_auditor")),
            ("notes", doc.get("notes")),
        ]
    )
    return "\n".join(lines) + "\n"


def software_report(doc: Mapping[str, Any]) -> str:
    """``verify-software``'s report: the verdict, then what was checked and what differs."""
    heading = "software verified" if doc.get("ok") else "software NOT verified"
    lines = [clean(f"{heading}: {doc.get('summary')}")]
    lines += _fields(
        [
            ("version", doc.get("version")),
            ("manifest (SHA-256)", doc.get("manifest")),
            ("release key", doc.get("key")),
            ("files hashed", doc.get("files")),
            ("files that differ", doc.get("differ_count")),
        ]
    )
    lines += [clean(f"  differs: {name}") for name in doc.get("differ") or ()]
    return "\n".join(lines) + "\n"


def backup_report(doc: Mapping[str, Any]) -> str:
    """``backup``'s report: what was copied, where, and where the key is not."""
    lines = [clean(f"audit log copied to {doc.get('backup')}")]
    lines += _fields(
        [
            ("records", doc.get("records")),
            ("bytes", doc.get("bytes")),
            ("origin", doc.get("origin")),
            ("key id", doc.get("key_id")),
            ("latest signed checkpoint", doc.get("checkpoint_size")),
            ("seconds", doc.get("seconds")),
            ("archive", doc.get("archive")),
            ("signing key", doc.get("signing_key")),
        ]
    )
    return "\n".join(lines) + "\n"


def selftest_report(doc: Mapping[str, Any]) -> str:
    """``selftest``'s checks, one line each."""
    checks: Mapping[str, Mapping[str, Any]] = doc.get("checks", {})
    failed = [name for name, check in checks.items() if not check.get("ok")]
    heading = f"selftest FAILED: {', '.join(failed)}" if failed else "selftest: every check passed"
    heading = clean(heading)
    rows = [
        [name, "ok" if check.get("ok") else "FAILED", _value(check.get("detail"))]
        for name, check in checks.items()
    ]
    return f"{heading}\n\n{columns(['check', 'result', 'detail'], rows)}\n"


def paytables_report(doc: Mapping[str, Any]) -> str:
    """Each paytable's exact hit frequency and house edge over the dice's outcomes."""
    rows = [
        [
            table.get("name"),
            table.get("wager"),
            table.get("condition"),
            table.get("hits"),
            f"{table.get('hit_frequency')} ({table.get('hit_frequency_percent')} %)",
            f"{table.get('house_edge')} ({table.get('house_edge_percent')} %)",
        ]
        for table in doc.get("paytables", [])
    ]
    heading = f"paytables over the {doc.get('outcomes')} equally likely rolls of the three dice"
    if not rows:
        return f"{heading}: no paytables configured\n"
    headers = ["paytable", "wager", "condition", "hits", "hit frequency", "house edge"]
    return f"{heading}\n\n{columns(headers, rows, right='___r')}\n"


def config_report(doc: Mapping[str, Any]) -> str:
    """``check-config``: the config is valid, and what it sets."""
    lines = [clean(f"config {doc.get('config')} is valid")]
    lines += _fields(
        [
            ("sha256", doc.get("sha256")),
            ("table", doc.get("table")),
            ("game", doc.get("game")),
            ("mode", doc.get("mode")),
            ("paytables", doc.get("paytables")),
            ("origin", doc.get("origin")),
        ]
    )
    return "\n".join(lines) + "\n"


def dice_stats_report(stats: Mapping[str, Any]) -> str:
    """``dice-stats``'s figures as a reader at a terminal wants them."""
    lines = [
        f"dice statistics over the {stats['window']} window: {stats['rolls']} rolls"
        f" ({stats['records']} records read)",
        "",
        "face      " + "".join(f"{face:>8}" for face in range(1, 7)) + "   p-value",
    ]
    for colour in ("red", "blue"):
        shown = stats["dice"][colour]
        counts = "".join(f"{shown['counts'][str(face)]:>8}" for face in range(1, 7))
        lines.append(f"{colour:<10}{counts}   {_p(shown['p_value'])}")
    totals = stats["total"]
    lines += [
        "",
        "total     " + "".join(f"{t:>5}" for t in TOTALS),
        "count     " + "".join(f"{totals['counts'][str(t)]:>5}" for t in TOTALS),
        f"p-value {_p(totals['p_value'])}",
        "",
        f"monitor (rolls since the dice were put in or kept: {stats['monitor']['rolls']})",
    ]
    for figure in stats["monitor"]["tests"]:
        face = "" if figure["face"] is None else f", face {figure['face']}"
        lines.append(
            f"  {figure['test']:<6} evidence ln E = {figure['log_e']:>8}"
            f"  alarm at {figure['threshold']}{face}"
        )
    standing = stats["monitor"]["standing"]
    if standing is None:
        lines.append("no dice alarm stands")
    else:
        lines.append(
            f"DICE ALARM stands: {standing['test']} (face {standing['face']}), round"
            f" {standing['round']}, record {standing['seq']}: replace the dice, or inspect and"
            " keep them"
        )
    if stats["context_agrees"] is False:
        lines.append("WARNING: the controller's stored counts differ from the records")
    return "\n".join(lines) + "\n"


_METER_WORDS = (
    ("games", "games"),
    ("no_rolls", "no rolls"),
    ("corrections", "results corrected"),
    ("round_voids", "rounds voided"),
    ("lid_openings", "lid openings"),
    ("tamper", "tamper-loop openings"),
    ("power_ups", "power-ups"),
    ("service_mode", "service mode entered"),
)


def meters_report(doc: Mapping[str, Any], *, since: str | None = None) -> str:
    """``meters``'s counts, then whether the table's own stored meters agree with them.
    ``since``: the local date-time as it was given (``--since``)."""
    size = doc.get("records")
    heading = (
        f"meters counted from the audit log's records written since {since} (local time; the"
        f" log holds {size})"
        if since
        else f"meters counted from the audit log's {size} records"
    )
    lines = [clean(heading)]
    pairs: list[tuple[str, object]] = []
    for name, words in _METER_WORDS:
        value = doc.get(name)
        if isinstance(value, dict):
            reasons = {reason: n for reason, n in value.items() if n}
            total = sum(n for n in reasons.values() if isinstance(n, int))
            value = f"{total} ({_value(reasons)})" if reasons else 0
        pairs.append((words, value))
    lines += _fields(pairs)
    agrees = doc.get("context_agrees")
    where = f"with record {doc.get('context_seq')}"
    if since:
        lines.append("the table's stored meters count from its start: not compared with --since")
    elif agrees is True:
        lines.append(f"the table's stored meters ({where}) agree with the records")
    elif agrees is False:
        stored = doc.get("context_meters") or {}
        differ = [
            f"{words} {_value(stored.get(name))} stored, {_value(doc.get(name))} in the records"
            for name, words in _METER_WORDS
            if stored.get(name) != doc.get(name)
        ]
        lines.append(
            clean(
                f"WARNING: the table's stored meters ({where}) differ from the records:"
                f" {'; '.join(differ)} (a log begun by a version without meters differs"
                " by what that version recorded)"
            )
        )
    else:
        lines.append("the table stored no meters to compare (its context is older than them)")
    return "\n".join(lines) + "\n"


def _p(value: float | None) -> str:
    return "   -" if value is None else f"{value:.4f}"


# --- commission ------------------------------------------------------------------------------

_VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "skipped": "skipped", "not_run": "not run"}


def commission_report(doc: Mapping[str, Any]) -> str:
    """``commission``'s report: the verdict, who and what, then every step with what was seen."""
    counts: Mapping[str, int] = doc.get("counts", {})
    outcome = doc.get("outcome")
    if outcome != "completed":
        verdict = f"{str(outcome).upper()} (not every step was taken)"
    elif doc.get("passed"):
        verdict = "PASSED"
    else:
        verdict = f"FAILED ({counts.get('fail', 0)} of {len(doc.get('steps', []))} steps)"
    lines = [clean(f"commissioning of table {doc.get('table')}: {verdict}")]
    record = doc.get("record")
    lines += _fields(
        [
            ("technician", doc.get("technician")),
            ("outcome", outcome),
            ("steps", ", ".join(f"{n} {_VERDICT_WORDS.get(k, k)}" for k, n in counts.items())),
            ("dice sensor", _sensor_text(doc.get("sensor"))),
            ("config sha256", doc.get("config_sha256")),
            ("outputs driven safe", doc.get("outputs_safe")),
            ("recorded", f"audit log record {record}" if record is not None else "NOT recorded"),
        ]
    )
    if doc.get("ended"):
        lines.append(clean(f"  ended: {doc['ended']}"))
    if doc.get("record_error"):
        lines.append(clean(f"  not recorded: {doc['record_error']}"))
    rows = [
        [
            step.get("step"),
            _VERDICT_WORDS.get(str(step.get("verdict")), step.get("verdict")),
            step.get("observed"),
        ]
        for step in doc.get("steps", [])
    ]
    lines += ["", columns(["step", "verdict", "seen"], rows)]
    return "\n".join(lines) + "\n"


def _sensor_text(sensor: object) -> str:
    if not isinstance(sensor, dict):
        return "not identified"
    return (
        f"{sensor.get('model')} serial {sensor.get('serial_number')} firmware"
        f" {sensor.get('firmware')} (protocol DS{sensor.get('protocol_version')})"
    )


def commissioning_text(data: Mapping[str, Any]) -> str:
    """A ``commissioning`` record in a line (recall's round detail)."""
    counts = data.get("counts")
    shown = (
        ", ".join(f"{n} {_VERDICT_WORDS.get(k, k)}" for k, n in counts.items() if n)
        if isinstance(counts, dict)
        else "-"
    )
    failed = [
        str(step.get("step"))
        for step in data.get("steps") or ()
        if isinstance(step, dict) and step.get("verdict") == "fail"
    ]
    verdict = "passed" if data.get("passed") else "NOT passed"
    text = f"by {data.get('technician')}: {data.get('outcome')}, {verdict} ({shown})"
    return text + (f"; failed: {', '.join(failed)}" if failed else "")


# the kinds a line says more of than their fields (None: their fields after all)
_KIND_TEXT: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    RecordKind.READING: _reading_text,
    RecordKind.RESULT: _result_text,
    RecordKind.RESULT_CORRECTED: _corrected_text,
    RecordKind.VOID: _void_record_text,
    RecordKind.COMMISSIONING: commissioning_text,
}
