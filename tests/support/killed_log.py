"""A log whose writer was killed (SIGKILL) after its commits: its WAL holds records its
database file does not, as after a crash or a power cut, with the ``-wal`` and ``-shm`` the
writer had (for the tests of the readers of a stopped log with a kept WAL)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from controller.audit.log import DB_NAME

_WRITER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from support.records import valid
from controller.audit.log import AuditLog
from controller.core.records import RecordKind

log = AuditLog.open(Path(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
os.kill(os.getpid(), signal.SIGKILL)
"""


def kill_writing(state: Path, records: int) -> None:
    """A writer opens the log in ``state`` (made if it is not there), appends ``records``
    records, each a commit, and is SIGKILLed: no close, no checkpoint."""
    tests = str(Path(__file__).parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, str(state), str(records), tests],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def records_in_the_database_file(state: Path) -> int:
    """The records the database file holds by itself, its WAL not read (``immutable``)."""
    uri = (state / DB_NAME).absolute().as_uri() + "?immutable=1"
    db = sqlite3.connect(uri, uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM records").fetchone()[0])
    except sqlite3.OperationalError:  # no records table yet: the schema is in the WAL too
        return 0
    finally:
        db.close()
