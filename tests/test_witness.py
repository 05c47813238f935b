"""The witness (controller/witness): real logs made by ``simulate``, sent as the tables send them
(export lines, the signed checkpoints) through a real mosquitto, verified and cosigned; a
rollback, a fork, a bad record, a bad signature, a gap, silence and garbage raise alerts or are
refused. The witness's clock is injected: the gap and silence timers move when the test moves
them, never with the wall clock."""

from __future__ import annotations

import copy
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from fleet_broker import Broker, free_port
from paho.mqtt.enums import CallbackAPIVersion

from controller.audit.log import origin_for
from controller.audit.recall import export_lines
from controller.core.config import parse_broker_url
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    Signer,
    Verifier,
    open_checkpoint,
    open_cosignature,
    sign_checkpoint,
)
from controller.errors import InstanceLocked
from controller.fleet.protocol import (
    ALERTS_TOPIC,
    MAX_RECORD_BYTES,
    Alert,
    AlertKind,
    Channel,
    Presence,
    Status,
    encode_record,
    topic,
)
from controller.witness.ports import NoFloor, Store
from controller.witness.service import Connection, WitnessService
from controller.witness.store import SqliteStore, StateLock, open_store
from controller.witness.tables import Witness

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 15.0
GAP_S = 60.0
SILENCE_S = 600.0


# --- the logs, made once ---------------------------------------------------------------------


@dataclass(frozen=True)
class TableLog:
    table: str
    lines: list[dict[str, Any]]
    key: Verifier

    @property
    def latest(self) -> str:
        note = self.lines[-1]["checkpoint"]
        assert isinstance(note, str)
        return note

    @property
    def size(self) -> int:
        return len(self.lines)


def _simulate(state_dir: Path, rounds: int, config: Path | None = None) -> None:
    argv = ["simulate", "--fast", "--plain-rounds", "--faults", "none"]
    argv += ["--rounds", str(rounds), "--state-dir", str(state_dir)]
    if config is not None:
        argv += ["--config", str(config)]
    subprocess.run(
        [sys.executable, "-m", "controller", *argv],
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
    )


def _read(table: str, state_dir: Path) -> TableLog:
    from controller.audit.log import load_signer

    signer = load_signer(state_dir)
    assert signer is not None
    return TableLog(table, list(export_lines(state_dir)), signer.verifier)


@dataclass(frozen=True)
class Logs:
    one: TableLog  # table-1: 3 rounds
    early: TableLog  # table-1 as it was after its first round (an older copy of audit.db)
    forked: TableLog  # that older copy, played on (another continuation)
    two: TableLog  # table-2: 2 rounds


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Logs:
    base = tmp_path_factory.mktemp("witness-logs")
    one, early, forked, two = (base / n for n in ("one", "early", "forked", "two"))
    _simulate(one, 1)
    shutil.copytree(one, early)
    _simulate(one, 2)
    shutil.copytree(early, forked)
    _simulate(forked, 1)
    config = base / "table-2.toml"
    config.write_text('[table]\nname = "table-2"\n')
    _simulate(two, 2, config)
    return Logs(
        _read("table-1", one),
        _read("table-1", early),
        _read("table-1", forked),
        _read("table-2", two),
    )


# --- a table, as the fleet publisher sends, and what the witness says ---------------------------


class Client:
    """A paho client on the test broker: publishes (waiting for the broker's PUBACK) and
    collects what arrives on its subscriptions."""

    def __init__(self, b: Broker, *subscriptions: str) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self._cond = threading.Condition()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2)
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.connect("127.0.0.1", b.port)
        self.client.loop_start()
        if subscriptions:
            self.client.subscribe([(s, 1) for s in subscriptions])
            assert subscribed.wait(WAIT_S)

    def _on_message(self, client: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        with self._cond:
            self.messages.append((msg.topic, bytes(msg.payload)))
            self._cond.notify_all()

    def publish(self, name: str, payload: bytes, *, retain: bool = False) -> None:
        info = self.client.publish(name, payload, qos=1, retain=retain)
        info.wait_for_publish(WAIT_S)
        assert info.is_published()

    def send(
        self, log: TableLog, lines: list[dict[str, Any]] | None = None, *, checkpoints: bool = True
    ) -> None:
        """Records in order, each checkpoint a line carries after it (the round's, then the
        latest), as the table's publisher does."""
        for line in log.lines if lines is None else lines:
            self.publish(topic(log.table, Channel.RECORDS), encode_record(line))
            if checkpoints and "checkpoint" in line:
                self.checkpoint(log.table, line["checkpoint"])

    def checkpoint(self, table: str, note: str) -> None:
        self.publish(topic(table, Channel.CHECKPOINT), note.encode(), retain=True)

    def wait_for(self, found: Callable[[list[tuple[str, bytes]]], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while not found(self.messages):
                left = deadline - time.monotonic()
                assert left > 0, f"waited {WAIT_S} s for {what}; got {self.summary()}"
                self._cond.wait(min(left, 0.05))  # also what the witness counts

    def alerts(self) -> list[Alert]:
        with self._cond:
            return [Alert.decode(p) for t, p in self.messages if t == ALERTS_TOPIC]

    def cosigned(self, table: str) -> list[str]:
        name = topic(table, Channel.COSIGNATURE)
        with self._cond:
            return [p.decode() for t, p in self.messages if t == name]

    def summary(self) -> str:
        return "; ".join(f"{t} {p[:80]!r}" for t, p in self.messages[-10:])

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@dataclass
class FakeClock:
    now: float = 1_796_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Running:
    """A witness running in a thread of the test."""

    witness: Witness
    service: WitnessService
    thread: threading.Thread
    stop: threading.Event
    cosigner: Signer
    errors: list[BaseException] = field(default_factory=list)

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        assert not self.errors, self.errors


def start_witness(
    b: Broker,
    store: Store,
    keys: dict[str, Verifier],
    cosigner: Signer,
    clock: FakeClock,
    *,
    partition: bool = False,
) -> Running:
    connection = Connection(
        parse_broker_url(b.url),
        client_id=f"witness-{cosigner.verifier.key_id.hex()}",
        tables=tuple(sorted(keys)) if partition else (),
    )
    service = WitnessService(connection, tick_s=0.05)
    witness = Witness(
        store,
        keys,
        cosigner,
        clock=clock,
        publish=service.publish,
        floor=NoFloor(),
        gap_s=GAP_S,
        silence_s=SILENCE_S,
    )
    stop = threading.Event()
    running = Running(witness, service, threading.Thread(target=lambda: None), stop, cosigner)

    def run() -> None:
        try:
            service.run(witness, stop)
        except BaseException as exc:  # the test reports it
            running.errors.append(exc)

    running.thread = threading.Thread(target=run, daemon=True)
    running.thread.start()
    assert service.connected.wait(WAIT_S)
    return running


@pytest.fixture
def watcher(broker: Broker) -> Iterator[Client]:
    c = Client(broker, f"paigow/v1/+/{Channel.COSIGNATURE}", ALERTS_TOPIC)
    yield c
    c.close()


@pytest.fixture
def table(broker: Broker) -> Iterator[Client]:
    c = Client(broker)
    yield c
    c.close()


@dataclass(frozen=True)
class Env:
    broker: Broker
    logs: Logs
    cosigner: Signer
    watcher: Client
    table: Client
    tmp_path: Path

    def unpack(self) -> tuple[Broker, Logs, Signer, Client, Client, Path]:
        return self.broker, self.logs, self.cosigner, self.watcher, self.table, self.tmp_path


@pytest.fixture
def env(broker: Broker, logs: Logs, watcher: Client, table: Client, tmp_path: Path) -> Env:
    cosigner = Signer.generate("paigow-witness/test", ALG_COSIGNATURE_V1)
    return Env(broker, logs, cosigner, watcher, table, tmp_path)


def keys_of(*logs: TableLog) -> dict[str, Verifier]:
    return {log.table: log.key for log in logs}


def cosigned_size(note: str, cosigner: Signer, log: TableLog) -> int:
    """The size of a cosigned note, once the cosignature and the table's signature verify."""
    cosigned = open_cosignature(note, cosigner.verifier)
    assert open_checkpoint(note, log.key) == cosigned.checkpoint
    return cosigned.checkpoint.size


def wait_cosigned(watcher: Client, cosigner: Signer, log: TableLog, size: int) -> None:
    watcher.wait_for(
        lambda _: any(cosigned_size(n, cosigner, log) == size for n in watcher.cosigned(log.table)),
        f"{log.table} cosigned at {size}",
    )


def wait_alert(watcher: Client, table: str, kind: AlertKind) -> Alert:
    watcher.wait_for(
        lambda _: any(a.table == table and a.kind is kind for a in watcher.alerts()),
        f"a {kind} alert for {table}",
    )
    return next(a for a in watcher.alerts() if a.table == table and a.kind is kind)


# --- the core: valid logs, two tables, duplicates, the store ------------------------------


def check_two_tables(env: Env, store: Store) -> None:
    b, logs, cosigner, watcher, table = env.broker, env.logs, env.cosigner, env.watcher, env.table
    running = start_witness(b, store, keys_of(logs.one, logs.two), cosigner, FakeClock())
    try:
        # interleaved, record by record; table-1's first records twice (a resend)
        one, two = logs.one.lines, logs.two.lines
        for i in range(max(len(one), len(two))):
            for log, lines in ((logs.one, one), (logs.two, two)):
                if i < len(lines):
                    table.send(log, [lines[i]])
        table.send(logs.one, one[:5])
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        wait_cosigned(watcher, cosigner, logs.two, logs.two.size)
        rounds = [line["seq"] for line in one if "checkpoint" in line]
        sizes = sorted(cosigned_size(n, cosigner, logs.one) for n in watcher.cosigned("table-1"))
        assert sizes == rounds  # every checkpoint cosigned, once
        assert watcher.alerts() == []
        # the resent records come after the last checkpoint: they may still be on their way
        duplicates = "table-1/records: duplicate"
        watcher.wait_for(lambda _: running.witness.refused[duplicates] >= 5, "the resend")
        assert running.witness.refused[duplicates] == 5
    finally:
        running.halt()
    heads = store.heads()
    assert (heads["table-1"].size, heads["table-1"].cosigned_size) == (logs.one.size,) * 2
    assert not heads["table-1"].halted
    assert store.leaf("table-2", 1) == logs.two.lines[0]["leaf"].encode()


def test_two_tables_interleaved_are_cosigned_and_duplicates_dropped(env: Env) -> None:
    store = SqliteStore(env.tmp_path / "witness.db")
    try:
        check_two_tables(env, store)
    finally:
        store.close()


# --- rollback and fork ---------------------------------------------------------------------------


def test_an_older_copy_of_the_log_is_a_rollback_and_cosigning_stops(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one, logs.two), cosigner, FakeClock())
    try:
        table.send(logs.one)
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        before = len(watcher.cosigned("table-1"))
        # audit.db replaced by the copy made after the first round: its publisher starts again
        # from record 1 (the same records: duplicates) and its checkpoint is smaller
        table.send(logs.early)
        alert = wait_alert(watcher, "table-1", AlertKind.ROLLBACK)
        assert alert.size <= logs.early.size < logs.one.size
        assert "cut back" in alert.detail
        # the other table goes on being cosigned; table-1 is not, whatever it sends
        table.send(logs.two)
        wait_cosigned(watcher, cosigner, logs.two, logs.two.size)
        table.send(logs.one)
        table.send(logs.two, logs.two.lines[:1])  # a marker after table-1's resend
        watcher.wait_for(lambda _: running.witness.refused["table-2/records: duplicate"] > 0, "it")
        assert len(watcher.cosigned("table-1")) == before
        assert [a.kind for a in watcher.alerts()] == [AlertKind.ROLLBACK]
    finally:
        running.halt()
    assert store.heads()["table-1"].halted.startswith("rollback")
    assert [a.kind for a in store.alerts("table-1")] == [AlertKind.ROLLBACK]
    # the operator's reset: the alert stays, the table is taken as new
    with store.transaction():
        store.reset_table("table-1", "2026-12-01T10:00:00Z", "test")
    assert "table-1" not in store.heads()
    assert [a.kind for a in store.alerts("table-1")] == [AlertKind.ROLLBACK]
    running = start_witness(broker, store, keys_of(logs.one, logs.two), cosigner, FakeClock())
    try:
        table.send(logs.forked)
        wait_cosigned(watcher, cosigner, logs.forked, logs.forked.size)
    finally:
        running.halt()
        store.close()


def test_witnesses_that_split_the_tables_each_cosign_their_own(env: Env) -> None:
    """--partition: each witness subscribes to its own tables' topics (README, "How far one
    witness goes"); neither hears the other's tables nor alerts on them."""
    broker, logs, _, watcher, table, tmp_path = env.unpack()
    cosigners = [Signer.generate(f"witness.test/w{i}", ALG_COSIGNATURE_V1) for i in (1, 2)]
    stores = [SqliteStore(tmp_path / f"w{i}.db") for i in (1, 2)]
    running = [
        start_witness(broker, store, keys_of(log), cosigner, FakeClock(), partition=True)
        for store, log, cosigner in zip(stores, (logs.one, logs.two), cosigners, strict=True)
    ]
    try:
        table.send(logs.one)
        table.send(logs.two)
        wait_cosigned(watcher, cosigners[0], logs.one, logs.one.size)
        wait_cosigned(watcher, cosigners[1], logs.two, logs.two.size)
        assert watcher.alerts() == []
    finally:
        for r in running:
            r.halt()
    assert set(stores[0].heads()) == {"table-1"}
    assert set(stores[1].heads()) == {"table-2"}
    for store in stores:
        store.close()


def test_an_older_copy_played_on_is_a_rollback_a_record_off_the_chain_a_fork(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one, logs.two), cosigner, FakeClock())
    try:
        table.send(logs.one)
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        table.send(logs.two)
        wait_cosigned(watcher, cosigner, logs.two, logs.two.size)
        # table-1's log went back to the copy made after its first round and went on: its
        # record 16 follows the cosigned record 15 but is another
        table.send(logs.forked, checkpoints=False)  # its records alone: they differ at 16
        alert = wait_alert(watcher, "table-1", AlertKind.ROLLBACK)
        assert alert.size == logs.early.size + 1  # the first record that differs
        assert "went back to record" in alert.detail
        # a record of table-2 that follows nothing table-2 holds at its seq: a fork
        foreign = next(line for line in logs.one.lines if line["seq"] == 5)
        table.send(logs.two, [foreign])
        fork = wait_alert(watcher, "table-2", AlertKind.FORK)
        assert fork.size == 5
        assert all(
            cosigned_size(n, cosigner, logs.one) <= logs.one.size
            for n in watcher.cosigned("table-1")
        )
    finally:
        running.halt()
        store.close()


# --- a bad record, a bad signature, a gap, silence ---------------------------------------------


def test_altered_record_bad_signature_gap_and_silence(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    clock = FakeClock()
    running = start_witness(broker, store, keys_of(logs.one, logs.two), cosigner, clock)
    lines = logs.one.lines
    try:
        # a record altered in transit: its data changed, its leaf (the signed record) not
        altered = copy.deepcopy(lines[2])
        altered["data"]["game"] = "poker"
        table.send(logs.one, lines[:2])
        table.publish(topic("table-1", Channel.RECORDS), encode_record(altered))
        assert "leaf" in wait_alert(watcher, "table-1", AlertKind.BAD_RECORD).detail
        # the records after it wait for it; after the gap time, a GAP
        table.send(logs.one, lines[3:])
        clock.now += GAP_S - 1
        table.send(logs.two, logs.two.lines[:1])  # something to wait for: the witness ticked
        wait_cosigned_or_nothing = len(watcher.alerts())
        clock.now += 2
        gap = wait_alert(watcher, "table-1", AlertKind.GAP)
        assert gap.size == 3
        assert len(watcher.alerts()) == wait_cosigned_or_nothing + 1
        # the record itself comes: the gap is filled and everything is cosigned
        table.send(logs.one, lines[2:3])
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        # a checkpoint signed by another key for this table's origin
        impostor = Signer.generate(origin_for("table-1"))
        forged = sign_checkpoint(Checkpoint(origin_for("table-1"), 3, bytes(32)), impostor)
        table.checkpoint("table-1", forged)
        wait_alert(watcher, "table-1", AlertKind.BAD_SIGNATURE)
        # table-2 sent one record long ago; table-1 keeps talking
        clock.now += SILENCE_S
        table.publish(topic("table-1", Channel.STATUS), Status(Presence.ONLINE, "ready").encode())
        silence = wait_alert(watcher, "table-2", AlertKind.SILENCE)
        assert "nothing from the table" in silence.detail
        assert not any(
            a.kind is AlertKind.SILENCE and a.table == "table-1" for a in watcher.alerts()
        )
    finally:
        running.halt()
    kinds = [a.kind for a in store.alerts()]
    assert kinds.count(AlertKind.GAP) == 1
    assert {AlertKind.BAD_RECORD, AlertKind.BAD_SIGNATURE, AlertKind.SILENCE} <= set(kinds)
    assert not store.heads()["table-1"].halted  # these alerts do not stop the cosigning
    store.close()


# --- restart, garbage ----------------------------------------------------------------------------


def test_a_restarted_witness_goes_on_from_where_it_was(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    lines = logs.one.lines
    half = next(i for i, line in enumerate(lines) if "checkpoint" in line) + 1
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    table.send(logs.one, lines[:half])
    wait_cosigned(watcher, cosigner, logs.one, half)
    running.halt()
    store.close()
    table.send(logs.one, lines[half:])  # the broker keeps them for the witness's session
    store = SqliteStore(tmp_path / "witness.db")
    assert store.heads()["table-1"].size == half
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    try:
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
    finally:
        running.halt()
    sizes = [s for (s,) in store._rows("SELECT size FROM cosignatures ORDER BY size")]
    assert sizes == [line["seq"] for line in lines if "checkpoint" in line]
    assert watcher.alerts() == []
    store.close()


def test_garbage_on_every_topic_is_refused_and_counted(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    try:
        garbage = [b"", b"\xff\xfe", b"[" * 100_000, b"{}", b'{"seq": 1}', b"x" * 5000]
        for channel in (Channel.RECORDS, Channel.CHECKPOINT, Channel.STATUS):
            for payload in garbage:
                table.publish(topic("table-1", channel), payload)
        table.publish(topic("table-1", Channel.RECORDS), b"{" + b" " * MAX_RECORD_BYTES + b"}")
        table.publish(topic("table-1", Channel.RECORDS), b" " * (3 << 20))  # the broker drops it
        table.publish(topic("table-9", Channel.COSIGNATURE), b"not the witness's")
        for _ in range(2):
            table.publish(topic("table-9", Channel.RECORDS), encode_record(logs.two.lines[0]))
        table.send(logs.one)
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        refused = running.witness.refused
        assert refused["table-1: bad_record"] == len(garbage) + 1
        assert refused["table-1: bad_signature"] == len(garbage)
        assert refused["table-1/status: refused"] == len(garbage)
        assert refused["table-9: unknown table"] == 2
        unknown = [a for a in watcher.alerts() if a.kind is AlertKind.UNKNOWN_TABLE]
        assert [a.table for a in unknown] == ["table-9"]
    finally:
        running.halt()
        store.close()


# --- PostgreSQL --------------------------------------------------------------------------------

PG_BIN = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def postgres() -> Iterator[str]:
    """A PostgreSQL cluster of its own, in a directory owned by the postgres user (it refuses
    to run as root), on a unix socket there and a free port; stopped at the end."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL 15 is not installed")
    # pytest's own directories are root's alone (0700): the cluster gets one of its own
    base = Path(tempfile.mkdtemp(prefix="witness-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(base, user.pw_uid, user.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    data, port = base / "data", free_port()
    run = lambda *argv: subprocess.run(  # noqa: E731
        [*as_postgres, *argv], check=True, capture_output=True, timeout=120
    )
    run(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    options = f"-k {base} -p {port} -c listen_addresses=''"
    run(
        str(PG_BIN / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-w",
        "-l",
        str(base / "log"),
        "start",
    )
    try:
        yield f"postgresql://postgres@/postgres?host={base}&port={port}"
    finally:
        run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_the_postgresql_store(env: Env, postgres: str) -> None:
    tmp_path, logs = env.tmp_path, env.logs
    store = open_store(tmp_path, postgres)
    try:
        check_two_tables(env, store)
        with store.transaction():
            store.reset_table("table-2", "2026-12-01T10:00:00Z", "test")
        assert set(store.heads()) == {"table-1"}
    finally:
        store.close()
    again = open_store(tmp_path, postgres)  # what it holds outlives the connection
    try:
        assert again.heads()["table-1"].cosigned_size == logs.one.size
    finally:
        again.close()


# --- the command line ----------------------------------------------------------------------


def cli(*argv: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_the_commands(broker: Broker, logs: Logs, tmp_path: Path, watcher: Client) -> None:
    state, keys = tmp_path / "w", tmp_path / "keys"
    keys.mkdir()
    (keys / "table-1.pub").write_text(f"{logs.one.key}\n")
    (keys / "README").write_text("not a key")
    out, err = cli("witness-key", "--state-dir", str(state)).communicate(timeout=60)
    witness_key = Verifier.parse(out.strip(), ALG_COSIGNATURE_V1)
    assert oct((state / "witness.key").stat().st_mode & 0o777) == "0o600"
    again, _ = cli("witness-key", "--state-dir", str(state)).communicate(timeout=60)
    assert again == out  # never replaced

    argv = ["witness", "--mqtt-url", broker.url, "--state-dir", str(state), "--keys", str(keys)]
    proc = cli(*argv, "--dashboard", "off")
    try:
        publisher = Client(broker)
        # a retained status of a table it has no key for: its alert says it has subscribed
        publisher.publish(
            topic("table-9", Channel.STATUS), Status(Presence.ONLINE).encode(), retain=True
        )
        wait_alert(watcher, "table-9", AlertKind.UNKNOWN_TABLE)
        publisher.send(logs.one)
        watcher.wait_for(
            lambda _: any(
                open_cosignature(n, witness_key).checkpoint.size == logs.one.size
                for n in watcher.cosigned("table-1")
            ),
            "the command's cosignature",
        )
        publisher.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    # a second reset prints what it forgot
    reset = cli("witness", "--state-dir", str(state), "--reset-table", "table-1")
    out, err = reset.communicate(timeout=60)
    assert reset.returncode == 0, err
    assert json.loads(out)["records_forgotten"] == logs.one.size

    (keys / "table-2.pub").write_text("paigow-controller/table-2+00000000+AAAA\n")
    bad = cli(*argv)
    _, err = bad.communicate(timeout=60)
    assert bad.returncode == 78
    assert str(keys / "table-2.pub") in err
    assert err.count("\n") == 1
    (keys / "table-2.pub").write_text(f"{logs.one.key}\n")  # table-1's key for table-2
    bad = cli(*argv)
    _, err = bad.communicate(timeout=60)
    assert (bad.returncode, "not of 'paigow-controller/table-2'" in err) == (78, True)
    for wrong in (["--mqtt-url", "http://x"], ["--gap-s", "0"], ["--db", "mysql://x"]):
        proc = cli(*argv, *wrong)
        _, err = proc.communicate(timeout=60)
        assert (proc.returncode, err.count("\n")) == (2, 1), (wrong, err)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_analyze_verifies_the_witness_unit(tmp_path: Path) -> None:
    """As scripts/check-systemd-unit does for the controller's unit: verify checks that the
    executable exists, so the copy points at one that does here; no warnings, and an exposure
    of at most 2.0."""
    unit = ROOT / "systemd" / "paigow-witness.service"
    text = unit.read_text()
    installed = "/opt/paigow-controller/current/venv/bin/paigow-controller"
    assert f"ExecStart={installed} witness " in text
    copy = tmp_path / unit.name
    copy.write_text(text.replace(installed, str(shutil.which("true"))))
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, "")
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    level = security.stdout.rsplit("Overall exposure level for", 1)[-1].split(":")[1].split()[0]
    assert float(level) <= 2.0, security.stdout


def test_one_witness_per_state_directory(tmp_path: Path) -> None:
    """Two witnesses on one store would cosign twice and fight over it: the second is refused,
    naming the first; the lock goes with the process that held it."""
    first = StateLock(tmp_path)
    try:
        with pytest.raises(InstanceLocked, match=rf"another witness \(PID {os.getpid()}\)"):
            StateLock(tmp_path)
        keys = tmp_path / "keys"
        keys.mkdir()
        argv = ["witness", "--mqtt-url", "mqtt://127.0.0.1:1", "--state-dir", str(tmp_path)]
        second = cli(*argv, "--keys", str(keys), "--dashboard", "off")
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1
        assert out == ""
        assert err.count("\n") == 1
        assert f"another witness (PID {os.getpid()})" in err
    finally:
        first.release()
    StateLock(tmp_path).release()  # free again
