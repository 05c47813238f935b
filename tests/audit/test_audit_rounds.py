"""verify-log refuses what the rules forbid in a round, on the record that does it, and the
verifier split across processes says exactly the same, wherever its runs' boundaries fall.

- No secondary selection (N.J.A.C. 13:69E-1.28G): a round is decided once, ever. A second
  ``result`` of a round, a ``result_voided`` (the way a round was played again before
  corrections, so old logs fail too), a second ``no_more_bets`` of a round, round numbers that
  go back.
- A correction (N.J.A.C. 13:69E-1.28P(d)) is of its round's one result, while it is shown, at
  most once, never of an RNG round's; it names the dice read (the result's) and the dice seen
  (others), and its result is what the dice seen give with the paytables in force.
- Current 621a.5(e)(2)-(4): the RNG's dice settle no side wager; a dice round's result settles
  them.
- A round void (621a.12(c),(e)) says why and who; every employee id is well-formed.
- Service mode's test rounds are ``service_test`` records: no live result.

Each forbidden sequence is next to the allowed one it differs from. Logs are written by the
core (tests/support/logged_table.py) where the core can write them, by hand where it never would.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from support.forge import unchecked
from support.logged_table import SUPERVISOR, LoggedTable, rng_dice_settings

from controller.audit import parallel, verify
from controller.audit.checks import RoundShape
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.audit.recall import export_lines
from controller.audit.verify import LogVerifier, verify_state_dir
from controller.cli import main
from controller.core import canonical
from controller.core.config import Config
from controller.core.dice import Roll
from controller.core.record_data import RecordDataError, config_loaded_data
from controller.core.records import RecordKind
from controller.core.result import result_of_number, result_of_roll
from controller.core.state import CorrectionReason, Event, Mode, VoidReason
from controller.errors import LogIntegrityError

RUNS = (1, 2, 3, 64)  # records per run of the split verifier: every boundary, and one run
Faces = tuple[int, int, int]
Records = list[tuple[RecordKind, dict[str, Any]]]


# --- records as the core writes them ------------------------------------------------------------


def bets(number: int, mode: str = "shaker", **extra: object) -> tuple[RecordKind, dict[str, Any]]:
    return RecordKind.NO_MORE_BETS, {
        "round": number,
        "bank": "dealer",
        "mode": mode,
        "employee": None,
        **extra,
    }


def _result_fields(
    faces: Faces, *, settles: bool = True, bank: int | None = None
) -> dict[str, Any]:
    settings = Config().round_settings()
    result = result_of_roll(
        settings.game,
        Roll(faces[0], (faces[1], faces[2])),
        bank_seat=bank,
        paytables=settings.paytables,
        settles_wagers=settles,
    )
    return canonical.normalized(result.as_record())  # type: ignore[no-any-return]


def result(
    number: int, faces: Faces = (3, 4, 5), *, attempt: int = 1, settles: bool = True
) -> tuple[RecordKind, dict[str, Any]]:
    fields = _result_fields(faces, settles=settles)
    return RecordKind.RESULT, {"round": number, "attempt": attempt, **fields}


def rng_number(number: int, count: int) -> tuple[RecordKind, dict[str, Any]]:
    """An RNG round in position mode: a number, no dice."""
    drawn = result_of_number(Config().round_settings().game, count, bank_seat=None)
    return RecordKind.RESULT, {"round": number, "attempt": 1, **drawn.as_record()}


def corrected(
    number: int,
    read: Faces = (3, 4, 5),
    seen: Faces = (3, 4, 6),
    *,
    attempt: int = 1,
    **changes: object,
) -> tuple[RecordKind, dict[str, Any]]:
    data: dict[str, Any] = {
        "round": number,
        "attempt": attempt,
        "dice_read": {"red": read[0], "blue": [read[1], read[2]]},
        "dice_seen": {"red": seen[0], "blue": [seen[1], seen[2]]},
        "reason": "misread",
        "employee": SUPERVISOR,
        "note": "",
        "result": _result_fields(seen),
    }
    return RecordKind.RESULT_CORRECTED, {**data, **changes}


def close(number: int, **extra: object) -> tuple[RecordKind, dict[str, Any]]:
    return RecordKind.CLOSE, {"round": number, "employee": None, **extra}


def void(
    number: int, reason: str = "dealer_error", employee: str | None = SUPERVISOR, **changes: object
) -> tuple[RecordKind, dict[str, Any]]:
    data: dict[str, Any] = {
        "round": number,
        "attempt": 1,
        "state": "result",
        "reason": reason,
        "wagers": "returned",
        "reshuffle": reason in ("wrong_count", "tile_exposed"),
        "note": "",
        "employee": employee,
    }
    return RecordKind.VOID, {**data, **changes}


def old_void(number: int) -> tuple[RecordKind, dict[str, Any]]:
    """A void as logs written before the reasons hold it."""
    return RecordKind.VOID, {
        "round": number,
        "attempt": 1,
        "state": "armed",
        "supervisor": False,
        "detail": "",
    }


def result_voided(number: int) -> tuple[RecordKind, dict[str, Any]]:
    """A result voided and its round decided again (logs written before corrections)."""
    return RecordKind.RESULT_VOIDED, {"round": number, "attempt": 1, "reason": "misread"}


def service_test(record: RecordKind, data: dict[str, Any]) -> tuple[RecordKind, dict[str, Any]]:
    return RecordKind.SERVICE_TEST, {"record": str(record), **data}


class Forged(NamedTuple):
    """A record of a shape this product never writes: written by a holder of the log's key."""

    kind: RecordKind
    data: dict[str, Any]


def played(number: int, faces: Faces = (3, 4, 5)) -> Records:
    return [bets(number), result(number, faces), close(number)]


# --- the log, and what both verifiers say of it -------------------------------------------------


def write(state: Path, records: Records) -> int:
    """A log of ``config_loaded`` and ``records``; the sequence number of the last."""
    log = AuditLog.open(state)
    seq = log.append(RecordKind.CONFIG_LOADED, config_loaded_data(Config()))
    for record in records:
        if isinstance(record, Forged):
            with unchecked():  # forged by a holder of the key, for the verifier to refuse
                seq = log.append(*record)
        else:
            seq = log.append(*record)
    log.close()
    return seq


def outcome(state: Path, workers: int) -> object:
    verifier = load_signer(state)
    assert verifier is not None
    try:
        return verify_state_dir(state, verifier.verifier, workers=workers).as_dict()
    except LogIntegrityError as exc:
        return ("failed", exc.record, str(exc))


def agreed(state: Path, monkeypatch: pytest.MonkeyPatch, *, split_only: bool = False) -> object:
    """What the record-by-record verifier says, and that the split verifier says the same for
    every run size. ``split_only``: the log verifies, and the split path itself said so (it
    never fell back to the record-by-record verifier)."""
    expected = outcome(state, 1)
    monkeypatch.setattr(verify, "MIN_RECORDS", 1)
    with monkeypatch.context() as patched:
        if split_only:
            assert isinstance(expected, dict), expected

            def no_sequential(self: LogVerifier, row: object) -> None:
                raise AssertionError("fell back to the sequential verifier")

            patched.setattr(LogVerifier, "feed", no_sequential)
        for run in RUNS:
            patched.setattr(parallel, "RUN_RECORDS", run)
            assert outcome(state, 2) == expected, run
    return expected


def refused(state: Path, monkeypatch: pytest.MonkeyPatch, records: Records, message: str) -> None:
    """verify-log (both of them) refuses the log at the last record, with ``message``."""
    last = write(state, records)
    found = agreed(state, monkeypatch)
    assert isinstance(found, tuple), f"the log verified: {found}"
    assert found[1] == last, found
    assert message in found[2], found[2]


def allowed(state: Path, monkeypatch: pytest.MonkeyPatch, records: Records) -> None:
    write(state, records)
    agreed(state, monkeypatch, split_only=True)


# --- no secondary selection (N.J.A.C. 13:69E-1.28G) ---------------------------------------------


FORBIDDEN: dict[str, tuple[Records, str]] = {
    "a second result of a round in play": (
        [bets(1), result(1, (1, 2, 3)), result(1, (4, 5, 6), attempt=2)],
        "round 1 decided twice",
    ),
    "a second result of a round closed": (
        [*played(1), result(1, (4, 5, 6), attempt=2)],
        "round 1 decided twice",
    ),
    "a second result of a round voided": (
        [bets(1), result(1), void(1), result(1, attempt=2)],
        "round 1 decided twice",
    ),
    "a result voided": (
        [bets(1), result(1), result_voided(1)],
        "secondary selection (N.J.A.C. 13:69E-1.28G",
    ),
    "a result voided and decided again, as logs before corrections hold it": (
        [*played(1), bets(2), result(2), result_voided(2)],
        "a result of round 2 voided to decide the round again",
    ),
    "a second no_more_bets of a round": (
        [bets(1), bets(1)],
        "the bets of round 1 closed twice",
    ),
    "a second no_more_bets of a round voided": (
        [bets(1), void(1, "dealer_key", None, state="armed"), bets(1)],
        "the bets of round 1 closed twice",
    ),
    "round numbers that go back": (
        [*played(5), bets(4)],
        "the bets of round 4 closed after those of round 5",
    ),
    "a no_more_bets without a round number": (
        [Forged(RecordKind.NO_MORE_BETS, {"bank": "dealer", "mode": "shaker", "round": "7"})],
        "no_more_bets names round '7'",
    ),
}


@pytest.mark.parametrize("case", sorted(FORBIDDEN))
def test_a_round_decided_twice_is_refused_at_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    records, message = FORBIDDEN[case]
    refused(tmp_path, monkeypatch, records, message)


def test_rounds_decided_once_each_verify_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds closed, voided (by the dealer before the dice rest, by the supervisor over a
    result, in the old format), a round number skipped (a test round of service mode took
    it), every run boundary."""
    allowed(
        tmp_path,
        monkeypatch,
        [
            *played(1),
            bets(2),
            void(2, "dealer_key", None, state="armed"),
            bets(3),
            result(3),
            void(3, "patron_complaint"),
            bets(4),
            old_void(4),
            *played(6, (6, 6, 6)),
            *played(7, (1, 1, 2)),
        ],
    )


# --- corrections (N.J.A.C. 13:69E-1.28P(d)) ------------------------------------------------------

# A round decided (3, 4, 5), shown: what may follow it
SHOWN: Records = [bets(1), result(1, (3, 4, 5))]

CORRECTIONS_FORBIDDEN: dict[str, tuple[Records, str]] = {
    "before its result": ([bets(1), corrected(1)], "before it"),
    "after its close": ([*SHOWN, close(1), corrected(1)], "after its close or void"),
    "after its void": ([*SHOWN, void(1), corrected(1)], "after its close or void"),
    "of another round's result": (
        [*played(1), bets(2), corrected(1)],
        "a correction of the result of round 1 after its close or void",
    ),
    "twice": (
        [*SHOWN, corrected(1), corrected(1, seen=(3, 4, 4))],
        "round 1 corrected twice",
    ),
    "of another attempt": ([*SHOWN, corrected(1, attempt=2)], "attempt 2 of round 1"),
    "of dice other than the result's": (
        [*SHOWN, corrected(1, read=(3, 4, 4), seen=(3, 4, 6))],
        "are not those its result recorded",
    ),
    "to the dice read": (
        [*SHOWN, corrected(1, seen=(3, 4, 5))],
        "corrects nothing",
    ),
    "whose result is not the dice seen's": (
        [*SHOWN, corrected(1, result=_result_fields((3, 4, 4)))],
        "a correction's result is of the dice seen",
    ),
    "whose result is another starting position": (
        [
            *SHOWN,
            corrected(1, result={**_result_fields((3, 4, 6)), "starting_position": "seat 1"}),
        ],
        "corrected result starting_position is recorded as 'seat 1'",
    ),
    "whose result pays otherwise": (
        [*SHOWN, corrected(1, seen=(6, 5, 5), result=_result_fields((6, 5, 5), settles=False))],
        "its side wagers settled on them",
    ),
    "whose result is of another bank": (
        [*SHOWN, corrected(1, result=_result_fields((3, 4, 6), bank=2))],
        "is not of its game and bank",
    ),
    "of an RNG round's result": (
        [bets(1, "rng"), result(1, settles=False), corrected(1)],
        "an RNG result: the RNG's number is the selection",
    ),
    "of an RNG number": (
        [bets(1, "rng"), rng_number(1, 7), corrected(1)],
        "never corrected or redrawn (N.J.A.C. 13:69E-1.28G)",
    ),
    "for a reason not in the rules": (
        [*SHOWN, corrected(1, reason="re_roll")],
        "a correction's reason is one of misread, patron_complaint, surveillance_review",
    ),
    "by nobody": ([*SHOWN, corrected(1, employee=None)], "names the employee who made it"),
    "by a malformed employee id": (
        [*SHOWN, corrected(1, employee="S 100")],
        "an employee id is 1 to 16 ASCII letters and digits",
    ),
    "with dice that are not dice": (
        [*SHOWN, corrected(1, dice_seen={"red": 7, "blue": [1, 2]})],
        "dice_seen: die face 7 is not 1..6",
    ),
}


@pytest.mark.parametrize("case", sorted(CORRECTIONS_FORBIDDEN))
def test_a_correction_out_of_its_place_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    records, message = CORRECTIONS_FORBIDDEN[case]
    refused(tmp_path, monkeypatch, records, message)


@pytest.mark.parametrize("reason", [str(r) for r in CorrectionReason])
def test_one_correction_of_the_result_shown_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    """Corrected, then closed; corrected, then voided (a correction found wrong); a round after
    it decided on its own dice."""
    allowed(
        tmp_path,
        monkeypatch,
        [
            *SHOWN,
            corrected(1, reason=reason, uid=1000),
            close(1),
            bets(2),
            result(2, (6, 6, 5)),
            corrected(2, read=(6, 6, 5), seen=(6, 5, 5)),
            void(2, "patron_complaint"),
            *played(3),
        ],
    )


# --- side wagers are the physical dice's (current 621a.5(e)(2)-(4)) --------------------------


def test_an_rng_result_that_settles_side_wagers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused(
        tmp_path,
        monkeypatch,
        [bets(1, "rng"), result(1, settles=True)],
        "a result of RNG round 1 settles side wagers",
    )


@pytest.mark.parametrize("mode", ["shaker", "manual"])
def test_a_dice_result_without_its_side_wagers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    refused(
        tmp_path,
        monkeypatch,
        [bets(1, mode), result(1, settles=False)],
        f"a result of {mode} round 1 without its dice and the side wagers they settle",
    )


def test_a_dice_round_without_dice_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused(
        tmp_path,
        monkeypatch,
        [bets(1, "shaker"), rng_number(1, 7)],
        "a result of shaker round 1 without its dice",
    )


def test_rng_results_settle_nothing_and_dice_results_settle_their_wagers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same dice in an RNG round and in a shaker round: one settles nothing, the other its
    wagers (and a log from before the modes, its no_more_bets without one, is not judged)."""
    allowed(
        tmp_path,
        monkeypatch,
        [
            bets(1, "rng"),
            result(1, (2, 3, 4), settles=False),
            close(1),
            bets(2, "rng"),
            rng_number(2, 5),
            close(2),
            *played(3, (2, 3, 4)),
            (RecordKind.NO_MORE_BETS, {"round": 4, "bank": "dealer"}),
            result(4, (2, 3, 4)),
            close(4),
            bets(5, "rng"),
            result(5, (2, 3, 4), settles=False),
            close(5),
        ],
    )


# --- round voids and who did it ------------------------------------------------------------------

VOIDS_FORBIDDEN: dict[str, tuple[Records, str]] = {
    "for a reason not in the rules": (
        [*SHOWN, void(1, "bored")],
        "a void's reason is one of wrong_count",
    ),
    "typed by nobody": (
        [*SHOWN, void(1, "wrong_count", None)],
        "a void for wrong_count names the employee who voided the round",
    ),
    "that keeps the wagers": ([*SHOWN, void(1, wagers="kept")], "returns every wager"),
    "for a wrong count without the reshuffle": (
        [*SHOWN, void(1, "wrong_count", reshuffle=False)],
        "a void for wrong_count reshuffles the tiles",
    ),
    "of neither format": (
        [*SHOWN, Forged(RecordKind.VOID, {"round": 1, "why": "x"})],
        "a void record has",
    ),
    "by a malformed employee id": (
        [*SHOWN, void(1, employee="S-100")],
        "employee: an employee id is 1 to 16",
    ),
}


@pytest.mark.parametrize("case", sorted(VOIDS_FORBIDDEN))
def test_a_void_without_its_reason_or_who_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    records, message = VOIDS_FORBIDDEN[case]
    refused(tmp_path, monkeypatch, records, message)


@pytest.mark.parametrize(
    ("kind", "data", "message"),
    [
        (RecordKind.CLOSE, {"round": 1, "employee": "x" * 17}, "employee: an employee id"),
        (RecordKind.CLOSE, {"round": 1, "employee": 7}, "employee is an employee id or null"),
        (RecordKind.CLOSE, {"round": 1, "employee": None, "uid": -1}, "uid is an account's"),
        (RecordKind.CLOSE, {"round": 1, "employee": None, "uid": True}, "uid is an account's"),
        (
            RecordKind.SHIFT_CHANGE,
            {"round": 2, "dealer": "d\u00e9"},
            "dealer: an employee id is 1 to 16 ASCII",
        ),
        (
            RecordKind.FAULT_CLEARED,
            {"round": 2, "faults": [], "supervisor": True, "employee": ""},
            "employee: an employee id",
        ),
        (
            RecordKind.TILES_SHUFFLED,
            {"round": 2, "reason": "new_game", "employee": "a b"},
            "employee: an employee id",
        ),
    ],
)
def test_an_employee_id_that_is_not_one_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: RecordKind,
    data: dict[str, Any],
    message: str,
) -> None:
    forged = Forged(kind, data)
    records = [*SHOWN, forged] if kind == RecordKind.CLOSE else [*played(1), forged]
    refused(tmp_path, monkeypatch, records, message)


def test_voids_by_the_table_and_by_a_person_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every reason: the table's own with no employee (a key of the panel with no dealer
    signed on), a person's with one; the old format too."""
    records: Records = []
    for number, reason in enumerate(VoidReason, start=1):
        employee = SUPERVISOR if reason.is_typed else None
        records += [bets(number), void(number, str(reason), employee, state="armed")]
    records += [bets(20), old_void(20), *played(21)]
    allowed(tmp_path, monkeypatch, records)


# --- service mode: test records ------------------------------------------------------------------


def test_service_modes_test_rounds_are_no_live_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """9 NYCRR 5319.58: the test rounds take the live round's number (and the next), and the
    live round takes it again when service mode is left: never a second result of it."""
    entered = (RecordKind.SERVICE_MODE, {"round": 2, "entered": True, "employee": SUPERVISOR})
    left = (RecordKind.SERVICE_MODE, {"round": 2, "entered": False, "test_rounds": 2})
    tests: Records = []
    for number in (2, 3):
        tests += [
            service_test(*bets(number)),
            service_test(*result(number, (1, 1, 1))),
            service_test(*close(number)),
        ]
    allowed(tmp_path, monkeypatch, [*played(1), entered, *tests, left, *played(2), *played(3)])


# --- logs the core writes -------------------------------------------------------------------------


def test_a_day_at_the_table_verifies_alike_whatever_the_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core's own records: no rolls, a correction, a void of each kind a person gives, a
    test round of service mode, rounds of the RNG's dice."""
    table = LoggedTable(tmp_path, settings=rng_dice_settings()).open()
    table.play((3, 4, 5), tilted=1)
    table.to_result((2, 4, 5))
    table.correct((2, 4, 6))
    table.send(Event.CLOSE_ROUND)
    for faces, reason in zip(
        [(1, 2, 3), (6, 6, 6), (1, 5, 2), (2, 2, 2), (4, 1, 1)],
        (r for r in VoidReason if r.is_typed),
        strict=True,
    ):
        table.to_result(faces)
        table.void(reason)
    table.service_round()
    table.play((5, 5, 6))
    table.switch_to(Mode.RNG)
    table.rng_round((2, 2, 6))
    table.rng_round((1, 3, 6))
    table.close()
    report = agreed(tmp_path, monkeypatch, split_only=True)
    assert isinstance(report, dict)
    assert report["results_recomputed"] == 11  # 10 results and the correction's
    # export writes every field of what the core recorded: the correction, who voided and why
    exported = {line["kind"]: line["data"] for line in export_lines(tmp_path)}
    assert set(exported["result_corrected"]) == {
        *("round", "attempt", "dice_read", "dice_seen", "reason", "employee", "note", "result"),
    }
    assert exported["result_corrected"]["employee"] == SUPERVISOR
    assert set(exported["void"]) == {
        *("round", "attempt", "state", "reason", "wagers", "reshuffle", "note", "employee"),
    }
    assert exported["void"]["wagers"] == "returned"


def test_a_correction_the_core_wrote_then_altered_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor's correction, its dice seen changed in the stored record: the
    correction's result no longer follows from them (and its hash no longer chains)."""
    table = LoggedTable(tmp_path).open()
    table.to_result((2, 4, 5))
    table.correct((2, 4, 6))
    table.send(Event.CLOSE_ROUND)
    table.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        seq, leaf = db.execute(
            "SELECT seq, leaf FROM records WHERE kind = 'result_corrected'"
        ).fetchone()
    found = agreed(tmp_path, monkeypatch)
    assert isinstance(found, dict)
    entry = canonical.decode(bytes(leaf))
    entry["data"]["dice_seen"] = {"red": 6, "blue": [6, 6]}
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("UPDATE records SET leaf = ? WHERE seq = ?", (canonical.encode(entry), seq))
    found = agreed(tmp_path, monkeypatch)
    assert isinstance(found, tuple)
    assert found[1] == seq


def test_verify_log_names_the_record_and_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the command: exit 1, the record and the rule on stderr in one line."""
    last = write(tmp_path, [*played(1), result(1, attempt=2)])
    code = main(["verify-log", "--state-dir", str(tmp_path), "--jobs", "1"])
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1
    assert f"record {last}" in err
    assert "round 1 decided twice" in err
    assert '"ok": false' in out


# --- the shape's own seam -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "later", "last"),
    [
        ([bets(3)], [bets(4)], 4),
        ([bets(3)], [bets(3)], None),
        (played(3), [void(3), bets(2)], None),
        ([], [bets(1)], 1),
        ([bets(3)], [void(3)], 3),  # a run in which no bets close: nothing to compare
    ],
)
def test_the_seam_of_two_runs_is_checked(before: Records, later: Records, last: int | None) -> None:
    """``RoundShape.then``: a run checked by itself from its first round boundary, joined to
    what came before it: the first bets it closes come after the last ones before."""
    first, second = RoundShape(), RoundShape()
    for shape, records in ((first, before), (second, later)):
        for seq, (kind, data) in enumerate(records, start=1):
            shape.feed(seq, kind, data)
    if last is None:
        with pytest.raises(RecordDataError, match="closed"):
            first.then(second)
    else:
        assert first.then(second).last_bets == last
