"""The product on the casino's broker as shipped: ``paigow-controller simulate`` with [fleet]
over mqtts:// with its table's certificate, ``paigow-controller witness`` with the witness's,
mosquitto on hw/mosquitto/ (TLS only, the ACL by certificate, the client id the CN). The
witness cosigns the table's log, and the table reads and records the cosignature: everything
the two need, the ACL grants (and tests/e2e/test_fleet_broker_acl.py: nothing more)."""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from support.fleet_broker import ClientFiles, FleetCa, ShippedBroker, free_port

from controller.audit.recall import export_line, export_lines
from controller.core import canonical
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Signer,
    Verifier,
    checkpoint_size,
    open_cosignature,
)
from controller.core.records import StoredRecord
from controller.fleet.client import tls_context
from controller.fleet.protocol import (
    MAX_NOTE_BYTES,
    MAX_RECORD_BYTES,
    MAX_STATUS_BYTES,
    Channel,
    Presence,
    SignedStatus,
    Status,
    encode_record,
    open_alert,
    sign_status,
    topic,
)

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
WAIT_S = 60.0
MESSAGE_SIZE_LIMIT = int(
    next(
        line.split()[1]
        for line in (ROOT / "hw" / "mosquitto" / "paigow.conf").read_text().splitlines()
        if line.startswith("message_size_limit ")
    )
)

pytestmark = pytest.mark.slow


def controller(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *argv],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class Observer:
    """The test's eyes on the broker (its own ACL user): the cosignatures and the alerts."""

    def __init__(self, broker: ShippedBroker, ca: FleetCa) -> None:
        files = ca.table("observer")
        self.cosigned: dict[str, str] = {}
        self.alerts: list[bytes] = []
        self._cond = threading.Condition()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="observer")
        self.client.tls_set_context(tls_context(str(files.ca), str(files.cert), str(files.key)))
        self.client.on_connect = lambda c, *_: c.subscribe(
            [("paigow/v1/+/cosignature", 1), ("paigow/v1/alerts", 1)]
        )
        self.subscribed = False
        self.client.on_subscribe = lambda *_: self._set(subscribed=True)
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", broker.port, keepalive=10)
        self.client.loop_start()

    def _set(self, **values: Any) -> None:
        with self._cond:
            for name, value in values.items():
                setattr(self, name, value)
            self._cond.notify_all()

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        with self._cond:
            if message.topic == "paigow/v1/alerts":
                self.alerts.append(message.payload)
            else:
                self.cosigned[message.topic.split("/")[2]] = message.payload.decode()
            self._cond.notify_all()

    def wait_for(self, what: str, predicate: Any) -> None:
        with self._cond:
            assert self._cond.wait_for(predicate, WAIT_S), f"not within {WAIT_S:.0f} s: {what}"

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class Fleet:
    """The shipped broker, the test's observer, the witness as a process (started and stopped
    by the test) and the table east, whose rounds ``play`` runs with ``simulate``."""

    def __init__(self, tmp_path: Path) -> None:
        self.ca = FleetCa(tmp_path / "fleet-ca")
        self.broker = ShippedBroker(
            tmp_path / "broker", self.ca, extra_acl="user observer\ntopic read #\n"
        )
        self.broker.start()
        self.observer = Observer(self.broker, self.ca)
        self.witness_proc: subprocess.Popen[str] | None = None
        self.witness_dir, self.keys = tmp_path / "witness", tmp_path / "keys"
        self.witness_log = tmp_path / "witness.err"
        self.keys.mkdir()
        self.witness_files = self.ca.witness()
        self.east = self.ca.table("east")
        self.state, self.config = tmp_path / "east", tmp_path / "east.toml"
        self.witness_key = ""

    def setup(self) -> None:
        self.observer.wait_for("the observer subscribed", lambda: self.observer.subscribed)
        made = controller("witness-key", "--state-dir", str(self.witness_dir))
        assert made.returncode == 0, made.stderr
        self.witness_key = made.stdout.splitlines()[0].strip()  # the cosigner's (alerts' 2nd)
        table = self.east
        self.config.write_text(
            f'[table]\nname = "east"\n[fleet]\nmqtt_url = "{self.broker.url}"\n'
            f'ca_file = "{table.ca}"\ncert_file = "{table.cert}"\nkey_file = "{table.key}"\n'
            f'witness_key = "{self.witness_key}"\nkeepalive_s = 5\nstop_flush_s = 10\n'
        )
        made = controller("init", "--state-dir", str(self.state), "--config", str(self.config))
        assert made.returncode == 0, made.stderr
        exported = controller("export-key", "--state-dir", str(self.state))
        assert exported.returncode == 0, exported.stderr
        (self.keys / "east.pub").write_text(exported.stdout)
        self.start_witness()
        # A retained record of a table the witness has no key for: its alert says the witness
        # has subscribed (what a table sends before that, the broker does not keep for it).
        with self.client(self.ca.table("probe")) as probe:
            probe.publish("paigow/v1/probe/records", b"{}", 1, True).wait_for_publish(10)
        self.observer.wait_for("the witness's alert", lambda: self.observer.alerts)

    def start_witness(self) -> None:
        """The witness started, and subscribed: what east sends from now on reaches it (a
        witness whose session the broker lost gets nothing sent before it subscribed)."""
        files = self.witness_files
        with self.witness_log.open("w") as err:
            self.witness_proc = subprocess.Popen(
                [
                    sys.executable, "-m", "controller", "witness", "--mqtt-url", self.broker.url,
                    "--ca-file", str(files.ca), "--cert-file", str(files.cert),
                    "--key-file", str(files.key), "--state-dir", str(self.witness_dir),
                    "--keys", str(self.keys), "--dashboard", "off",
                ],
                cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=err, text=True,
            )  # fmt: skip
        for _ in range(600):  # 60 s at most
            if "subscribed:" in self.witness_log.read_text():
                return
            assert self.witness_proc.poll() is None, self.witness_log.read_text()
            time.sleep(0.1)
        raise AssertionError(f"the witness did not subscribe: {self.witness_log.read_text()}")

    def stop_witness(self) -> str:
        """An orderly stop: what the witness said (its counts of what it refused)."""
        assert self.witness_proc is not None
        self.witness_proc.terminate()
        self.witness_proc.wait(timeout=30)
        code, self.witness_proc = self.witness_proc.returncode, None
        err = self.witness_log.read_text()
        assert code == 0, err
        return err

    @contextlib.contextmanager
    def client(self, files: ClientFiles) -> Iterator[mqtt.Client]:
        """A client of the broker with ``files``' certificate (its client id is the CN)."""
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=files.name)
        client.tls_set_context(tls_context(str(files.ca), str(files.cert), str(files.key)))
        client.connect("127.0.0.1", self.broker.port)
        client.loop_start()
        try:
            yield client
        finally:
            client.disconnect()
            client.loop_stop()

    def wait_cosigned(self, size: int) -> None:
        try:
            self.observer.wait_for(
                f"east cosigned at {size}",
                lambda: checkpoint_size(self.observer.cosigned.get("east", "")) == size,
            )
        except AssertionError as exc:
            said = self.witness_log.read_text()[-3000:]
            raise AssertionError(f"{exc}; the witness said:\n{said}") from None

    def close(self) -> None:
        self.observer.close()
        if self.witness_proc is not None:
            self.stop_witness()
        self.broker.kill()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(tmp_path)
    try:
        made.setup()
        yield made
    finally:
        made.close()


def play(fleet: Fleet, rounds: int, state: Path | None = None, config: Path | None = None) -> int:
    """``rounds`` rounds at east (or at a copy of its state directory, or with another
    configuration): the log's size."""
    state = state or fleet.state
    done = controller(
        "simulate", "--fast", "--plain-rounds", "--faults", "none", "--rounds", str(rounds),
        "--config", str(config or fleet.config), "--state-dir", str(state),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return max(line["seq"] for line in export_lines(state))


def test_a_table_is_cosigned_over_the_shipped_broker(fleet: Fleet) -> None:
    cosigner = Verifier.parse(fleet.witness_key, ALG_COSIGNATURE_V1)
    size = play(fleet, 3)
    fleet.wait_cosigned(size)
    assert open_cosignature(fleet.observer.cosigned["east"], cosigner).checkpoint.size == size
    # the table reads its cosignature through the ACL and records it
    size = play(fleet, 3)
    fleet.wait_cosigned(size)
    recorded = [line for line in export_lines(fleet.state) if line["kind"] == "cosigned"]
    assert recorded, "the table recorded no cosignature"
    log = fleet.broker.log_text()
    assert "Denied" not in log, [line for line in log.splitlines() if "Denied" in line]
    assert " as east (" in log  # the client id is the CN, not paigow-east
    assert " as witness (" in log


# --- what an attacker with a connection to the broker, and the broker's crashes, may do ---------


def renumbered(line: dict[str, Any]) -> bytes:
    """``line``'s record re-numbered to follow it: the next seq, the right ``prev``, a
    well-formed export line that no key signed (the issue's anonymous re-numbering)."""
    value = canonical.decode(line["leaf"].encode())
    assert isinstance(value, dict)
    value["seq"], value["prev"] = line["seq"] + 1, line["hash"]
    forged = export_line(StoredRecord(value["seq"], value["kind"], canonical.encode(value)), None)
    return encode_record(forged)


def alert_kinds(fleet: Fleet) -> list[str]:
    """Every alert the witness published, its signature verified with the alert key."""
    made = controller("witness-key", "--state-dir", str(fleet.witness_dir))
    verifier = Verifier.parse(made.stdout.splitlines()[1].strip())
    return [f"{a.kind}:{a.table}" for a in (open_alert(p, verifier) for p in fleet.observer.alerts)]


def attack(fleet: Fleet, files: ClientFiles, lines: list[dict[str, Any]]) -> None:
    """What a client holding east's certificate (stolen, or east's own software gone bad) may
    publish on east's topics: each genuine older checkpoint again, retained; the last record
    re-numbered; statuses signed by another key (online, and offline) and unsigned ones; 50
    messages over the broker's message_size_limit and 50 under it but over the protocol's
    bounds on each topic."""
    checkpoints = [line["checkpoint"] for line in lines if "checkpoint" in line]
    assert len(checkpoints) >= 2, "east made too few checkpoints to replay"
    other = Signer.generate(Verifier.parse(fleet.witness_key, ALG_COSIGNATURE_V1).name)
    with fleet.client(files) as client:
        sent = []
        for note in checkpoints[:-1]:
            sent.append(client.publish(topic("east", Channel.CHECKPOINT), note.encode(), 1, True))
        sent.append(client.publish(topic("east", Channel.RECORDS), renumbered(lines[-1]), 1))
        for presence in (Presence.ONLINE, Presence.OFFLINE):
            forged = sign_status(SignedStatus("east", 10**9, 1, Status(presence, "ready")), other)
            sent.append(client.publish(topic("east", Channel.STATUS), forged, 1, True))
        sent.append(client.publish(topic("east", Channel.STATUS), b'{"status": "offline"}', 1))
        for info in sent:
            info.wait_for_publish(10)
    oversized = b"x" * (MESSAGE_SIZE_LIMIT + 1)
    for channel, bound in (
        (Channel.RECORDS, MAX_RECORD_BYTES),
        (Channel.CHECKPOINT, MAX_NOTE_BYTES),
        (Channel.STATUS, MAX_STATUS_BYTES),
    ):
        # the broker drops (and, on MQTT 5, disconnects for) what is past its limit: a
        # connection for each message, as a determined attacker would reconnect
        for payload in (oversized, b"{" + b" " * (bound + 1) + b"}"):
            with fleet.client(files) as client:
                infos = [client.publish(topic("east", channel), payload, 1) for _ in range(50)]
                for info in infos:
                    with contextlib.suppress(RuntimeError, ValueError):
                        info.wait_for_publish(10)


def refused(fleet: Fleet, cert: str, key: str) -> bool:
    """Whether the broker refuses a client with this certificate (none: ``""``) at the TLS
    handshake or right after it (TLS 1.3 says no after the client's finished message); the
    client trusts the broker's CA, so the refusal is the broker's."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="east")
    client.tls_set_context(tls_context(str(fleet.east.ca), cert, key))
    accepted: list[bool] = []
    client.on_connect = lambda _c, _u, _f, reason, _p: accepted.append(not reason.is_failure)
    try:
        client.connect("127.0.0.1", fleet.broker.port)
        for _ in range(40):  # 20 s at most, as the broker's answer is awaited
            if client.loop(timeout=0.5) != mqtt.MQTT_ERR_SUCCESS or accepted:
                break
    except (ssl.SSLError, OSError):
        return True
    finally:
        client.socket() and client.disconnect()
    return accepted == [] and client.loop(timeout=0.1) != mqtt.MQTT_ERR_SUCCESS


def test_attacks_and_broker_crashes_halt_nothing_raise_nothing_and_lose_nothing(
    fleet: Fleet,
) -> None:
    """The issue's attacks on the shipped broker over TLS, then the broker's two crashes: at
    the end every record of east is cosigned, and no alert but a stopped table's was raised."""
    # 1. an anonymous client, and one whose certificate another CA issued, are refused at the
    # handshake (each trusts the broker's CA: the broker is the one that says no)
    stranger = FleetCa(fleet.state.parent / "stranger-ca").table("east")
    for cert, key in (("", ""), (str(stranger.cert), str(stranger.key))):
        assert refused(fleet, cert, key), f"a client with {cert or 'no certificate'} connected"
    # 2. east plays and is cosigned; then the attacks, with east's own certificate
    size = play(fleet, 3)
    fleet.wait_cosigned(size)
    attack(fleet, fleet.east, list(export_lines(fleet.state)))
    size = play(fleet, 2)
    fleet.wait_cosigned(size)
    # 3. the broker stopped in order (its persistence saved: east's retained checkpoint,
    # status and cosignature as they are now), east plays on, and the broker is SIGKILLed:
    # restarted, it hands out the retained messages of before, all out of date
    fleet.broker.stop()
    fleet.broker.start()
    size = play(fleet, 2)
    fleet.wait_cosigned(size)
    fleet.broker.kill()
    fleet.broker.start()
    size = play(fleet, 1)
    fleet.wait_cosigned(size)
    # 4. records the broker acknowledged and then lost: the witness stops (its session, and
    # what the broker queues for it, are in the broker's memory), east plays, and the broker
    # restarts without its persistence; east sends them again from the witness's cosignature
    refusals = fleet.stop_witness()
    lost = play(fleet, 2)
    assert lost > size
    fleet.broker.kill()
    for saved in fleet.broker.directory.glob("mosquitto.db*"):
        saved.unlink()
    fleet.broker.start()
    fleet.start_witness()
    size = play(fleet, 1)
    fleet.wait_cosigned(size)
    refusals += fleet.stop_witness()
    # every record of east is cosigned; nothing was alerted but the probe's unknown table,
    # east's own signed offline status and, once (it stands until acknowledged), the
    # checkpoints over the protocol's bound that only a holder of east's certificate could
    # publish
    assert size == max(line["seq"] for line in export_lines(fleet.state))
    kinds = alert_kinds(fleet)
    assert kinds.count("bad_signature:east") == 1, kinds
    assert set(kinds) <= {"unknown_table:probe", "device_offline:east", "bad_signature:east"}
    assert "stale" in refusals, refusals
    kinds_at_east = {line["kind"] for line in export_lines(fleet.state)}
    assert "rollback_evidence" not in kinds_at_east
    faults = [line["data"] for line in export_lines(fleet.state) if line["kind"] == "fault_raised"]
    assert faults == [], faults


def test_two_copies_of_one_table_playing_are_a_fork(fleet: Fleet) -> None:
    """A real fork over the shipped broker: east's state directory copied; the copy plays a
    round cut off from the broker, east plays on and is cosigned, then the copy reaches the
    broker. From record N on there are two histories, each holding records older than the
    other's newest: a fork (not a rollback, whose branch is all later than what was
    cosigned), and east is cosigned no more."""
    size = play(fleet, 2)
    fleet.wait_cosigned(size)
    copy = fleet.state.parent / "east-copy"
    shutil.copytree(fleet.state, copy)
    cut_off = fleet.config.parent / "east-cut-off.toml"
    unreachable = f"mqtts://127.0.0.1:{free_port()}"
    cut_off.write_text(fleet.config.read_text().replace(fleet.broker.url, unreachable))
    assert unreachable in cut_off.read_text()
    play(fleet, 1, copy, cut_off)
    cosigned = play(fleet, 1)
    fleet.wait_cosigned(cosigned)
    play(fleet, 1, copy)
    fleet.observer.wait_for(
        "a fork alert", lambda: any(b'"fork"' in a for a in fleet.observer.alerts)
    )
    assert "fork:east" in alert_kinds(fleet)
    assert "rollback:east" not in alert_kinds(fleet)
    after = play(fleet, 1)
    assert after > cosigned
    refusals = fleet.stop_witness()
    assert checkpoint_size(fleet.observer.cosigned["east"]) == cosigned, refusals
