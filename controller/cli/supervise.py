"""``supervise``: a supervisor's action at the service terminal, sent to the running controller
(``controller/app/service.py``) over its Unix socket.

Exit codes: 0 recorded (the records on stdout; for ``service-mode``, whether the table is now
in service mode or out of it); 1 refused by the table (its reason on stderr);
2 a bad argument, or a request the controller refused as outside its grammar; 69
(EX_UNAVAILABLE) no controller answers at the socket; 75 (EX_TEMPFAIL) the controller was busy
or did not answer in time (the action may still be recorded: look at the log); 77 (EX_NOPERM)
the socket is not ours to open.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from controller.cli.args import complain, path_argument
from controller.errors import EX_USAGE, EncodingError, UsageError

EX_UNAVAILABLE = 69  # sysexits(3)
EX_TEMPFAIL = 75
EX_NOPERM = 77
REFUSED = 1

_ACTIONS = {  # command-line name -> the protocol's action
    "correct-result": "correct_result",
    "void-round": "void_round",
    "dice-replaced": "dice_replaced",
    "tiles-inspected": "tiles_inspected",
    "tiles-shuffled": "tiles_shuffled",
    "shift-change": "shift_change",
    "clear-fault": "clear_fault",
    "shaker-inspected": "shaker_inspected",
    "mode-switch": "mode_switch",
    "service-mode": "service_mode",
    "lamp-test": "lamp_test",
    "dice-kept": "dice_kept",
    "recall": "recall",
    "recall-leave": "recall_leave",
}
_GONE = {
    "void-result": "void-result is gone: a result is corrected to the dice as they lie"
    " (correct-result), or the whole round is void, every wager returned (void-round)",
}
# option -> the protocol's key it fills
_OPTIONS = {
    "id": "id",
    "reason": "reason",
    "result": "result",
    "dice": "dice",
    "round": "round",
    "to": "mode",
    "note": "note",
    "back": "back",
    "set": "set",
    "dealer": "dealer",
}
_DONE = {
    "lamp_test": "every lamp is lit until the next screen",
    "recall": "the display shows the round recalled",
}
_DESCRIPTION = """\
An action of the supervisor (or the dealer) at the service terminal, recorded by the running
controller with the employee id given. The physical supervisor key must be on where the rules
ask for the supervisor: the controller reads it when the command arrives, and the table refuses
the action without it. The command talks to the controller over its Unix socket (by default
/run/paigow-controller/control.sock, open to root and the service's group)."""
_EXAMPLES = """\
examples:
  paigow-controller supervise correct-result --result 30.1 --dice 4,2,3 --reason misread \\
      --employee S1021
  paigow-controller supervise void-round --round 30 --reason tile_exposed --employee S1021
  paigow-controller supervise dice-replaced --id B-0417 --employee S1021
  paigow-controller supervise tiles-inspected --set T-0921 --dealer D2207 --employee F0310
  paigow-controller supervise tiles-shuffled --employee D2207
  paigow-controller supervise shift-change --employee D2207     # the dealer coming on
  paigow-controller supervise clear-fault --employee S1021
  paigow-controller supervise clear-fault --note "anchor lost with the card's repair" \
      --employee T0042                                          # anchor_missing: why
  paigow-controller supervise shaker-inspected --note "cup, lid, tilt switch" --employee S1021
  paigow-controller supervise mode-switch --to rng --employee S1021
  paigow-controller supervise service-mode --employee T0042     # in; the same command again: out
  paigow-controller supervise lamp-test --employee T0042
  paigow-controller supervise dice-kept --note "weighed and calipered" --employee S1021
  paigow-controller supervise recall --back 3 --employee S1021  # the third newest round
  paigow-controller supervise recall-leave --employee S1021
  paigow-controller supervise dice-replaced --employee S1021 --state-dir demo-state --json"""


def supervise_arguments(p: argparse.ArgumentParser) -> None:
    from controller.app.service import DEFAULT_SOCKET
    from controller.core.state import Mode

    p.description = _DESCRIPTION
    p.epilog = _EXAMPLES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "action",
        choices=[*_ACTIONS, *_GONE],
        metavar="action",
        help="correct-result: the result shown corrected to the dice as they lie, never"
        " re-rolled (N.J.A.C. 13:69E-1.28P(d)); "
        "void-round: the whole round void, every wager returned (621a.12(c),(e)); "
        "dice-replaced: a new dice set is in the shaker (proposed 621a.5(c)); "
        "tiles-inspected: a set of tiles inspected by the dealer and verified by the"
        " floorperson (621a.6(a)); its 12 hours start (621a.3(e)); "
        "tiles-shuffled: the dealer shuffled for a new game (621a.11(b)); "
        "shift-change: a new dealer signs on; "
        "clear-fault: the faults the key allows cleared; "
        "shaker-inspected: the end-of-day inspection (N.J.A.C. 13:69E-1.16A); "
        "mode-switch: another mode this table allows, between rounds, or to the RNG out of a "
        "fault of the dice (current 621a.6(a)); "
        "service-mode: into service mode with bets open, or out of it (9 NYCRR 5319.58); "
        "lamp-test: in service mode, every lamp lit; "
        "dice-kept: after a dice alarm, the dice inspected and kept (the monitor starts again); "
        "recall: the display recalls one of the last rounds (AGCO 13.1.1); "
        "recall-leave: the display returns to the table",
    )
    p.add_argument(
        "--employee",
        metavar="ID",
        help="(required) who does it: an employee id, 1 to 16 ASCII letters and digits",
    )
    p.add_argument(
        "--result",
        metavar="ROUND.ATTEMPT",
        help="correct-result (required): the result shown, as the display numbers it (e.g."
        " 30.1); a repeated command never corrects another result",
    )
    p.add_argument(
        "--dice",
        metavar="R,B,B",
        help="correct-result (required): the dice as they lie: the red die, then the two blue",
    )
    p.add_argument(
        "--round",
        metavar="N",
        help="void-round (required): the round in play, as the display numbers it",
    )
    p.add_argument(
        "--reason",
        help="correct-result (required): misread, patron_complaint or surveillance_review;"
        " void-round (required): wrong_count (621a.12(c)), tile_exposed (621a.12(e)),"
        " dealer_error, patron_complaint or equipment; tiles-shuffled: new_game (default)"
        " or remix (621a.6(e))",
    )
    p.add_argument(
        "--id",
        help="dice-replaced: the new set's id, 1 to 16 letters, digits or '-'"
        " (default: the next number)",
    )
    p.add_argument("--set", help="tiles-inspected (required): the tile set's id, like --id")
    p.add_argument(
        "--dealer",
        metavar="ID",
        help="tiles-inspected (required): the dealer who sorted and inspected the tiles",
    )
    p.add_argument(
        "--to",
        choices=[str(m) for m in Mode],
        help="mode-switch (required): the mode to switch to (one of the table's [table] modes)",
    )
    p.add_argument(
        "--note",
        help="correct-result, void-round, shaker-inspected, dice-kept, clear-fault (required"
        " to clear anchor_missing: why): up to 120 printable ASCII characters",
    )
    p.add_argument(
        "--back",
        metavar="N",
        help="recall: the round to show, 1 the newest (the round in play) to 11 (default 1)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--socket",
        type=path_argument,
        help=f"the controller's socket (default: {DEFAULT_SOCKET})",
    )
    where.add_argument(
        "--state-dir", help="a controller run without systemd: the socket in its state directory"
    )
    p.add_argument("--json", action="store_true", help="print the controller's reply as JSON")


def supervise(args: argparse.Namespace) -> int:
    from controller.app.service import (
        parse_request,
        send_request,
    )
    from controller.core import canonical
    from controller.errors import RequestError, ServiceTerminalError, TerminalUnavailable

    fields = _request_fields(args)
    try:
        # the one grammar: the request as the controller will parse it
        request = parse_request(canonical.encode(fields) + b"\n")
    except (RequestError, EncodingError) as exc:
        raise UsageError(str(exc)) from None
    path = _socket_path(args)
    try:
        reply = send_request(path, request)
    except TerminalUnavailable as exc:
        complain(str(exc))
        return EX_UNAVAILABLE
    except PermissionError:
        complain(
            f"{path}: permission denied (the service terminal is for root and the service's group)"
        )
        return EX_NOPERM
    except ServiceTerminalError as exc:
        complain(f"{exc} (the action may still be recorded: look at the log)")
        return EX_TEMPFAIL
    if args.json:
        sys.stdout.write(json.dumps(reply, sort_keys=True) + "\n")
    return _report(reply, printed=args.json)


def _request_fields(args: argparse.Namespace) -> dict[str, str]:
    """The request's fields from the command line: the action, who does it, and the options
    it takes (each refused where it does not go, and those it needs required)."""
    from controller.app.service import ACTIONS

    if args.action in _GONE:
        raise UsageError(_GONE[args.action])
    action = _ACTIONS[args.action]
    if args.employee is None:
        raise UsageError(f"{args.action} needs --employee ID (who does it)")
    _, takes, needs = ACTIONS[action]
    fields = {"action": action, "employee": args.employee}
    for option, key in _OPTIONS.items():
        value = getattr(args, option)
        if value is None:
            continue
        if key not in takes:
            raise UsageError(f"--{option} does not go with {args.action}")
        fields[key] = str(value)
    if action == "recall":
        fields.setdefault("back", "1")
    missing = sorted(needs - set(fields))
    if missing:
        shown = {v: k for k, v in _OPTIONS.items()}
        raise UsageError(
            f"{args.action} needs {', '.join('--' + shown.get(k, k) for k in missing)}"
        )
    return fields


def _socket_path(args: argparse.Namespace) -> Path:
    from controller.app.service import DEFAULT_SOCKET, SOCKET_NAME

    if args.socket is not None:
        return Path(args.socket)
    if args.state_dir is not None:
        return Path(args.state_dir) / SOCKET_NAME
    return DEFAULT_SOCKET


def _report(reply: Mapping[str, object], *, printed: bool) -> int:
    from controller.app.service import in_service_said

    if reply.get("ok") is True:
        if not printed:
            records = reply.get("records")
            listed = ", ".join(
                f"{r.get('kind')} #{r.get('seq')}"
                for r in (records if isinstance(records, list) else [])
                if isinstance(r, dict)
            )
            if listed:
                sys.stdout.write(f"recorded: {listed}{in_service_said(reply)}\n")
            else:  # an action that records nothing: the lamp test
                sys.stdout.write(
                    f"done: {_DONE.get(str(reply.get('action')), 'nothing to record')}\n"
                )
        return 0
    if "refused" in reply:
        complain(f"refused by the table: {reply['refused']}")
        return REFUSED
    error, detail = reply.get("error"), reply.get("detail")
    if error == "bad_request":
        complain(f"the controller refused the request: {detail}")
        return EX_USAGE
    complain(f"the controller did not act ({error}): {detail}")
    return EX_TEMPFAIL
