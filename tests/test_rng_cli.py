"""``rng-stream`` and ``rng-replay`` on the command line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rng_fakes import MemoryLog, counter_source, manager

from controller.cli import main
from controller.cli.rng import write_stream
from controller.core.drbg import HmacDrbg
from controller.core.records import RecordKind


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
