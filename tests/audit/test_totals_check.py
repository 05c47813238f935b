"""The running totals (controller/audit/totals.py) on logs the core writes, with every kind of
record they count: ``meters`` and ``dice-stats`` from the totals say what they say from a full
recount (the same log with its totals dropped), before and after retention moved records to
the archive; verify-log checks every row inside its one pass (controller/audit/totals_check.py)
and names a row altered, deleted or added, record by record and split across processes alike.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support.logged_table import SUPERVISOR, LoggedTable, rng_dice_settings

from controller.audit import log as audit_log
from controller.audit import parallel, verify
from controller.audit.archive import Policy, Retention, archive_paths
from controller.audit.dice_stats import DiceTally, dice_stats
from controller.audit.log import DB_NAME, load_signer
from controller.audit.meters import meters_report
from controller.audit.reader import read_records
from controller.audit.totals import METER_KINDS
from controller.audit.totals_check import FIELDS, KINDS, counted_data
from controller.audit.verify import LogVerifier, VerifyReport, verify_state_dir
from controller.cli import main
from controller.core.config import MIN_RETAIN_ROUNDS
from controller.core.dice_monitor import Window, alarm
from controller.core.meters import Meters, counted
from controller.core.record_schema import FIELDS as SCHEMA_FIELDS
from controller.core.records import RecordKind
from controller.core.state import Event, Mode, VoidReason
from controller.errors import LogIntegrityError

FRONTIER_EVERY = 16  # records between rows: many rows on a short log


def _day(table: LoggedTable, number: int) -> None:
    """Rounds of every kind the totals count: no rolls, a correction, voids, the lid and the
    tamper loop (a fault), service mode, an RNG round; and a checkpoint kept on demand."""
    table.play((number % 6 + 1, 4, 5), tilted=1)  # a no roll: not flat
    table.to_result((2, number % 6 + 1, 5))
    table.correct((2, number % 6 + 1, 6))
    table.send(Event.CLOSE_ROUND)
    table.to_result((1, 2, 3))
    table.void(VoidReason.PATRON_COMPLAINT)
    table.send(Event.LID_OPENED)
    table.send(Event.LID_CLOSED)
    table.send(Event.TAMPER, detail="shaker tilted")
    table.send(Event.SECURED)
    table.send(Event.CLEAR_FAULT, supervisor=True, employee=SUPERVISOR)
    table.service_round()
    table.switch_to(Mode.RNG)
    table.rng_round((5, 5, number % 6 + 1))
    table.switch_to(Mode.SHAKER)
    for faces in range(6):
        table.play((faces + 1, (faces + number) % 6 + 1, 3))
    table.log.checkpoint()  # kept with the frontier on demand (a reanchor): with its row


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("totals") / "state"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(audit_log, "FRONTIER_EVERY", FRONTIER_EVERY)
        table = LoggedTable(state, settings=rng_dice_settings()).open()
        for number in range(3):
            _day(table, number)
        table.close()
        table = LoggedTable(state, settings=rng_dice_settings()).open()  # a restart
        _day(table, 3)
        table.close()
    return state


@pytest.fixture
def state(played: Path, tmp_path: Path) -> Path:
    target = tmp_path / "state"
    shutil.copytree(played, target)
    return target


def _bare(state: Path, target: Path) -> Path:
    """The same log without its totals: the reports count every record."""
    shutil.copytree(state, target)
    with sqlite3.connect(target / DB_NAME) as db:
        db.execute("DROP TABLE totals")
    db.close()
    return target


def _rows(state: Path) -> list[int]:
    with sqlite3.connect(state / DB_NAME) as db:
        sizes = [size for (size,) in db.execute("SELECT size FROM totals ORDER BY size")]
    db.close()
    return sizes


def _change(state: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    with sqlite3.connect(state / DB_NAME) as db:
        for sql, args in statements:
            db.execute(sql, args)
    db.close()


def _verify(state: Path, *, split: bool, monkeypatch: pytest.MonkeyPatch) -> VerifyReport:
    signer = load_signer(state)
    assert signer is not None
    if not split:
        return verify_state_dir(state, signer.verifier, workers=1)
    monkeypatch.setattr(verify, "MIN_RECORDS", 1)
    monkeypatch.setattr(parallel, "RUN_RECORDS", 7)

    def no_sequential(self: LogVerifier, row: object) -> None:
        raise AssertionError("fell back to the sequential verifier")

    with monkeypatch.context() as patch:  # the split path itself checks the totals
        patch.setattr(LogVerifier, "feed", no_sequential)
        return verify_state_dir(state, signer.verifier, workers=2)


def _reports(state: Path) -> list[object]:
    return [meters_report(state), *(dice_stats(state, window) for window in Window)]


def test_the_reports_from_the_totals_are_the_full_recount(state: Path, tmp_path: Path) -> None:
    sizes = _rows(state)
    assert sizes[0] == 0
    assert len(sizes) > 10
    reports = _reports(state)
    assert reports == _reports(_bare(state, tmp_path / "bare"))
    meters = reports[0]
    assert isinstance(meters, dict)
    assert meters["corrections"] == 4
    assert meters["round_voids"] == 4
    assert meters["tamper"] == 4
    assert meters["context_agrees"] is True


@pytest.mark.parametrize("split", [False, True], ids=["one process", "split"])
def test_verify_log_accepts_the_totals_the_writer_kept(
    state: Path, monkeypatch: pytest.MonkeyPatch, split: bool
) -> None:
    assert _verify(state, split=split, monkeypatch=monkeypatch).records > 100


def test_after_retention_the_reports_are_the_full_recount_and_verify_log_accepts(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log, "FRONTIER_EVERY", FRONTIER_EVERY)
    table = LoggedTable(state, settings=rng_dice_settings()).open()
    for number in range(MIN_RETAIN_ROUNDS // 8):
        _day(table, number)
    signer = load_signer(state)
    assert signer is not None
    retention = Retention(state, signer, Policy(retain_rounds=MIN_RETAIN_ROUNDS))
    assert retention.run_until_done(table.log) >= 1
    _day(table, 7)  # rows kept after the drop
    table.close()
    assert archive_paths(state)
    with sqlite3.connect(state / DB_NAME) as db:
        (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
    db.close()
    sizes = _rows(state)
    assert sizes
    assert sizes[0] >= first  # the rows of the records dropped went with them
    assert _reports(state) == _reports(_bare(state, tmp_path / "bare"))
    verify_state_dir(state, signer.verifier)


def _altered_meters(state: Path, size: int) -> None:
    with sqlite3.connect(state / DB_NAME) as db:
        (blob,) = db.execute("SELECT meters FROM totals WHERE size = ?", (size,)).fetchone()
        altered = bytes(blob).replace(b'"games":', b'"games":1')
        db.execute("UPDATE totals SET meters = ? WHERE size = ?", (altered, size))
    db.close()


def _altered_dice(state: Path, size: int) -> None:
    with sqlite3.connect(state / DB_NAME) as db:
        (blob,) = db.execute("SELECT dice FROM totals WHERE size = ?", (size,)).fetchone()
        altered = bytes(blob).replace(b'"counted_from":', b'"counted_from":1', 1)
        assert altered != blob
        db.execute("UPDATE totals SET dice = ? WHERE size = ?", (altered, size))
    db.close()


@pytest.mark.parametrize("split", [False, True], ids=["one process", "split"])
@pytest.mark.parametrize(
    "tamper",
    [
        "meters altered",
        "dice altered",
        "dice removed",
        "row deleted",
        "creation's row deleted",
        "row added",
        "row beyond the end",
    ],
)
def test_verify_log_names_a_row_altered_deleted_or_added(
    state: Path, monkeypatch: pytest.MonkeyPatch, split: bool, tamper: str
) -> None:
    sizes = _rows(state)
    middle = sizes[len(sizes) // 2]
    named, words = middle, "its row of the meters' totals is not the count"
    if tamper == "meters altered":
        _altered_meters(state, middle)
    elif tamper == "dice altered":
        _altered_dice(state, middle)
        words = "its row's dice state is not the counts"
    elif tamper == "dice removed":
        _change(state, ("UPDATE totals SET dice = NULL WHERE size = ?", (middle,)))
        words = "its row's dice state is not the counts"
    elif tamper == "row deleted":
        _change(state, ("DELETE FROM totals WHERE size = ?", (middle,)))
        words = "is kept with the Merkle frontier, without its row of the totals"
    elif tamper == "creation's row deleted":
        _change(state, ("DELETE FROM totals WHERE size = 0", ()))
        named, words = None, "the totals lack the row of the log's creation"
    elif tamper == "row added":  # a copy of the row before, where no commit kept the frontier
        named = middle + 1
        _change(
            state,
            (
                "INSERT INTO totals SELECT ?, meters, dice FROM totals WHERE size = ?",
                (named, middle),
            ),
        )
        words = "has a row of the totals where no commit kept the frontier"
    else:
        named = sizes[-1] + 10_000
        _change(
            state,
            (
                "INSERT INTO totals SELECT ?, meters, dice FROM totals WHERE size = ?",
                (named, sizes[-1]),
            ),
        )
        words = "has a row of the totals beyond the log's end"
    where = "log" if named is None else f"record {named}"
    with pytest.raises(LogIntegrityError, match=f"^{where}: {words}"):
        _verify(state, split=split, monkeypatch=monkeypatch)


def test_a_log_from_before_the_totals_is_verified_and_reported_from_its_records(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = _bare(state, tmp_path / "bare")
    assert _verify(bare, split=False, monkeypatch=monkeypatch).records > 100
    assert _verify(bare, split=True, monkeypatch=monkeypatch).records > 100
    assert _reports(bare) == _reports(state)


def test_the_command_exits_1_naming_the_row(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export-key", "--state-dir", str(state)]) == 0
    key = tmp_path / "verifier.key"
    key.write_text(capsys.readouterr().out)
    middle = _rows(state)[len(_rows(state)) // 2]
    _altered_meters(state, middle)
    code = main(["verify-log", "--state-dir", str(state), "--key", str(key), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["ok"] is False
    assert report["record"] == middle
    assert "its row of the meters' totals is not the count" in report["error"]


# --- what the split path's workers hand back of a record: the fields the totals read -----------

_EVERY_FIELD = "(every field)"
_Counted = list[tuple[int, str, Mapping[str, Any]]]


class _Reads(Mapping[str, Any]):
    """A record's data that notes each field read of it (``get`` and ``in`` read through
    ``__getitem__``; going over them all reads every field)."""

    def __init__(self, data: Mapping[str, Any], read: set[str]) -> None:
        self._data, self._read = data, read

    def __getitem__(self, name: str) -> Any:
        self._read.add(name)
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        self._read.add(_EVERY_FIELD)
        return iter(self._data)

    def __len__(self) -> int:
        self._read.add(_EVERY_FIELD)
        return len(self._data)


def _fold(records: _Counted) -> tuple[Meters, bytes]:
    """The meters and the dice state the records make, as totals_check.py folds them."""
    meters, tally = Meters(), DiceTally()
    for seq, kind, data in records:
        if kind in METER_KINDS:
            meters = counted(meters, kind, data)
        if kind in FIELDS and kind not in METER_KINDS:
            tally.take(seq, kind, data)
    return meters, tally.fold().encode()


def _logged(state: Path) -> _Counted:
    """The records of the kinds the totals count, in order."""
    with sqlite3.connect(state / DB_NAME) as db:
        rows = [row for row in read_records(db) if row.kind in KINDS]
    db.close()
    return [(row.seq, row.kind, row.entry()["data"]) for row in rows]


def _loaded_dice() -> _Counted:
    """Rounds of a red die showing 6 until the monitor's test fires, the alarm recorded with
    the figures the test gives, the dice inspected and kept, a shift change, new dice."""
    records: _Counted = []
    tally, number = DiceTally(), 0
    while (figure := alarm(tally.fold().windows.test)) is None:
        number += 1
        for kind, data in (
            ("no_more_bets", {"round": number, "mode": "shaker", "bank": "dealer"}),
            ("result", {"round": number, "dice": {"red": 6, "blue": [number % 6 + 1, 2]}}),
        ):
            records.append((len(records) + 1, kind, data))
            tally.take(len(records), kind, data)
    test = tally.fold().windows.test
    figures = {"round": number, "attempt": 1, "rolls": test.rolls, "counts": test.as_record()}
    for kind, data in (
        ("dice_alarm", {**figure.as_record(), **figures, "dice_set": "D1", "locks": True}),
        ("supervisor_action", {"action": "dice_kept", "employee": SUPERVISOR}),
        ("shift_change", {"employee": SUPERVISOR}),
        ("dice_replaced", {"dice_set": "D2", "employee": SUPERVISOR}),
    ):
        records.append((len(records) + 1, kind, data))
    return records


def test_the_workers_hand_back_every_field_the_totals_read(state: Path) -> None:
    """The split path folds what ``counted_data`` keeps of each record: every field the meters'
    count and the dice fold read of it (noted as they read it, on a log of every kind the
    totals count and on loaded dice), and the fold of those is the fold of the records."""
    for records in (_logged(state), _loaded_dice()):
        reads: dict[str, set[str]] = {}
        noted = [
            (seq, kind, _Reads(data, reads.setdefault(kind, set()))) for seq, kind, data in records
        ]
        full = _fold(noted)
        for kind, read in reads.items():
            assert read <= set(FIELDS[kind]), (kind, read)
        assert _fold([(seq, kind, counted_data(kind, data)) for seq, kind, data in records]) == full
    assert _fold(_loaded_dice())[1] != DiceTally().fold().encode()
    assert {str(kind) for kind in METER_KINDS} <= set(reads) | {
        kind for _, kind, _ in _logged(state)
    }
    assert RecordKind.DICE_ALARM in reads


def test_the_fields_the_totals_read_are_their_kinds_fields() -> None:
    """A field's name mistyped in the list would be handed back as absent."""
    for kind, names in FIELDS.items():
        assert set(names) <= {spec.name for spec in SCHEMA_FIELDS[RecordKind(kind)]}, kind
