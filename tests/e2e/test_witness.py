"""The witness (controller/witness) on a real mosquitto: real logs made by ``simulate``, sent as
the tables send them (export lines, the signed checkpoints, signed statuses), verified and
cosigned; what an anonymous client of the broker sends (a replayed checkpoint, a re-numbered
record, a forged status) and what a restarted broker hands back (its out-of-date retained
checkpoint) is stale or dropped, never an alert; a real fork and an older copy played on are
alerted as such; a gap outlives a witness restart; an alert is acknowledged on the dashboard.
The witness's clock is injected: the gap and silence timers move when the test moves them,
never with the wall clock. (tests/app/test_witness_rules.py feeds the same rules without a
broker.)"""

from __future__ import annotations

import functools
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
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from support.fleet_broker import Broker, free_port
from support.witness import (
    GAP_S,
    ROOT,
    SILENCE_S,
    FakeClock,
    Logs,
    TableLog,
    keys_of,
    make_logs,
    status_note,
)

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
    open_alert,
    topic,
)
from controller.witness.dashboard import DashboardServer
from controller.witness.floor import Floor
from controller.witness.ports import NoFloor, Store
from controller.witness.service import Connection, WitnessService
from controller.witness.store import SqliteStore, StateLock, open_store
from controller.witness.tables import Witness

WAIT_S = 120.0  # a bound on every wait (a loaded machine is slow, never wrong)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Logs:
    return make_logs(tmp_path_factory.mktemp("witness-logs"))


# --- a table, as the fleet publisher sends, and what the witness says ---------------------------


class Client:
    """A paho client on the test broker: publishes (waiting for the broker's PUBACK) and
    collects what arrives on its subscriptions."""

    alert_key: Verifier = Signer.generate("nobody").verifier

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

    def alerts(self, key: Verifier | None = None) -> list[Alert]:
        """The alerts published, each opened with the witness's alert key (every one the
        witness publishes is signed: ``open_alert`` raises for any other)."""
        with self._cond:
            found = [p for t, p in self.messages if t == ALERTS_TOPIC]
        return [open_alert(p, key or self.alert_key) for p in found]

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


ALERT_KEY = Signer.generate("paigow-witness/test")


def start_witness(
    b: Broker,
    store: Store,
    keys: dict[str, Verifier],
    cosigner: Signer,
    clock: FakeClock,
    *,
    partition: bool = False,
    floor: Floor | None = None,
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
        alert_key=ALERT_KEY,
        clock=clock,
        publish=service.publish,
        floor=NoFloor() if floor is None else floor,
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
    c.alert_key = ALERT_KEY.verifier
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


# --- stale checkpoints, forged records and statuses: counted, never an alert ------------------


def test_a_replayed_checkpoint_an_older_copy_and_a_forged_status_are_no_alert(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    try:
        table.send(logs.one)
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        refused = running.witness.refused
        # anyone on the broker replays the first checkpoint; the table's older copy is put back
        # (its records are the cosigned ones, its checkpoints older): stale
        table.checkpoint("table-1", logs.one.checkpoints()[0][1])
        table.send(logs.early)
        forged = status_note(logs.one, 9, 1, signer=Signer.generate(logs.one.key.name))
        table.publish(topic("table-1", Channel.STATUS), forged, retain=True)
        table.publish(topic("table-1", Channel.STATUS), status_note(logs.one, 1, 1))
        table.publish(topic("table-1", Channel.STATUS), status_note(logs.one, 0, 7))  # older
        watcher.wait_for(lambda _: refused["table-1/status: stale"] == 1, "the older status")
        assert refused["table-1/status: refused"] == 1
        assert refused["table-1/checkpoint: stale"] >= len(logs.one.checkpoints()) + 1
        assert watcher.alerts() == []
    finally:
        running.halt()
    assert not store.heads()["table-1"].halted
    assert store.heads()["table-1"].status_order == (1, 1)
    store.close()


def test_a_restarted_brokers_out_of_date_retained_checkpoint_is_stale(env: Env) -> None:
    """The broker crashes and comes back with its persistence of a while ago: it hands the
    witness the retained checkpoint it kept then, older than the one cosigned."""
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    first = logs.one.checkpoints()[0][0]
    try:
        table.send(logs.one, logs.one.lines[:first])
        wait_cosigned(watcher, cosigner, logs.one, first)
        table.close()
        watcher.close()
        broker.stop()  # saves its persistence: the retained checkpoint of the first round
        saved = broker.directory / "mosquitto.db.then"
        shutil.copy2(broker.directory / "mosquitto.db", saved)
        broker.start()
        again = Client(broker)
        again.send(logs.one, logs.one.lines[first:])
        stale = running.witness.refused
        again.wait_for(
            lambda _: (
                store is not None and running.witness.tables["table-1"].head.size == logs.one.size
            ),
            "the whole log cosigned",
        )
        again.close()
        broker.kill()
        shutil.copy2(saved, broker.directory / "mosquitto.db")
        before = stale["table-1/checkpoint: stale"]
        broker.start()  # the witness reconnects, subscribes, gets the old retained one
        late = Client(broker, f"paigow/v1/+/{Channel.COSIGNATURE}", ALERTS_TOPIC)
        late.alert_key = ALERT_KEY.verifier
        late.wait_for(lambda _: stale["table-1/checkpoint: stale"] > before, "the old one")
        assert late.alerts() == []
        late.close()
    finally:
        running.halt()
    head = store.heads()["table-1"]
    assert (head.cosigned_size, head.halted) == (logs.one.size, "")
    store.close()


def test_a_renumbered_record_published_anonymously_is_dropped(env: Env) -> None:
    from support.witness import renumbered

    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    first = logs.one.checkpoints()[0][0]
    try:
        table.send(logs.one, logs.one.lines[:first])
        wait_cosigned(watcher, cosigner, logs.one, first)
        anonymous = Client(broker)
        anonymous.send(logs.one, [renumbered(logs.one.lines[first - 1], logs.one.lines[3])])
        anonymous.close()
        table.send(logs.one, logs.one.lines[first:])
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        assert running.witness.refused["table-1: unconfirmed records dropped"] == 1
        assert watcher.alerts() == []
    finally:
        running.halt()
    assert store.leaf("table-1", first + 1) == logs.one.lines[first]["leaf"].encode()
    store.close()


# --- rollback and fork ---------------------------------------------------------------------------


def test_an_older_copy_played_on_is_a_rollback_and_cosigning_stops(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one, logs.two), cosigner, FakeClock())
    try:
        table.send(logs.one)
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        before = len(watcher.cosigned("table-1"))
        # audit.db replaced by the copy made after the first round, played on: its records
        # alone are candidates (no alert); its first checkpoint is evidence
        table.send(logs.forked, logs.forked.without_checkpoints())
        table.send(logs.two)
        wait_cosigned(watcher, cosigner, logs.two, logs.two.size)
        assert watcher.alerts() == []
        table.send(logs.forked)
        alert = wait_alert(watcher, "table-1", AlertKind.ROLLBACK)
        assert alert.size == logs.early.size + 1  # the first record that differs
        assert "older copy" in alert.detail
        # the other table goes on being cosigned; table-1 is not, whatever it sends
        table.send(logs.one)
        table.send(logs.two, logs.two.lines[:1])  # a marker after table-1's resend
        watcher.wait_for(lambda _: running.witness.refused["table-2/records: duplicate"] > 0, "it")
        assert len(watcher.cosigned("table-1")) == before
        assert [a.kind for a in watcher.alerts()] == [AlertKind.ROLLBACK]
    finally:
        running.halt()
    assert store.heads()["table-1"].halted.startswith("rollback")
    assert [a.alert.kind for a in store.alerts("table-1")] == [AlertKind.ROLLBACK]
    # the operator's reset: the alert stays, the table is taken as new
    with store.transaction():
        store.reset_table("table-1", "2026-12-01T10:00:00Z", "test")
    assert store.heads()["table-1"].size == 0
    assert [a.alert.kind for a in store.alerts("table-1")] == [AlertKind.ROLLBACK]
    running = start_witness(broker, store, keys_of(logs.one, logs.two), cosigner, FakeClock())
    try:
        table.send(logs.forked)
        wait_cosigned(watcher, cosigner, logs.forked, logs.forked.size)
    finally:
        running.halt()
        store.close()


def test_two_copies_of_a_log_diverging_at_the_head_are_a_fork(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    try:
        table.send(logs.one)
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        table.send(logs.parallel)  # the other copy, played while this one played too
        fork = wait_alert(watcher, "table-1", AlertKind.FORK)
        assert fork.size == logs.early.size + 1
        assert "two copies" in fork.detail
    finally:
        running.halt()
    assert store.heads()["table-1"].halted.startswith("fork")
    store.close()


def test_witnesses_that_split_the_tables_each_cosign_their_own(env: Env) -> None:
    """--partition: each witness subscribes to its own tables' topics (docs/casino-it.md, "How far
    one witness goes"); neither hears the other's tables nor alerts on them."""
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


# --- a bad signature, a gap, silence -----------------------------------------------------------


def test_an_altered_record_a_bad_signature_a_gap_and_silence(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    clock = FakeClock()
    running = start_witness(broker, store, keys_of(logs.one, logs.two), cosigner, clock)
    lines = logs.one.lines
    refused = running.witness.refused
    try:
        # a record altered in transit: its data changed, its leaf (the record) not: refused
        altered = json.loads(json.dumps(lines[2]))
        altered["data"]["game"] = "poker"
        table.send(logs.one, lines[:2])
        table.publish(topic("table-1", Channel.RECORDS), encode_record(altered))
        # the records after it wait, and their checkpoints: after the gap time, a GAP
        table.send(logs.one, lines[3:])
        # the clock moves only once the witness holds the newest checkpoint waiting: moved
        # while a loaded witness is still taking the records after the refused one, the wait
        # would start at the moved time and the GAP never come within the test's moves
        one = running.witness.tables["table-1"]
        watcher.wait_for(
            lambda _: (
                refused["table-1/records: refused"] == 1
                and one.head.pending_note == logs.one.latest
            ),
            "the refusal and the newest checkpoint waiting",
        )
        assert one.head.pending_since == clock.now  # the gap's wait starts now
        clock.now += GAP_S - 1
        table.send(logs.two, logs.two.lines[:1])  # something to wait for: the witness ticked
        watcher.wait_for(
            lambda _: len(running.witness.tables["table-2"].candidates) == 1, "table-2's record"
        )
        assert watcher.alerts() == []
        clock.now += 2
        gap = wait_alert(watcher, "table-1", AlertKind.GAP)
        assert gap.size == logs.one.size  # the newest checkpoint waits
        # the record itself comes: the gap is filled and everything is cosigned
        table.send(logs.one, lines[2:3])
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        # a checkpoint signed by another key for this table's origin
        impostor = Signer.generate(logs.one.key.name)
        forged = sign_checkpoint(Checkpoint(logs.one.key.name, 3, bytes(32)), impostor)
        table.checkpoint("table-1", forged)
        wait_alert(watcher, "table-1", AlertKind.BAD_SIGNATURE)
        # table-2 never had a checkpoint accepted: heard last at the witness's start; table-1
        # says it is online (a signed status) just before the silence time
        clock.now = running.witness.tables["table-2"].head.last_heard + SILENCE_S - 1
        table.publish(topic("table-1", Channel.STATUS), status_note(logs.one, 1, 1))
        watcher.wait_for(
            lambda _: running.witness.tables["table-1"].head.status_order == (1, 1), "the status"
        )
        clock.now += 1
        silence = wait_alert(watcher, "table-2", AlertKind.SILENCE)
        assert "nothing signed from table-2" in silence.detail
        assert not any(
            a.kind is AlertKind.SILENCE and a.table == "table-1" for a in watcher.alerts()
        )
    finally:
        running.halt()
    kinds = [a.alert.kind for a in store.alerts()]
    assert kinds.count(AlertKind.GAP) == 1
    assert {AlertKind.BAD_SIGNATURE, AlertKind.SILENCE} <= set(kinds)
    assert AlertKind.BAD_RECORD not in kinds  # an unsigned line is no alert
    assert not store.heads()["table-1"].halted  # these alerts do not stop the cosigning
    store.close()


# --- restarts: nothing lost ---------------------------------------------------------------------


def test_a_restarted_witness_goes_on_from_where_it_was(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    lines = logs.one.lines
    half = logs.one.checkpoints()[0][0]
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
    assert sizes == [seq for seq, _ in logs.one.checkpoints()]
    assert watcher.alerts() == []
    store.close()


def test_records_past_a_gap_outlive_a_witness_restart(env: Env) -> None:
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    lines = logs.one.lines
    first = logs.one.checkpoints()[0][0]
    store = SqliteStore(tmp_path / "witness.db")
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    try:
        table.send(logs.one, [line for line in lines if line["seq"] != first + 1])
        watcher.wait_for(
            lambda _: running.witness.tables["table-1"].head.pending_note == logs.one.latest,
            "the newest checkpoint waiting",
        )
        wait_cosigned(watcher, cosigner, logs.one, first)
    finally:
        running.halt()
    store.close()
    store = SqliteStore(tmp_path / "witness.db")  # acknowledged to the broker: only here now
    assert len(store.candidates()["table-1"]) == logs.one.size - first - 1
    running = start_witness(broker, store, keys_of(logs.one), cosigner, FakeClock())
    try:
        table.send(logs.one, [lines[first]])  # the table sends the missing one again
        wait_cosigned(watcher, cosigner, logs.one, logs.one.size)
        assert watcher.alerts() == []
    finally:
        running.halt()
    assert store.candidates() == {}
    store.close()


def test_an_alert_is_acknowledged_on_the_dashboard_and_the_page_says_who(env: Env) -> None:
    """POST /alerts/<id>/ack from the loopback: the witness records who and when (its control
    thread, its store), the dashboard shows it, and a restarted witness's dashboard too."""
    broker, logs, cosigner, watcher, table, tmp_path = env.unpack()
    store = SqliteStore(tmp_path / "witness.db")
    clock = FakeClock()
    floor = Floor(clock=clock)
    running = start_witness(broker, store, keys_of(logs.one), cosigner, clock, floor=floor)
    # the witness answers a user within ACK_TIMEOUT_S (5 s) or the page says 503, busy: a
    # loaded machine's control thread may take longer, so the test's bound is its own
    acknowledge = functools.partial(running.service.acknowledge, timeout_s=WAIT_S)
    dashboard = DashboardServer(
        floor, "127.0.0.1", 0, acknowledge=acknowledge, heartbeat_s=0.2
    ).start()
    try:
        table.send(logs.one)
        table.send(logs.parallel)
        fork = wait_alert(watcher, "table-1", AlertKind.FORK)
        (stored,) = store.alerts("table-1")
        url = f"{dashboard.url}alerts/{stored.id}/ack"
        answer = _post(url, {"user": "S100 Pat"})
        assert (answer["acked_by"], answer["kind"]) == ("S100 Pat", "fork")
        with pytest.raises(urllib.error.HTTPError) as again:
            _post(url, {"user": "S200"})
        assert again.value.code == 409
        assert json.loads(again.value.read())["acked_by"] == "S100 Pat"
        shown = floor.snapshot()
        closed = [a for a in shown["closed"] if a["id"] == stored.id]
        assert closed[0]["acked_by"] == "S100 Pat"
        assert shown["alerts"] == []
        assert fork.detail == stored.alert.detail
    finally:
        dashboard.close()
        running.halt()
    assert store.alerts("table-1")[0].acked_by == "S100 Pat"
    again_floor = Floor(clock=clock)
    restarted = start_witness(broker, store, keys_of(logs.one), cosigner, clock, floor=again_floor)
    try:
        view = again_floor.table("table-1")
        assert view is not None
        assert view["log_size"] == logs.one.size
        assert again_floor.snapshot()["closed"][0]["acked_by"] == "S100 Pat"
    finally:
        restarted.halt()
        store.close()


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as answer:
        result: dict[str, Any] = json.loads(answer.read())
        return result


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
        assert refused["table-1/records: refused"] == len(garbage) + 1
        assert refused["table-1: bad_signature"] == len(garbage)
        assert refused["table-1/status: refused"] == len(garbage)
        assert refused["table-9: unknown table"] == 2
        kinds = [(a.table, a.kind) for a in watcher.alerts()]
        assert kinds == [("table-1", AlertKind.BAD_SIGNATURE), ("table-9", AlertKind.UNKNOWN_TABLE)]
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
        assert store.heads()["table-2"].size == 0
        assert store.candidates() == {}
    finally:
        store.close()
    again = open_store(tmp_path, postgres)  # what it holds outlives the connection
    try:
        assert again.heads()["table-1"].cosigned_size == logs.one.size
    finally:
        again.close()


@pytest.mark.slow
def test_a_postgresql_store_of_schema_1_is_migrated(env: Env, postgres: str) -> None:
    """As tests/app/test_witness_rules.py's SQLite one: the records a schema 1 witness held past
    its cosigned checkpoint go back to candidates, and the next checkpoint takes them."""
    import psycopg
    from support.witness import SCHEMA_1

    log = env.logs.one
    first = log.checkpoints()[0][0]
    with psycopg.connect(postgres, autocommit=True) as db:
        for statement in SCHEMA_1.replace("BLOB", "BYTEA").split(";"):
            if statement.strip():
                db.execute(statement.replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY"))
        from controller.core.merkle import CompactRange, leaf_hash
        from controller.core.note import cosign_note, unverified_checkpoint

        tree = CompactRange()
        for line in log.lines[: first + 2]:
            tree.append_hash(leaf_hash(line["leaf"].encode()))
            db.execute(
                "INSERT INTO leaves VALUES (%s, %s, %s, %s, %s)",
                ("table-1", line["seq"], line["kind"], line["leaf"].encode(), tree.root()),
            )
        note = log.lines[first - 1]["checkpoint"]
        db.execute(
            "INSERT INTO heads VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            ("table-1", first + 2, log.lines[first + 1]["hash"], tree.to_bytes(), first,
             unverified_checkpoint(note).root_hash, cosign_note(note, env.cosigner, 1), ""),
        )  # fmt: skip
        db.execute(
            "INSERT INTO alerts (table_name, kind, detail, time, size) VALUES (%s, %s, %s, %s, %s)",
            ("table-1", "gap", "then", "2026-11-30T08:00:00.000Z", 1),
        )
    store = open_store(env.tmp_path, postgres)
    try:
        assert store.alerts()[0].cleared  # a gap of schema 1: cleared at the migration
        running = start_witness(env.broker, store, keys_of(log), env.cosigner, FakeClock())
        try:
            assert store.heads()["table-1"].size == first
            assert len(store.candidates()["table-1"]) == 2
            env.table.send(log, log.lines[first + 2 :])
            wait_cosigned(env.watcher, env.cosigner, log, log.size)
        finally:
            running.halt()
    finally:
        store.close()


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
    cosigner_line, alert_line = out.splitlines()
    witness_key = Verifier.parse(cosigner_line, ALG_COSIGNATURE_V1)
    watcher.alert_key = Verifier.parse(alert_line)  # Ed25519, the cosigner key's name
    assert watcher.alert_key.name == witness_key.name
    assert oct((state / "witness.key").stat().st_mode & 0o777) == "0o600"
    assert oct((state / "alerts.key").stat().st_mode & 0o777) == "0o600"
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
    assert (bad.returncode, "is the key of table-1 too" in err) == (78, True), err
    (keys / "table-2.pub").unlink()
    token = tmp_path / "ack.token"
    token.write_text("a-token-of-twenty-chars\n")
    token.chmod(0o644)  # others may read it: refused, naming the option
    bad = cli(*argv, "--ack-token-file", str(token))
    _, err = bad.communicate(timeout=60)
    assert (bad.returncode, "--ack-token-file" in err) == (78, True), err
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
