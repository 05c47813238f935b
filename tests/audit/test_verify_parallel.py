"""verify-log split across processes says exactly what the record-by-record verifier says: the
same report for an intact log, the same record and words for a tampered one, whatever the
split (runs of 1 record up to the whole log, boundaries anywhere)."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.rng_fakes import MemoryLog, counter_source, manager

from controller.audit import parallel, verify
from controller.audit.log import DB_NAME, AuditLog
from controller.audit.verify import LogVerifier, verify_state_dir
from controller.core import canonical
from controller.core.note import Signer, Verifier
from controller.core.records import RecordKind
from controller.errors import LogIntegrityError

WRITER = Path(__file__).resolve().parents[1] / "support" / "audit_writer.py"
RUNS = (1, 2, 3, 7, 10, 64, 10_000)  # records per run: every boundary, odd splits, one run
SEED = int(os.environ.get("VERIFY_SEED", random.randrange(2**32)))


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("played")
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "11", "12"], check=True, stdout=subprocess.DEVNULL
    )
    return state


@pytest.fixture
def log_dir(played: Path, tmp_path: Path) -> Path:
    target = tmp_path / "state"
    shutil.copytree(played, target)
    return target


def _key(state: Path) -> Verifier:
    return Signer.parse((state / "audit-log.key").read_text()).verifier


def _outcome(state: Path, verifier: Verifier, workers: int, anchor: str | None) -> object:
    try:
        return verify_state_dir(state, verifier, workers=workers, checkpoint=anchor).as_dict()
    except LogIntegrityError as exc:
        return ("failed", exc.record, str(exc))


def _agree(
    state: Path,
    monkeypatch: pytest.MonkeyPatch,
    verifier: Verifier | None = None,
    anchor: str | None = None,
) -> object:
    """The outcome of one process, and the same outcome for every split on 2 and 3 processes."""
    key = verifier or _key(state)
    expected = _outcome(state, key, 1, anchor)
    monkeypatch.setattr(verify, "MIN_RECORDS", 1)
    for run in RUNS:
        monkeypatch.setattr(parallel, "RUN_RECORDS", run)
        for workers in (2, 3):
            assert _outcome(state, key, workers, anchor) == expected, (run, workers)
    return expected


def _rows(state: Path) -> list[tuple[int, str, bytes]]:
    with sqlite3.connect(state / DB_NAME) as db:
        return [
            (r[0], r[1], bytes(r[2]))
            for r in db.execute("SELECT seq, kind, leaf FROM records ORDER BY seq")
        ]


def _set_leaf(state: Path, seq: int, leaf: bytes) -> None:
    with sqlite3.connect(state / DB_NAME) as db:
        db.execute("UPDATE records SET leaf = ? WHERE seq = ?", (leaf, seq))


def test_an_intact_log_gets_the_same_report_and_the_split_path_is_taken(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _agree(log_dir, monkeypatch)
    assert isinstance(report, dict)
    assert report["results_recomputed"] >= 12
    # The split path itself gave it: the record-by-record path is not used at all.
    monkeypatch.setattr(parallel, "RUN_RECORDS", 5)

    def no_sequential(self: LogVerifier, row: object) -> None:
        raise AssertionError("fell back to the sequential verifier")

    monkeypatch.setattr(LogVerifier, "feed", no_sequential)
    assert verify_state_dir(log_dir, _key(log_dir), workers=2).as_dict() == report


def test_a_flipped_byte_is_named_alike_at_every_run_boundary(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    print(f"VERIFY_SEED={SEED}")
    rng = random.Random(SEED)
    rows = _rows(log_dir)
    pristine = log_dir.parent / "pristine"
    shutil.copytree(log_dir, pristine)
    victims = {rows[0], rows[1], rows[-1], *rng.sample(rows, 4)}
    for seq, _, leaf in sorted(victims):
        flipped = bytearray(leaf)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        _set_leaf(log_dir, seq, bytes(flipped))
        outcome = _agree(log_dir, monkeypatch)
        assert isinstance(outcome, tuple), seq
        assert outcome[1] == seq
        _set_leaf(log_dir, seq, leaf)


@pytest.mark.parametrize("victim", [0, 4, 9, -2, -1])
def test_a_deleted_record_is_named_alike(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch, victim: int
) -> None:
    seq = _rows(log_dir)[victim][0]
    with sqlite3.connect(log_dir / DB_NAME) as db:
        db.execute("DELETE FROM records WHERE seq = ?", (seq,))
    outcome = _agree(log_dir, monkeypatch)
    assert isinstance(outcome, tuple)
    assert outcome[1] == seq


def test_an_altered_checkpoint_is_named_alike(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sqlite3.connect(log_dir / DB_NAME) as db:
        size, note = db.execute(
            "SELECT size, note FROM checkpoints WHERE size > 0 ORDER BY size LIMIT 1 OFFSET 3"
        ).fetchone()
        lines = note.split("\n")
        lines[2] = ("B" if lines[2][0] != "B" else "C") + lines[2][1:]  # the root hash
        db.execute("UPDATE checkpoints SET note = ? WHERE size = ?", ("\n".join(lines), size))
    outcome = _agree(log_dir, monkeypatch)
    assert isinstance(outcome, tuple)
    assert outcome[1] == size
    assert "signature" in outcome[2]


def test_a_settlement_re_signed_by_the_key_holder_is_named_alike_far_from_its_paytables(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key holder rewrites the log with one wrong payout, re-chained and re-signed: the run
    that holds the result has no config_loaded of its own, and still finds it."""
    signer = Signer.parse((log_dir / "audit-log.key").read_text())
    target = log_dir.parent / "forged"
    target.mkdir()
    log = AuditLog(target / DB_NAME, signer)
    results = [seq for seq, kind, _ in _rows(log_dir) if kind == "result"]
    bad_seq = results[-1]
    for seq, kind, leaf in _rows(log_dir)[1:]:  # the new log has its own log_created record
        data = canonical.decode(leaf)["data"]
        if seq == bad_seq:
            data["payouts"]["A"]["wins"] = not data["payouts"]["A"]["wins"]
        log.append(RecordKind(kind), data)
    log.close()
    outcome = _agree(target, monkeypatch, signer.verifier)
    assert isinstance(outcome, tuple)
    assert outcome[1] == bad_seq
    assert "payouts" in outcome[2]


def test_a_log_cut_back_and_one_checked_against_a_later_checkpoint_agree(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = len(_rows(log_dir))
    with sqlite3.connect(log_dir / DB_NAME) as db:
        db.execute("DELETE FROM records WHERE seq > ?", (size - 3,))
    outcome = _agree(log_dir, monkeypatch)
    assert isinstance(outcome, tuple)
    assert outcome[1] == size - 2


def test_a_checkpoint_kept_elsewhere_is_extended_or_the_fork_named_alike(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sqlite3.connect(log_dir / DB_NAME) as db:
        size, anchor = db.execute(
            "SELECT size, note FROM checkpoints WHERE size > 0 ORDER BY size LIMIT 1 OFFSET 5"
        ).fetchone()
    report = _agree(log_dir, monkeypatch, anchor=anchor)
    assert isinstance(report, dict)
    assert report["extends_checkpoint"] == size
    seq, _, leaf = _rows(log_dir)[size // 2]
    entry = canonical.decode(leaf)
    entry["time"] = entry["time"][:-1] + ("0" if entry["time"][-1] != "0" else "1")
    _set_leaf(log_dir, seq, canonical.encode(entry))
    outcome = _agree(log_dir, monkeypatch, anchor=anchor)
    assert isinstance(outcome, tuple)


def _rng_log(state: Path, *, late_commit: bool) -> Verifier:
    """A log of RNG sessions whose draws come between the bets closing and the round's void
    (with ``late_commit``, the second session is committed after its first round's bets
    closed: named at that draw)."""
    records = MemoryLog()
    rng = manager(state, records, entropy_source=counter_source())
    round_number = 0
    for session in range(3):
        if not (late_commit and session == 1):
            rng.open()
        for _ in range(9):
            round_number += 1
            records.append(RecordKind.ROUND_OPENED, {"round": round_number})
            records.append(
                RecordKind.NO_MORE_BETS, {"bank": "dealer", "mode": "rng", "round": round_number}
            )
            if late_commit and session == 1 and not rng.is_open:
                rng.open()
            rng.draw(round_number, 1)
            records.append(RecordKind.VOID, _dealer_void(round_number))
        rng.close()
    signer = Signer.generate("paigow-controller/table-7")
    log = AuditLog(state / DB_NAME, signer)
    for _, kind, data in records.records:
        log.append(RecordKind(kind), data)
    log.close()
    return signer.verifier


def _dealer_void(round_number: int) -> dict[str, object]:
    """The dealer's void key while the RNG draws (621a.12(c)): every wager returned."""
    return {
        "round": round_number,
        "attempt": 1,
        "state": "drawing",
        "reason": "dealer_key",
        "wagers": "returned",
        "reshuffle": False,
        "note": "",
        "employee": None,
    }


@pytest.mark.parametrize("late_commit", [False, True])
def test_rng_sessions_replay_and_their_draws_are_checked_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, late_commit: bool
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    verifier = _rng_log(state, late_commit=late_commit)
    outcome = _agree(state, monkeypatch, verifier)
    if late_commit:
        assert isinstance(outcome, tuple)
        assert "a commitment must come before" in outcome[2]
    else:
        assert isinstance(outcome, dict)
        assert outcome["rng"] == "3 revealed RNG session(s) replayed"


def test_the_split_path_itself_proves_consistency_and_replays_rng_sessions(
    log_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Subtrees handed back never cross the consistency proof's ranges, and the RNG draws are
    checked against the round the runs saw: no run falls back to the sequential verifier."""
    with sqlite3.connect(log_dir / DB_NAME) as db:
        size, anchor = db.execute(
            "SELECT size, note FROM checkpoints WHERE size > 0 ORDER BY size LIMIT 1 OFFSET 5"
        ).fetchone()
    rng_state = tmp_path / "rng"
    rng_state.mkdir()
    rng_key = _rng_log(rng_state, late_commit=False)
    expected = [
        _outcome(log_dir, _key(log_dir), 1, anchor),
        _outcome(rng_state, rng_key, 1, None),
    ]

    def no_sequential(self: LogVerifier, row: object) -> None:
        raise AssertionError("fell back to the sequential verifier")

    monkeypatch.setattr(LogVerifier, "feed", no_sequential)
    monkeypatch.setattr(verify, "MIN_RECORDS", 1)
    for run in RUNS:
        monkeypatch.setattr(parallel, "RUN_RECORDS", run)
        assert _outcome(log_dir, _key(log_dir), 2, anchor) == expected[0], run
        assert _outcome(rng_state, rng_key, 2, None) == expected[1], run
    assert isinstance(expected[0], dict)
    assert expected[0]["extends_checkpoint"] == size
