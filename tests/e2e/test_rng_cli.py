"""``rng-stream``, ``rng-replay``, and the auditor's ``rng-escrow-key``, ``rng-reveal`` and
``verify-log --rng-reveals`` on the command line."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from support.records import valid
from support.rng_fakes import AUDITOR, MemoryLog, counter_source, manager

from controller.audit.log import AuditLog
from controller.cli import main
from controller.cli.rng import write_stream
from controller.core.drbg import HmacDrbg
from controller.core.records import RecordKind
from controller.core.rng_escrow import escrow_key_of
from controller.errors import AuditLogError, RngSessionLost
from controller.rng.session import RngPort


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args], capture_output=True, timeout=60, check=False
    )


def test_rng_stream_writes_exactly_the_bytes_asked_and_is_freshly_seeded() -> None:
    first = run("rng-stream", "--bytes", "70000")
    second = run("rng-stream", "--bytes", "70000")
    assert first.returncode == second.returncode == 0
    assert len(first.stdout) == len(second.stdout) == 70000
    assert first.stdout != second.stdout
    assert first.stderr == b""


def test_rng_stream_is_the_drbg_output_in_maximal_requests() -> None:
    out = io.BytesIO()
    seed = (bytes(range(32)), bytes(range(16)))
    assert write_stream(out, 65536 + 10, HmacDrbg(*seed)) == 65546
    reference = HmacDrbg(*seed)
    assert out.getvalue() == reference.generate(65536) + reference.generate(10)


def test_rng_stream_without_end_stops_quietly_when_the_reader_closes() -> None:
    shell = f"{sys.executable} -m controller rng-stream --bytes 0 | head -c 200000 | wc -c"
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", shell], capture_output=True, timeout=60, check=False
    )
    assert result.stdout.strip() == b"200000"
    assert b"Traceback" not in result.stderr
    assert b"BrokenPipe" not in result.stderr


@pytest.mark.parametrize("value", ["-1", "ten", "1.5", ""])
def test_rng_stream_bad_byte_count_is_one_line_and_exit_2(value: str) -> None:
    result = run("rng-stream", "--bytes", value)
    assert result.returncode == 2
    assert result.stdout == b""
    assert len(result.stderr.decode().strip().splitlines()) == 1


def _export(tmp_path: Path, log: MemoryLog) -> Path:
    path = tmp_path / "export.jsonl"
    path.write_text(
        "".join(json.dumps({"seq": s, "kind": k, "data": d}) + "\n" for s, k, d in log.records)
    )
    return path


def _closed_sessions(tmp_path: Path) -> MemoryLog:
    log = MemoryLog()
    rng = manager(tmp_path, log, entropy_source=counter_source())
    round_number = 0
    for _ in range(2):
        rng.open()
        for _ in range(5):
            round_number += 1
            rng.draw(round_number, 1)
        rng.close()
    return log


def test_rng_replay_verifies_an_exported_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _closed_sessions(tmp_path)
    path = _export(tmp_path, log)
    assert main(["rng-replay", "--log", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] is True
    assert len(report["sessions"]) == 2
    session = report["sessions"][1]["session"]
    assert main(["rng-replay", "--log", str(path), "--session", session]) == 0
    shown = json.loads(capsys.readouterr().out)["session"]
    recorded = [d["number"] for _, k, d in log.records if k == RecordKind.RNG_DRAW][5:]
    assert [d["outcome"] for d in shown["draws"]] == recorded


def test_rng_replay_of_a_tampered_log_names_the_record_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _closed_sessions(tmp_path)
    seq, _, data = next(r for r in log.records if r[1] == RecordKind.RNG_REVEAL)
    data["nonce"] = "00" * 16
    path = _export(tmp_path, log)
    assert main(["rng-replay", "--log", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"record {seq}:" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_rng_replay_of_a_broken_file_or_unknown_session_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"seq": 1, "kind": "rng_commit", "data": {}}\nnot json\n')
    assert main(["rng-replay", "--log", str(path)]) == 1
    assert "line" in capsys.readouterr().err
    good = _export(tmp_path, _closed_sessions(tmp_path))
    assert main(["rng-replay", "--log", str(good), "--session", "ffffffffffffffff"]) == 1
    assert "not revealed" in capsys.readouterr().err


def test_rng_replay_of_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rng-replay", "--log", str(tmp_path / "none.jsonl")]) == 2
    assert capsys.readouterr().out == ""


# --- the auditor's escrow: rng-escrow-key, rng-reveal, verify-log --rng-reveals ------------


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    return lines[0]


def test_rng_escrow_key_makes_a_0600_key_and_prints_the_configs_form(tmp_path: Path) -> None:
    from controller.core.config import parse_config
    from controller.rng.escrow import read_escrow_key

    path = tmp_path / "auditor.key"
    made = run("rng-escrow-key", "--out", str(path))
    assert made.returncode == 0, made.stderr
    public = made.stdout.decode().strip()
    config = parse_config({"table": {"mode": "rng"}, "rng": {"escrow_public_key": public}})
    assert config.rng.escrow_public_key == public
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert escrow_key_of(read_escrow_key(path)).text == public
    again = run("rng-escrow-key", "--out", str(path))
    assert again.returncode == 1
    assert "never replaced" in one_line(again)
    assert again.stdout == b""


@pytest.mark.parametrize(
    "args",
    [
        ("rng-escrow-key",),
        ("rng-escrow-key", "--out", ""),
        ("rng-reveal", "--state-dir", "."),
        ("rng-reveal", "--escrow-key", "K"),
        ("rng-reveal", "--escrow-key", "K", "--state-dir", ".", "--log", "x.jsonl"),
        ("rng-reveal", "--escrow-key", "K", "--state-dir", ".", "--session", "XYZ"),
        ("rng-reveal", "--escrow-key", "K", "--state-dir", ".", "--session", "ABCDEF0123456789"),
        ("rng-reveal", "--escrow-key", "missing.key", "--state-dir", "."),
        ("rng-reveal", "--escrow-key", "junk.key", "--state-dir", "."),
        ("rng-reveal", "--escrow-key", "auditor.key", "--state-dir", "no-such-dir"),
        ("rng-reveal", "--escrow-key", "auditor.key", "--log", "no-such.jsonl"),
        ("rng-reveal", "--escrow-key", "auditor.key", "--state-dir", ".", "--out", "junk.key"),
        ("verify-log", "--state-dir", ".", "--rng-reveals", "junk.key"),
        ("verify-log", "--state-dir", ".", "--rng-reveals", "missing.json"),
        ("verify-log", "--state-dir", ".", "--rng-reveals", "empty.json"),
    ],
)
def test_a_bad_argument_to_the_escrow_commands_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    from controller.rng.escrow import create_escrow_key

    create_escrow_key(tmp_path / "auditor.key")
    (tmp_path / "junk.key").write_text("not a key\n")
    (tmp_path / "junk.key").chmod(0o600)
    (tmp_path / "empty.json").write_text("{}\n")
    result = subprocess.run(
        [sys.executable, "-m", "controller", *args],
        capture_output=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == b""
    one_line(result)


def _bets(number: int) -> dict[str, object]:
    return valid(RecordKind.NO_MORE_BETS, round=number, bank="dealer", mode="rng")


def table_log(state: Path) -> tuple[str, str]:
    """A real log, as the table writes it: a session drawn for rounds 1 to 6, a power cut, the
    restart (its end recorded), a new session drawn for rounds 8 and 9 and closed. Each draw
    after the round's bets closed. The ids of the lost session and of the closed one."""
    log = AuditLog.open(state)
    try:
        log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, previous="first start"))
        before = RngPort(manager(state, log, table="table-1", records=[]))
        before.prepare()
        for round_number in range(1, 7):
            log.append(RecordKind.NO_MORE_BETS, _bets(round_number))
            before.draw(round_number=round_number, attempt=1)
        log.append(RecordKind.NO_MORE_BETS, _bets(7))  # its draw lost in the power cut
        lost = before.manager.commitment
        assert lost is not None
        log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, previous="interrupted"))
        records = [(r.seq, r.kind, r.data) for r in log.records()]
        after = RngPort(manager(state, log, table="table-1", records=records))
        with pytest.raises(RngSessionLost):
            after.draw(round_number=7, attempt=1)
        log.append(  # the table's void of the round (controller/core/state.py, rng_interrupted)
            RecordKind.VOID,
            {
                "round": 7,
                "attempt": 1,
                "state": "drawing",
                "reason": "rng_interrupted",
                "wagers": "returned",
                "reshuffle": False,
                "note": "",
                "employee": None,
            },
        )
        after.prepare()
        for round_number in (8, 9):
            log.append(RecordKind.NO_MORE_BETS, _bets(round_number))
            after.draw(round_number=round_number, attempt=1)
        closed = after.manager.commitment
        assert closed is not None
        after.close("shutdown")
    finally:
        log.close()
    return lost.session, closed.session


def verify_json(*args: str) -> tuple[int, dict[str, Any], str]:
    result = run("verify-log", "--json", *args)
    return result.returncode, json.loads(result.stdout or b"{}"), result.stderr.decode()


def test_rng_reveal_and_verify_log_round_trip_on_a_real_log(tmp_path: Path) -> None:
    state = tmp_path / "state"
    lost, _ = table_log(state)
    key = tmp_path / "auditor.key"
    key.write_bytes(AUDITOR.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    key.chmod(0o600)
    code, report, err = verify_json("--state-dir", str(state))
    assert code == 0, err
    assert report["rng_sessions_escrowed_not_revealed"] == [lost]
    assert report["rng_sessions_interrupted"] == [lost]
    assert report["rng_sessions_never_revealed"] == []
    assert "1 escrowed, not revealed" in report["rng"]

    reveals = tmp_path / "reveals.json"
    made = run(
        "rng-reveal", "--escrow-key", str(key), "--state-dir", str(state), "--out", str(reveals)
    )
    assert made.returncode == 0, made.stderr
    assert b"1 RNG session(s) revealed and replayed" in made.stdout
    assert stat.S_IMODE(reveals.stat().st_mode) == 0o600
    document = json.loads(reveals.read_text())
    [reveal] = document["reveals"]
    assert (reveal["session"], reveal["draws"]) == (lost, 6)
    assert document["recipient"] == escrow_key_of(AUDITOR).fingerprint
    printed = run(
        "rng-reveal", "--escrow-key", str(key), "--state-dir", str(state), "--session", lost
    )
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["reveals"] == [reveal]

    code, report, err = verify_json("--state-dir", str(state), "--rng-reveals", str(reveals))
    assert code == 0, err
    assert report["rng_sessions_revealed_by_auditor"] == [lost]
    assert report["rng_sessions_escrowed_not_revealed"] == []
    assert "1 revealed by the auditor replayed" in report["rng"]

    # A reveal that is not the session's seed: verify-log names the commitment.
    commit = reveal["commit_seq"]
    forged = {**document, "reveals": [{**reveal, "entropy": "ab" * 32}]}
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    code, report, err = verify_json(
        "--state-dir", str(state), "--rng-reveals", str(tmp_path / "forged.json")
    )
    assert code == 1
    assert report["record"] == commit
    assert f"record {commit}:" in err

    # The export, read by rng-reveal: a changed draw is named; the same reveals otherwise.
    export = tmp_path / "audit.jsonl"
    export.write_bytes(run("export", "--state-dir", str(state)).stdout)
    from_export = run("rng-reveal", "--escrow-key", str(key), "--log", str(export))
    assert from_export.returncode == 0, from_export.stderr
    assert json.loads(from_export.stdout)["reveals"] == [reveal]
    lines = [json.loads(line) for line in export.read_text().splitlines()]
    draw = next(line for line in lines if line["kind"] == "rng_draw" and line["data"]["round"] == 4)
    draw["data"]["number"] = draw["data"]["number"] % 8 + 1
    export.write_text("".join(json.dumps(line) + "\n" for line in lines))
    altered = run("rng-reveal", "--escrow-key", str(key), "--log", str(export))
    assert altered.returncode == 1
    assert f"record {draw['seq']}:" in one_line(altered)
    assert altered.stdout == b""


def test_rng_reveal_with_another_key_opens_nothing_and_says_so(tmp_path: Path) -> None:
    state = tmp_path / "state"
    lost, _ = table_log(state)
    other = tmp_path / "other.key"
    run("rng-escrow-key", "--out", str(other))
    result = run("rng-reveal", "--escrow-key", str(other), "--state-dir", str(state))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["reveals"] == []
    assert [r["session"] for r in document["not_revealed"]] == [lost]
    assert "another auditor key" in document["not_revealed"][0]["reason"]
    one = run(
        "rng-reveal", "--escrow-key", str(other), "--state-dir", str(state), "--session", lost
    )
    assert one.returncode == 1
    assert "another auditor key" in one_line(one)


@pytest.mark.slow
def test_a_simulated_table_killed_mid_session_is_revealed_by_the_auditor(tmp_path: Path) -> None:
    """simulate --mode rng (its throwaway auditor key beside the log) killed with SIGKILL while
    a session draws; the next start ends the session (its seed went with the process); the
    throwaway key opens it, and verify-log replays it."""
    from controller.audit.log import open_for_reading
    from controller.rng.escrow import throwaway_escrow_key

    state = tmp_path / "state"
    output = (tmp_path / "simulate.out").open("wb")
    simulate = ("simulate", "--mode", "rng", "--fast", "--faults", "none", "--rounds", "100000")
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller", *simulate, "--state-dir", str(state)],
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(1200):  # at most two minutes
            if proc.poll() is not None:
                break
            if (state / "audit.db").exists():
                try:
                    db = open_for_reading(state)
                except AuditLogError:  # the log is being created: its schema is not there yet
                    time.sleep(0.1)
                    continue
                try:
                    (draws,) = db.execute(
                        "SELECT count(*) FROM records WHERE kind = 'rng_draw'"
                    ).fetchone()
                finally:
                    db.close()
                if draws >= 5:
                    break
            time.sleep(0.1)
        assert proc.poll() is None, (tmp_path / "simulate.out").read_text()
    finally:
        proc.kill()
        proc.wait(timeout=30)
        output.close()
    said = (tmp_path / "simulate.out").read_text()
    key_file, key = throwaway_escrow_key(state)
    assert f"throwaway auditor key {key_file}: for a simulation only" in said
    # The next start: the manager as the appliance builds it, then an orderly stop.
    log = AuditLog.open(state, origin="paigow-controller/table-1")
    try:
        kinds = {RecordKind.RNG_COMMIT, RecordKind.RNG_DRAW, RecordKind.RNG_REVEAL}
        kinds.add(RecordKind.RNG_INTERRUPTED)
        recent = log.recent_records(kinds, since_kind=RecordKind.RNG_COMMIT, count=3)
        records = [(r.seq, r.kind, r.data) for r in recent]
        restarted = manager(state, log, table="table-1", records=records, escrow=key)
        restarted.close("shutdown")
        [ended] = [r.data for r in log.records() if r.kind == RecordKind.RNG_INTERRUPTED]
    finally:
        log.close()
    assert ended["draws"] >= 5
    for path in state.iterdir():  # the seed rests in no file: only sealed, in its commitment
        assert not path.name.startswith("rng-seed-")
    reveals = tmp_path / "reveals.json"
    made = run(
        "rng-reveal",
        "--escrow-key",
        str(key_file),
        "--state-dir",
        str(state),
        "--out",
        str(reveals),
    )
    assert made.returncode == 0, made.stderr
    [reveal] = json.loads(reveals.read_text())["reveals"]
    assert (reveal["session"], reveal["draws"]) == (ended["session"], ended["draws"])
    code, report, err = verify_json("--state-dir", str(state), "--rng-reveals", str(reveals))
    assert code == 0, err
    assert report["rng_sessions_revealed_by_auditor"] == [ended["session"]]
    assert report["rng_sessions_interrupted"] == [ended["session"]]


def test_rng_replay_of_a_line_nested_deeper_than_the_stack_names_the_line_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert main(["rng-replay", "--log", str(path)]) == 1
    err = capsys.readouterr().err
    assert "line 1 is not a JSON record" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
