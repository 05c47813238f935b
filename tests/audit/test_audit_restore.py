"""``paigow-controller restore``: the restore drill end to end (backup, the card lost, restore
into a new directory, verify-log, play on, verify-log), and every refusal (over a log, over a
newer log's anchor or its copy, a backup that does not verify, another log's key), each with
nothing written."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import simulate_argv

from controller.audit.archive import Policy, Retention, archive_paths
from controller.audit.log import DB_NAME, KEY_FILE, AuditLog, load_signer
from controller.audit.recall import export_lines
from controller.cli import main
from controller.core.config import MIN_RETAIN_ROUNDS

pytestmark = pytest.mark.usefixtures("logging_restored")

WRITER = Path(__file__).resolve().parents[1] / "support" / "audit_writer.py"


class Bench:
    """A table on the bench: its config (the state directory and the anchor's copy
    directory), and the technician's files kept off the card (the verifier key, the signing
    key, the backups)."""

    def __init__(self, root: Path, *, copy_anchor: bool = True) -> None:
        self.root = root
        self.state = root / "state"
        self.anchors = root / "anchors"
        self.config = root / "bench.toml"
        lines = ["[storage]", f'state_dir = "{self.state}"']
        if copy_anchor:
            self.anchors.mkdir()
            lines.append(f'anchor_copy_dir = "{self.anchors}"')
        self.config.write_text("\n".join(lines) + "\n")
        self.verifier_key = root / "log.pub"
        self.signing_key = root / "kept-audit-log.key"

    def play(self, rounds: int, state: Path | None = None) -> None:
        argv = simulate_argv(state or self.state, rounds, "--config", str(self.config))
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    def keep_keys(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["export-key", "--state-dir", str(self.state)]) == 0
        self.verifier_key.write_text(capsys.readouterr().out)
        shutil.copy2(self.state / KEY_FILE, self.signing_key)

    def backup(self, name: str, capsys: pytest.CaptureFixture[str]) -> Path:
        out = self.root / name
        assert main(["backup", "--state-dir", str(self.state), str(out), "--json"]) == 0
        capsys.readouterr()
        return out

    def restore(self, backup: Path, target: Path, *more: str) -> list[str]:
        return [
            *("restore", str(backup), "--key", str(self.verifier_key)),
            *("--signing-key", str(self.signing_key), "--config", str(self.config)),
            *("--state-dir", str(target), "--json", *more),
        ]


def verify(state: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["verify-log", "--state-dir", str(state), "--key", str(key)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    return report


def leaves(path: Path) -> dict[int, bytes]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {int(s): bytes(leaf) for s, leaf in db.execute("SELECT seq, leaf FROM records")}
    finally:
        db.close()


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line a refused restore says; nothing on stdout."""
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    return line


def nothing_written(root: Path, target: Path) -> None:
    assert not target.exists() or sorted(p.name for p in target.iterdir()) in ([], ["log-anchor"])
    assert [p.name for p in root.iterdir() if ".restore-" in p.name] == []


def test_the_drill_backup_restore_verify_play_on_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path)
    bench.play(8)
    bench.keep_keys(capsys)
    backup = bench.backup("table-1.db", capsys)
    backed_up = leaves(backup)
    shutil.rmtree(bench.state)  # the card is lost
    new = tmp_path / "new-card"
    assert main(bench.restore(backup, new)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["records"] == max(backed_up)
    assert report["restored"] == str(new)
    assert report["anchors"][0].endswith(f"at or behind the backup's {max(backed_up)}")
    assert (new / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert verify(new, bench.verifier_key, capsys)["records"] == max(backed_up)
    # the controller starts on it and plays on; the log still verifies, the backup's records
    # its first ones
    bench.play(3, new)
    after = verify(new, bench.verifier_key, capsys)
    assert after["records"] > max(backed_up)
    played_on = leaves(new / DB_NAME)
    assert {seq: played_on[seq] for seq in backed_up} == backed_up
    # the start took the anchor's copy (at or behind the restored log) and recorded so
    started = [line for line in export_lines(new) if line["seq"] > max(backed_up)]
    (power_on,) = [line["data"] for line in started if line["kind"] == "power_on"][:1]
    assert power_on["anchor"].startswith(f"the anchor at {new / 'log-anchor'} (missing) rewritten")


def test_without_an_anchor_copy_the_restored_table_is_cleared_at_the_terminal_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No anchor anywhere: the restored log starts with anchor_missing latched, which only a
    person at the terminal clears, with a note: the restore is on the record (here the
    simulated technician does it, as a technician would with supervise clear-fault)."""
    bench = Bench(tmp_path, copy_anchor=False)
    bench.play(4)
    bench.keep_keys(capsys)
    backup = bench.backup("table-1.db", capsys)
    shutil.rmtree(bench.state)
    new = tmp_path / "new-card"
    assert main(bench.restore(backup, new)) == 0
    capsys.readouterr()
    bench.play(2, new)
    verify(new, bench.verifier_key, capsys)
    cleared = [
        line["data"]
        for line in export_lines(new)
        if line["kind"] == "fault_cleared" and "anchor_missing" in json.dumps(line["data"])
    ]
    assert cleared, "anchor_missing was never cleared at the terminal"
    assert cleared[0].get("employee") == "T0042"


def test_a_backup_older_than_the_anchor_copy_is_refused_as_a_rollback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path)
    bench.play(4)
    bench.keep_keys(capsys)
    old = bench.backup("old.db", capsys)
    size = max(leaves(old))
    bench.play(2)  # the log moves on; its anchor's copy with it
    shutil.rmtree(bench.state)
    new = tmp_path / "new-card"
    line = refused(capsys, bench.restore(old, new))
    copy = next(bench.anchors.iterdir())
    assert line.startswith(
        f"paigow-controller: restore: refused: the anchor {copy} shows the log at"
    )
    assert line.endswith(
        f"records, newer than the backup's {size}: restoring it would roll the log back;"
        " restore the newest backup"
    )
    nothing_written(tmp_path, new)


def test_into_an_empty_directory_and_never_behind_a_checkpoint_kept_off_the_box(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path, copy_anchor=False)
    bench.play(2)
    bench.keep_keys(capsys)
    old = bench.backup("old.db", capsys)
    bench.play(1)
    assert main(["checkpoint", "--state-dir", str(bench.state)]) == 0
    kept = tmp_path / "checkpoint.txt"
    kept.write_text(capsys.readouterr().out)  # kept off the box, newer than the old backup
    empty = tmp_path / "empty-card"
    empty.mkdir()
    line = refused(capsys, bench.restore(old, empty, "--checkpoint", str(kept)))
    assert line.startswith("paigow-controller: restore: refused: the backup does not verify:")
    assert "rolled back" in line
    nothing_written(tmp_path, empty)
    new = bench.backup("new.db", capsys)
    assert main(bench.restore(new, empty, "--checkpoint", str(kept))) == 0
    assert json.loads(capsys.readouterr().out)["records"] == max(leaves(new))
    assert sorted(p.name for p in empty.iterdir()) == [KEY_FILE, DB_NAME]
    verify(empty, bench.verifier_key, capsys)


def test_the_anchor_left_in_the_target_refuses_an_older_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log's file is gone but its anchor beside it is not: that anchor is newer than the
    backup, so restoring it there would roll the log back."""
    bench = Bench(tmp_path, copy_anchor=False)
    bench.play(3)
    bench.keep_keys(capsys)
    old = bench.backup("old.db", capsys)
    bench.play(2)
    for path in bench.state.iterdir():
        if path.name != "log-anchor":
            path.unlink()
    line = refused(capsys, bench.restore(old, bench.state))
    assert line.startswith(
        f"paigow-controller: restore: refused: the anchor {bench.state / 'log-anchor'} shows"
        " the log at"
    )
    nothing_written(tmp_path, bench.state)


def test_a_restore_never_writes_over_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path)
    bench.play(2)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    before = leaves(bench.state / DB_NAME)
    line = refused(capsys, bench.restore(backup, bench.state))
    assert line == (
        f"paigow-controller: restore: refused: {bench.state / DB_NAME} exists: a restore never"
        " writes over a log; restore into a new (empty or absent) state directory"
    )
    assert leaves(bench.state / DB_NAME) == before
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("x")
    line = refused(capsys, bench.restore(backup, busy))
    assert line == (
        f"paigow-controller: restore: refused: {busy} is not empty (notes.txt): restore into a"
        " new (empty or absent) state directory"
    )


def test_a_backup_that_does_not_verify_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path)
    bench.play(2)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    db = sqlite3.connect(backup)
    (leaf,) = db.execute("SELECT leaf FROM records WHERE seq = 5").fetchone()
    db.execute("UPDATE records SET leaf = ? WHERE seq = 5", (bytes(leaf).replace(b"1", b"2", 1),))
    db.commit()
    db.close()
    shutil.rmtree(bench.state)
    new = tmp_path / "new-card"
    line = refused(capsys, bench.restore(backup, new))
    assert line.startswith(
        "paigow-controller: restore: refused: the backup does not verify: record 5: altered"
    )
    nothing_written(tmp_path, new)


def test_a_key_of_another_log_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path)
    bench.play(1)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    other = tmp_path / "other"
    AuditLog.open(other).close()
    new = tmp_path / "new-card"
    argv = bench.restore(backup, new)
    argv[argv.index("--signing-key") + 1] = str(other / KEY_FILE)
    assert main(argv) == 2
    assert "--signing-key is the key" in capsys.readouterr().err
    argv = [*argv[: argv.index("--signing-key")], *argv[argv.index("--signing-key") + 2 :]]
    assert main(["export-key", "--state-dir", str(other)]) == 0
    bench.verifier_key.write_text(capsys.readouterr().out)
    line = refused(capsys, argv)
    assert line.startswith(f"paigow-controller: restore: refused: the backup {backup} is the log")
    nothing_written(tmp_path, new)


def test_a_backup_past_its_archive_is_restored_with_it_and_verified_as_one_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "9", str(MIN_RETAIN_ROUNDS + 20)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    signer = load_signer(state)
    assert signer is not None
    with AuditLog.open(state) as audit:
        retention = Retention(state, signer, Policy(retain_rounds=MIN_RETAIN_ROUNDS))
        assert retention.run_until_done(audit) >= 1
    (tmp_path / "log.pub").write_text(f"{signer.verifier}\n")
    (tmp_path / "config.toml").write_text("")
    backup = tmp_path / "b.db"
    assert main(["backup", "--state-dir", str(state), str(backup), "--json"]) == 0
    capsys.readouterr()
    taken = tmp_path / "archive-taken"
    shutil.copytree(state / "archive", taken)
    new = tmp_path / "new-card"
    argv = [
        *("restore", str(backup), "--key", str(tmp_path / "log.pub")),
        *("--config", str(tmp_path / "config.toml"), "--state-dir", str(new), "--json"),
    ]
    line = main(argv)
    assert line == 2
    assert "--archive" in capsys.readouterr().err
    nothing_written(tmp_path, new)
    assert main([*argv, "--archive", str(taken)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["archives"] == len(archive_paths(state)) >= 1
    assert "systemd credential" in report["signing_key"]
    assert sorted(p.name for p in new.iterdir()) == ["archive", "audit.db"]
    assert verify(new, tmp_path / "log.pub", capsys)["records"] == report["records"]


def test_restore_needs_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["restore", str(tmp_path / "b.db"), "--state-dir", str(tmp_path / "n")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "restore needs --key" in line


# --- a restore attacked: killed, raced, a controller on the target, links, a new card ----------

KILLED_RESTORE = """
import os, signal, sys
from pathlib import Path
import controller.audit.restore as restore
from controller.cli import main

copy = restore._copy

def killed_midway(source: Path, target: Path) -> str:
    if target.name == "audit.db":  # half the log written, then the power goes
        with source.open("rb") as reading, target.open("xb") as writing:
            writing.write(reading.read(source.stat().st_size // 2))
        os.kill(os.getpid(), signal.SIGKILL)
    return copy(source, target)

restore._copy = killed_midway
sys.exit(main(sys.argv[1:]))
"""


def test_a_restore_killed_midway_leaves_no_log_and_the_next_one_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path)
    bench.play(2)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    shutil.rmtree(bench.state)
    new = tmp_path / "new-card"
    argv = bench.restore(backup, new)
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RESTORE, *argv], capture_output=True, check=False
    )
    assert done.returncode == -9, done.stderr
    # nothing there looks like a log: only the hidden copy, which no reader takes for one
    (left,) = [p.name for p in new.iterdir()]
    assert left.startswith(".restore-")
    assert main(["verify-log", "--state-dir", str(new), "--key", str(bench.verifier_key)]) != 0
    capsys.readouterr()
    assert main(argv) == 0  # the retry completes, and removes what the killed one left
    capsys.readouterr()
    assert sorted(p.name for p in new.iterdir()) == [KEY_FILE, DB_NAME]
    assert verify(new, bench.verifier_key, capsys)["records"] == max(leaves(backup))


def test_a_restore_stopped_after_the_archive_moved_in_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a restore killed between moving the archive in and the log leaves: no log, and a
    refusal that names what to remove (the anchor kept)."""
    bench = Bench(tmp_path)
    bench.play(1)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    new = tmp_path / "new-card"
    (new / "archive").mkdir(parents=True)
    (new / ".restore-999999").mkdir()
    (new / ".restore-999999" / DB_NAME).write_bytes(b"SQLite format 3\x00half")
    line = refused(capsys, bench.restore(backup, new))
    assert line == (
        f"paigow-controller: restore: refused: {new} holds archive but no log: a restore"
        " stopped before it finished? remove archive from it (keep log-anchor) and restore"
        " again"
    )
    assert sorted(p.name for p in new.iterdir()) == ["archive"]  # the killed one's copy gone
    (new / "archive").rmdir()
    assert main(bench.restore(backup, new)) == 0


def test_a_running_controller_or_a_second_restore_holds_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.app.instance_lock import InstanceLock
    from controller.files import DirectoryLock

    bench = Bench(tmp_path)
    bench.play(1)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    new = tmp_path / "new-card"
    new.mkdir()
    held = "is held by a running controller or another restore: stop it, or wait"
    controller = InstanceLock.acquire(new)  # a controller started on the empty card
    try:
        assert held in refused(capsys, bench.restore(backup, new))
    finally:
        controller.release()
    (new / "controller.lock").unlink()
    other = DirectoryLock.acquire(new)  # a second restore into it, under way
    try:
        assert held in refused(capsys, bench.restore(backup, new))
        assert list(new.iterdir()) == []
    finally:
        other.release()
    assert main(bench.restore(backup, new)) == 0


def test_links_in_the_target_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path)
    bench.play(1)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    # an anchor that is a link (to another log's anchor, or to nothing) is not the target's
    new = tmp_path / "new-card"
    new.mkdir()
    (new / "log-anchor").symlink_to(bench.state / "log-anchor")
    line = refused(capsys, bench.restore(backup, new))
    assert line == (
        f"paigow-controller: restore: refused: the anchor {new / 'log-anchor'} is a symbolic"
        " link, not this directory's anchor: remove it and restore again"
    )
    assert sorted(p.name for p in new.iterdir()) == ["log-anchor"]
    # a target that is a link to nothing
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert main(bench.restore(backup, dangling)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"paigow-controller: --state-dir {dangling} is a symbolic link to nothing"
    assert not (tmp_path / "nowhere").exists()


def test_into_a_new_card_mounted_at_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new card's filesystem mounted as the state directory: its empty lost+found is no
    obstacle, and every file is moved within the target (a move from the parent, another
    filesystem, fails with EXDEV)."""
    from controller.audit import restore

    bench = Bench(tmp_path)
    bench.play(1)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    card = tmp_path / "card"
    (card / "lost+found").mkdir(parents=True)
    moved: list[tuple[Path, Path]] = []

    def within(move: Any) -> Any:
        def checked(source: Any, target: Any) -> None:
            moved.append((Path(source), Path(target)))
            if card not in Path(source).parents:
                raise OSError(18, "Invalid cross-device link", str(source))
            move(source, target)

        return checked

    monkeypatch.setattr(restore.os, "rename", within(os.rename))
    monkeypatch.setattr(restore.os, "link", within(os.link))
    assert main(bench.restore(backup, card)) == 0
    capsys.readouterr()
    assert moved
    assert sorted(p.name for p in card.iterdir()) == [KEY_FILE, DB_NAME, "lost+found"]
    monkeypatch.undo()
    assert verify(card, bench.verifier_key, capsys)["records"] == max(leaves(backup))


def test_an_anchor_that_is_a_fifo_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO in the anchor's place would block its reader for ever (no writer opens it)."""
    bench = Bench(tmp_path)
    bench.play(1)
    bench.keep_keys(capsys)
    backup = bench.backup("b.db", capsys)
    new = tmp_path / "new-card"
    new.mkdir()
    os.mkfifo(new / "log-anchor")
    line = refused(capsys, bench.restore(backup, new))
    assert line == (
        f"paigow-controller: audit log: the anchor {new / 'log-anchor'} is not a regular file"
    )
    assert sorted(p.name for p in new.iterdir()) == ["log-anchor"]
