"""The audit log's commands: ``verify-log``, ``recall``, ``export`` and ``export-key``.

JSON on stdout (one document, or JSON lines for ``export``); a failed verification names the
first bad record on stderr and exits 1; a bad argument is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from controller.audit_log import (
    KEY_FILE,
    LATEST_CHECKPOINT,
    open_for_reading,
    read_checkpoints,
    read_records,
    record_hash,
)
from controller.config import StorageConfig
from controller.errors import AuditLogError, LogIntegrityError, UsageError
from controller.merkle import leaf_hash
from controller.note import NoteError, Signer, Verifier
from controller.records import RecordKind
from controller.verify_log import verify_state_dir

DEFAULT_RECALL = 10  # AGCO 13.1.1: the current game and at least the 9 before it


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or StorageConfig().state_dir)


def _state_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-dir",
        help=f"the controller's state directory (default {StorageConfig().state_dir})",
    )


def _print(value: object) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")


def log_verifier(state_dir: Path, key_file: str | None) -> Verifier:
    """The verifier key from ``--key`` (note-verifier form), else from the log's own key."""
    if key_file is not None:
        try:
            return Verifier.parse(Path(key_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"--key {key_file}: {exc.strerror or exc}") from None
        except (NoteError, UnicodeDecodeError) as exc:
            raise UsageError(f"--key {key_file}: not a verifier key ({exc})") from None
    candidates = [state_dir / KEY_FILE]
    credentials = os.environ.get("CREDENTIALS_DIRECTORY")
    if credentials:
        candidates.insert(0, Path(credentials) / KEY_FILE)
    for path in candidates:
        if path.exists():
            try:
                return Signer.parse(path.read_text(encoding="ascii")).verifier
            except (OSError, UnicodeDecodeError, NoteError) as exc:
                raise AuditLogError(f"audit log: cannot read the key {path}: {exc}") from exc
    raise AuditLogError(f"audit log: no key in {state_dir}; pass the verifier key with --key")


# --- verify-log -----------------------------------------------------------------------------


def verify_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)
    p.add_argument("--key", help="file holding the log's verifier key (name+keyid+base64)")


def verify(args: argparse.Namespace) -> int:
    state_dir = _state_dir(args)
    verifier = log_verifier(state_dir, args.key)
    try:
        report = verify_state_dir(state_dir, verifier)
    except LogIntegrityError as exc:
        _print({"ok": False, "record": exc.record, "error": str(exc)})
        sys.stderr.write(f"paigow-controller: verify-log: {exc}\n")
        return 1
    _print({**report.as_dict(), "key": str(verifier)})
    return 0


# --- recall ---------------------------------------------------------------------------------


def recall_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)
    p.add_argument("--last", default=str(DEFAULT_RECALL), help="how many rounds (default 10)")


def recall_command(args: argparse.Namespace) -> int:
    try:
        last = int(args.last, 10)
    except ValueError:
        raise UsageError(f"--last {args.last!r} is not a whole number") from None
    if not 1 <= last <= 10_000:
        raise UsageError(f"--last {last} is not 1..10000")
    _print({"rounds": recall(_state_dir(args), last=last)})
    return 0


def recall(state_dir: Path, *, last: int = DEFAULT_RECALL) -> list[dict[str, Any]]:
    """The last ``last`` rounds, oldest first, each with its records (readings included) and
    its outcome: the result, void, or still in play."""
    db = open_for_reading(state_dir)
    try:
        starts = db.execute(
            "SELECT seq FROM records WHERE kind = ? ORDER BY seq DESC LIMIT ?",
            (str(RecordKind.ROUND_OPENED), last),
        ).fetchall()
        first = int(starts[-1][0]) if starts else 1
        rounds: dict[int, dict[str, Any]] = {}
        for row in read_records(db, start=first):
            entry = row.entry()
            data = entry["data"]
            number = data.get("round")
            if not isinstance(number, int):
                continue
            game = rounds.setdefault(
                number, {"round": number, "outcome": "in play", "result": None, "records": []}
            )
            game["records"].append(
                {"seq": row.seq, "kind": row.kind, "time": entry["time"], "data": data}
            )
            if row.kind == RecordKind.RESULT:
                game["result"] = data
                game["outcome"] = "result"
            elif row.kind == RecordKind.VOID:
                game["outcome"] = "void"
            elif row.kind == RecordKind.CLOSE:
                game["outcome"] = "closed"
        return [rounds[n] for n in sorted(rounds)][-last:]
    finally:
        db.close()


# --- export ---------------------------------------------------------------------------------


def export_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)


def export(args: argparse.Namespace) -> int:
    """One JSON line per record: the record's fields, its leaf as stored (base64-free: the
    canonical text), its SHA-256 (the next record's prev), its RFC 6962 leaf hash, and the
    signed checkpoint made at it, if any."""
    db = open_for_reading(_state_dir(args))
    try:
        db.execute("BEGIN")
        checkpoints = read_checkpoints(db)
        latest = checkpoints.pop(LATEST_CHECKPOINT, None)
        size = int(db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()[0])
        for row in read_records(db, stop=size):
            entry = row.entry()
            line = {
                "seq": row.seq,
                "kind": row.kind,
                "time": entry["time"],
                "data": entry["data"],
                "prev": entry["prev"],
                "hash": record_hash(row.leaf),
                "leaf_hash": leaf_hash(row.leaf).hex(),
                "leaf": row.leaf.decode("utf-8"),
            }
            note = checkpoints.get(row.seq) or (latest if row.seq == size else None)
            if note is not None:
                line["checkpoint"] = note
            _print(line)
        db.execute("COMMIT")
    finally:
        db.close()
    return 0


# --- export-key -----------------------------------------------------------------------------


def key_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)


def export_key(args: argparse.Namespace) -> int:
    verifier = log_verifier(_state_dir(args), None)
    sys.stdout.write(f"{verifier}\n")
    return 0
