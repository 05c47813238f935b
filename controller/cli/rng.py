"""The RNG's commands: ``rng-stream`` (raw DRBG output for external test suites such as
dieharder), ``rng-replay`` (replay of revealed sessions from an exported log), and the
auditor's escrow: ``rng-escrow-key`` (the auditor's key pair) and ``rng-reveal`` (the seeds of
the sessions a restart left unrevealed, opened from their escrow and replayed)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from controller.cli.args import describe, path_argument
from controller.core.digits import MAX_SEQ, parse_bounded_int, quoted
from controller.core.drbg import MAX_REQUEST_BYTES, MIN_ENTROPY_BYTES, MIN_NONCE_BYTES, HmacDrbg
from controller.core.drbg import known_answer_test as _known_answer_test
from controller.core.rng_replay import SESSION_ID_HEX, Record, SeedReveal, replay_sessions
from controller.errors import EscrowError, LogIntegrityError, NumberError, UsageError
from controller.files import write_new
from controller.rng.session import os_entropy

STREAM_PERSONALIZATION = b"paigow-controller rng v1 rng-stream"
MAX_LINE_BYTES = 1 << 20  # one exported record; a record is a few kB


# --- rng-stream -----------------------------------------------------------------------------


def rng_stream_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Raw output of the controller's DRBG (HMAC_DRBG with SHA-256, after its known-answer"
        " test), freshly seeded from the operating system, as binary on stdout: for external"
        " statistical test suites such as dieharder or NIST SP 800-22. Never used for a game.",
        "examples:\n"
        "  paigow-controller rng-stream --bytes 1048576 > rng.bin\n"
        "  paigow-controller rng-stream --bytes 0 | dieharder -a -g 200",
    )
    p.add_argument(
        "--bytes",
        required=True,
        dest="n_bytes",
        help="how many bytes to write; 0 writes until the reader closes the pipe",
    )


def write_stream(out: BinaryIO, n_bytes: int | None, drbg: HmacDrbg) -> int:
    """Write ``n_bytes`` (None: without end) of DRBG output in maximal requests."""
    written = 0
    while n_bytes is None or written < n_bytes:
        size = MAX_REQUEST_BYTES if n_bytes is None else min(MAX_REQUEST_BYTES, n_bytes - written)
        out.write(drbg.generate(size))
        written += size
    out.flush()
    return written


def rng_stream(args: argparse.Namespace) -> int:
    try:
        n_bytes = parse_bounded_int(str(args.n_bytes), low=0, high=MAX_SEQ, what="--bytes")
    except NumberError as exc:
        raise UsageError(str(exc)) from None
    _known_answer_test()
    drbg = HmacDrbg(
        os_entropy(MIN_ENTROPY_BYTES), os_entropy(MIN_NONCE_BYTES), STREAM_PERSONALIZATION
    )
    try:
        write_stream(sys.stdout.buffer, n_bytes or None, drbg)
    except BrokenPipeError:
        # The reader (dieharder, head) has what it wanted. Point stdout at /dev/null so that
        # the interpreter's final flush does not complain (Python docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


# --- rng-replay -----------------------------------------------------------------------------


def rng_replay_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Replays every revealed RNG session of an exported log (paigow-controller export):"
        " the revealed seed must match its commitment, and every number drawn must be what the"
        " DRBG gives from it. Prints JSON: the sessions verified, or one session with every"
        " draw (--session). A session that does not replay exits 1 naming it.",
        "examples:\n"
        "  paigow-controller export --state-dir D > audit.jsonl\n"
        "  paigow-controller rng-replay --log audit.jsonl\n"
        "  paigow-controller rng-replay --log audit.jsonl --session SESSION-ID",
    )
    p.add_argument(
        "--log",
        required=True,
        help='exported log: JSON lines, each {"seq": N, "kind": "...", "data": {...}}',
    )
    p.add_argument("--session", help="show this revealed session with every draw")


def read_json_lines(path: Path) -> Iterator[Record]:
    """The records of an exported log, one JSON object per line, read lazily; a line longer
    than MAX_LINE_BYTES is refused before it is read to its end."""
    with path.open("rb") as lines:
        number = 0
        while line := lines.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES:
                raise LogIntegrityError(None, f"line {number} is over {MAX_LINE_BYTES} bytes")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                seq, kind, data = record["seq"], record["kind"], record["data"]
            except (ValueError, TypeError, KeyError, RecursionError):  # [[[[... too deep
                raise LogIntegrityError(
                    None, f"line {number} is not a JSON record with seq, kind and data"
                ) from None
            if not (isinstance(seq, int) and isinstance(kind, str) and isinstance(data, dict)):
                raise LogIntegrityError(None, f"line {number}: seq, kind or data has a wrong type")
            yield seq, kind, data


def rng_replay(args: argparse.Namespace) -> int:
    path = Path(args.log)
    try:
        is_file = path.is_file()
    except OSError as exc:  # a name too long
        raise UsageError(f"--log {quoted(args.log)}: {exc.strerror or exc}") from None
    if not is_file:
        raise UsageError(f"--log {quoted(args.log)}: no such file")
    try:
        sessions = replay_sessions(read_json_lines(path), keep_draws=args.session is not None)
    except LogIntegrityError:
        raise  # the log itself is bad: exit 1, naming the line
    except OSError as exc:  # the file cannot be read
        raise UsageError(f"--log {quoted(args.log)}: {exc.strerror or exc}") from None
    if args.session is not None:
        chosen = [s for s in sessions if s.session == args.session]
        if not chosen:
            raise LogIntegrityError(None, f"RNG session {args.session} is not revealed in this log")
        report: dict[str, object] = {"verified": True, "session": chosen[0].as_record()}
    else:
        report = {
            "verified": True,
            "sessions": [
                {
                    "session": s.session,
                    "table": s.table,
                    "mode": str(s.mode),
                    "commit_seq": s.commit_seq,
                    "reveal_seq": s.reveal_seq,
                }
                for s in sessions
            ],
        }
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


# --- rng-escrow-key -------------------------------------------------------------------------


def rng_escrow_key_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Makes the auditor's X25519 key pair for the RNG's seed escrow: the private key in a"
        " new file (PKCS #8 PEM, mode 0600; an existing file is never replaced: exit 1), and"
        " the public key printed as [rng] escrow_public_key takes it (base64). Each session's"
        " seed is sealed to that key in its commitment; only the private key opens it"
        " (rng-reveal). Keep the private key with the auditor, never on a table.",
        "examples:\n"
        "  paigow-controller rng-escrow-key --out ~/keys/paigow-auditor.key\n"
        '  # then in the table\'s config:  [rng]  escrow_public_key = "<what it printed>"',
    )
    p.add_argument(
        "--out", required=True, type=path_argument, help="the new private key file (0600)"
    )


def rng_escrow_key(args: argparse.Namespace) -> int:
    from controller.rng.escrow import create_escrow_key

    key = create_escrow_key(Path(args.out))  # a file there already: exit 1, never replaced
    sys.stdout.write(f"{key.text}\n")
    return 0


# --- rng-reveal -------------------------------------------------------------------------------

MAX_REVEALS_FILE_BYTES = 64 << 20  # a reveal is some 500 bytes; a table-year a few thousand


def rng_reveal_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The auditor's reveal of the RNG sessions a restart (a power cut, a crash) ended"
        " unrevealed: opens the seed each one's commitment sealed to the auditor's key, checks"
        " it against the commitment and replays every draw recorded for the session, then"
        " writes the reveals as JSON (stdout, or --out, a new file of mode 0600), for"
        " verify-log --rng-reveals. A session that may still be drawing (the newest, with no"
        " restart or later session after it) is never opened. Reads a state directory (or a"
        " copy) or an export. Exit 1 names the record when a seal does not open or a seed does"
        " not match its commitment or a draw; 2 for a bad argument.",
        "examples:\n"
        "  paigow-controller rng-reveal --escrow-key auditor.key --state-dir copy-of-state"
        " --out reveals.json\n"
        "  paigow-controller rng-reveal --escrow-key auditor.key --log audit.jsonl"
        " --session SESSION-ID\n"
        "  paigow-controller verify-log --state-dir copy-of-state --rng-reveals reveals.json",
    )
    p.add_argument(
        "--escrow-key",
        required=True,
        type=path_argument,
        help="the auditor's private key file (rng-escrow-key --out)",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--state-dir", type=path_argument, help="a state directory, or a copy")
    source.add_argument(
        "--log", type=path_argument, help="an exported log (paigow-controller export)"
    )
    p.add_argument("--session", help="this session only (16 hex digits)")
    p.add_argument(
        "--out", type=path_argument, help="write the reveals to this new file (mode 0600)"
    )


def escrow_private_key(name: str) -> X25519PrivateKey:
    """The auditor's private key named by ``--escrow-key``: a bad file is a bad argument."""
    from controller.rng.escrow import read_escrow_key

    try:
        return read_escrow_key(Path(name))
    except EscrowError as exc:
        raise UsageError(f"--escrow-key: {exc}") from None


def session_argument(text: str | None) -> str | None:
    if text is None:
        return None
    if len(text) != SESSION_ID_HEX or not all(c in "0123456789abcdef" for c in text):
        raise UsageError(f"--session {quoted(text)}: not {SESSION_ID_HEX} lowercase hex digits")
    return text


def rng_reveal(args: argparse.Namespace) -> int:
    from controller.core.rng_audit import open_escrowed_sessions

    only = session_argument(args.session)
    out = None if args.out is None else Path(args.out)
    if out is not None and out.exists():
        raise UsageError(f"--out {quoted(args.out)} exists: it is never replaced")
    private = escrow_private_key(args.escrow_key)
    opening = open_escrowed_sessions(_records_of(args), private, only=only)
    blob = (json.dumps(opening.as_document(), indent=1) + "\n").encode("ascii")
    if out is None:
        sys.stdout.write(blob.decode("ascii"))
        return 0
    try:
        write_new(out, blob, 0o600, replace=False)
    except FileExistsError:
        raise UsageError(f"--out {quoted(args.out)} exists: it is never replaced") from None
    except OSError as exc:
        raise UsageError(f"--out {quoted(args.out)}: {exc.strerror or exc}") from None
    left = "".join(f"; {session} not revealed: {why}" for session, why in opening.not_revealed)
    sys.stdout.write(
        f"{len(opening.opened)} RNG session(s) revealed and replayed, into {args.out}{left}\n"
    )
    return 0


def _records_of(args: argparse.Namespace) -> Iterator[Record]:
    """The records of ``--state-dir`` (the archive's first: the whole log) or ``--log``."""
    if args.log is not None:
        path = Path(args.log)
        if not path.is_file():
            raise UsageError(f"--log {quoted(args.log)}: no such file")
        return read_json_lines(path)
    from controller.audit.recall import export_lines

    state_dir = Path(args.state_dir)
    if not state_dir.is_dir():
        raise UsageError(f"--state-dir {quoted(args.state_dir)}: no such directory")
    return ((line["seq"], line["kind"], line["data"]) for line in export_lines(state_dir))


def read_reveals(name: str) -> list[SeedReveal]:
    """``verify-log --rng-reveals FILE``: the seeds rng-reveal wrote (a bad file is exit 2)."""
    from controller.core.rng_audit import reveals_from_document
    from controller.errors import TooLarge
    from controller.files import read_capped

    option = f"--rng-reveals {quoted(name)}"
    try:
        document = json.loads(read_capped(Path(name), MAX_REVEALS_FILE_BYTES))
    except TooLarge:
        raise UsageError(f"{option}: larger than {MAX_REVEALS_FILE_BYTES} bytes") from None
    except OSError as exc:
        raise UsageError(f"{option}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError is a ValueError)
        raise UsageError(f"{option}: not JSON") from None
    try:
        return reveals_from_document(document)
    except EscrowError as exc:
        raise UsageError(f"{option}: {exc}") from None
