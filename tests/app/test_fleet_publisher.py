"""The fleet publisher (controller/fleet/publisher.py) against a real mosquitto: every record
arrives, in order and without a gap, whatever the broker or the controller did meanwhile; the
retained checkpoint and the signed status, ordered by the table's connection and its seq; the
witness's cosignatures checked, shown and recorded once per round close, and the cursor they
make: records a broker acknowledged and lost are sent again from the witness's cosignature;
a cosignature that proves the log was longer is rollback evidence, once; a hung broker never
holds up the table."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from support.fleet_broker import Broker, make_tls
from support.records import valid

from controller.app.loop import EventQueue
from controller.audit.log import AuditLog, load_signer
from controller.audit.recall import export_lines
from controller.core.config import FleetConfig
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    Signer,
    checkpoint_size,
    cosign_note,
    open_checkpoint,
    open_cosignature,
    sign_checkpoint,
)
from controller.core.records import RecordKind
from controller.core.state import Event
from controller.fleet.client import FleetError, read_credentials
from controller.fleet.outbox import (
    CONNECTION_FILE,
    CURSOR_FILE,
    Cursor,
    read_connection,
    read_cursor,
    write_cursor,
)
from controller.fleet.protocol import (
    END_OF_CONNECTION,
    Presence,
    SignedStatus,
    StatusSigner,
    open_status,
)
from controller.fleet.publisher import Publisher
from controller.fleet.resend import RESEND_AFTER_S

TABLE = "t1"
ORIGIN = "casino.test/paigow/t1"  # the log's origin: the publisher never assumes one
ROOT = Path(__file__).resolve().parents[2]
# How long a wait for the broker, the publisher or the floor may take before the test fails: a
# bound on liveness, not a measure of speed. Past a reconnection's back-off (at most
# RECONNECT_MAX_S) with room for a machine under full load; a wait ends as soon as its event comes.
WAIT_S = 120.0


class Subscriber:
    """A floor system on the broker: a persistent session (QoS 1 kept while it is away), every
    record's seq in arrival order, duplicates dropped by seq, any gap noted."""

    def __init__(self, broker: Broker, *, client_id: str = "floor", clean: bool = False) -> None:
        self.seqs: list[int] = []  # accepted, in order
        self.lines: dict[int, dict[str, Any]] = {}
        self.duplicates = 0
        self.gaps: list[tuple[int, int]] = []
        self.retained: dict[str, bytes] = {}
        self.latest: dict[str, bytes] = {}
        self.statuses: list[bytes] = []  # every status, as it came
        self.checkpoint_sizes: list[int | None] = []  # every checkpoint, as it came
        self.subscribed = False
        self._cond = threading.Condition()
        self.client = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=clean,
        )
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe
        self.client.reconnect_delay_set(0.05, 0.2)
        self.client.connect_async("127.0.0.1", broker.port, keepalive=5)
        self.client.loop_start()

    def _on_connect(self, client: mqtt.Client, *_: Any) -> None:
        client.subscribe(f"paigow/v1/{TABLE}/#", qos=1)

    def _on_subscribe(self, *_: Any) -> None:
        with self._cond:
            self.subscribed = True
            self._cond.notify_all()

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        channel = message.topic.rsplit("/", 1)[-1]
        with self._cond:
            self.latest[channel] = bytes(message.payload)
            if message.retain:
                self.retained[channel] = bytes(message.payload)
            if channel == "checkpoint":
                self.checkpoint_sizes.append(checkpoint_size(message.payload.decode()))
            if channel == "status":
                self.statuses.append(bytes(message.payload))
            if channel == "records":
                line = json.loads(message.payload)
                seq = line["seq"]
                last = self.seqs[-1] if self.seqs else 0
                if seq <= last:
                    self.duplicates += 1
                else:
                    if seq != last + 1:
                        self.gaps.append((last, seq))
                    self.seqs.append(seq)
                    self.lines[seq] = line
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = WAIT_S) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def wait_records(self, count: int, timeout: float = WAIT_S) -> None:
        arrived = self.wait_for(lambda: bool(self.seqs) and self.seqs[-1] >= count, timeout)
        assert arrived, f"{self.seqs[-1:] or 'none'} of {count} records arrived"
        assert self.gaps == [], self.gaps
        assert self.seqs == list(range(1, len(self.seqs) + 1))

    def checkpoint_of(self, size: int) -> str:
        """The checkpoint of ``size`` records, once it came."""
        came = self.wait_for(
            lambda: checkpoint_size(self.latest.get("checkpoint", b"").decode()) == size
        )
        assert came, f"no checkpoint of {size} records"
        return self.latest["checkpoint"].decode()

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@pytest.fixture
def floor(broker: Broker) -> Iterator[Subscriber]:
    subscriber = Subscriber(broker)
    assert subscriber.wait_for(lambda: subscriber.subscribed, 10)
    yield subscriber
    subscriber.close()


def eventually(predicate: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    """For what no condition announces (a log line, the publisher's display hook)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def fleet_config(broker: Broker, **options: Any) -> FleetConfig:
    options.setdefault("keepalive_s", 5)
    options.setdefault("stop_flush_s", 3)
    return FleetConfig(mqtt_url=broker.url, **options)


def open_log(state_dir: Path) -> AuditLog:
    return AuditLog.open(state_dir, origin=ORIGIN)


def status_of(log: AuditLog, payload: bytes) -> SignedStatus:
    """A status as a reader with the table's key takes it."""
    assert log.signer is not None
    return open_status(payload, log.signer.verifier, TABLE)


def play(log: AuditLog, rounds: int, publisher: Publisher | None = None) -> None:
    """Rounds as records: opened, a result, closed (each a commit, as the loop makes them)."""
    for _ in range(rounds):
        number = log.size
        for kind in (RecordKind.ROUND_OPENED, RecordKind.RESULT, RecordKind.CLOSE):
            log.commit([(kind, valid(kind, round=number))])
            if publisher is not None:
                publisher.committed()


def started(broker: Broker, state_dir: Path, log: AuditLog, **options: Any) -> Publisher:
    events = options.pop("events", None)
    on_anchor = options.pop("on_anchor", None)
    clock = options.pop("clock", time.monotonic)
    assert log.signer is not None
    publisher = Publisher(
        fleet_config(broker, **options),
        table=TABLE,
        state_dir=state_dir,
        signer=StatusSigner(log.signer),
        events=events,
        on_anchor=on_anchor,
        wall_clock=lambda: 1_796_000_000_000,
        clock=clock,
    )
    publisher.start()
    return publisher


def test_broker_down_at_start_then_up_every_record_in_order_and_the_retained_state(
    broker: Broker, floor: Subscriber, tmp_path: Path
) -> None:
    broker.stop()
    state = tmp_path / "state"
    log = open_log(state)
    publisher = started(broker, state, log)
    try:
        play(log, 10, publisher)  # the table plays while the broker is away
        broker.start()
        play(log, 5, publisher)
        floor.wait_records(log.size)
        # a late subscriber: the retained checkpoint, of records all acknowledged, and status
        assert floor.wait_for(lambda: publisher.acked == log.size)
        late = Subscriber(broker, client_id="late", clean=True)
        try:
            assert late.wait_for(lambda: {"checkpoint", "status"} <= late.retained.keys())
            assert log.signer is not None
            note = late.retained["checkpoint"].decode()
            checkpoint = open_checkpoint(note, log.signer.verifier)
            assert 0 < checkpoint.size <= publisher.acked
            assert status_of(log, late.retained["status"]).status.presence is Presence.ONLINE
        finally:
            late.close()
    finally:
        publisher.close()
    # the orderly stop: everything acknowledged, the latest checkpoint, then offline
    assert read_cursor(state / CURSOR_FILE).acked == log.size
    late = Subscriber(broker, client_id="late2", clean=True)
    try:
        assert late.wait_for(lambda: {"checkpoint", "status"} <= late.retained.keys())
        assert log.signer is not None
        last = open_checkpoint(late.retained["checkpoint"].decode(), log.signer.verifier)
        assert last.size == log.size
        assert status_of(log, late.retained["status"]).status.presence is Presence.OFFLINE
    finally:
        late.close()
    # each record is the export's line (the checkpoint only where the table has one)
    exported = {line["seq"]: line for line in export_lines(state)}
    for seq, line in floor.lines.items():
        expected = dict(exported[seq])
        if seq == log.size and "checkpoint" not in line:  # the export's latest, at its end
            expected.pop("checkpoint", None)
        assert line == expected
    log.close()


@pytest.mark.slow
def test_broker_restarted_mid_play_loses_nothing(
    broker: Broker, floor: Subscriber, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    log = open_log(state)
    publisher = started(broker, state, log)
    try:
        play(log, 5, publisher)
        floor.wait_records(log.size)
        broker.stop()
        play(log, 5, publisher)
        broker.start()
        play(log, 5, publisher)
        floor.wait_records(log.size)
        broker.kill()  # no word at all this time
        play(log, 3, publisher)
        broker.start()
        floor.wait_records(log.size)
    finally:
        publisher.close()
        log.close()


def test_a_publisher_abandoned_mid_play_resumes_from_its_cursor(
    broker: Broker, floor: Subscriber, tmp_path: Path
) -> None:
    """What a SIGKILL leaves: a cursor behind what was acknowledged (it is written every
    PERSIST_EVERY_S). The next publisher sends from it (duplicates, no gap), and never a
    checkpoint smaller than one published before (the witness would take it for a rollback)."""
    state = tmp_path / "state"
    log = open_log(state)
    write_cursor(state / CURSOR_FILE, Cursor(0, ""))
    publisher = started(broker, state, log)
    play(log, 16, publisher)  # more records than the window of unacknowledged ones
    floor.wait_records(log.size)
    floor.checkpoint_of(log.size)
    publisher._stopping = True
    publisher._thread.join(5)
    fifth = next(line for line in export_lines(state) if line["seq"] == 5)
    write_cursor(state / CURSOR_FILE, Cursor(5, fifth["hash"]))  # saved long before the kill
    play(log, 2)
    again = started(broker, state, log)
    try:
        floor.wait_records(log.size)
        floor.checkpoint_of(log.size)
    finally:
        again.close()
        log.close()
    sizes = floor.checkpoint_sizes
    assert sizes == sorted(sizes), sizes


@pytest.mark.parametrize(
    ("cursor", "why"),
    [
        (b"garbage\n", "not a JSON object"),
        (b'{"acked": 999, "hash": "' + b"a" * 64 + b'"}', "rolled back or replaced"),
        (b'{"acked": 3, "hash": "' + b"b" * 64 + b'"}', "the log was replaced"),
    ],
)
def test_a_bad_cursor_or_a_rolled_back_log_is_published_again_from_the_start(
    broker: Broker,
    floor: Subscriber,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    *,
    cursor: bytes,
    why: str,
) -> None:
    state = tmp_path / "state"
    log = open_log(state)
    play(log, 3)
    (state / CURSOR_FILE).write_bytes(cursor)
    with caplog.at_level(logging.ERROR, logger="paigow.fleet"):
        publisher = started(broker, state, log)
        try:
            floor.wait_records(log.size)
        finally:
            publisher.close()
            log.close()
    assert why in caplog.text
    assert floor.seqs[0] == 1


@pytest.mark.slow
def test_a_hung_broker_never_holds_up_the_table(broker: Broker, tmp_path: Path) -> None:
    """The broker SIGSTOPped (it accepts connections and says nothing): ``simulate`` plays its
    rounds and stops within its flush bound."""
    assert broker.process is not None
    config = write_config(tmp_path, broker, stop_flush_s=1)
    os.kill(broker.process.pid, signal.SIGSTOP)
    try:
        proc = simulate(tmp_path / "state", config, rounds=15)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "done: 15 rounds" in out
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)


# --- the controller as a process ---------------------------------------------------------


def write_config(tmp_path: Path, broker: Broker, **fleet: object) -> Path:
    lines = ["[table]", f'name = "{TABLE}"', "[fleet]", f'mqtt_url = "{broker.url}"']
    fleet.setdefault("keepalive_s", 5)
    fleet.setdefault("stop_flush_s", 5)
    lines += [f"{k} = {json.dumps(v)}" for k, v in fleet.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def simulate(state: Path, config: Path, *, rounds: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "controller", "simulate", "--fast", "--plain-rounds"]
    command += ["--faults", "none", "--rounds", str(rounds), "--seed", "3"]
    command += ["--config", str(config), "--state-dir", str(state)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


class Witness:
    """A witness in the test: cosigns each checkpoint it receives, retained on the table's
    cosignature topic (``forge``: with another key, or of a checkpoint never made)."""

    def __init__(self, broker: Broker, signer: Signer, clock: Callable[[], int]) -> None:
        self.signer = signer
        self.clock = clock
        self.cosigned = 0
        self.client = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2, client_id="witness"
        )
        self.client.on_connect = lambda c, *_: c.subscribe(f"paigow/v1/{TABLE}/checkpoint", 1)
        self.client.on_message = self._on_message
        self.client.connect_async("127.0.0.1", broker.port, keepalive=5)
        self.client.loop_start()

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        note = cosign_note(message.payload.decode(), self.signer, self.clock())
        client.publish(f"paigow/v1/{TABLE}/cosignature", note.encode(), qos=1, retain=True)
        self.cosigned += 1

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@pytest.mark.slow
def test_the_controller_killed_and_restarted_publishes_every_record_and_records_cosignatures(
    broker: Broker, floor: Subscriber, tmp_path: Path
) -> None:
    """``simulate`` with [fleet]: SIGKILLed mid-play, started again; the floor has every record
    of the log, in order, with no gap; the witness's cosignatures are recorded at most once per
    round close and verify-log checks them."""
    witness_key = Signer.generate("witness.test/w1", ALG_COSIGNATURE_V1)
    ticks = iter(range(1_796_000_000, 1_796_100_000))
    witness = Witness(broker, witness_key, lambda: next(ticks))
    config = write_config(tmp_path, broker, witness_key=str(witness_key.verifier))
    state = tmp_path / "state"
    try:
        first = simulate(state, config, rounds=400)
        try:
            assert floor.wait_for(lambda: len(floor.seqs) >= 60), first.pid
        finally:
            first.kill()
            first.communicate(timeout=10)
        second = simulate(state, config, rounds=5)
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 0, out
        exported = list(export_lines(state))
        floor.wait_records(len(exported))
    finally:
        witness.close()
    cosigned = [line for line in exported if line["kind"] == "cosigned"]
    closes = [line["seq"] for line in exported if line["kind"] in ("close", "void")]
    assert cosigned, "no cosignature was recorded"
    covered = [line["data"]["close"] for line in cosigned]
    assert covered == sorted(set(covered)), "a round close was recorded twice"
    assert set(covered) <= set(closes)
    verified = subprocess.run(
        [sys.executable, "-m", "controller", "verify-log", "--state-dir", str(state)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


# --- cosignatures ---------------------------------------------------------------------------


def test_cosignatures_are_checked_shown_and_recorded_once_per_round_close(
    broker: Broker, floor: Subscriber, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    witness = Signer.generate("witness.test/w1", ALG_COSIGNATURE_V1)
    state = tmp_path / "state"
    log = open_log(state)
    assert log.signer is not None
    events = EventQueue()
    shown: list[dict[str, object]] = []
    publisher = started(
        broker,
        state,
        log,
        witness_key=str(witness.verifier),
        events=events,
        on_anchor=lambda anchor: shown.append(dict(anchor)),
    )
    sender = Subscriber(broker, client_id="sender", clean=True)
    cosignature = f"paigow/v1/{TABLE}/cosignature"

    def send(payload: bytes) -> None:
        sender.client.publish(cosignature, payload, qos=1, retain=True).wait_for_publish(5)

    def taken(count: int) -> bool:
        return eventually(lambda: len(shown) >= count)

    try:
        play(log, 2, publisher)
        floor.wait_records(log.size)
        note = floor.checkpoint_of(log.size)
        send(cosign_note(note, witness, 1_796_000_000).encode())
        assert taken(1)
        size = open_checkpoint(note, log.signer.verifier).size
        assert shown[-1] == {"witness": witness.name, "size": size, "timestamp": 1_796_000_000}
        occ = events.get(timeout=WAIT_S)
        assert occ is not None
        assert occ.event is Event.COSIGNED
        assert occ.cosignature is not None
        assert occ.cosignature["close"] == size  # the last round's close ends this checkpoint
        assert occ.cosignature["size"] == size
        # the same round close cosigned again, later: shown, not recorded again
        log.commit([(RecordKind.COSIGNED, {**occ.cosignature, "round": 2})])
        publisher.committed()
        floor.wait_records(log.size)
        later = floor.checkpoint_of(log.size)
        send(cosign_note(later, witness, 1_796_000_060).encode())
        assert taken(2)
        assert events.empty()
        # refused, never shown: another witness, a checkpoint the log never made, garbage
        other = Signer.generate("witness.test/w1", ALG_COSIGNATURE_V1)
        forged_log = Signer(log.signer.name, bytes(32))
        never = note.replace(note.split("\n")[2], "A" * 43 + "=")
        for bad in (
            cosign_note(later, other, 1_796_000_100).encode(),
            cosign_note(never, witness, 1_796_000_100).encode(),
            cosign_note(
                note.replace(note.rsplit("\n\n", 1)[1], "") + f"— {forged_log.name} {'A' * 96}\n",
                witness,
                1_796_000_100,
            ).encode(),
            b"\xff\xfe garbage",
            b"x" * 20_000,
        ):
            with caplog.at_level(logging.WARNING, logger="paigow.fleet"):
                caplog.clear()
                send(bad)
                assert eventually(lambda: "refused" in caplog.text), bad[:40]
        assert len(shown) == 2
        assert events.empty()
        assert publisher._thread.is_alive()
        # a new round closed and cosigned: recorded
        play(log, 1, publisher)
        floor.wait_records(log.size)
        send(cosign_note(floor.checkpoint_of(log.size), witness, 1_796_000_200).encode())
        occ = events.get(timeout=WAIT_S)
        assert occ is not None
        assert occ.cosignature is not None
        assert occ.cosignature["close"] == log.size
    finally:
        sender.close()
        publisher.close()
        log.close()


def test_credentials_must_be_two_lines_only_the_owner_reads(tmp_path: Path) -> None:
    path = tmp_path / "credentials"
    path.write_text("table-1\nsecret\n")
    path.chmod(0o600)
    assert read_credentials(path) == ("table-1", "secret")
    path.chmod(0o640)
    with pytest.raises(FleetError, match="readable by group or others"):
        read_credentials(path)
    for bad in ("one line\n", "a\nb\nc\n", "\npassword\n", "x" * 2000):
        path.write_text(bad)
        path.chmod(0o400)
        with pytest.raises(FleetError):
            read_credentials(path)
        path.chmod(0o600)
    with pytest.raises(FleetError, match="cannot be read"):
        read_credentials(tmp_path / "missing")


def test_mqtts_with_a_client_certificate_and_a_password(tmp_path: Path) -> None:
    """The casino's broker over TLS: its certificate checked against [fleet] ca_file, the
    table's client certificate shown, the user and password from credentials_file. A password
    the broker does not take is refused and logged; the table plays on."""
    tls = make_tls(tmp_path / "tls")
    passwords = tmp_path / "passwd"
    made = subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(passwords), "table-1", "s3cret"],
        capture_output=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    credentials = tmp_path / "mqtt.cred"
    credentials.write_text("table-1\ns3cret\n")
    credentials.chmod(0o600)
    wrong = tmp_path / "wrong.cred"
    wrong.write_text("table-1\nnot-it\n")
    wrong.chmod(0o600)
    broker = Broker(tmp_path / "broker", tls=tls, password_file=passwords)
    broker.start()
    floor = Subscriber(broker)  # on the plain listener
    try:
        state = tmp_path / "state"
        log = open_log(state)
        tls_options = {
            "ca_file": str(tls.ca),
            "cert_file": str(tls.client_cert),
            "key_file": str(tls.client_key),
        }
        assert log.signer is not None
        publisher = Publisher(
            FleetConfig(mqtt_url=broker.tls_url, credentials_file=str(credentials), **tls_options),
            table=TABLE,
            state_dir=state,
            signer=StatusSigner(log.signer),
        )
        publisher.start()
        try:
            play(log, 3, publisher)
            floor.wait_records(log.size)
        finally:
            publisher.close()
        (tmp_path / "other").mkdir()  # a state directory (its connection number goes there)
        refused = Publisher(
            FleetConfig(mqtt_url=broker.tls_url, credentials_file=str(wrong), **tls_options),
            table=TABLE,
            state_dir=tmp_path / "other",
            signer=StatusSigner(log.signer),
        )
        refused.start()
        try:
            play(log, 1)  # the table goes on whatever the broker says
            assert eventually(lambda: "not authorised" in broker.tail(50))
            assert not refused.is_connected
        finally:
            refused.close()
        log.close()
    finally:
        floor.close()
        broker.kill()


# --- the signed status and its connection number --------------------------------------------


@pytest.mark.slow
def test_every_status_is_signed_and_ordered_and_the_will_ends_its_connection(
    broker: Broker, floor: Subscriber, tmp_path: Path
) -> None:
    """``simulate`` with [fleet], SIGKILLed mid-play (the broker says its will), then run again
    to its end (an orderly stop): a reader with the table's key opens every status; each
    connection's statuses are seq 1, 2, ... and its end is the will (END_OF_CONNECTION) or
    the orderly offline (the next seq); the restart's connection is a greater number."""
    config = write_config(tmp_path, broker)
    state = tmp_path / "state"
    first = simulate(state, config, rounds=400)
    try:
        assert floor.wait_for(lambda: len(floor.statuses) >= 3 and len(floor.seqs) >= 30)
    finally:
        first.kill()
        first.communicate(timeout=10)
    signer = load_signer(state)
    assert signer is not None
    key = signer.verifier
    assert key.name == "paigow-controller/t1"  # [fleet] origin unset: as before

    def last() -> SignedStatus:
        return open_status(floor.statuses[-1], key, TABLE)

    assert floor.wait_for(lambda: last().seq == END_OF_CONNECTION)
    second = simulate(state, config, rounds=3)
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0, out
    assert floor.wait_for(lambda: last().status.presence is Presence.OFFLINE and last().seq < 100)
    statuses = [open_status(payload, key, TABLE) for payload in floor.statuses]
    orders = [status.order for status in statuses]
    assert orders == sorted(set(orders)), orders  # each newer than the one before
    one, two = statuses[0].connection, statuses[-1].connection
    assert two > one
    run1 = [s for s in statuses if s.connection == one]
    run2 = [s for s in statuses if s.connection == two]
    assert len(run1) + len(run2) == len(statuses)
    assert [s.seq for s in run1[:-1]] == list(range(1, len(run1)))
    assert {s.status.presence for s in run1[:-1]} == {Presence.ONLINE}
    assert run1[-1].seq == END_OF_CONNECTION  # the will: the end of connection one
    assert run1[-1].status.presence is Presence.OFFLINE
    assert [s.seq for s in run2] == list(range(1, len(run2) + 1))
    assert run2[-1].status.presence is Presence.OFFLINE  # said by the orderly stop
    assert read_connection(state / CONNECTION_FILE) == two
    # the status is retained as the last one said
    assert floor.wait_for(lambda: floor.latest["status"] == floor.statuses[-1])


def test_a_connection_number_lost_with_the_file_is_taken_above_the_brokers_retained_status(
    broker: Broker, floor: Subscriber, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``fleet-connection`` lost (or an older copy of it, with the card) and the log no longer
    than at the last connection: the broker's retained status, signed by the log's key, says
    the number used; the publisher connects again above it."""
    state = tmp_path / "state"
    log = open_log(state)
    play(log, 1)
    publisher = started(broker, state, log)
    try:
        floor.wait_records(log.size)
    finally:
        publisher.close()
    used = read_connection(state / CONNECTION_FILE)
    assert floor.wait_for(lambda: status_of(log, floor.latest["status"]).connection == used)
    for lost in (None, b"garbage\n"):
        (state / CONNECTION_FILE).unlink()
        if lost is not None:
            (state / CONNECTION_FILE).write_bytes(lost)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="paigow.fleet"):
            again = started(broker, state, log)
            try:
                assert eventually(
                    lambda p=again, n=used + 1: p.connection == n and p.is_connected  # type: ignore[misc]
                )
                assert f"connecting again as {used + 1}" in caplog.text
                if lost is not None:
                    assert "is not a connection number" in caplog.text
            finally:
                again.close()
        assert read_connection(state / CONNECTION_FILE) == used + 1
        assert floor.wait_for(
            lambda n=used + 1: (  # type: ignore[misc]
                (latest := status_of(log, floor.latest["status"])).connection == n
                and latest.status.presence is Presence.OFFLINE
            )
        )
        used += 1
    # the file as it is: the next number, and no second connection
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="paigow.fleet"):
        last = started(broker, state, log)
        try:
            assert eventually(lambda: last.is_connected)
            play(log, 1, last)
            floor.wait_records(log.size)
        finally:
            last.close()
    assert "connecting again" not in caplog.text
    assert read_connection(state / CONNECTION_FILE) == used + 1
    log.close()


# --- the witness's cosignature as the cursor -------------------------------------------------


class FakeClock:
    """The publisher's monotonic clock for when to send again: moved by the test only."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeWitness:
    """A witness as the table sees one (the real one is controller/witness): it takes the
    records by seq (a duplicate changes nothing) and cosigns, retained, the newest checkpoint
    it holds every record of, each of more records than the last (``cosigns`` False: none).
    A persistent session (what comes while it is away is queued for it) unless ``clean``."""

    def __init__(self, broker: Broker, signer: Signer) -> None:
        self.broker = broker
        self.signer = signer
        self.through = 0  # it holds every record up to this one
        self.cosigned = 0
        self.cosigns = True
        self.subscribed = False
        self._held: set[int] = set()
        self._notes: dict[int, str] = {}
        self._cond = threading.Condition()
        self.client = self._connect(clean=False)
        assert self.wait_for(lambda: self.subscribed)

    def _connect(self, *, clean: bool) -> mqtt.Client:
        client = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id="fake-witness",
            clean_session=clean,
        )
        client.on_connect = lambda c, *_: c.subscribe(
            [(f"paigow/v1/{TABLE}/records", 1), (f"paigow/v1/{TABLE}/checkpoint", 1)]
        )
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        client.reconnect_delay_set(0.05, 0.2)
        client.connect_async("127.0.0.1", self.broker.port, keepalive=5)
        client.loop_start()
        return client

    def _on_subscribe(self, *_: Any) -> None:
        with self._cond:
            self.subscribed = True
            self._cond.notify_all()

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        with self._cond:
            if message.topic.endswith("/records"):
                line = json.loads(message.payload)
                self._held.add(line["seq"])
                if "checkpoint" in line:
                    self._note(line["checkpoint"])
                while self.through + 1 in self._held:
                    self.through += 1
            else:
                self._note(message.payload.decode())
            self._cosign(client)
            self._cond.notify_all()

    def _note(self, note: str) -> None:
        size = checkpoint_size(note)
        if size is not None:
            self._notes[size] = note

    def _cosign(self, client: mqtt.Client) -> None:
        ready = [n for n in self._notes if self.cosigned < n <= self.through]
        if not self.cosigns or not ready:
            return
        size = max(ready)
        note = cosign_note(self._notes[size], self.signer, 1_796_000_000 + size)
        client.publish(f"paigow/v1/{TABLE}/cosignature", note.encode(), qos=1, retain=True)
        self.cosigned = size

    def resume(self) -> None:
        with self._cond:
            self.cosigns = True
            self._cosign(self.client)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = WAIT_S) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def away(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def back(self, *, clean: bool) -> None:
        """Connected again; ``clean``: a clean start, which drops what was queued for it."""
        with self._cond:
            self.subscribed = False
        self.client = self._connect(clean=clean)
        assert self.wait_for(lambda: self.subscribed)

    def close(self) -> None:
        self.away()


@pytest.fixture
def cosigner() -> Signer:
    return Signer.generate("witness.test/w1", ALG_COSIGNATURE_V1)


def anchored(publisher: Publisher, size: int) -> bool:
    """The publisher took the witness's cosignature of ``size`` records."""
    return eventually(lambda: publisher.anchor is not None and publisher.anchor.size == size)


def test_records_a_broker_acknowledged_and_lost_go_again_from_the_witness_cosignature(
    broker: Broker, cosigner: Signer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker restarted without its persistence (stopped, its file wiped, started): the
    records it acknowledged and queued for the witness are gone, and its retained checkpoint
    and cosignature with them. The publisher's next connection starts at the witness's
    cosignature, not at its cursor: every record reaches the witness and it cosigns them,
    ``fleet-cursor`` untouched."""
    witness = FakeWitness(broker, cosigner)
    state = tmp_path / "state"
    log = open_log(state)
    caplog.set_level(logging.INFO, logger="paigow.fleet")
    publisher = started(broker, state, log, witness_key=str(cosigner.verifier))
    try:
        play(log, 3, publisher)
        assert witness.wait_for(lambda: witness.cosigned == log.size)
        assert anchored(publisher, log.size)
        safe = log.size
        witness.away()
        play(log, 3, publisher)
        assert eventually(lambda: publisher.acked == log.size)  # queued for the witness
        broker.stop()
        (broker.directory / "mosquitto.db").unlink()
        broker.start()
        witness.back(clean=False)  # the broker knows no session of it any more
        assert witness.wait_for(lambda: witness.cosigned == log.size)
        assert witness.through == log.size
        assert anchored(publisher, log.size)
        assert f"sending from record {safe + 1}" in caplog.text
    finally:
        witness.close()
        publisher.close()
        log.close()
    assert read_cursor(state / CURSOR_FILE).acked == log.size  # kept, never deleted


def test_records_the_witness_lost_go_again_when_its_cosignature_stands_still(
    broker: Broker, cosigner: Signer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No reconnection of the table this time: the witness's session taken over with a clean
    start drops what the broker queued for it. The publisher's acknowledged records go past the
    cosignature, a checkpoint past it is published, and the cosignature does not grow for
    RESEND_AFTER_S: the records go again from the cosignature's size + 1, once."""
    witness = FakeWitness(broker, cosigner)
    clock = FakeClock()
    state = tmp_path / "state"
    log = open_log(state)
    caplog.set_level(logging.INFO, logger="paigow.fleet")
    publisher = started(broker, state, log, witness_key=str(cosigner.verifier), clock=clock)
    try:
        play(log, 2, publisher)
        assert witness.wait_for(lambda: witness.cosigned == log.size)
        assert anchored(publisher, log.size)
        safe, connection = log.size, publisher.connection
        witness.away()
        play(log, 2, publisher)
        assert eventually(lambda: publisher.acked == log.size)
        assert eventually(lambda: publisher._witness_cursor.behind_since is not None)
        witness.back(clean=True)  # what was queued for it is dropped
        assert witness.wait_for(lambda: witness.through == safe)  # a gap: nothing to cosign
        clock.advance(RESEND_AFTER_S)
        assert witness.wait_for(lambda: witness.cosigned == log.size)
        assert witness.through == log.size
        assert anchored(publisher, log.size)
        assert publisher.resends == 1
        assert caplog.text.count("sending again from record") == 1
        assert f"sending again from record {safe + 1}" in caplog.text
        assert publisher.connection == connection  # the same connection: no reconnect
        assert publisher._witness_cursor.wait_s == RESEND_AFTER_S  # it grew: back to 10 s
    finally:
        witness.close()
        publisher.close()
        log.close()


def test_the_resend_backs_off_while_no_witness_cosigns(
    broker: Broker, cosigner: Signer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A witness that cosigns no more (down, or it stopped cosigning this table): the records
    go again after 10 s, 20 s, 40 s, 80 s ... each resend logged once; when it cosigns again
    the wait is back to 10 s."""
    witness = FakeWitness(broker, cosigner)
    clock = FakeClock()
    state = tmp_path / "state"
    log = open_log(state)
    caplog.set_level(logging.WARNING, logger="paigow.fleet")
    publisher = started(broker, state, log, witness_key=str(cosigner.verifier), clock=clock)
    try:
        play(log, 2, publisher)
        assert witness.wait_for(lambda: witness.cosigned == log.size)
        assert anchored(publisher, log.size)
        witness.cosigns = False
        play(log, 2, publisher)
        assert eventually(lambda: publisher.acked == log.size)
        assert eventually(lambda: publisher._witness_cursor.behind_since is not None)
        for count, wait in enumerate((10, 20, 40, 80), start=1):
            assert publisher._witness_cursor.wait_s == wait
            clock.advance(wait)
            assert eventually(lambda n=count: publisher.resends == n)  # type: ignore[misc]
            assert eventually(lambda: publisher._next_seq > publisher.acked)  # sent whole
        lines = [r.getMessage() for r in caplog.records if "sending again" in r.getMessage()]
        assert [line.rsplit("after ", 1)[1] for line in lines] == [
            "20 s)",
            "40 s)",
            "80 s)",
            "160 s)",
        ]
        witness.resume()
        assert witness.wait_for(lambda: witness.cosigned == log.size)
        assert anchored(publisher, log.size)
        assert publisher._witness_cursor.wait_s == RESEND_AFTER_S
    finally:
        witness.close()
        publisher.close()
        log.close()


# --- rollback evidence -------------------------------------------------------------------------


def evidence_of(events: EventQueue) -> list[Any]:
    found = []
    while not events.empty():
        occ = events.get(timeout=1)
        if occ is not None and occ.event is Event.ROLLBACK_EVIDENCE:
            found.append(occ)
    return found


@pytest.mark.parametrize("played_on", [False, True], ids=["shorter", "played-on"])
def test_a_cosignature_of_a_history_the_log_no_longer_holds_is_rollback_evidence_once(
    broker: Broker,
    cosigner: Signer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    *,
    played_on: bool,
) -> None:
    """The state directory copied back to an older state (the card swapped for an older
    image): the witness's retained cosignature, signed by this log's own key, is of more
    records than the log holds, or (``played-on``) of a size it holds again with another root.
    ROLLBACK_EVIDENCE goes on the control loop's queue once; not again on another connection,
    nor after a restart once the log records it. One whose inner checkpoint another key signed
    is refused, never evidence."""
    witness = FakeWitness(broker, cosigner)
    state, older = tmp_path / "state", tmp_path / "older"
    log = open_log(state)
    play(log, 2)
    log.close()
    shutil.copytree(state, older)  # the card's image, as it is now
    log = open_log(state)
    publisher = started(broker, state, log, witness_key=str(cosigner.verifier))
    try:
        play(log, 2, publisher)
        assert witness.wait_for(lambda: witness.cosigned == log.size)
        assert anchored(publisher, log.size)
    finally:
        publisher.close()
        log.close()
    longer = witness.cosigned
    witness.cosigns = False  # a witness cosigns no older copy
    shutil.rmtree(state)
    shutil.copytree(older, state)
    log = open_log(state)
    if played_on:
        play(log, 3)  # past the cosigned size, on another branch
    held = log.size
    assert (held > longer) is played_on
    caplog.set_level(logging.DEBUG, logger="paigow.fleet")
    events = EventQueue()
    publisher = started(broker, state, log, witness_key=str(cosigner.verifier), events=events)
    try:
        occ = events.get(timeout=WAIT_S)
        assert occ is not None
        assert occ.event is Event.ROLLBACK_EVIDENCE
        data = dict(occ.cosignature or {})
        assert set(data) == {
            "witness",
            "witness_key",
            "note",
            "size",
            "root",
            "timestamp",
            "log_size",
        }
        assert (data["witness"], data["witness_key"]) == (cosigner.name, str(cosigner.verifier))
        assert (data["size"], data["log_size"]) == (longer, held)
        assert data["timestamp"] == 1_796_000_000 + longer
        assert log.signer is not None
        inner = open_checkpoint(data["note"], log.signer.verifier)  # this log's key signed it
        assert open_cosignature(data["note"], cosigner.verifier).checkpoint == inner
        assert (inner.size, inner.origin) == (longer, ORIGIN)
        assert base64.b64encode(inner.root_hash).decode() == data["root"]
        assert "the log went back" in caplog.text
        assert publisher.anchor is None  # never shown as an anchor
        # another connection: the broker's retained cosignature comes again; not sent again
        broker.stop()
        broker.start()
        assert eventually(
            lambda: "rollback evidence at" in caplog.text and "came again" in caplog.text
        )
        assert evidence_of(events) == []
        # the core records it (as the control loop does); the table restarts: not again
        log.commit([(RecordKind.ROLLBACK_EVIDENCE, {**data, "round": 1})])
        publisher.committed()
    finally:
        publisher.close()
    events = EventQueue()
    again = started(broker, state, log, witness_key=str(cosigner.verifier), events=events)
    try:
        assert eventually(lambda: "already recorded as rollback evidence" in caplog.text)
        # a cosignature by the witness of a checkpoint another key signed under this log's
        # name: anyone can make one, so it is refused and logged, never evidence
        impostor = Signer.generate(ORIGIN)
        forged = sign_checkpoint(Checkpoint(ORIGIN, longer + 10, bytes(32)), impostor)
        sender = Subscriber(broker, client_id="sender", clean=True)
        try:
            assert sender.wait_for(lambda: sender.subscribed, 10)
            caplog.clear()
            sender.client.publish(
                f"paigow/v1/{TABLE}/cosignature",
                cosign_note(forged, cosigner, 1_796_100_000).encode(),
                qos=1,
                retain=True,
            ).wait_for_publish(5)
            assert eventually(lambda: "a cosignature refused" in caplog.text)
        finally:
            sender.close()
        assert evidence_of(events) == []
    finally:
        again.close()
        witness.close()
        log.close()
