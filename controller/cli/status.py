"""``status``: the table's status on one screen, for the supervisor and the technician.

Asks the running controller over the service terminal's socket (the read-only ``status``
action: no key, no employee id); when no controller answers, says so and reports what the state
directory's log says, read only, creating no file. ``--fault-table`` prints the table of fault
codes instead (``docs/faults.md`` is its ``--markdown`` text).

Exit codes: 0 the controller runs and nothing stops play (a notice, such as an unsynchronised
clock or unverified software, is listed but play goes on); 1 a fault or another condition that
stops play, or the controller not running; 2 a bad argument; 77 the socket is not ours to
open; 75 the controller did not answer in time; 78 a bad configuration file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.cli.args import complain, path_argument
from controller.cli.render import clean
from controller.software.release import installed_release

if TYPE_CHECKING:
    from controller.core.config import Config
    from controller.core.position import Game
    from controller.core.state import Mode, RoundContext

EX_TEMPFAIL = 75
EX_NOPERM = 77

_DESCRIPTION = """\
The table's status on one screen: its state, every active fault or condition with its code
(F01...), what it means, who may clear it and how; the software release, the clock, the dice
set and the tiles with their age, the log's last checkpoint and the witness's last
cosignature. The running controller answers over its service terminal socket (no supervisor
key needed); when none answers, the status says so and shows what the log in the state
directory says (read only). Exit 0: running, nothing stops play (notices are listed); 1: a
fault or a condition stops play, or the controller does not run."""
_EXAMPLES = """\
examples:
  paigow-controller status
  paigow-controller status --json
  paigow-controller status --state-dir demo-state        # a controller run without systemd
  paigow-controller status --fault-table --markdown      # the table of codes (docs/faults.md)"""


def status_arguments(p: argparse.ArgumentParser) -> None:
    from controller.app.config_file import DEFAULT_PATH
    from controller.app.service import DEFAULT_SOCKET

    p.description = _DESCRIPTION
    p.epilog = _EXAMPLES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--socket",
        type=path_argument,
        help=f"the controller's socket (default: {DEFAULT_SOCKET}, or the state directory's)",
    )
    p.add_argument(
        "--state-dir",
        help="the state directory (default: the config's [storage] state_dir): its socket for a"
        " controller run without systemd, its log when the controller does not run",
    )
    p.add_argument(
        "--config",
        help=f"the table's config, for its name, game and state directory when the controller"
        f" does not run (default {DEFAULT_PATH} if it exists)",
    )
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument(
        "--fault-table",
        action="store_true",
        help="print the table of fault codes instead (with --markdown: docs/faults.md)",
    )
    p.add_argument("--markdown", action="store_true", help="--fault-table as Markdown")


def status_command(args: argparse.Namespace) -> int:
    from controller.errors import UsageError

    if args.markdown and not args.fault_table:
        raise UsageError("--markdown goes with --fault-table")
    if args.fault_table:
        return _fault_table(markdown=args.markdown, as_json=args.json)
    from controller.app.service import DEFAULT_SOCKET, SOCKET_NAME, ask_status
    from controller.cli.args import directory_argument
    from controller.errors import ServiceTerminalError, TerminalUnavailable

    state_dir = directory_argument(args.state_dir)
    # where a controller may answer: the socket named; else the state directory's (a
    # controller run without systemd), then the unit's RuntimeDirectory=
    if args.socket is not None:
        candidates = [Path(args.socket)]
    elif state_dir is not None:
        candidates = [state_dir / SOCKET_NAME, DEFAULT_SOCKET]
    else:
        candidates = [DEFAULT_SOCKET]
    reply: dict[str, object] | None = None
    unavailable = ""
    for path in candidates:
        try:
            reply = ask_status(path)
            break
        except TerminalUnavailable as exc:
            unavailable = str(exc)
        except PermissionError:
            complain(
                f"{path}: permission denied (the service terminal is for root and the"
                " service's group)"
            )
            return EX_NOPERM
        except ServiceTerminalError as exc:
            complain(str(exc))
            return EX_TEMPFAIL
    if reply is None:
        shown = _not_running(args, state_dir, unavailable)
    else:
        status = reply.get("status")
        if reply.get("ok") is not True or not isinstance(status, dict):
            complain(f"the controller did not give its status: {reply.get('detail', reply)}")
            return EX_TEMPFAIL
        shown = _enriched(status)
        shown["source"] = f"the running controller at {path}"
    from controller.core.status import exit_code

    if args.json:
        sys.stdout.write(json.dumps(shown, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render(shown))
    return exit_code(shown)


def _enriched(status: Mapping[str, Any]) -> dict[str, Any]:
    """Each fault the controller named by its code gets its meaning, who and how from the
    table (the same release's)."""
    from controller.core.faults import code_of
    from controller.core.status import Condition

    shown = dict(status)
    rows = []
    faults = status.get("faults")  # what answered on the socket is not trusted to be ours
    for fault in faults if isinstance(faults, list) else []:
        if isinstance(fault, dict) and isinstance(fault.get("name"), str):
            rows.append(Condition(code_of(fault["name"]), str(fault.get("detail") or "")).as_dict())
    shown["faults"] = rows
    return shown


def _not_running(args: argparse.Namespace, state_dir: Path | None, why: str) -> dict[str, Any]:
    """What the log in the state directory says, read only, with the controller_stopped
    condition."""
    from controller.app.config_file import DEFAULT_PATH, load_config
    from controller.core.config import Config
    from controller.core.state import ClockSync
    from controller.core.status import Facts, report
    from controller.errors import ControllerError
    from controller.ports import wall_ms

    configured = args.config is not None or DEFAULT_PATH.is_file()
    if configured:
        config = load_config(Path(args.config or DEFAULT_PATH), escrow_required=False)
    else:
        config = Config()
    directory = state_dir or Path(config.storage.state_dir)
    if not directory.is_dir():
        raise ControllerError(f"{why}; and there is no state directory {directory} to read")
    problems: list[str] = []
    details = {"controller_stopped": why}
    found, context = _read_log(directory, details, problems)
    problems.extend(found.get("problems", []))
    behind = _behind_anchor(directory, found.get("log_size"), problems)
    table, game, mode = _table_as_configured(
        config, found.get("table") if not configured else None, context
    )
    clock = found.get("clock")
    facts = Facts(
        table=table,
        is_running=False,
        context=context,
        wall=wall_ms(),
        mode=mode,
        game=game,
        log_size=found.get("log_size"),
        clock=None if clock is None else ClockSync(clock),
        software={**(found.get("software") or {}), "release": installed_release()},
        checkpoint=found.get("checkpoint"),
        witness=found.get("witness"),
        details=details,
        problems=tuple(problems),
        behind_anchor=behind,
    )
    shown = report(facts)
    shown["source"] = f"the log in {directory} (read only): the controller does not run"
    return shown


def _read_log(
    directory: Path, details: dict[str, str], problems: list[str]
) -> tuple[dict[str, Any], RoundContext | None]:
    """The log's facts and the context stored last, read only; the details of its active
    faults added to ``details``, a log that cannot be read to ``problems``."""
    from controller.app.status import fault_details, log_facts, quiet_connection, stored_context
    from controller.errors import AuditLogError

    context = None
    found: dict[str, Any] = {}
    try:
        with quiet_connection(directory) as db:
            found = log_facts(db)
            context = stored_context(db, directory)
            if context is not None:
                details.update(fault_details(db, {str(f) for f in context.active_faults}))
    except AuditLogError as exc:
        problems.append(str(exc))
    return found, context


def _table_as_configured(
    config: Config, logged: object, context: RoundContext | None
) -> tuple[str, Game, Mode]:
    """The table's name, game and mode: the configuration's, or, without one, as the log's
    last configuration record says (``logged``); the mode the stored context plays in, if it
    is one of the table's."""
    from controller.core.position import Game
    from controller.core.state import Mode

    settings = config.round_settings()
    table, game, mode = config.table.name, settings.game, settings.mode
    allowed = set(settings.allowed_modes)
    if isinstance(logged, dict):  # as the log says it was configured
        table = str(logged.get("table") or table)
        game = Game(logged["game"]) if logged.get("game") in {str(g) for g in Game} else game
        if logged.get("mode") in {str(m) for m in Mode}:
            mode = Mode(logged["mode"])
            allowed = {mode} | {Mode(m) for m in logged.get("modes") or [] if m in set(Mode)}
    if context is not None and context.mode in allowed:
        mode = context.mode
    return table, game, mode


def _behind_anchor(directory: Path, size: object, problems: list[str]) -> str | None:
    """Whether the log holds fewer records than its anchor beside it shows (an older copy put
    in place of the log): the controller latches log_rollback at its start. Read only."""
    from controller.audit.anchor import ANCHOR_FILE, AnchorFile
    from controller.errors import AuditLogError, NoteError

    if not isinstance(size, int):
        return None
    path = directory / ANCHOR_FILE
    try:
        anchor = AnchorFile(path).read()
        anchored = None if anchor is None else anchor.checkpoint().size
    except (AuditLogError, NoteError, ValueError) as exc:
        problems.append(f"the anchor {path}: {exc}")
        return None
    if anchored is None or anchored <= size:
        return None
    return (
        f"the log holds {size} records but its anchor {path} shows {anchored}: an older copy"
        " of the log was put in its place?"
    )


def _fault_table(*, markdown: bool, as_json: bool) -> int:
    from controller.core.faults import FAULT_CODES
    from controller.core.faults import markdown as table_markdown

    if markdown:
        sys.stdout.write(table_markdown())
    elif as_json:
        rows = [
            {
                "code": r.code,
                "name": r.name,
                "meaning": r.meaning,
                "who": r.who,
                "how": r.how,
                "stops_play": r.stops_play,
            }
            for r in FAULT_CODES
        ]
        sys.stdout.write(json.dumps(rows, ensure_ascii=False) + "\n")
    else:
        for r in FAULT_CODES:
            sys.stdout.write(f"{r.code} {r.name:<21} {r.who:<22} {r.meaning}\n")
    return 0


# --- the screen ---------------------------------------------------------------------------------


_SOFTWARE_SAID = {
    "ok": "ok, verified against its signed manifest",
    "no_manifest": "unverified (no manifest installed)",
    "mismatch": "MISMATCH: it differs from its signed manifest",
    "bad_manifest": "BAD MANIFEST: unreadable, unsigned or signed by another key",
}


def _age(seconds: object) -> str:
    if not isinstance(seconds, int):
        return "unknown"
    if seconds >= 2**40:
        return "unknown (treated as expired)"
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60:02d} min"


def _set_line(what: str, life: object) -> str:
    if not isinstance(life, dict):
        return f"{what}: unknown"
    name = life.get("set")
    if name is None:
        return f"{what}: none recorded"
    limit = life.get("life_s")
    of = f" of {int(limit) // 3600} h" if isinstance(limit, int) else ""
    return f"{what}: {name}, in for {_age(life.get('age_s'))}{of}"


def render(shown: Mapping[str, Any]) -> str:
    """The one screen."""
    listed = shown.get("faults")
    faults: Sequence[Mapping[str, Any]] = [
        f for f in (listed if isinstance(listed, list) else []) if isinstance(f, Mapping)
    ]
    software = shown.get("software")
    problems = shown.get("problems")
    lines = [
        f"Table {shown.get('table', '?')}: {_verdict(shown, faults)}",
        f"  from {shown.get('source', '?')}",
        _state_line(shown),
        *_fault_lines(faults),
        *_software_lines(software if isinstance(software, dict) else None),
        f"Clock: {shown.get('clock') or 'unknown'}",
        _dice_line(shown),
        _set_line("Tiles", shown.get("tiles")),
        _checkpoint_line(shown.get("checkpoint")),
        _witness_line(shown.get("witness")),
        *(f"Could not read: {p}" for p in (problems if isinstance(problems, list) else [])),
    ]
    # every line safe on a terminal: a reply's text never moves the cursor or clears the screen
    return "\n".join(clean(line) for line in lines) + "\n"


def _verdict(shown: Mapping[str, Any], faults: Sequence[Mapping[str, Any]]) -> str:
    if not shown.get("running"):
        return "NOT RUNNING"
    if shown.get("play_stopped"):
        return "PLAY STOPPED"
    return "HEALTHY, WITH NOTICES (play goes on)" if faults else "HEALTHY"


def _state_line(shown: Mapping[str, Any]) -> str:
    state = shown.get("state")
    if state is None:
        return "State: unknown (no stored state in the log)"
    service = " (SERVICE MODE: test rounds)" if shown.get("in_service") else ""
    mode = f", {shown['mode']} mode" if shown.get("mode") else ""
    return (
        f"State: {state} ({shown.get('state_said', '')}), round {shown.get('round')}{mode}{service}"
    )


def _fault_lines(faults: Sequence[Mapping[str, Any]]) -> list[str]:
    if not faults:
        return ["Faults: none"]
    lines = [f"Faults and conditions ({len(faults)}):"]
    for f in faults:
        stops = "stops play" if f.get("stops_play") else "play goes on"
        lines.append(f"  {f.get('code')} {f.get('name')} ({stops}; {f.get('who')})")
        lines.append(f"      what:  {f.get('meaning')}")
        if f.get("detail"):
            lines.append(f"      found: {f.get('detail')}")
        lines.append(f"      clear: {f.get('how')}")
    return lines


def _software_lines(software: Mapping[str, Any] | None) -> list[str]:
    """The software's check against its signed manifest, and the release installed."""
    if software is None:
        return ["Software: not checked yet", "Release: none installed (run from a checkout)"]
    manifest = software.get("manifest")
    release = f" (manifest {str(manifest)[:16]})" if manifest else ""
    result = software.get("result")
    said = "not checked yet" if result is None else _SOFTWARE_SAID.get(str(result), str(result))
    named = software.get("release")
    return [
        f"Software: {software.get('version', '?')}{release}: {said}",
        f"Release: {named or 'none installed (run from a checkout)'}",
    ]


def _dice_line(shown: Mapping[str, Any]) -> str:
    dice = _set_line("Dice set", shown.get("dice"))
    if shown.get("mode") == "rng" and dice.endswith("none recorded"):
        dice += " (an RNG table needs none)"
    return dice


def _checkpoint_line(checkpoint: object) -> str:
    if not isinstance(checkpoint, dict):
        return "Checkpoint: none"
    return (
        f"Checkpoint: {checkpoint.get('size')} records, root {checkpoint.get('root')}...,"
        f" last record {checkpoint.get('time') or '?'}"
    )


def _witness_line(witness: object) -> str:
    if not isinstance(witness, dict):
        return "Witness: no cosignature recorded"
    return (
        f"Witness: {witness.get('witness')} cosigned {witness.get('size')} records"
        f" (root {witness.get('root')}...), recorded {witness.get('recorded')}"
    )
