"""The appliance end to end: the daemon as a subprocess (``simulate``: mock pins, the simulated
sensor on a real pty, a temporary state directory), killed and restarted.

These tests read the audit log the daemon wrote, the way an auditor would: through
``verify-log`` and ``export``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drivers.sim.sensor import SimulatedSensor

pytestmark = pytest.mark.slow

FAULTS = (
    "tilted=0.05,die_out=0.03,missing=0.02,colours=0.02,garbled=0.04,bad_checksum=0.04,"
    "truncated=0.03,duplicate=0.03,late=0.03,no_reply=0.03,few_cycles=0.03,lid=0.03,"
    "disconnect=0.02,tamper=0.02,camera=0.02"
)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller", *args]


class Daemon:
    """A ``simulate`` subprocess whose stdout lines are collected by a thread."""

    def __init__(self, state_dir: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            cli("simulate", "--fast", "--state-dir", str(state_dir), *args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"no line {prefix!r} in:\n" + "\n".join(self.lines))
                self._changed.wait(min(left, 0.5))

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:
        daemon.kill()


def records(state_dir: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        cli("export", "--state-dir", str(state_dir)), capture_output=True, text=True, check=True
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def verify(state_dir: Path) -> dict[str, Any]:
    proc = subprocess.run(
        cli("verify-log", "--state-dir", str(state_dir)), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def newest(state_dir: Path) -> tuple[str | None, int]:
    """The kind of the newest committed record and the number of results, read-only."""
    path = state_dir / "audit.db"
    if not path.exists():
        return None, 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        row = db.execute("SELECT kind FROM records ORDER BY seq DESC LIMIT 1").fetchone()
        (results,) = db.execute("SELECT count(*) FROM records WHERE kind = 'result'").fetchone()
    except sqlite3.OperationalError:
        return None, 0
    finally:
        db.close()
    return (None if row is None else str(row[0])), int(results)


def stopped(pid: int) -> bool:
    """Every thread of ``pid`` has stopped (a SIGSTOP has taken effect): none is inside a
    system call, so the files it wrote are as a kill now leaves them."""
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):  # the thread has ended
            continue
        if state not in ("T", "t", "Z", "X"):  # stopped, or ended
            return False
    return True


def newest_after_a_kill(state_dir: Path, scratch: Path) -> tuple[str | None, int]:
    """``newest`` as the next start finds it: read from a copy of the database and its WAL
    (without the writer's shared index, so the copy's WAL is recovered from the file)."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for name in ("audit.db", "audit.db-wal"):
        if (state_dir / name).exists():
            shutil.copyfile(state_dir / name, scratch / name)
    db = sqlite3.connect(scratch / "audit.db")
    try:
        row = db.execute("SELECT kind FROM records ORDER BY seq DESC LIMIT 1").fetchone()
        (results,) = db.execute("SELECT count(*) FROM records WHERE kind = 'result'").fetchone()
    finally:
        db.close()
    return (None if row is None else str(row[0])), int(results)


def kill_after(daemon: Daemon, state_dir: Path, kind: str, results: int, timeout: float) -> None:
    """SIGKILL the daemon right after it commits a record of ``kind`` (mid-round), once at
    least ``results`` rounds have their result. Once the newest record is of ``kind`` the
    daemon is stopped (SIGSTOP) and killed only if that is still what a start would find; else
    it goes on (SIGCONT). On a loaded machine it could otherwise commit its next record between
    the look and the kill."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last, done = newest(state_dir)
        if last == kind and done >= results:
            daemon.proc.send_signal(signal.SIGSTOP)
            while not stopped(daemon.proc.pid):
                time.sleep(0.001)
            last, done = newest_after_a_kill(state_dir, state_dir.parent / "copy")
            if last == kind and done >= results:
                daemon.kill()
                return
            daemon.proc.send_signal(signal.SIGCONT)
        time.sleep(0.005)
    raise AssertionError(f"no {kind} record after {results} results within {timeout} s")


@pytest.mark.parametrize(
    ("rounds_first", "kill_at"),
    [(50, "shake"), (10, "result")],
    ids=["shake-in-progress", "result-committed"],
)
def test_rounds_with_faults_a_kill_mid_round_and_recovery(
    tmp_path: Path, daemons: list[Daemon], rounds_first: int, kill_at: str
) -> None:
    state = tmp_path / "state"
    # Seed 15: the faults' own series (one draw per shake, whatever the timing) latches a
    # sensor fault within the first 5 rounds and a tamper within 20.
    first = Daemon(state, "--rounds", "100000", "--seed", "15", "--faults", FAULTS)
    daemons.append(first)
    kill_after(first, state, kill_at, rounds_first, timeout=240)

    before = records(state)
    kinds = [r["kind"] for r in before]
    assert kinds.count("result") >= rounds_first
    if rounds_first >= 50:
        assert {"no_roll", "fault", "fault_cleared"} <= set(kinds), "faults injected, cleared"
    assert before[-1]["kind"] == kill_at
    verify(state)
    killed = before[-1]["data"]
    round_, attempt = killed["round"], killed["attempt"]

    # plain rounds: the supervisor corrects no result (round 10's would be, shown again)
    second = Daemon(state, "--rounds", "2", "--seed", "12", "--faults", "none", "--plain-rounds")
    daemons.append(second)
    assert second.wait(timeout=120) == 0, "\n".join(second.lines)

    after = records(state)[len(before) :]
    assert after[0]["kind"] == "power_on"
    assert after[0]["data"]["previous"] == "interrupted"
    recovery = next(r for r in after if r["kind"] == "recovery")["data"]
    assert recovery["interrupted"] is True
    assert (recovery["round"], recovery["faults"]) == (round_, [])
    this_round = [r for r in after if r["data"].get("round") == round_]
    if kill_at == "result":
        # A committed result is shown again, never re-drawn or re-read; the dealer closes it.
        assert (recovery["round"], recovery["attempt"]) == (round_, attempt)
        assert recovery["state"] == "result"
        # (the start's own records name the round too: the recovery, the software check)
        start = ("recovery", "software_check", "lid")  # and the lid, closed, as it reports
        assert [r["kind"] for r in this_round if r["kind"] not in start] == ["close"]
    else:
        # A shake without a committed result is void: recorded as such, and reshaken.
        assert recovery["voided_attempt"] == attempt
        assert recovery["state"] == "armed"
        interrupted = next(r for r in after if r["kind"] == "interrupted")
        assert (interrupted["data"]["round"], interrupted["data"]["attempt"]) == (round_, attempt)
        reshake = next(r for r in this_round if r["kind"] == "shake")
        assert reshake["data"]["attempt"] == attempt + 1
        assert any(r["kind"] == "result" for r in this_round)
    # Every (round, attempt) is decided at most once over the whole log.
    decided = [
        (r["data"]["round"], r["data"]["attempt"]) for r in before + after if r["kind"] == "result"
    ]
    assert len(decided) == len(set(decided))
    corrections = [r for r in before + after if r["kind"] == "result_corrected"]
    assert verify(state)["results_recomputed"] == len(decided) + len(corrections)


def test_sigterm_stops_the_motor_records_the_round_and_exits_0(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    state = tmp_path / "state"
    daemon = Daemon(state, "--rounds", "100000", "--seed", "4", "--faults", "none")
    daemons.append(daemon)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until a shake is under way (bets closed)
        if newest(state)[0] in ("no_more_bets", "shake"):
            break
        time.sleep(0.002)
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    rows = records(state)
    assert rows[-1]["kind"] == "shutdown"
    open_round = rows[-1]["data"]["round"]
    # On a loaded machine the stop may come in the crew's service-mode test round (round 25 on):
    # its records are service_test records naming their kind, and the same rules hold for them.
    in_service = rows[-1]["data"].get("service") is True
    this_round = [
        r for r in rows if r["data"].get("round") == open_round and _is_test(r) == in_service
    ]
    ended = any(_kind(r) in ("close", "void") for r in this_round)
    # Bets open (the round opened, perhaps a bank selected): nothing was in play to interrupt.
    if not ended and _kind(rows[-2]) not in ("round_opened", "bank_selected"):
        assert _kind(rows[-2]) == "interrupted"
        assert rows[-2]["data"]["reason"] == "shutdown"
    verify(state)


def _is_test(record: dict[str, Any]) -> bool:
    return record["kind"] == "service_test" or record["data"].get("service") is True


def _kind(record: dict[str, Any]) -> str:
    """A record's kind, or the kind a service test record names."""
    if record["kind"] == "service_test":
        return str(record["data"]["record"])
    return str(record["kind"])


def test_a_bad_argument_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        cli("simulate", "--rounds", "0", "--state-dir", str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    proc = subprocess.run(
        cli("simulate", "--faults", "meteor=1"), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert "meteor" in proc.stderr


def test_run_with_a_bad_config_exits_78_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[shaker]\nmotor_max_ms = 99\n")
    proc = subprocess.run(
        cli("run", "--config", str(config)), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 78
    assert "shaker.motor_max_ms" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_selftest_names_what_fails(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[sensor]\nurl = "{tmp_path}/no-such-port"\ntimeout_ms = 100\nretries = 0\n')
    env = {**os.environ, "GPIOZERO_PIN_FACTORY": "mock"}
    state = tmp_path / "state"
    selftest = cli("selftest", "--config", str(config), "--state-dir", str(state))
    proc = subprocess.run(selftest, capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert not report["checks"]["keys"]["ok"]  # a selftest never creates a key
    assert "paigow-controller init" in report["checks"]["keys"]["detail"]
    assert not (state / "audit-log.key").exists()
    init = cli("init", "--config", str(config), "--state-dir", str(state))
    subprocess.run(init, check=True, capture_output=True)
    proc = subprocess.run(selftest, capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["checks"]["config"]["ok"]
    assert report["checks"]["keys"]["ok"]
    assert report["checks"]["rng"]["ok"]
    assert not report["checks"]["sensor"]["ok"]
    assert "sensor failed" in proc.stderr


def test_the_daemon_serves_the_display_and_the_feed_from_its_log(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    """The display server wired into the running appliance: the page is served and the feed
    carries the committed records (hash for hash what ``export`` gives)."""
    http_port, feed_port = free_ports()
    config = tmp_path / "config.toml"
    config.write_text(f"[display]\nhttp_port = {http_port}\nfeed_port = {feed_port}\n")
    state = tmp_path / "state"
    daemon = Daemon(
        state, "--rounds", "100000", "--faults", "none", "--web-display", "--config", str(config)
    )
    daemons.append(daemon)
    feed = connect_when_listening(feed_port, timeout=60)
    with feed, feed.makefile("rw", encoding="utf-8", newline="\n") as stream:
        stream.write('{"from": 1}\n')
        stream.flush()
        lines: list[dict[str, Any]] = []
        while sum(1 for line in lines if line.get("kind") == "result") < 3:
            line = json.loads(stream.readline())
            if line["type"] == "record":
                lines.append(line)
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/", timeout=10) as page:
        assert page.status == 200
        assert "<html" in page.read().decode("utf-8").lower()
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    exported = {r["seq"]: r for r in records(state)}
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    for line in lines:
        assert line["hash"] == exported[line["seq"]]["hash"]
    results = [line for line in lines if line["kind"] == "result"]
    assert all(line["starting_position"] and line["total"] for line in results)


def free_ports() -> tuple[int, int]:
    """Two ports free now, not the same one (both held while the second is asked for)."""
    with socket.socket() as first, socket.socket() as second:
        first.bind(("127.0.0.1", 0))
        second.bind(("127.0.0.1", 0))
        return int(first.getsockname()[1]), int(second.getsockname()[1])


def connect_when_listening(port: int, timeout: float) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_run_without_usable_pins_says_so_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    http_port, feed_port = free_ports()
    config.write_text(
        f'[storage]\nstate_dir = "{tmp_path / "state"}"\n'
        f"[display]\nhttp_port = {http_port}\nfeed_port = {feed_port}\n"
    )
    env = {**os.environ, "GPIOZERO_PIN_FACTORY": "no-such-factory"}
    proc = subprocess.run(
        cli("run", "--config", str(config)), capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 1
    assert "GPIO pins unavailable" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_day_and_more_of_table_operations_is_recorded_and_verifies(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    """A day and more end to end: the table opened (the dice recorded, the tiles inspected,
    the dealer signed on), bank seats and delivery styles from the panel's keys, every tenth
    round's misread corrected to the dice as they lie (never re-rolled), every tenth from the
    fifth voided whole with a reason (every wager returned), the dice replaced at their 24 hours
    and the tiles at their 12 (a simulated wall clock: an hour per round), a new game's shuffle,
    the shaker inspected each day, rounds 15-19, 30-34 and 45-49 played with the RNG (the
    supervisor switches the table there and back; round 30's result, never corrected, is voided
    instead), a test round in service mode before round 25; then verify-log."""
    state = tmp_path / "state"
    config = tmp_path / "config.toml"
    config.write_text('[table]\nmodes = ["rng"]\n')
    daemon = Daemon(
        state, "--rounds", "52", "--seed", "14", "--faults", "none",
        "--table-minutes-per-round", "60", "--config", str(config),
    )  # fmt: skip
    daemons.append(daemon)
    assert daemon.wait(timeout=240) == 0, "\n".join(daemon.lines)
    rows = records(state)
    kinds = [r["kind"] for r in rows]
    banks = {r["data"]["bank"] for r in rows if r["kind"] == "no_more_bets"}
    assert "dealer" in banks
    assert len(banks) > 1, banks  # seats banked too (621a.11)
    styles = {r["data"]["style"] for r in rows if r["kind"] == "delivery_style"}
    assert len(styles) > 1, styles  # 621a.9 styles chosen, not only 621a.8(d)
    # Proposed 621a.5(c): a set put in at the start, then a new one at each 24 hours.
    replaced = [r["data"] for r in rows if r["kind"] == "dice_replaced"]
    assert [d["dice_set"] for d in replaced] == ["1", "2", "3"]
    assert all(d["previous_age_ms"] >= 24 * 3_600_000 for d in replaced[1:])
    assert all(d["employee"] == "S1021" for d in replaced)
    # 621a.6(a), 621a.3(e): the tiles inspected at the start and changed every 12 hours
    tiles = [r["data"] for r in rows if r["kind"] == "tiles_inspected"]
    assert len(tiles) >= 4, tiles
    assert all((d["employee"], d["dealer"]) == ("F0310", "D2207") for d in tiles)
    assert kinds.index("tiles_inspected") < kinds.index("no_more_bets")
    assert kinds.count("supervisor_action") >= 2  # the shaker inspected on each day
    # N.J.A.C. 13:69E-1.28P(d): each misread corrected to the dice as they lie, in the dice
    # rounds, after the round's one result; never in an RNG round
    corrections = [r["data"] for r in rows if r["kind"] == "result_corrected"]
    assert [d["round"] for d in corrections] == [10, 20, 40, 50]
    for d in corrections:
        assert d["dice_seen"]["red"] % 6 + 1 == d["dice_read"]["red"]  # the red die misread
        assert d["dice_read"]["blue"] == d["dice_seen"]["blue"]
        assert (d["reason"], d["employee"]) == ("misread", "S1021")
    # 621a.12(c),(e): whole rounds voided, with the reasons in turn, and round 30's RNG result
    voids = [(r["data"]["round"], r["data"]["reason"]) for r in rows if r["kind"] == "void"]
    assert [n for n, _ in voids] == [5, 15, 25, 30, 35, 45]
    assert all(r["data"]["wagers"] == "returned" for r in rows if r["kind"] == "void")
    assert "result_voided" not in kinds
    # Current 621a.6(a): to the RNG between rounds (its session committed before the bets
    # close, 621a.8(a)(1)) and back (the session revealed).
    changes = [(r["data"]["round"], r["data"]["mode"]) for r in rows if r["kind"] == "mode_changed"]
    assert changes == [(n + k, m) for n in (15, 30, 45) for k, m in ((0, "rng"), (5, "shaker"))]
    modes = {r["data"]["round"]: r["data"]["mode"] for r in rows if r["kind"] == "no_more_bets"}
    rng_rounds = {*range(15, 20), *range(30, 35), *range(45, 50)}
    assert {n for n, m in modes.items() if m == "rng"} == rng_rounds
    draws = [(r["data"]["round"], r["data"]["attempt"]) for r in rows if r["kind"] == "rng_draw"]
    assert sorted(draws) == [(n, 1) for n in sorted(rng_rounds)]  # one draw each, never again
    reveals = [r["data"]["reason"] for r in rows if r["kind"] == "rng_reveal"]
    assert reveals == ["mode_switch"] * 3
    # current 621a.5(e)(2)-(4): an RNG round settles no side wager
    for r in rows:
        if r["kind"] == "result":
            assert ("wagers" in r["data"]) == (modes[r["data"]["round"]] != "rng")
    # 621a.11(b): the dealer's shuffle for a new game, by the panel's key
    assert [r["data"]["round"] for r in rows if r["kind"] == "tiles_shuffled"] == [20]
    # 9 NYCRR 5319.58: the test round is recorded as test records only, between the entry
    # and the exit, and live round 25 is then played as if nothing had happened.
    entered, left = (i for i, r in enumerate(rows) if r["kind"] == "service_mode")
    assert (rows[entered]["data"]["entered"], rows[left]["data"]["entered"]) == (True, False)
    assert rows[left]["data"]["test_rounds"] == 1
    inside = rows[entered + 1 : left]
    # A fault the hardware reports meanwhile is a fault like any other, recorded and cleared:
    # on a loaded machine the simulated motor or sensor can miss its compressed deadline.
    faults = [r["data"]["fault"] for r in inside if r["kind"] == "fault"]
    assert set(faults) <= {"motor_overrun", "sensor_timeout"}, faults
    assert not faults or inside[-1]["kind"] != "fault"  # cleared before the exit
    assert {r["kind"] for r in inside} - {"fault", "fault_cleared", "lid"} == {"service_test"}
    assert "result" in [r["data"]["record"] for r in inside]
    assert any(r["kind"] == "result" and r["data"]["round"] == 25 for r in rows[left:])
    # one result per round, ever (N.J.A.C. 13:69E-1.28G)
    decided = [r["data"]["round"] for r in rows if r["kind"] == "result"]
    assert sorted(decided) == list(range(1, 53))
    # the dealer signed on: the records of the dealer's keys name who pressed them
    assert {r["data"]["employee"] for r in rows if r["kind"] == "close"} == {"D2207"}
    report = verify(state)
    assert report["results_recomputed"] >= len(decided)
    assert report["rng_sessions_never_revealed"] == []


def test_a_sensor_on_the_bench_is_read_through_simulate_with_simulated_pins(
    tmp_path: Path,
) -> None:
    """Issue 17: ``simulate --sensor-url`` plays on simulated pins with the DS1 sensor at that
    URL (here another simulated sensor on a TCP socket, as a sensor on a serial-to-network
    adapter would be): the log names that sensor and the result is the dice in its tray."""
    with SimulatedSensor(seed=9, transport="socket", serial_number="BENCH-7") as bench:
        red, blue1, blue2 = (die.face for die in bench.dice)
        state = tmp_path / "state"
        command = cli(
            "simulate", "--fast", "--rounds", "1", "--faults", "few_cycles=0.5",
            "--sensor-url", bench.url, "--state-dir", str(state),
        )  # fmt: skip
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"dice sensor: {bench.url}" in proc.stdout
        assert bench.requests["Hello"] >= 1
        assert bench.requests["ReadNow"] >= 2  # two agreeing readings at least
    rows = records(state)
    sensors = [r["data"]["detail"] for r in rows if r["kind"] == "sensor"]
    assert sensors
    assert all("BENCH-7" in detail for detail in sensors), sensors
    (result,) = [r["data"] for r in rows if r["kind"] == "result"]
    assert result["dice"] == {"red": red, "blue": [blue1, blue2]}
    assert verify(state)["records"] == len(rows)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--faults", "garbled=0.1"], "garbled cannot be injected into the sensor at"),
        (["--dice-bias", "red:6:0.25"], "are real"),
        (["--sensor-url", "a b"], "not a device path or URL"),
        (["--sensor-url", "/dev/x" * 100], "not a device path or URL"),
    ],
)
def test_simulate_with_a_bench_sensor_refuses_what_it_cannot_do(
    tmp_path: Path, options: list[str], says: str
) -> None:
    url = ["--sensor-url", "socket://127.0.0.1:9"] if "--sensor-url" not in options else []
    proc = subprocess.run(
        cli("simulate", "--fast", "--rounds", "1", *url, *options, "--state-dir", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr
