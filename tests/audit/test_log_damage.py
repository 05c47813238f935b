"""A damaged record is named, never an internal error (issue 28): ``export``, ``recall``,
``dice-stats`` and ``meters`` name it (its seq and what is wrong), go on with the rest and exit
1; a damaged tail at start latches ``log_damaged`` with the record named, and the controller
stays up (display and readers served, play refused, nothing recorded, no restart loop)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest
from support import simulate_argv
from support.records import valid

from controller.audit.damage import Damage, sound_rows
from controller.audit.log import DB_NAME, AuditLog
from controller.cli import main
from controller.core import canonical
from controller.core.config import Config
from controller.core.records import RecordKind, StoredRecord
from controller.core.state import (
    ClearFault,
    Fault,
    NoMoreBets,
    Screen,
    ShakePressed,
    State,
    Tick,
)
from controller.errors import LogDamagedError, LogIntegrityError

READERS = (
    ("export",),
    ("recall", "--last", "100", "--json"),
    ("dice-stats", "--window", "all", "--json"),
    ("meters", "--json"),
)


@pytest.fixture(scope="module")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three rounds played by the simulation: some fifty records."""
    state = tmp_path_factory.mktemp("small") / "state"
    proc = subprocess.run(
        simulate_argv(state, 3),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return state


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def _leaf(state: Path, seq: int) -> bytes:
    with sqlite3.connect(state / DB_NAME) as db:
        (leaf,) = db.execute("SELECT leaf FROM records WHERE seq = ?", (seq,)).fetchone()
    db.close()
    return bytes(leaf)


def _store(state: Path, seq: int, leaf: bytes) -> None:
    with sqlite3.connect(state / DB_NAME) as db:
        db.execute("UPDATE records SET leaf = ? WHERE seq = ?", (leaf, seq))
    db.close()


def _size(state: Path) -> int:
    with sqlite3.connect(state / DB_NAME) as db:
        (size,) = db.execute("SELECT max(seq) FROM records").fetchone()
    db.close()
    return int(size)


def _seq_of(state: Path, kind: str) -> int:
    with sqlite3.connect(state / DB_NAME) as db:
        rows = db.execute("SELECT seq FROM records WHERE kind = ? ORDER BY seq", (kind,))
        seqs = [int(seq) for (seq,) in rows]
    db.close()
    assert seqs, kind
    return seqs[len(seqs) // 2]


def _without_time(state: Path, seq: int) -> None:
    """The finding's damage: a record that is canonical but lacks its ``time``."""
    entry = canonical.decode(_leaf(state, seq))
    del entry["time"]
    _store(state, seq, canonical.encode(entry))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _names(err: str, seq: int) -> bool:
    return re.search(rf"\brecord {seq}\b", err) is not None


# --- each reader names the record and goes on --------------------------------------------


@pytest.mark.parametrize("argv", READERS, ids=[argv[0] for argv in READERS])
def test_a_record_without_its_time_is_named_and_the_rest_is_read(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    state = _copy(small_log, tmp_path / "state")
    seq = _seq_of(state, "close")  # a record every reader reads
    _without_time(state, seq)
    code, out, err = _run(capsys, *argv, "--state-dir", str(state))
    assert code == 1
    assert "internal error" not in err
    assert "Traceback" not in err
    first = err.splitlines()[0]
    assert first == (
        f"paigow-controller: {argv[0]}: damaged: record {seq}: has fields"
        " ['data', 'kind', 'prev', 'seq'], not ['data', 'kind', 'prev', 'seq', 'time']"
    )
    assert "1 damaged record(s) left out; the rest was read" in err.splitlines()[-1]
    if argv[0] == "export":
        seqs = [json.loads(line)["seq"] for line in out.splitlines()]
        assert seqs == [n for n in range(1, _size(state) + 1) if n != seq]
    else:
        report = json.loads(out)
        assert report["damaged"] == [{"record": seq, "error": first.split("damaged: ")[1]}]


def test_recall_of_rounds_goes_on_past_a_damaged_record(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _copy(small_log, tmp_path / "state")
    code, out, _ = _run(capsys, "recall", "--json", "--state-dir", str(state))
    assert code == 0
    rounds = json.loads(out)["rounds"]
    seq = _seq_of(state, "close")
    _without_time(state, seq)
    code, out, err = _run(capsys, "recall", "--json", "--state-dir", str(state))
    assert code == 1
    assert _names(err, seq)
    after = json.loads(out)["rounds"]
    assert [game["round"] for game in after] == [game["round"] for game in rounds]
    shown = [r["seq"] for game in after for r in game["records"]]
    assert seq not in shown
    assert len(shown) == sum(len(g["records"]) for g in rounds) - 1


def test_an_altered_record_that_still_decodes_is_named_by_the_chain(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A die's face changed in a result: canonical still, but the next record's prev says
    it is not what was written. dice-stats leaves it out of the counts; meters, which counts
    no result, names it all the same (it checks every record against the chain)."""
    state = _copy(small_log, tmp_path / "state")
    seq = _seq_of(state, "result")
    entry = canonical.decode(_leaf(state, seq))
    red = entry["data"]["dice"]["red"]
    entry["data"]["dice"]["red"] = red % 6 + 1
    _store(state, seq, canonical.encode(entry))
    for argv in READERS:
        code, _, err = _run(capsys, *argv, "--state-dir", str(state))
        assert code == 1, argv
        assert f"record {seq}: altered: its hash is not the prev record {seq + 1} carries" in err
    code, _, err = _run(capsys, "verify-log", "--state-dir", str(state))
    assert code == 1
    assert _names(err, seq)


def test_a_deleted_record_is_named() -> None:
    rows = _chain(5)
    damage = Damage()
    kept = list(sound_rows([rows[0], rows[1], rows[3], rows[4]], damage))
    assert [row.seq for row in kept] == [1, 2, 4, 5]
    assert [str(exc) for exc in damage.found] == [
        "record 3: is missing (the next stored record is 4): deleted"
    ]


def test_a_record_whose_prev_was_altered_is_the_one_named() -> None:
    rows = _chain(5)
    entry = canonical.decode(rows[2].leaf)
    entry["prev"] = "f" * 64
    rows[2] = StoredRecord(3, rows[2].kind, canonical.encode(entry))
    damage = Damage()
    assert [row.seq for row in sound_rows(rows, damage)] == [1, 2, 4, 5]
    assert [exc.record for exc in damage.found] == [3]


def test_a_strict_reader_raises_the_first() -> None:
    rows = _chain(3)
    rows[1] = StoredRecord(2, rows[1].kind, b" " + rows[1].leaf)
    with pytest.raises(LogIntegrityError, match="record 2: not a canonical record"):
        list(sound_rows(rows, Damage(strict=True)))


def _chain(count: int) -> list[StoredRecord]:
    rows, prev = [], "0" * 64
    for seq in range(1, count + 1):
        kind = str(RecordKind.SENSOR)
        entry = {"seq": seq, "kind": kind, "time": "2026-12-01T00:00:00.000Z", "prev": prev}
        row = StoredRecord(seq, kind, canonical.encode({**entry, "data": {"present": True}}))
        rows.append(row)
        prev = row.hash
    return rows


# --- the fuzz -----------------------------------------------------------------------------


def test_byte_flips_are_named_never_an_internal_error(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """150 copies of the log, each with one bit of one record's leaf flipped (seeded): every
    reader exits 0 or 1, and 1 names the flipped record; never 70, never a traceback. Export
    reads every record: it names each flip but one in the last record's own fields (nothing
    after it vouches for them but the signed head, verify-log's to check)."""
    seed = int(os.environ.get("DAMAGE_SEED", random.randrange(2**32)))
    print(f"byte-flip seed: {seed} (DAMAGE_SEED={seed} repeats it)")
    rng = random.Random(seed)
    size = _size(small_log)
    counts: dict[tuple[str, int], int] = {}
    for copy in range(150):
        state = _copy(small_log, tmp_path / f"copy-{copy}")
        seq = rng.randrange(1, size + 1)
        leaf = bytearray(_leaf(state, seq))
        at = rng.randrange(len(leaf))
        leaf[at] ^= 1 << rng.randrange(8)
        _store(state, seq, bytes(leaf))
        for argv in READERS:
            code, _, err = _run(capsys, *argv, "--state-dir", str(state))
            where = (seed, copy, seq, at, argv[0], err[-400:])
            assert code in (0, 1), where
            assert "internal error" not in err, where
            assert "Traceback" not in err, where
            if code == 1:
                assert _names(err, seq), where
            if argv[0] == "export" and seq != size:
                assert code == 1, where
            counts[argv[0], code] = counts.get((argv[0], code), 0) + 1
        shutil.rmtree(state)
    print(f"exit codes over 150 flips: {sorted(counts.items())}")


def test_byte_flips_anywhere_in_the_file_are_one_line_never_an_internal_error(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """150 copies of the database file, each with one bit flipped anywhere (seeded): a
    record's leaf, another column, a page SQLite keeps for itself. Every reader, and
    verify-log, exits 0 or 1;
    1 names a damaged record or the part of the log it cannot read, in lines of its own."""
    seed = int(os.environ.get("DAMAGE_SEED", random.randrange(2**32)))
    print(f"file byte-flip seed: {seed} (DAMAGE_SEED={seed} repeats it)")
    rng = random.Random(seed)
    counts: dict[tuple[str, int], int] = {}
    for copy in range(150):
        state = _copy(small_log, tmp_path / f"copy-{copy}")
        data = bytearray((state / DB_NAME).read_bytes())
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        (state / DB_NAME).write_bytes(bytes(data))
        for argv in (*READERS, ("verify-log",)):
            code, _, err = _run(capsys, *argv, "--state-dir", str(state))
            where = (seed, copy, at, argv[0], err[-400:])
            assert code in (0, 1), where
            assert "internal error" not in err, where
            assert "Traceback" not in err, where
            if code == 1:
                assert re.search(
                    r"\brecord \d+\b|paigow-controller: (audit log|\w[\w-]*: damaged: log):"
                    r"|paigow-controller: verify-log: ",
                    err,
                ), where
            counts[argv[0], code] = counts.get((argv[0], code), 0) + 1
        shutil.rmtree(state)
    print(f"exit codes over 150 flips: {sorted(counts.items())}")


def test_a_malformed_checkpoint_row_is_named_and_the_records_still_exported(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kept checkpoint whose note is no longer text (a flipped bit in its record's header
    made it a blob): export names it as damage of the log and exports every record without the
    kept checkpoints (the byte-flip test found such a row: DAMAGE_SEED=1882955626, copy 133)."""
    state = _copy(small_log, tmp_path / "state")
    with sqlite3.connect(state / DB_NAME) as db:
        (size,) = db.execute("SELECT min(size) FROM checkpoints WHERE size > 0").fetchone()
        db.execute("UPDATE checkpoints SET note = CAST(note AS BLOB) WHERE size = ?", (size,))
    code, out, err = _run(capsys, "export", "--state-dir", str(state))
    assert code == 1
    assert "export: damaged: log: a checkpoint row" in err
    assert len(out.splitlines()) == _size(state)


# --- a damaged tail at start ---------------------------------------------------------------


class Screens:
    def __init__(self) -> None:
        self.shown: list[tuple[Screen, dict[str, object]]] = []

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        self.shown.append((screen, dict(data)))

    def close(self) -> None:
        return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_opening_a_log_with_a_damaged_tail_names_the_record(
    small_log: Path, tmp_path: Path
) -> None:
    state = _copy(small_log, tmp_path / "state")
    seq = _size(state) - 3
    leaf = bytearray(_leaf(state, seq))
    leaf[-5] ^= 0x01  # a character of its time: canonical still, the chain says it was altered
    _store(state, seq, bytes(leaf))
    with pytest.raises(LogDamagedError, match=rf"record {seq}: ") as raised:
        AuditLog.open(state)
    assert raised.value.record == seq
    assert raised.value.fault == "log_damaged"


def test_the_last_record_altered_is_named_by_the_signed_head(
    small_log: Path, tmp_path: Path
) -> None:
    state = _copy(small_log, tmp_path / "state")
    seq = _size(state)
    entry = canonical.decode(_leaf(state, seq))
    entry["time"] = "2000-01-01T00:00:00.000Z"  # canonical: only the signed head vouches
    _store(state, seq, canonical.encode(entry))
    with pytest.raises(LogDamagedError, match=rf"record {seq}: altered") as raised:
        AuditLog.open(state)
    assert raised.value.record == seq


def test_a_damaged_tail_at_start_latches_log_damaged_and_the_controller_stays_up(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the appliance's start: the fault latched and shown, the record named (in the
    fault's detail, the journal and systemd's status), the display page served, the readers
    read the log, play and the supervisor's key refused, nothing recorded; started twice,
    the same (no restart loop)."""
    from gpiozero.pins.mock import MockFactory, MockPWMPin

    from controller.app.appliance import Appliance, Options

    state = _copy(small_log, tmp_path / "state")
    seq = _seq_of(state, "close")
    _without_time(state, seq)
    size = _size(state)
    notify = tmp_path / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(30)
    os.environ["NOTIFY_SOCKET"] = str(notify)
    try:
        for start in range(2):
            http_port = _free_port()
            display = dataclasses.replace(
                Config().display, host="127.0.0.1", http_port=http_port, feed_port=_free_port()
            )
            config = dataclasses.replace(Config(), display=display)
            factory = MockFactory(pin_class=MockPWMPin)
            screens = Screens()
            appliance = Appliance(
                config,
                Options(
                    pin_factory=factory,
                    state_dir=state,
                    displays=(screens,),
                    sensor_url="loop://",
                ),
            )
            try:
                appliance.start()  # does not raise: no restart loop
                loop, log = appliance.loop, appliance.log
                assert loop is not None
                assert log is not None
                assert loop.machine.state is State.FAULT, start
                assert loop.machine.context.active_faults == {Fault.LOG_DAMAGED}
                assert screens.shown[-1] == (Screen.FAULT, {"faults": ["log_damaged"]})
                assert log.locked is not None
                assert f"record {seq}: has fields" in log.locked
                status = listener.recv(4096).decode()
                assert f"record {seq}" in status
                assert status.startswith("READY=1")
                url = f"http://127.0.0.1:{http_port}/"
                with urllib.request.urlopen(url, timeout=30) as page:
                    assert page.status == 200
                code, out, err = _run(capsys, "export", "--state-dir", str(state))
                assert code == 1
                assert _names(err, seq)
                assert len(out.splitlines()) == size - 1
                for occ in (
                    NoMoreBets(at=1, supervisor=True),
                    ShakePressed(at=2),
                    ClearFault(at=3, supervisor=True),
                ):
                    loop.dispatch(occ)
                    assert loop.machine.state is State.FAULT, occ.event
                    assert loop.machine.context.active_faults == {Fault.LOG_DAMAGED}
                # the fault never clears, so it never "comes back": pressed every 10 s for
                # ten minutes, the watchdog is still fed (a restart would find the same log)
                for k in range(60):
                    loop.dispatch(ClearFault(at=10_000 * (k + 1)))
                    loop.dispatch(Tick(at=10_000 * (k + 1) + 1))
                assert loop.machine.context.active_faults == {Fault.LOG_DAMAGED}
                assert loop.restart_reason is None
            finally:
                appliance.close()
                factory.close()
            assert _size(state) == size  # nothing recorded, the shutdown neither
    finally:
        del os.environ["NOTIFY_SOCKET"]
        listener.close()
    err = capsys.readouterr().err
    assert "Traceback" not in err


def _records_page_unreadable(state: Path) -> None:
    """The records table's root page (page 2 of 512 bytes) no longer a b-tree page: SQLite
    says the database disk image is malformed."""
    data = bytearray((state / DB_NAME).read_bytes())
    data[512] = 0
    (state / DB_NAME).write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["record", "page"])
def test_the_simulated_daemon_on_a_damaged_log_stays_up_in_the_fault(
    small_log: Path, tmp_path: Path, damage: str
) -> None:
    """The daemon's own process, as systemd runs it (NOTIFY_SOCKET, WatchdogSec): it starts,
    latches log_damaged saying what is damaged (the record; a page SQLite cannot read), says
    READY with that in its status, keeps running and pinging the watchdog (a restart loop
    would be an exit or a silent watchdog), records nothing, and stops cleanly on SIGTERM."""
    state = _copy(small_log, tmp_path / "state")
    size = _size(state)
    seq = _seq_of(state, "close")
    if damage == "record":
        _without_time(state, seq)
        named = f"record {seq}: has fields"
    else:
        _records_page_unreadable(state)
        named = "the database is damaged (database disk image is malformed)"
    output = tmp_path / "daemon.out"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify.sock"))
    notify.settimeout(30)  # a bound on liveness
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify.sock")}
    env["WATCHDOG_USEC"] = "2000000"  # WatchdogSec=2: a ping at least every half second
    env.pop("WATCHDOG_PID", None)
    with output.open("w") as out:
        proc = subprocess.Popen(
            simulate_argv(state, 1),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        messages = [notify.recv(4096).decode()]
        while "WATCHDOG=1" not in messages[-1]:
            messages.append(notify.recv(4096).decode())
        ready = [m for m in messages if m.startswith("READY=1")]
        assert ready, messages
        assert named in ready[0]
        deadline = time.monotonic() + 60  # a bound on liveness, not a measure of speed
        # twice: at start, then again at an event the loop took (it runs: SIGTERM is its own)
        while output.read_text().count("FAULT log_damaged") < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, output.read_text()[-2000:]
            time.sleep(0.1)
        text = output.read_text()
        assert text.count("FAULT log_damaged") >= 2, text[-2000:]
        assert named in text
        assert proc.poll() is None  # still up, in the fault
        while "WATCHDOG=1" not in notify.recv(4096).decode():  # and still pinging
            pass
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        notify.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert "Traceback" not in output.read_text()
    if damage == "record":
        assert _size(state) == size
    else:
        assert (state / DB_NAME).read_bytes()[512] == 0  # nothing written over it


def _schema_not_utf8(state: Path) -> None:
    """A bit of the schema's text flipped so that SQLite's message quotes bytes that are not
    UTF-8 (Python cannot even decode the error)."""
    data = bytearray((state / DB_NAME).read_bytes())
    at = data.find(b"PRIMARY KEY,\n    value")  # the meta table's
    assert at > 0
    data[at + 9] ^= 0x80  # KEY -> K\xc5Y
    (state / DB_NAME).write_bytes(bytes(data))


UNREADABLE = {
    "page": (
        _records_page_unreadable,
        "the database is damaged (database disk image is malformed)",
    ),
    "schema": (_schema_not_utf8, "the database is damaged (its schema is not UTF-8 text)"),
}


@pytest.mark.parametrize("argv", READERS, ids=[argv[0] for argv in READERS])
def test_a_schema_whose_seq_is_no_longer_the_key_is_damage_never_an_internal_error(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    """One bit flipped in the schema's text ("PRIMARY" to "PRKMARY", found by the file fuzz):
    ``seq`` is no longer the rowid, and every row reads it as NULL. Each reader says the log is
    damaged and exits 1; none fails on a seq that is not a number."""
    state = _copy(small_log, tmp_path / "state")
    data = (state / DB_NAME).read_bytes()
    assert data.count(b"seq INTEGER PRIMARY KEY") == 1
    (state / DB_NAME).write_bytes(
        data.replace(b"seq INTEGER PRIMARY KEY", b"seq INTEGER PRKMARY KEY")
    )
    code, _, err = _run(capsys, *argv, "--state-dir", str(state))
    assert code == 1, err
    assert "internal error" not in err
    assert "damaged" in err or "cannot read" in err, err


@pytest.mark.parametrize("unreadable", sorted(UNREADABLE))
@pytest.mark.parametrize("argv", READERS, ids=[argv[0] for argv in READERS])
def test_a_database_sqlite_cannot_read_is_one_line_and_exit_1(
    small_log: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    unreadable: str,
) -> None:
    damage, said = UNREADABLE[unreadable]
    state = _copy(small_log, tmp_path / "state")
    damage(state)
    code, out, err = _run(capsys, *argv, "--state-dir", str(state))
    assert code == 1
    assert out == ""
    assert said in err
    assert len(err.splitlines()) == 1


def test_a_page_sqlite_cannot_read_is_damage_and_the_log_opens_for_reading_only(
    small_log: Path, tmp_path: Path
) -> None:
    state = _copy(small_log, tmp_path / "state")
    _records_page_unreadable(state)
    with pytest.raises(LogDamagedError, match="the database is damaged"):
        AuditLog.open(state)
    log = AuditLog.open_locked(state, "damaged", locked_error=LogDamagedError)
    try:
        assert log.latest_context() is None
        assert log.last_record(str(RecordKind.CLOSE), within=100) is None
        with pytest.raises(LogDamagedError, match="damaged"):
            log.append(RecordKind.SENSOR, valid(RecordKind.SENSOR, present=True))
    finally:
        log.close()


# --- past the last kept frontier ----------------------------------------------------------


@pytest.fixture
def framed_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    """A log of 20 records whose frontier is kept every 8: the last kept at 16."""
    monkeypatch.setattr("controller.audit.log.FRONTIER_EVERY", 8)
    state = tmp_path / "state"
    log = AuditLog.open(state)
    for _ in range(19):
        log.append(RecordKind.SENSOR, valid(RecordKind.SENSOR, present=True))
    log.close()
    with sqlite3.connect(state / DB_NAME) as db:
        kept = [
            int(n) for (n,) in db.execute("SELECT size FROM checkpoints WHERE frontier NOT NULL")
        ]
    db.close()
    assert max(kept) == 16
    return state, 16


def _flip(state: Path, seq: int) -> None:
    leaf = bytearray(_leaf(state, seq))
    leaf[-4] ^= 0x01  # a digit of its time: canonical still, the chain says it was altered
    _store(state, seq, bytes(leaf))


def test_a_damaged_record_before_the_kept_frontier_does_not_stop_a_start(
    framed_log: tuple[Path, int],
) -> None:
    """Nothing at start reads further back than the kept frontier: verify-log names it."""
    state, _ = framed_log
    _flip(state, 3)
    AuditLog.open(state).close()


def test_only_the_records_after_the_kept_frontier_are_read_at_start(
    framed_log: tuple[Path, int],
) -> None:
    state, kept = framed_log
    _flip(state, 3)  # not read: the error names the tail's record
    _flip(state, kept + 2)
    with pytest.raises(LogDamagedError, match=rf"record {kept + 2}: altered") as raised:
        AuditLog.open(state)
    assert raised.value.record == kept + 2


def test_a_damaged_kept_frontier_is_named(framed_log: tuple[Path, int]) -> None:
    state, kept = framed_log
    with sqlite3.connect(state / DB_NAME) as db:
        (frontier,) = db.execute(
            "SELECT frontier FROM checkpoints WHERE size = ?", (kept,)
        ).fetchone()
        damaged = bytes([frontier[0] ^ 0x80]) + bytes(frontier[1:])
        db.execute("UPDATE checkpoints SET frontier = ? WHERE size = ?", (damaged, kept))
    db.close()
    with pytest.raises(LogDamagedError, match=rf"the Merkle frontier kept at record {kept}"):
        AuditLog.open(state)


def test_a_damaged_head_signature_is_named(framed_log: tuple[Path, int]) -> None:
    state, _ = framed_log
    with sqlite3.connect(state / DB_NAME) as db:
        (root,) = db.execute("SELECT root FROM head").fetchone()
        db.execute("UPDATE head SET root = ?", (bytes([root[0] ^ 0x01]) + bytes(root[1:]),))
    db.close()
    with pytest.raises(LogDamagedError, match=r"the log's head row is damaged \(its signature\)"):
        AuditLog.open(state)


def test_a_log_opened_for_reading_only_keeps_its_size_and_reads_past_the_damage(
    framed_log: tuple[Path, int],
) -> None:
    state, kept = framed_log
    _without_time(state, kept + 2)
    log = AuditLog.open_locked(state, "damaged", locked_error=LogDamagedError)
    try:
        assert log.size == 20
        assert log.next_seq == 21
        last = log.last_record(str(RecordKind.SENSOR), within=10)
        assert last is not None
        assert last.seq == 20
        seqs = [
            r.seq
            for r in log.recent_records({str(RecordKind.SENSOR)}, since_kind="sensor", count=5)
        ]
        assert seqs == [16, 17, 19, 20]  # 18 is not sound by itself: it has no time
        with pytest.raises(LogDamagedError, match="damaged"):
            log.append(RecordKind.SENSOR, valid(RecordKind.SENSOR, present=False))
    finally:
        log.close()


def test_the_first_record_after_the_kept_frontier_is_checked_against_it(
    framed_log: tuple[Path, int],
) -> None:
    state, kept = framed_log
    entry = canonical.decode(_leaf(state, kept + 1))
    entry["prev"] = "0" * 64
    _store(state, kept + 1, canonical.encode(entry))
    with pytest.raises(LogDamagedError, match=rf"record {kept + 1}: altered") as raised:
        AuditLog.open(state)
    assert raised.value.record == kept + 1


def test_a_damaged_round_opening_is_named_once_by_recall(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """recall --since reads the openings, then the rounds' records: the same record is
    met twice and named once."""
    state = _copy(small_log, tmp_path / "state")
    seq = _seq_of(state, "round_opened")
    _without_time(state, seq)
    code, _, err = _run(capsys, "recall", "--since", "2000-01-01", "--state-dir", str(state))
    assert code == 1
    assert err.count(f"record {seq}:") == 1
    assert "1 damaged record(s) left out" in err
