"""The RNG's commands: ``rng-stream`` (raw DRBG output for external test suites such as
dieharder) and ``rng-replay`` (replay of revealed sessions from an exported log)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from controller.cli.args import describe
from controller.core.digits import MAX_SEQ, NumberError, parse_bounded_int, quoted
from controller.core.drbg import MAX_REQUEST_BYTES, MIN_ENTROPY_BYTES, MIN_NONCE_BYTES, HmacDrbg
from controller.core.drbg import known_answer_test as _known_answer_test
from controller.core.rng_replay import Record, replay_sessions
from controller.errors import LogIntegrityError, UsageError
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
            except (ValueError, TypeError, KeyError):
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
