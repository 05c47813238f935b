"""Log lines carry syslog priority prefixes so that journald keeps the levels."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

from controller.system.logs import configure_logging


def test_priorities_and_multiline_messages() -> None:
    stream = io.StringIO()
    configure_logging(logging.DEBUG, stream)
    log = logging.getLogger("paigow.test")
    log.error("bad")
    log.warning("careful")
    log.info("note")
    log.debug("detail")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = stream.getvalue().splitlines()
    assert lines[:4] == [
        "<3>paigow.test: bad",
        "<4>paigow.test: careful",
        "<6>paigow.test: note",
        "<7>paigow.test: detail",
    ]
    assert all(line.startswith("<3>") for line in lines[4:])
    assert any("ValueError: boom" in line for line in lines[4:])
    logging.getLogger().handlers.clear()


def _failed_command(tmp_path: Path, journal_stream: str | None) -> str:
    """A command that fails (a config that is missing), its stderr a file; the line it left."""
    err = tmp_path / "stderr"
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    with err.open("wb") as stream:
        if journal_stream == "this file":
            status = os.fstat(stream.fileno())
            journal_stream = f"{status.st_dev}:{status.st_ino}"
        if journal_stream is not None:
            env["JOURNAL_STREAM"] = journal_stream
        done = subprocess.run(
            [sys.executable, "-m", "controller", "check-config", "--config", str(tmp_path / "no")],
            stderr=stream,
            env=env,
            check=False,
        )
    assert done.returncode == 78
    return err.read_text()


def test_a_failed_command_says_err_to_the_journal_and_plain_text_elsewhere(
    tmp_path: Path,
) -> None:
    assert _failed_command(tmp_path, "this file").startswith("<3>paigow-controller: ")
    # stderr is not the stream systemd named (a redirect), or the variable is garbage: plain
    for other in (None, "1:2", "x:y", "", "12", "9" * 30 + ":1"):
        assert _failed_command(tmp_path, other).startswith("paigow-controller: "), other
