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
from controller.errors import EX_USAGE, UsageError

EX_UNAVAILABLE = 69  # sysexits(3)
EX_TEMPFAIL = 75
EX_NOPERM = 77
REFUSED = 1

_ACTIONS = {  # command-line name -> the protocol's action
    "dice-replaced": "dice_replaced",
    "shaker-inspected": "shaker_inspected",
    "void-result": "void_result",
    "mode-switch": "mode_switch",
    "service-mode": "service_mode",
    "lamp-test": "lamp_test",
    "dice-kept": "dice_kept",
    "recall": "recall",
    "recall-leave": "recall_leave",
}
_WITH_NOTE = ("shaker_inspected", "void_result", "dice_kept")
_DONE = {
    "lamp_test": "every lamp is lit until the next screen",
    "recall": "the display shows the round recalled",
}
_DESCRIPTION = """\
A supervisor's action, recorded by the running controller. The physical supervisor key must be
on: the controller reads it when the command arrives, and the table refuses the action without
it. The command talks to the controller over its Unix socket (by default
/run/paigow-controller/control.sock, open to root and the service's group)."""
_EXAMPLES = """\
examples:
  paigow-controller supervise dice-replaced --id B-0417
  paigow-controller supervise shaker-inspected --note "cup, lid and tilt switch intact"
  paigow-controller supervise void-result --result 30.1 --reason misread --note "seat 3 complaint"
  paigow-controller supervise mode-switch --to rng
  paigow-controller supervise service-mode      # in; the same command again: out
  paigow-controller supervise lamp-test
  paigow-controller supervise dice-kept --note "weighed and calipered: within tolerance"
  paigow-controller supervise recall --back 3     # the display shows the third newest round
  paigow-controller supervise recall-leave
  paigow-controller supervise dice-replaced --state-dir demo-state --json"""


def supervise_arguments(p: argparse.ArgumentParser) -> None:
    from controller.app.service import DEFAULT_SOCKET
    from controller.core.state import Mode, VoidReason

    p.description = _DESCRIPTION
    p.epilog = _EXAMPLES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "action",
        choices=list(_ACTIONS),
        help="dice-replaced: a new dice set is in the shaker (proposed 621a.5(c)); "
        "shaker-inspected: the end-of-day inspection (N.J.A.C. 13:69E-1.16A); "
        "void-result: the result shown is void, the round goes on (N.J.A.C. 13:69E-1.28P); "
        "mode-switch: another mode this table allows, between rounds, or to the RNG out of a "
        "fault of the dice (current 621a.6(a)); "
        "service-mode: into service mode with bets open, or out of it (9 NYCRR 5319.58); "
        "lamp-test: in service mode, every lamp lit; "
        "dice-kept: after a dice alarm, the dice inspected and kept (the monitor starts again); "
        "recall: the display recalls one of the last rounds (AGCO 13.1.1); "
        "recall-leave: the display returns to the table",
    )
    p.add_argument(
        "--id",
        help="dice-replaced: the new set's id, 1 to 16 letters, digits or '-'"
        " (default: the next number)",
    )
    p.add_argument(
        "--reason",
        choices=[str(r) for r in VoidReason],
        help="void-result (required): why the result is void",
    )
    p.add_argument(
        "--result",
        metavar="ROUND.ATTEMPT",
        help="void-result (required): the result shown, as the display numbers it (e.g. 30.1);"
        " a repeated command never voids the result decided after the first",
    )
    p.add_argument(
        "--to",
        choices=[str(m) for m in Mode],
        help="mode-switch (required): the mode to switch to (one of the table's [table] modes)",
    )
    p.add_argument(
        "--note",
        help="shaker-inspected, void-result, dice-kept: up to 120 printable ASCII characters",
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
        DEFAULT_SOCKET,
        SOCKET_NAME,
        Request,
        RequestError,
        ServiceTerminalError,
        TerminalUnavailable,
        parse_result,
        send_request,
    )
    from controller.core.digits import NumberError, parse_bounded_int
    from controller.core.state import RECALL_DEPTH, Mode, VoidReason

    action = _ACTIONS[args.action]
    if args.id is not None and action != "dice_replaced":
        raise UsageError(f"--id goes with dice-replaced, not {args.action}")
    if args.note is not None and action not in _WITH_NOTE:
        raise UsageError("--note goes with shaker-inspected, void-result or dice-kept")
    if args.back is not None and action != "recall":
        raise UsageError(f"--back goes with recall, not {args.action}")
    back = None
    if action == "recall":
        try:
            back = parse_bounded_int(args.back or "1", low=1, high=RECALL_DEPTH, what="--back")
        except NumberError as exc:
            raise UsageError(str(exc)) from None
    if (args.reason is None) == (action == "void_result"):
        raise UsageError("--reason goes with void-result, and void-result needs one")
    if (args.to is None) == (action == "mode_switch"):
        raise UsageError("--to goes with mode-switch, and mode-switch needs one")
    if (args.result is None) == (action == "void_result"):
        raise UsageError("--result goes with void-result, and void-result needs one")
    try:
        request = Request(
            action,
            dice_set=args.id,
            note=args.note or "",
            reason=None if args.reason is None else VoidReason(args.reason),
            mode=None if args.to is None else Mode(args.to),
            result=None if args.result is None else parse_result(args.result),
            back=back,
        )
    except RequestError as exc:
        raise UsageError(str(exc)) from None
    if args.socket is not None:
        path = Path(args.socket)
    elif args.state_dir is not None:
        path = Path(args.state_dir) / SOCKET_NAME
    else:
        path = DEFAULT_SOCKET
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
