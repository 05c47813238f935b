"""``paigow-controller status`` against the real appliance (in-process, on gpiozero's
MockFactory, its service terminal on a real Unix socket): a healthy table, the same table with
two faults, and the same table stopped (read from its log, creating no file); systemd's
``STATUS=`` under those faults; the terminal's read-only ``status`` action and its grammar."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import opening, simulate_argv
from support.rng_fakes import AUDITOR_KEY

from controller.app.appliance import Appliance, Options
from controller.app.service import (
    SOCKET_NAME,
    STATUS_REQUEST,
    ServiceTerminalError,
    _read_reply,
    ask_status,
    encode_reply,
)
from controller.cli import main
from controller.core.config import Config
from controller.core.software import Change, Difference, SoftwareCheck, SoftwareResult
from controller.core.state import ClearFault, Fault, FaultRaised, Mode, State

TABLE = dataclasses.replace(
    Config(),
    table=dataclasses.replace(Config().table, mode=Mode.RNG, name="t9"),
    rng=dataclasses.replace(Config().rng, escrow_public_key=AUDITOR_KEY.text),
)
VERIFIED = SoftwareCheck(SoftwareResult.OK, "1.0", manifest="ab" * 32, key="01020304", files=80)
CHANGED = SoftwareCheck(
    SoftwareResult.MISMATCH,
    "1.0",
    manifest="ab" * 32,
    key="01020304",
    files=80,
    differences=(Difference("controller/core/state.py", Change.CHANGED),),
)


class Software:
    def __init__(self) -> None:
        self.result = VERIFIED

    def check(self) -> SoftwareCheck:
        return self.result


class Synchronised:
    def is_synchronised(self) -> bool | None:
        return True


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[socket.socket]:
    """systemd's notification socket: what the appliance says, one datagram each."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / "notify.sock"))
    listener.settimeout(30)  # a bound on liveness
    os.environ["NOTIFY_SOCKET"] = str(tmp_path / "notify.sock")
    try:
        yield listener
    finally:
        del os.environ["NOTIFY_SOCKET"]
        listener.close()


def _status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["status", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out


def _messages(listener: socket.socket, until: str) -> list[str]:
    said = [listener.recv(4096).decode()]
    while until not in said[-1]:
        said.append(listener.recv(4096).decode())
    return said


def test_status_of_a_healthy_table_then_two_faults_then_stopped(
    tmp_path: Path,
    factory: Any,
    capsys: pytest.CaptureFixture[str],
    notify: socket.socket,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    software = Software()
    appliance = Appliance(
        TABLE,
        Options(
            pin_factory=factory,
            state_dir=state,
            web_display=False,
            software=software,
            clock_status=Synchronised(),
        ),
    )
    try:
        appliance.start()
        loop = appliance.loop
        assert loop is not None
        ready = notify.recv(4096).decode()
        assert ready.startswith("READY=1\nSTATUS=table t9: FAULT F18 tiles_missing")  # none yet
        for occ in opening(1):  # the tiles inspected: the RNG table may play
            loop.dispatch(occ)
        assert _messages(notify, "STATUS=")[-1] == "STATUS=table t9: ready: bets open, round 1"

        code, out = _status(capsys, "--state-dir", str(state))
        assert code == 0, out
        assert out.startswith("Table t9: HEALTHY\n")
        assert "Faults: none" in out
        assert "State: idle (bets open), round 1, rng mode" in out
        assert "Tiles: T1, in for 0 h 00 min of 12 h" in out
        assert "Clock: synchronised" in out
        assert "Software: 1.0 (manifest abababababababab): ok, verified" in out
        assert "Release: none installed (run from a checkout)" in out  # a test's venv
        assert "Checkpoint: " in out
        assert " records, root " in out

        # two faults: the RNG fails, and the periodic check finds a file changed
        loop.dispatch(FaultRaised(at=2, fault=Fault.RNG_FAILURE, detail="KAT"))
        software.result = CHANGED
        [check] = [duty.check for duty in loop.duties if duty.name == "software"]
        found = check(3)  # the periodic program verification, as the loop makes it
        assert found is not None
        loop.dispatch(found)
        assert loop.machine.state is State.FAULT
        said = _messages(notify, "F14")[-1]
        assert said == (
            "STATUS=table t9: FAULT F06 rng_failure, F14 software_identity: play stopped, round 1"
        )
        code, out = _status(capsys, "--state-dir", str(state))
        assert code == 1, out
        assert out.startswith("Table t9: PLAY STOPPED\n")
        assert "Faults and conditions (2):" in out
        assert "  F06 rng_failure (stops play; supervisor key)" in out
        assert "  F14 software_identity (stops play; supervisor key)" in out
        assert "`paigow-controller verify-software` says what differs" in out
        assert "      found: KAT\n" in out  # the fault record's detail
        assert "found: the software does not match its signed manifest: changed: controller/" in out
        assert "Software: 1.0 (manifest abababababababab): MISMATCH" in out
        code, out = _status(capsys, "--state-dir", str(state), "--json")
        assert code == 1
        shown = json.loads(out)
        assert [f["code"] for f in shown["faults"]] == ["F06", "F14"]
        assert shown["state"] == "fault"
        assert shown["play_stopped"] is True
        assert all(f["how"] and f["who"] and f["meaning"] for f in shown["faults"])

        # the release verifies again, the supervisor clears both: systemd hears "ready"
        software.result = VERIFIED
        found = check(4)
        assert found is not None
        loop.dispatch(found)
        loop.dispatch(ClearFault(at=5, supervisor=True))
        assert loop.machine.state is State.IDLE
        said = _messages(notify, "ready")[-1]
        assert said == "STATUS=table t9: ready: bets open, round 1"
        assert _status(capsys, "--state-dir", str(state))[0] == 0
        # and the faults again, for the log to keep at the stop
        loop.dispatch(FaultRaised(at=6, fault=Fault.RNG_FAILURE, detail="KAT"))
        software.result = CHANGED
        found = check(7)
        assert found is not None
        loop.dispatch(found)
    finally:
        appliance.close()

    before = sorted(p.name for p in state.iterdir())
    code, out = _status(capsys, "--state-dir", str(state))
    assert code == 1
    assert out.startswith("Table t9: NOT RUNNING\n")  # no config given: the name the log has
    assert "F22 controller_stopped" in out
    assert "F06 rng_failure" in out
    assert "F14 software_identity" in out
    assert "State: fault (fault: play stopped), round 1" in out
    assert sorted(p.name for p in state.iterdir()) == before  # read only: no file made


def test_status_without_a_log_or_controller_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _status(capsys, "--state-dir", str(tmp_path))
    assert code == 1
    assert "NOT RUNNING" in out
    assert "F22 controller_stopped" in out
    assert "Could not read: audit log: no log at" in out
    assert list(tmp_path.iterdir()) == []


def test_status_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--markdown"]) == 2
    assert "--markdown goes with --fault-table" in capsys.readouterr().err
    assert main(["status", "--no-such-option"]) == 2


def test_the_status_action_takes_no_other_key(
    tmp_path: Path, factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The exact line is answered, with who asked (no key, no employee); any other key with
    it is a bad request, counted."""
    state = tmp_path / "s"
    state.mkdir()
    appliance = Appliance(TABLE, Options(pin_factory=factory, state_dir=state, web_display=False))
    try:
        appliance.start()
        terminal = appliance.terminal
        assert terminal is not None

        def ask(line: bytes) -> dict[str, Any]:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(30)
                conn.connect(str(state / SOCKET_NAME))
                conn.sendall(line)
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            reply = json.loads(data)
            assert encode_reply(reply) == data  # one canonical line
            return reply  # type: ignore[no-any-return]

        reply = ask(STATUS_REQUEST)
        assert reply["ok"] is True
        assert reply["asked_by"] == os.getuid()
        assert reply["status"]["table"] == "t9"
        reply = ask(b'{"action":"status","employee":"S1021"}\n')
        assert reply == {
            "ok": False,
            "error": "bad_request",
            "detail": "status takes no other key",
        }
        assert terminal.counts["bad_request"] == 1
    finally:
        appliance.close()


# --- a socket that is not the controller's ------------------------------------------------------


class Impostor:
    """A listener at the socket that answers one request with ``reply`` (or nothing), then
    holds the connection open until the test is done."""

    def __init__(self, path: Path, reply: bytes | None) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(1)
        self.reply = reply
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(4096)
            if self.reply is not None:
                conn.sendall(self.reply)
            self.done.wait(60)

    def close(self) -> None:
        self.done.set()
        self.thread.join(60)
        self.listener.close()


@pytest.mark.parametrize(
    "reply",
    [
        b"\x00\xff garbage\n",
        b"[1, 2, 3]\n",
        b'{"ok": "yes"}\n',
        b"x" * 100_000,  # huge, never a line
        b"[" * 20_000 + b"\n",
    ],
)
def test_status_from_a_socket_that_is_not_the_controllers_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reply: bytes
) -> None:
    impostor = Impostor(tmp_path / SOCKET_NAME, reply)
    try:
        code, out = _status(capsys, "--socket", str(tmp_path / SOCKET_NAME))
    finally:
        impostor.close()
    err = capsys.readouterr().err
    assert code == 75, (out, err)
    assert out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [SOCKET_NAME]


def test_status_shows_a_hostile_reply_without_a_traceback_or_an_escape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reply inside the protocol whose fields are not what a controller sends: faults and
    problems that are not lists, text with terminal escape sequences: shown, never obeyed."""
    status = {
        "table": "\x1b[2J\x1b[Hspoofed",
        "running": True,
        "healthy": True,
        "faults": 5,
        "problems": 7,
        "state": "\x1b]0;title\x07idle",
        "software": {"version": "\x1b[31m"},
        "dice": {"set": "\x1b[1m", "age_s": "x", "life_s": 3600},
    }
    reply = json.dumps({"ok": True, "status": status}).encode() + b"\n"
    impostor = Impostor(tmp_path / SOCKET_NAME, reply)
    try:
        code, out = _status(capsys, "--socket", str(tmp_path / SOCKET_NAME))
    finally:
        impostor.close()
    assert code == 0
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "spoofed" in out
    reply = json.dumps({"ok": True, "status": 5}).encode() + b"\n"
    impostor = Impostor(tmp_path / "again.sock", reply)
    try:
        assert main(["status", "--socket", str(tmp_path / "again.sock")]) == 75
    finally:
        impostor.close()
    (line,) = capsys.readouterr().err.splitlines()
    assert "did not give its status" in line


def test_status_from_a_listener_that_never_answers_ends_at_its_bound(tmp_path: Path) -> None:
    impostor = Impostor(tmp_path / SOCKET_NAME, None)
    try:
        with pytest.raises(ServiceTerminalError, match="did not answer within"):
            ask_status(tmp_path / SOCKET_NAME, timeout_s=0.2)
    finally:
        impostor.close()


def test_a_reply_dripped_a_byte_at_a_time_is_not_waited_on_beyond_the_bound() -> None:
    """Each byte comes within the socket's timeout, but the whole reply has one deadline (a
    fake clock: every reading of it a second later)."""
    ours, theirs = socket.socketpair()
    ticks = iter(range(1000))
    with ours, theirs:
        theirs.sendall(b"{")
        with pytest.raises(TimeoutError):
            _read_reply(ours, 3.0, clock=lambda: float(next(ticks)))
    assert next(ticks) <= 6  # it stopped at the deadline, not at the peer's pace


def test_status_of_a_socket_that_is_a_plain_file_reads_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / SOCKET_NAME).write_text("not a socket\n")
    code, out = _status(
        capsys, "--state-dir", str(tmp_path), "--socket", str(tmp_path / SOCKET_NAME)
    )
    assert code == 1
    assert "NOT RUNNING" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [SOCKET_NAME]


def test_status_of_a_log_replaced_by_an_older_copy_names_the_rollback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The controller stopped, its log put back to an older copy: the anchor beside it shows
    more records; status says the log_rollback the controller latches at its start, and reads
    only."""
    state = tmp_path / "state"
    config = tmp_path / "bench.toml"
    config.write_text(f'[storage]\nstate_dir = "{state}"\n')
    play = [*simulate_argv(state, 2, "--config", str(config))]
    subprocess.run(play, check=True, capture_output=True)
    older = tmp_path / "older.db"
    assert main(["backup", "--state-dir", str(state), str(older), "--json"]) == 0
    subprocess.run(play, check=True, capture_output=True)
    code, out = _status(capsys, "--state-dir", str(state), "--socket", str(tmp_path / "none"))
    assert code == 1
    assert "F09 log_rollback" not in out
    for name in ("audit.db-wal", "audit.db-shm"):
        (state / name).unlink(missing_ok=True)
    shutil.copyfile(older, state / "audit.db")
    before = sorted(p.name for p in state.iterdir())
    code, out = _status(capsys, "--state-dir", str(state), "--socket", str(tmp_path / "none"))
    assert code == 1
    assert "F09 log_rollback (stops play; supervisor key)" in out
    assert f"its anchor {state / 'log-anchor'} shows" in out
    assert "an older copy of the log was put in its place?" in out
    assert sorted(p.name for p in state.iterdir()) == before


def test_status_of_a_state_directory_whose_anchor_is_a_fifo_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    subprocess.run(simulate_argv(state, 1), check=True, capture_output=True)
    (state / "log-anchor").unlink()
    os.mkfifo(state / "log-anchor")  # never opened for writing: a blocking read never ends
    code, out = _status(capsys, "--state-dir", str(state), "--socket", str(tmp_path / "none"))
    assert code == 1
    assert (
        f"Could not read: the anchor {state / 'log-anchor'}: audit log: the anchor"
        f" {state / 'log-anchor'} is not a regular file"
    ) in out


def test_status_of_a_state_directory_it_may_not_read_says_so(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Another user's state directory (0700): status says it cannot read the log, in its
    screen, never an internal error. Run as another user (nobody) when the tests run as
    root, whom no mode stops."""
    if os.geteuid() == 0:  # a directory nobody may pass through (pytest's are 0700)
        tmp_path = Path(tempfile.mkdtemp(prefix="paigow-status-"))
        tmp_path.chmod(0o755)
        request.addfinalizer(lambda: shutil.rmtree(tmp_path, ignore_errors=True))
    state = tmp_path / "state"
    subprocess.run(simulate_argv(state, 1), check=True, capture_output=True)
    argv = [*simulate_argv(state, 1)[:3], "status", "--state-dir", str(state)]
    argv += ["--socket", str(tmp_path / "none")]
    if os.geteuid() == 0:
        state.chmod(0o700)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        done = subprocess.run([*nobody, *argv], capture_output=True, text=True, check=False)
    else:
        state.chmod(0)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        finally:
            state.chmod(0o700)
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    assert f"Could not read: audit log: cannot read {state / 'audit.db'}: Permission denied" in (
        done.stdout
    )


def test_the_release_named_is_the_one_the_process_runs_from(tmp_path: Path) -> None:
    """``RELEASE`` beside the virtualenv names the installed release (the installer writes it);
    status shows it, as ``--version`` does."""
    from controller.software.release import installed_release

    venv = tmp_path / "venv"
    venv.mkdir()
    assert installed_release(venv) is None
    (tmp_path / "RELEASE").write_text("0.1.0-0123456789ab\n")
    assert installed_release(venv) == "0.1.0-0123456789ab"
    (tmp_path / "RELEASE").write_text("0.1.0-0123456789ab; rm -rf /\n")
    assert installed_release(venv) is None  # not a release id: not believed
