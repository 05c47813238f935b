"""The audit log's commands: ``verify-log``, ``recall``, ``dice-stats``, ``meters``, ``export``,
``export-key``, ``checkpoint`` and ``init``.

The reading commands (``verify-log``, ``recall``, ``dice-stats``, ``meters``) print a report on
a terminal and JSON with ``--json`` or when stdout is not a terminal
(``controller/cli/render.py`` words the report); ``export`` writes JSON lines. A failed
verification names the first bad record on stderr and exits 1; a bad argument is one line on
stderr and exit 2. ``export``, ``recall``, ``dice-stats`` and ``meters`` name each damaged
record they meet on stderr (its seq and what is wrong), go on with the rest, and exit 1 at the
end (controller/audit/damage.py); their JSON says which (``damaged``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from controller.app.config_file import DEFAULT_PATH, load_config
from controller.app.instance_lock import InstanceLock
from controller.audit.archive import archive_paths
from controller.audit.damage import MAX_NAMED, Damage
from controller.audit.log import (
    DB_NAME,
    KEY_FILE,
    MAX_KEY_FILE_BYTES,
    AuditLog,
    configured_origin,
    load_signer,
    open_for_reading,
    read_latest_checkpoint,
    require_origin,
    storage_errors,
)
from controller.audit.recall import (
    DEFAULT_RECALL,
    MAX_RECORDS,
    archived_round,
    check_no_gap,
    export_lines,
    recall,
    recall_between,
    recall_records,
    recall_round,
)
from controller.audit.verify import verify_database, verify_export, verify_state_dir
from controller.cli import render
from controller.cli.args import (
    JSON_OR_TEXT,
    LOCAL_TIME_FORMS,
    complain,
    describe,
    json_argument,
    local_span,
    path_argument,
    print_report,
    whole_number,
)
from controller.core.config import StorageConfig
from controller.core.digits import MAX_SEQ, parse_bounded_int, quoted
from controller.core.note import Verifier
from controller.core.records import RecordKind
from controller.errors import (
    AuditLogError,
    ControllerError,
    LogIntegrityError,
    NoteError,
    NumberError,
    UsageError,
)
from controller.files import read_capped

MAX_NOTE_BYTES = 16 * 1024  # a signed checkpoint is a few hundred bytes
DAMAGED = (
    "A damaged record is named on stderr (its seq and what is wrong) and left out, the rest"
    " is read, and the exit is 1."
)


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or StorageConfig().state_dir)


def _state_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-dir",
        help=f"the controller's state directory (default {StorageConfig().state_dir})",
    )


def _print(value: object) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")


def _argument_file(option: str, name: str, limit: int) -> str:
    """The text of a small file named on the command line (a key, a checkpoint)."""
    try:
        return read_capped(Path(name), limit).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"{option} {quoted(name)}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{option} {quoted(name)}: {exc}") from None


def log_verifier(state_dir: Path, key_file: str | None) -> Verifier:
    """The verifier key from ``--key`` (note-verifier form), else from the log's own key."""
    if key_file is not None:
        text = _argument_file("--key", key_file, MAX_KEY_FILE_BYTES)
        try:
            return Verifier.parse(text)
        except NoteError as exc:
            raise UsageError(f"--key {quoted(key_file)}: not a verifier key ({exc})") from None
    signer = load_signer(state_dir)
    if signer is None:
        raise AuditLogError(f"audit log: no key in {state_dir}; pass the verifier key with --key")
    return signer.verifier


def _damage(command: str) -> Damage:
    """What a reader met that is damaged: each named on stderr as it is met (the first
    MAX_NAMED of them), the reader going on with the rest."""

    def named(exc: LogIntegrityError) -> None:
        if damage.count <= MAX_NAMED:
            complain(f"{command}: damaged: {exc}")

    damage = Damage(on_found=named)
    return damage


def _damage_status(command: str, damage: Damage) -> int:
    """1 when a damaged record was left out (said once more, with the count), else 0."""
    if not damage:
        return 0
    more = f" ({damage.count - MAX_NAMED} not named above)" if damage.count > MAX_NAMED else ""
    complain(
        f"{command}: {damage.count} damaged record(s) left out{more}; the rest was read"
        " (verify-log checks the whole log)"
    )
    return 1


# --- verify-log -----------------------------------------------------------------------------

MAX_JOBS = 64


_VERIFY_DESCRIPTION = f"""\
Verifies the audit log from its first record to its last: the hash chain, the Merkle roots
against every signed checkpoint, the signatures and the key the log was created for, every
revealed RNG session replayed, every starting position and side wager recomputed from the dice
and the recorded paytables, each correction's result from the dice seen, and each round's
shape: no round decided twice (no second result, no result voided to decide it again), a
correction only of the result shown, no side wager on the RNG's dice, a void's reason and who
gave it. Each RNG commitment's escrow must be well formed; the sessions a restart ended
unrevealed are listed as escrowed, not revealed, and with --rng-reveals (what rng-reveal wrote)
they are replayed too. A failure names the first bad record on stderr and exits 1. Works on a
copy of the state directory, while the controller appends.
{JSON_OR_TEXT}"""
_VERIFY_EXAMPLES = """\
examples:
  paigow-controller verify-log --state-dir /var/lib/paigow-controller
  paigow-controller verify-log --state-dir copy-of-state --key log.pub --checkpoint cp.txt
  paigow-controller verify-log --state-dir copy-of-state --key log.pub --json > verified.json
  paigow-controller verify-log --state-dir copy-of-state --rng-reveals reveals.json"""


def verify_arguments(p: argparse.ArgumentParser) -> None:
    describe(p, _VERIFY_DESCRIPTION, _VERIFY_EXAMPLES)
    _state_dir_argument(p)
    copy = p.add_mutually_exclusive_group()
    copy.add_argument(
        "--db",
        type=path_argument,
        help="verify this log file instead (a backup); the key: --key, or --state-dir's",
    )
    copy.add_argument(
        "--export",
        type=path_argument,
        help="verify this export instead (JSON lines of export); the key: --key, or --state-dir's",
    )
    p.add_argument("--key", help="file holding the log's verifier key (name+keyid+base64)")
    p.add_argument(
        "--checkpoint",
        help="a signed checkpoint kept elsewhere (paigow-controller checkpoint): the log must"
        " extend it",
    )
    p.add_argument(
        "--jobs",
        help="processes for a long log (default: one per available core; 1: this one only)",
    )
    p.add_argument(
        "--rng-reveals",
        type=path_argument,
        help="the auditor's reveals (rng-reveal --out) of RNG sessions the log did not reveal:"
        " each must match its commitment and replay every draw",
    )
    json_argument(p)


def verify(args: argparse.Namespace) -> int:
    jobs = None
    if args.jobs is not None:
        try:
            jobs = parse_bounded_int(args.jobs, low=1, high=MAX_JOBS, what="--jobs")
        except NumberError as exc:
            raise UsageError(str(exc)) from None
    copy = _copy_to_verify(args)
    reveals = []
    if args.rng_reveals is not None:
        from controller.cli.rng import read_reveals

        reveals = read_reveals(args.rng_reveals)
    state_dir = _state_dir(args)
    verifier = log_verifier(state_dir, args.key)
    checkpoint = None
    if args.checkpoint is not None:
        checkpoint = _argument_file("--checkpoint", args.checkpoint, MAX_NOTE_BYTES)
    try:
        if copy is None:
            report = verify_state_dir(
                state_dir, verifier, checkpoint=checkpoint, workers=jobs, rng_reveals=reveals
            )
        elif args.export is not None:
            report = verify_export(copy, verifier, checkpoint=checkpoint, rng_reveals=reveals)
        else:
            report = verify_database(
                copy, verifier, checkpoint=checkpoint, workers=jobs, rng_reveals=reveals
            )
    except LogIntegrityError as exc:
        failed = {"ok": False, "record": exc.record, "error": str(exc)}
        print_report(args, failed, render.verify_report, to_json=_print)
        sys.stderr.write(f"paigow-controller: verify-log: {exc}\n")
        return 1
    print_report(
        args, {**report.as_dict(), "key": str(verifier)}, render.verify_report, to_json=_print
    )
    return 0


def _copy_to_verify(args: argparse.Namespace) -> Path | None:
    """The backup (``--db``) or export (``--export``) file to verify, if one is named. Its
    verifier key is never taken from the copy itself: ``--key``, or the state directory's."""
    option, name = ("--db", args.db) if args.db is not None else ("--export", args.export)
    if name is None:
        return None
    path = Path(name)
    try:
        is_file = path.is_file()
    except OSError as exc:
        raise UsageError(f"{option} {quoted(name)}: {exc.strerror or exc}") from None
    if not is_file:
        what = "not a regular file" if path.exists() else "no such file"
        raise UsageError(f"{option} {quoted(name)}: {what}")
    if args.key is None and args.state_dir is None:
        raise UsageError(
            f"{option} needs the log's verifier key: --key FILE (what export-key prints)"
            " or --state-dir D"
        )
    return path


# --- recall ---------------------------------------------------------------------------------

MAX_RECALL = 10_000
_RECALL_DESCRIPTION = f"""\
Game recall (AGCO 13.1.1): the last rounds played at the table, read from the audit log (a copy
of the state directory will do), oldest first. Each round shows its number, the time it opened
in the machine's local time zone (named in the heading), the dice (red, blue, blue), the total,
the starting position, the bank, the attempt that gave the result, and the voids, no rolls and
faults in that round. --round N shows one round in detail with its records in order. --since
and --until choose the rounds that opened between two local date-times, both ends included to
the precision written ({LOCAL_TIME_FORMS}; a date alone is the whole day). {DAMAGED}

A round that retention moved to the archive files is found there by --round N. Records outside
rounds (a commissioning before the first round, shift changes, power-ons) are read by sequence
number, --seq N or --seq A-B (at most {MAX_RECORDS}), and by kind, --kind KIND[,KIND...] (the last
--last of them, default {DEFAULT_RECALL}, at most {MAX_RECORDS}; with --seq, within that span),
across the archive files and the live log. An archive file is read only once verified with the
log's verifier key (--key, default the state directory's own key): its signed note, the chain of
notes, and its records against the root its note signs; one that does not verify is exit 1.
{JSON_OR_TEXT}"""
_RECALL_EXAMPLES = """\
examples:
  paigow-controller recall --state-dir /var/lib/paigow-controller
  paigow-controller recall --last 20
  paigow-controller recall --round 1234
  paigow-controller recall --since "2026-11-30 14:00" --until "2026-11-30 16:30"
  paigow-controller recall --since 2026-11-30 --json > rounds.json
  paigow-controller recall --round 12 --key log.pub           # archived, verified first
  paigow-controller recall --kind commissioning,shift_change --last 5
  paigow-controller recall --seq 1-40"""


def recall_arguments(p: argparse.ArgumentParser) -> None:
    describe(p, _RECALL_DESCRIPTION, _RECALL_EXAMPLES)
    _state_dir_argument(p)
    p.add_argument(
        "--last",
        help=f"how many rounds, 1..{MAX_RECALL} (default {DEFAULT_RECALL}; with --since or"
        f" --until, every round between them up to {MAX_RECALL}: the last ones)",
    )
    p.add_argument("--round", metavar="N", help="one round in detail: its records in order")
    p.add_argument("--since", metavar="DATE-TIME", help="rounds opened at or after it (local)")
    p.add_argument("--until", metavar="DATE-TIME", help="rounds opened up to it (local)")
    p.add_argument(
        "--seq",
        metavar="N|A-B",
        help=f"records by sequence number, one or a span of at most {MAX_RECORDS} (any kind,"
        " in rounds or not)",
    )
    p.add_argument(
        "--kind",
        metavar="KIND[,KIND]",
        help="records of these kinds (e.g. commissioning, shift_change, power_on): the last"
        " --last of them",
    )
    p.add_argument(
        "--key",
        help="the log's verifier key (export-key's output), to verify the archive files before"
        " they are read (default: the state directory's own key)",
    )
    json_argument(p)


_SEQ_SPAN = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")  # ASCII digits only


def _seq_span(text: str) -> tuple[int, int]:
    """``--seq N`` or ``--seq A-B``: ASCII digits, 1..MAX_SEQ, A <= B, at most MAX_RECORDS."""
    found = _SEQ_SPAN.fullmatch(text)
    if found is None:
        raise UsageError(f"--seq {quoted(text)} is not N or A-B (sequence numbers)")
    low = whole_number(found[1], "--seq", 1, MAX_SEQ)
    high = low if found[2] is None else whole_number(found[2], "--seq", 1, MAX_SEQ)
    if high < low:
        raise UsageError(f"--seq {text}: {low} is after {high}")
    if high - low + 1 > MAX_RECORDS:
        raise UsageError(f"--seq {text} spans {high - low + 1} records: at most {MAX_RECORDS}")
    return low, high


def _kinds(text: str) -> frozenset[str]:
    """``--kind``: record kinds the log knows, comma-separated, each at most once."""
    known = {str(kind) for kind in RecordKind}
    names = text.split(",")
    if len(names) > len(known):
        raise UsageError(f"--kind names more kinds than there are ({len(known)})")
    for name in names:
        if name not in known:
            raise UsageError(
                f"--kind {quoted(name)} is not a record kind (e.g. commissioning, shift_change,"
                " power_on, dice_replaced)"
            )
    return frozenset(names)


def _archive_verifier(args: argparse.Namespace) -> Verifier | None:
    """The verifier key the archive files are checked with: --key, else the state
    directory's own; None when there are no archive files to check."""
    if args.key is None and not archive_paths(_state_dir(args)):
        return None
    return log_verifier(_state_dir(args), args.key)


def recall_command(args: argparse.Namespace) -> int:
    """Every argument is checked before the log is opened: a bad one is exit 2."""
    windowed = args.since is not None or args.until is not None
    by_record = args.seq is not None or args.kind is not None
    if args.round is not None:
        if windowed or args.last is not None:
            raise UsageError("--round shows one round: it takes no --last, --since or --until")
        if by_record:
            raise UsageError("--round shows one round: it takes no --seq or --kind")
        return _recall_one(args, whole_number(args.round, "--round", 1, MAX_SEQ))
    if by_record:
        if windowed:
            raise UsageError("--seq and --kind read records: they take no --since or --until")
        return _recall_records(args)
    default = MAX_RECALL if windowed else DEFAULT_RECALL
    last = default if args.last is None else whole_number(args.last, "--last", 1, MAX_RECALL)
    damage = _damage("recall")
    if windowed:
        return _recall_window(args, last, damage)
    with storage_errors(f"cannot read {_state_dir(args)}"):
        rounds = recall(_state_dir(args), last=last, damage=damage)
    every = "" if len(rounds) == last else ", every round the log holds"
    heading = f"game recall: the last {len(rounds)} rounds{every}"
    return _show_rounds(args, rounds, heading, damage)


def _recall_window(args: argparse.Namespace, last: int, damage: Damage) -> int:
    """The rounds opened between ``--since`` and ``--until`` (local time), the last ``last``
    of them."""
    since = None if args.since is None else local_span(args.since, "--since", zone=None)
    until = None if args.until is None else local_span(args.until, "--until", zone=None)
    if since is not None and until is not None and since.start >= until.end:
        raise UsageError(f"--since {args.since} is after --until {args.until}")
    with storage_errors(f"cannot read {_state_dir(args)}"):
        rounds, found = recall_between(
            _state_dir(args),
            since=None if since is None else since.start,
            until=None if until is None else until.end,
            last=last,
            damage=damage,
        )
    window = " ".join(
        part
        for part in (
            "" if since is None else f"since {since.text}",
            "" if until is None else f"until {until.text}",
        )
        if part
    )
    cut = "" if found == len(rounds) else f"; the last {len(rounds)} shown (--last)"
    heading = f"game recall: {found} rounds opened {window} (local time){cut}"
    return _show_rounds(args, rounds, heading, damage)


def _show_rounds(
    args: argparse.Namespace, rounds: list[dict[str, Any]], heading: str, damage: Damage
) -> int:
    print_report(
        args,
        {"rounds": rounds, **_damaged(damage)},
        lambda doc: render.recall_table(doc["rounds"], heading=heading, zone=None),
        to_json=_print,
    )
    return _damage_status("recall", damage)


def _damaged(damage: Damage) -> dict[str, Any]:
    return {"damaged": damage.as_record()} if damage else {}


def _recall_records(args: argparse.Namespace) -> int:
    seqs = None if args.seq is None else _seq_span(args.seq)
    kinds = None if args.kind is None else _kinds(args.kind)
    if kinds is None and args.last is not None:
        raise UsageError("--seq shows the records it names: --last goes with --kind")
    default = MAX_RECORDS if kinds is None else DEFAULT_RECALL
    last = default if args.last is None else whole_number(args.last, "--last", 1, MAX_RECORDS)
    damage = _damage("recall")
    with storage_errors(f"cannot read {_state_dir(args)}"):
        records, found = recall_records(
            _state_dir(args),
            verifier=_archive_verifier(args),
            seqs=seqs,
            kinds=kinds,
            last=last,
            damage=damage,
        )
    what = " ".join(
        part
        for part in (
            "" if kinds is None else f"of kind {', '.join(sorted(kinds))}",
            "" if seqs is None else f"numbered {seqs[0]}..{seqs[1]}",
        )
        if part
    )
    cut = "" if found == len(records) else f"; the last {len(records)} shown (--last)"
    heading = f"recall: {found} records {what}{cut}"
    print_report(
        args,
        {"records": records, "found": found, **_damaged(damage)},
        lambda doc: _records_report(doc["records"], heading),
        to_json=_print,
    )
    return _damage_status("recall", damage)


def _records_report(records: list[dict[str, Any]], heading: str) -> str:
    lines = [render.clean(heading)]
    for record in records:
        where = "" if record["from"] == "log" else f" [{record['from']}]"
        in_round = "" if record.get("round") is None else f" round {record['round']}"
        text = render.record_text(record["kind"], record["data"])
        lines.append(
            render.clean(f"#{record['seq']} {record['time']} {record['kind']}{in_round}{where}")
        )
        lines.append(render.clean(f"    {text}"))
    return "\n".join(lines) + "\n"


def _recall_one(args: argparse.Namespace, number: int) -> int:
    damage = _damage("recall")
    with storage_errors(f"cannot read {_state_dir(args)}"):
        game = recall_round(_state_dir(args), number, damage=damage)
        if game is None:  # retention may have moved it: the archives, verified first
            verifier = _archive_verifier(args)
            if verifier is not None:
                game = archived_round(_state_dir(args), number, verifier=verifier)
            else:  # no archive: it may be among records missing before the log's first
                check_no_gap(_state_dir(args), [], 1, None)
    if game is None:
        _damage_status("recall", damage)
        raise ControllerError(f"recall: round {number} is not in the log")
    print_report(
        args,
        {"rounds": [game], **_damaged(damage)},
        lambda doc: render.round_report(doc["rounds"][0], zone=None),
        to_json=_print,
    )
    return _damage_status("recall", damage)


# --- export ---------------------------------------------------------------------------------


def export_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The whole audit log as JSON lines, one per record, for auditors to take away: each"
        " record's fields, its leaf as stored (the canonical text that is hashed), its SHA-256"
        " (the next record's prev), its RFC 6962 leaf hash, and the signed checkpoint made at"
        " it, if any. Reads one snapshot, while the controller appends. " + DAMAGED,
        "examples:\n"
        "  paigow-controller export --state-dir /var/lib/paigow-controller > audit.jsonl\n"
        "  paigow-controller export --state-dir copy-of-state | gzip > audit.jsonl.gz",
    )
    _state_dir_argument(p)


def export(args: argparse.Namespace) -> int:
    """One JSON line per record (``controller.audit.recall.export_lines``); a damaged record
    has none, and is named on stderr."""
    damage = _damage("export")
    with storage_errors(f"cannot read {_state_dir(args)}"):
        for line in export_lines(_state_dir(args), damage=damage):
            _print(line)
    return _damage_status("export", damage)


# --- checkpoint and init ---------------------------------------------------------------------


def checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The log's latest signed checkpoint (a C2SP signed note: the log's size and Merkle"
        " root, signed with its Ed25519 key), to keep off the box. Given back to verify-log"
        " --checkpoint later, it proves the log still extends what it held then: nothing"
        " recorded before it was changed or removed. Exit 1 when the log has none yet.",
        "example:\n  paigow-controller checkpoint --state-dir /var/lib/paigow-controller > cp.txt",
    )
    _state_dir_argument(p)


def checkpoint_command(args: argparse.Namespace) -> int:
    """The log's latest signed checkpoint (a C2SP signed note), to keep off the box."""
    db = open_for_reading(_state_dir(args))
    try:
        latest = read_latest_checkpoint(db)
    finally:
        db.close()
    if latest is None:
        raise AuditLogError("audit log: the log has no signed checkpoint yet")
    sys.stdout.write(latest)
    return 0


def init_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Makes a new state directory: the log's Ed25519 signing key (mode 0600) and the log's"
        " first record, which names the log's origin and its verifier key; prints the verifier"
        " key. The origin, also the key's name, is [fleet] origin when set, else"
        " paigow-controller/<table>. Refuses a directory that already holds a log or a key: a"
        " key is never replaced (exit 1; exit 78 naming fleet.origin for a log of another"
        " origin than [fleet] origin).",
        "examples:\n"
        "  paigow-controller init --config /etc/paigow-controller/config.toml\n"
        "  paigow-controller init --state-dir demo-state > demo-state.pub",
    )
    _state_dir_argument(p)
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")


def init_command(args: argparse.Namespace) -> int:
    """A new state directory: the log's signing key and its first record. Refuses a directory
    that already holds a log or a key (a key is never replaced)."""
    config = load_config(Path(args.config))
    state_dir = Path(args.state_dir or config.storage.state_dir)
    lock = InstanceLock.acquire(state_dir)
    try:
        require_origin(state_dir, config)  # a log of another origin: exit 78, fleet.origin
        if (state_dir / KEY_FILE).exists() or (state_dir / DB_NAME).exists():
            raise AuditLogError(f"audit log: {state_dir} already holds a log or a key")
        with AuditLog.open(state_dir, origin=configured_origin(config)) as log:
            assert log.signer is not None
            verifier = log.signer.verifier
    finally:
        lock.release()
    sys.stdout.write(f"{verifier}\n")
    return 0


# --- export-key -----------------------------------------------------------------------------


def key_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The log's verifier key (name+keyid+base64, the note-verifier form), read from the"
        " state directory's signing key. Keep it off the box: verify-log --key checks a copy of"
        " the log against it, so a log re-signed with another key fails.",
        "example:\n  paigow-controller export-key --state-dir /var/lib/paigow-controller > log.pub",
    )
    _state_dir_argument(p)


def export_key(args: argparse.Namespace) -> int:
    verifier = log_verifier(_state_dir(args), None)
    sys.stdout.write(f"{verifier}\n")
    return 0


# --- dice-stats ------------------------------------------------------------------------------

_DICE_STATS_EXAMPLES = """\
examples:
  paigow-controller dice-stats --state-dir /var/lib/paigow-controller
  paigow-controller dice-stats --state-dir copy-of-state --window all --json"""


def dice_stats_arguments(p: argparse.ArgumentParser) -> None:
    from controller.core.dice_monitor import Window

    describe(
        p,
        "The dice's face counts, their chi-square p-values and the dice monitor's figures,"
        " counted again from the log's records (a copy of the state directory will do). JSON"
        " with --json or when stdout is not a terminal; a table on a terminal. " + DAMAGED,
        _DICE_STATS_EXAMPLES,
    )
    _state_dir_argument(p)
    p.add_argument(
        "--window",
        default="set",
        choices=[str(w) for w in Window if w is not Window.TEST],
        help="set: since the dice were put in (default); shift: since the shift change;"
        " all: since the log began",
    )
    json_argument(p)


def dice_stats_command(args: argparse.Namespace) -> int:
    from controller.audit.dice_stats import dice_stats
    from controller.core.dice_monitor import Window

    damage = _damage("dice-stats")
    with storage_errors(f"cannot read {_state_dir(args)}"):
        stats = dice_stats(_state_dir(args), Window(args.window), damage=damage)
    print_report(args, stats, render.dice_stats_report, to_json=_print)
    return _damage_status("dice-stats", damage)


# --- meters ------------------------------------------------------------------------------------

_METERS_DESCRIPTION = f"""\
The table's meters counted again from the audit log alone (a copy of the state directory will
do; the archive's records too): games closed, no rolls by reason, results corrected to the
dice as they lie, rounds voided, openings of the shaker's lid and of its tamper loop,
power-ups and entries into service mode, counted the way the table counts its own records.
--since counts only the records written at or after a local date-time ({LOCAL_TIME_FORMS}).
Without --since it also says whether the meters the table keeps (its latest stored context)
agree with the records. {DAMAGED} {JSON_OR_TEXT}"""
_METERS_EXAMPLES = """\
examples:
  paigow-controller meters --state-dir /var/lib/paigow-controller
  paigow-controller meters --state-dir copy-of-state --since "2026-11-30 14:00"
  paigow-controller meters --state-dir copy-of-state --since 2026-11-30 --json > meters.json"""


def meters_arguments(p: argparse.ArgumentParser) -> None:
    describe(p, _METERS_DESCRIPTION, _METERS_EXAMPLES)
    _state_dir_argument(p)
    p.add_argument(
        "--since", metavar="DATE-TIME", help="count the records written at or after it (local)"
    )
    json_argument(p)


def meters_command(args: argparse.Namespace) -> int:
    """The argument is checked before the log is opened: a bad one is exit 2."""
    from controller.audit.meters import meters_report

    since = None if args.since is None else local_span(args.since, "--since", zone=None)
    damage = _damage("meters")
    with storage_errors(f"cannot read {_state_dir(args)}"):
        report = meters_report(
            _state_dir(args), since=None if since is None else since.start, damage=damage
        )
    print_report(
        args,
        report,
        lambda doc: render.meters_report(doc, since=None if since is None else since.text),
        to_json=_print,
    )
    return _damage_status("meters", damage)
