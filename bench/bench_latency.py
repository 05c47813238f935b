"""Latency from the dice sensor's frame to the result on the feed and on the page (issue 13:
p99 <= 1 ms, fsync excluded).

    .venv/bin/python bench/bench_latency.py     # BENCH_LATENCY_ROUNDS=200 BENCH_SEED=1

Method. A child Python runs the appliance on simulated hardware with the web display on (the
``run_simulation`` of ``simulate --fast --web-display``), its state directory on a tmpfs
(/dev/shm: an fsync there costs nothing, which is what "fsync excluded" asks). In the child the
simulated sensor notes ``time.monotonic_ns()`` just before it writes each reading frame's bytes
to the pty. This process is the table-management system and the kiosk page: one thread holds
a feed connection (JSON lines over TCP, live records) and a page connection (``GET /events``,
the Server-Sent Events stream the page reads), and notes ``time.monotonic_ns()`` as each chunk
arrives (nothing else is done on arrival; the lines are parsed after the run). Both processes
read the same CLOCK_MONOTONIC. A round's latency is from the frame that decided it (the second
agreeing reading: the last reading frame before its result) to the arrival of the feed's
``result`` record, and of the page's ``result`` screen.

Baseline, measured in the same run: the same hops with no work on them, in a child of its
own (``--relay``): a thread writes a frame of the sensor's size to a pty, a reader thread
blocked on the other end puts it on a ``queue.Queue``, a control thread takes it and sends a
line on a TCP connection to this process, one frame every 50 ms (the threads go cold between
frames, as between rounds). What the product adds is its figure less the baseline's.

Floor, measured in the same run: the baseline's hops with the least any design does under the
write-ahead guarantee before the line goes out (``_Floor``): one SQLite transaction in WAL
mode, ``synchronous=FULL``, of two records of a result's size and the head row, and one
Ed25519 signature. What the product adds over that is its own work: the core's step, the
records' and the context's encoding, the feed's lines and the page.

Under arm64 emulation (issue 31): where the arm64 tree of tests/arm64 can run here (root,
binfmt_misc, qemu-user; ``make armtest`` makes it), the same child runs there under qemu-user,
``BENCH_LATENCY_ARM64_ROUNDS`` rounds, its state and work directories on the host's /dev/shm
(the tree sees the host's /dev), and this process on x86_64 is its clients as before: the
tree shares this machine's network and its CLOCK_MONOTONIC. The figures are its p50 and p99
and their ratios to x86_64's. qemu-user translates every instruction on this core: the ratio
is emulation's cost, an upper bound on a Pi's, not a Pi's latency. Where the tree cannot run,
one line says why.

Only the frame -> result path is timed: the shake, the settle and the first read are before the
frame. The simulated hardware has timing margins (bench/common.py, ``steady_simulation``) and
the simulated dealer waits 20 ms before pressing a key, as a dealer takes seconds, so that the
round's close does not run inside the window. The crew starts only once both clients are
connected. Each run gives p50 and p99 of its rounds; the figures are the medians over the runs.
A run with nothing to measure (no frame timed, a stream refused or with no result) ends the
script with status 1, naming the stream, what it sent and the simulation's stderr.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import selectors
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tty
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from common import (
    env_int,
    figure,
    free_ports,
    machine_load,
    median,
    note,
    percentile,
    spread,
    steady_simulation,
    title,
    tmpfs_dir,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.app import simulate
from controller.core.config import Config
from controller.core.sensor_protocol import Reading, Reply

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 1.0
DEALER_PAUSE_S = 0.02
CONNECT_TIMEOUT_S = 60


# --- the child: the appliance on simulated hardware -------------------------------------------


class _TimedSensor(simulate.CrewsSimulatedSensor):
    """The simulation's own sensor (``simulate.CrewsSimulatedSensor``, which ``run_simulation``
    builds; patching its base class would time nothing), noting when each reading frame's
    bytes go to the pty."""

    frame_times: list[int] = []  # noqa: RUF012 - one sensor per child process
    _is_reading = False

    def _send(self, link: Any, reply: Reply) -> None:
        self._is_reading = isinstance(reply, Reading)
        super()._send(link, reply)

    def _write(self, link: Any, data: bytes) -> None:
        if self._is_reading:
            self.frame_times.append(time.monotonic_ns())
        super()._write(link, data)


def child(argv: Sequence[str]) -> None:
    """``ROUNDS SEED STATE_DIR HTTP_PORT FEED_PORT WORK_DIR``: play, then leave the frames'
    times in WORK_DIR/frames.json."""
    rounds, seed, http, feed = int(argv[0]), int(argv[1]), int(argv[3]), int(argv[4])
    state_dir, work = Path(argv[2]), Path(argv[5])
    go = work / "go"

    class Crew(simulate.Crew):
        """The simulated crew: a dealer who takes a moment, starting once the clients are in."""

        def __post_init__(self) -> None:
            super().__post_init__()
            self.pause_s = max(self.pause_s, DEALER_PAUSE_S)

        def _run(self) -> None:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            while not go.exists() and time.monotonic() < deadline:
                self.stopping.wait(0.01)
            super()._run()

    steady_simulation()
    simulate.CrewsSimulatedSensor = _TimedSensor  # type: ignore[misc]
    simulate.Crew = Crew  # type: ignore[misc]
    config = Config()
    display = dataclasses.replace(config.display, http_port=http, feed_port=feed)
    with open(os.devnull, "w") as out:
        simulate.run_simulation(
            dataclasses.replace(config, display=display),
            rounds=rounds,
            seed=seed,
            fast=True,
            faults={},
            state_dir=state_dir,
            out=out,
            web_display=True,
            plain_rounds=True,
        )
    (work / "frames.json").write_text(json.dumps(_TimedSensor.frame_times))


# --- this process: the feed client and the page ------------------------------------------------


def _connect(port: int, deadline: float) -> socket.socket:
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


def _read_until(sock: socket.socket, marker: bytes, deadline: float) -> bytes:
    data = b""
    while marker not in data:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise StreamFailed(
                f"no {marker.decode()!r} in time; it sent {_excerpt(data)}"
            ) from None
        if not chunk:
            raise StreamFailed(f"closed before {marker.decode()!r}; it sent {_excerpt(data)}")
        data += chunk
    return data


class StreamFailed(Exception):
    """A stream that gave the bench nothing to measure; its text says what it did give."""


def _excerpt(data: bytes, limit: int = 200) -> str:
    """What a stream sent, short enough for one line: a refusal (the feed's error line, the
    page server's 503) reads as itself."""
    if not data:
        return "nothing"
    text = data[:limit].decode("utf-8", "replace")
    return f"{len(data)} bytes, {text!r}" + ("..." if len(data) > limit else "")


def _check_stream(
    name: str, chunks: Sequence[tuple[int, bytes]], arrivals: dict[int, int], frames: list[int]
) -> None:
    """Raise :class:`StreamFailed` where ``name`` yields no latency: what it sent instead."""
    if frames and any(at > frames[0] for at in arrivals.values()):
        return  # at least one latency
    received = b"".join(data for _, data in chunks)
    if not arrivals:
        raise StreamFailed(f"the {name} stream carried no result; it sent {_excerpt(received)}")
    raise StreamFailed(f"the {name} stream's {len(arrivals)} results all came before any frame")


def _receive(
    socks: dict[str, socket.socket], proc: subprocess.Popen[bytes]
) -> dict[str, list[tuple[int, bytes]]]:
    """Every chunk of each stream with its arrival time, until the child is done."""
    chunks: dict[str, list[tuple[int, bytes]]] = {name: [] for name in socks}
    selector = selectors.DefaultSelector()
    for name, sock in socks.items():
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, name)
    open_streams = len(socks)
    while open_streams and proc.poll() is None:
        for key, _ in selector.select(0.5):
            try:
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            at = time.monotonic_ns()
            if not data:
                selector.unregister(key.fileobj)
                open_streams -= 1
                continue
            chunks[key.data].append((at, data))
    selector.close()
    return chunks


def _results(chunks: Sequence[tuple[int, bytes]], separator: bytes) -> dict[int, int]:
    """Round -> arrival time of its first result, in a feed (lines) or page (events) stream."""
    arrivals: dict[int, int] = {}
    pending = b""
    for at, data in chunks:
        pending += data
        *complete, pending = pending.split(separator)
        for item in complete:
            found = _result_round(item)
            if found is not None and found not in arrivals:
                arrivals[found] = at
    return arrivals


def _result_round(item: bytes) -> int | None:
    text = item.decode("utf-8", "replace")
    if text.startswith("{"):  # a feed line
        line = json.loads(text)
        if line.get("type") == "record" and line.get("kind") == "result":
            return int(line["round"])
        return None
    fields = dict(f.split(": ", 1) for f in text.split("\n") if ": " in f)
    if fields.get("event") != "screen":
        return None
    payload = json.loads(fields["data"])
    if payload.get("screen") == "result" and "result" in payload.get("data", {}):
        return int(payload["round"])
    return None


def _latencies_ms(arrivals: dict[int, int], frames: list[int]) -> list[float]:
    """Each result's arrival less the last reading frame written before it."""
    latencies = []
    for at in arrivals.values():
        before = [frame for frame in frames if frame < at]
        if before:
            latencies.append((at - before[-1]) / 1e6)
    return latencies


RELAY_GAP_S = 0.05
RELAY_FRAME = 98  # bytes: about a reading frame's size


FLOOR_RECORDS = 2  # the deciding reading's record and the result's
FLOOR_RECORD = 700  # bytes of a record's canonical text, about a result's


class _Floor:
    """The least a result's path does under the write-ahead guarantee, whatever the design:
    its records made durable before anything is sent (one SQLite transaction in WAL mode,
    ``synchronous=FULL``, as the audit log's: ``FLOOR_RECORDS`` rows and the head row's
    update) and the log's new checkpoint signed (one Ed25519 signature); nothing else (no
    state machine, no JSON, no page)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE records (seq INTEGER PRIMARY KEY, leaf BLOB, hash BLOB)")
        self.db.execute("CREATE TABLE head (id INTEGER PRIMARY KEY, size INTEGER, note BLOB)")
        self.db.execute("INSERT INTO head VALUES (1, 0, x'')")
        self.key = Ed25519PrivateKey.generate()
        self.seq = 0

    def commit(self, frame: bytes) -> None:
        rows = []
        for _ in range(FLOOR_RECORDS):
            self.seq += 1
            leaf = frame + b"%d" % self.seq + b"x" * (FLOOR_RECORD - len(frame))
            rows.append((self.seq, leaf, hashlib.sha256(leaf).digest()))
        note = b"table\n%d\n" % self.seq + rows[-1][2] + b"\n"
        signed = note + self.key.sign(note)
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO records VALUES (?, ?, ?)", rows)
        self.db.execute("UPDATE head SET size = ?, note = ? WHERE id = 1", (self.seq, signed))
        self.db.execute("COMMIT")


def relay_child(port: int, frames: int, floor_dir: str | None = None) -> None:
    """The baseline's hops, with nothing done on them, or (``floor_dir``: where its database
    goes) with the floor's work (``_Floor``) before the line; prints the frames' times as
    JSON."""
    master, slave = os.openpty()
    tty.setraw(slave)
    hand_over: queue.Queue[bytes] = queue.Queue()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    floor = None if floor_dir is None else _Floor(Path(floor_dir) / "floor.db")

    def reader() -> None:
        while True:
            hand_over.put(os.read(slave, 4096))

    def control() -> None:
        while (data := hand_over.get()) != b"end":
            if floor is not None:
                floor.commit(data)
            sock.sendall(data[:8] + b"\n")
        sock.close()

    threading.Thread(target=reader, daemon=True).start()
    controller = threading.Thread(target=control)
    controller.start()
    times = []
    for number in range(frames):
        time.sleep(RELAY_GAP_S)
        times.append(time.monotonic_ns())
        os.write(master, b"%08d" % number + b"x" * (RELAY_FRAME - 8))
    time.sleep(0.1)
    os.write(master, b"end")
    controller.join()
    print(json.dumps(times))


def run_baseline(frames: int, floor_dir: Path | None = None) -> list[float]:
    """The baseline's latencies, in ms; with ``floor_dir``, the floor's (``_Floor``)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    command = [sys.executable, __file__, "--relay", str(server.getsockname()[1]), str(frames)]
    if floor_dir is not None:
        command.append(str(floor_dir))
    proc = subprocess.Popen(command, stdout=subprocess.PIPE)
    server.settimeout(CONNECT_TIMEOUT_S)
    conn, _ = server.accept()
    server.close()
    arrivals: dict[int, int] = {}
    pending = b""
    while data := conn.recv(65536):
        at = time.monotonic_ns()
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            arrivals[int(line)] = at
    conn.close()
    out, _ = proc.communicate(timeout=60)
    sent = json.loads(out)
    return [(arrivals[n] - sent[n]) / 1e6 for n in sorted(arrivals)]


# the child's command line: its arguments -> the host's command (x86_64 here, or arm64)
Child = Callable[[list[str]], list[str]]


def x86_child(args: list[str]) -> list[str]:
    return [sys.executable, __file__, *args]


def run_once(
    rounds: int, seed: int, base: Path | None, child_argv: Child = x86_child
) -> dict[str, list[float]]:
    """One run's latencies by stream; exits naming the stream (what it sent, the child's
    stderr) where the run gives nothing to measure."""
    with tempfile.TemporaryDirectory(prefix="bench-latency-", dir=base) as tmp:
        work = Path(tmp)
        http, feed = free_ports(2)
        args = ["--child", str(rounds), str(seed)]
        command = child_argv([*args, str(work / "state"), str(http), str(feed), str(work)])
        stderr = (work / "child.stderr").open("wb")
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        stream = "feed"
        try:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            feed_sock = _connect(feed, deadline)
            feed_sock.sendall(b"\n")  # no request: the records committed from now on
            stream = "page"
            page_sock = _connect(http, deadline)
            page_sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = _read_until(page_sock, b"event: snapshot", deadline)
            (work / "go").touch()
            chunks = _receive({"feed": feed_sock, "page": page_sock}, proc)
            proc.wait(timeout=600)
        except (OSError, StreamFailed) as exc:
            _fail(f"the {stream} connection to the simulation failed: {exc}", proc, work)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stderr.close()
        if proc.returncode != 0:
            _fail("the simulation failed", proc, work)
        frames = sorted(json.loads((work / "frames.json").read_text()))
        body = first.split(b"\r\n\r\n", 1)[1]
        page = _results([(0, body), *chunks["page"]], b"\n\n")
        fed = _results(chunks["feed"], b"\n")
        try:
            if not frames:
                raise StreamFailed(
                    "the simulation timed no sensor frame: the sensor it built is not _TimedSensor"
                )
            _check_stream("feed", chunks["feed"], fed, frames)
            _check_stream("page", [(0, body), *chunks["page"]], page, frames)
        except StreamFailed as exc:
            _fail(f"nothing to measure: {exc}", proc, work)
    return {"feed": _latencies_ms(fed, frames), "page": _latencies_ms(page, frames)}


def _fail(reason: str, proc: subprocess.Popen[bytes], work: Path) -> NoReturn:
    """Exit (status 1) with ``reason`` and the end of the child's stderr."""
    try:
        tail = (work / "child.stderr").read_text(errors="replace")[-3000:]
    except OSError:
        tail = ""
    status = "running" if proc.returncode is None else f"exit status {proc.returncode}"
    sys.exit(f"bench_latency: {reason}\nthe simulation ({status}) wrote to stderr:\n{tail}")


def arm64_child() -> Child | str:
    """How to run the child in the arm64 tree under qemu-user (the project and this directory
    installed there), or why it cannot run here."""
    sys.path.insert(0, str(ROOT / "tests" / "arm64"))
    import chroot  # noqa: PLC0415 (tests/arm64: the tree and how to enter it)

    reason = chroot.unavailable()
    if reason is not None:
        return reason
    if not sorted(chroot.CACHE.glob(f"{chroot.SUITE}-{chroot.ARCH}-*/.complete")):
        return f"no arm64 tree in {chroot.CACHE} (make armtest makes it, once)"
    tree = chroot.Chroot(chroot.root_filesystem())
    tree.install_project()
    bench = tree.root / chroot.PROJECT.lstrip("/") / "bench"
    shutil.rmtree(bench, ignore_errors=True)
    skip = shutil.ignore_patterns(".*", "__pycache__")  # .scratch: the cached logs
    shutil.copytree(Path(__file__).parent, bench, ignore=skip)
    python = f"{chroot.PROJECT}/.venv/bin/python"
    script = f"{chroot.PROJECT}/bench/{Path(__file__).name}"
    return lambda args: tree.argv([python, script, *args], cwd=chroot.PROJECT)


def arm64_runs(rounds: int, seed: int, base: Path | None) -> dict[str, list[float]] | str:
    """The latencies of one run of the child in the arm64 tree, or why there is none."""
    if base is None or not str(base).startswith("/dev/"):
        return "the state directory must be on /dev/shm, which the tree shares"
    sys.path.insert(0, str(ROOT / "tests" / "arm64"))
    import chroot  # noqa: PLC0415

    with chroot.locked():
        child_argv = arm64_child()
        if isinstance(child_argv, str):
            return child_argv
        return run_once(rounds, seed, base, child_argv)


def report_arm64(runs: list[dict[str, list[float]]], arm: dict[str, list[float]] | str) -> None:
    if isinstance(arm, str):
        note(f"arm64 under qemu-user: not measured: {arm}")
        return
    for stream in ("feed", "page"):
        x86_p50 = median([percentile(run[stream], 0.50) for run in runs])
        x86_p99 = median([percentile(run[stream], 0.99) for run in runs])
        p50, p99 = percentile(arm[stream], 0.50), percentile(arm[stream], 0.99)
        figure(f"arm64 (qemu-user): frame -> {stream}, p50", f"{p50:.3f} ms")
        figure(f"arm64 (qemu-user): frame -> {stream}, p99", f"{p99:.3f} ms")
        figure(
            f"arm64 / x86_64: frame -> {stream}",
            f"p50 {p50 / x86_p50:.1f}x, p99 {p99 / x86_p99:.1f}x",
        )
    note(f"arm64: {len(arm['feed'])} rounds; qemu-user's ratio is an upper bound on a Pi's")


def _hops_figures(label: str, runs: list[list[float]], what: str) -> tuple[float, float]:
    """The p50 and p99 of a baseline's runs (medians over the runs), printed."""
    p50 = median([percentile(run, 0.50) for run in runs])
    p99 = median([percentile(run, 0.99) for run in runs])
    figure(f"{label}, p50", f"{p50:.3f} ms")
    figure(f"{label}, p99", f"{p99:.3f} ms")
    note(f"p99 {spread([percentile(run, 0.99) for run in runs], 'ms', 3)}: {what}")
    return p50, p99


def main() -> None:
    rounds = env_int("BENCH_LATENCY_ROUNDS", 200)
    arm64_rounds = env_int("BENCH_LATENCY_ARM64_ROUNDS", 60, low=0)
    repeats = env_int("BENCH_LATENCY_REPEATS", 3)
    seed = env_int("BENCH_SEED", 1, low=0)
    base = tmpfs_dir()
    title(
        f"sensor frame -> result on the feed and the page: {repeats} runs of {rounds} rounds"
        f" (seed {seed}), state directory on {base or 'the default temporary directory'}"
    )
    note(machine_load())
    if base is None:
        note("no tmpfs found: the figures include the fsyncs of the commits")
    runs = []
    baselines = []
    floors = []
    for _ in range(repeats):  # interleaved: each run has its baselines beside it in time
        baselines.append(run_baseline(rounds))
        with tempfile.TemporaryDirectory(dir=base) as floor_dir:
            floors.append(run_baseline(rounds, Path(floor_dir)))
        runs.append(run_once(rounds, seed, base))
    base_p50, base_p99 = _hops_figures(
        "baseline: the same hops doing nothing",
        baselines,
        "pty -> reader thread -> queue -> control thread -> TCP, a frame every 50 ms",
    )
    floor_p50, floor_p99 = _hops_figures(
        "floor: the hops, one transaction and one signature",
        floors,
        f"the least any design does under the write-ahead guarantee ({FLOOR_RECORDS} records"
        " in a WAL transaction, synchronous=FULL, and an Ed25519 signature, before the line"
        " is sent)",
    )
    for stream, what in (("feed", "feed (JSON lines over TCP)"), ("page", "page (SSE /events)")):
        p50s = [percentile(run[stream], 0.50) for run in runs]
        p99s = [percentile(run[stream], 0.99) for run in runs]
        counts = [len(run[stream]) for run in runs]
        p50, p99 = median(p50s), median(p99s)
        figure(f"frame -> {what}, p50", f"{p50:.3f} ms")
        figure(f"frame -> {what}, p99", f"{p99:.3f} ms", f"<= {GOAL_MS} ms", p99 <= GOAL_MS)
        pooled = [x for run in runs for x in run[stream]]
        note(
            f"p99 {spread(p99s, 'ms', 3)}; {sum(counts)} rounds; all runs pooled:"
            f" p99 {percentile(pooled, 0.99):.3f} ms, max {max(pooled):.3f} ms"
        )
        note(
            f"over the baseline: p50 {p50 / base_p50:.1f}x (+{p50 - base_p50:.3f} ms),"
            f" p99 {p99 / base_p99:.1f}x (+{p99 - base_p99:.3f} ms); over the floor:"
            f" p50 +{p50 - floor_p50:.3f} ms, p99 +{p99 - floor_p99:.3f} ms"
        )
    if arm64_rounds:
        title(f"the same path under arm64 emulation: {arm64_rounds} rounds (seed {seed})")
        report_arm64(runs, arm64_runs(arm64_rounds, seed, base))


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "--relay":
        relay_child(int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:])
    else:
        main()
