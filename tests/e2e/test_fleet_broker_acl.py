"""The casino's broker as shipped (hw/mosquitto/paigow.conf and paigow.acl, Debian's mosquitto,
certificates from ``paigow-controller fleet-ca``): only a client with a certificate of the
casino's CA connects, each table publishes only its own topics and reads only its own
cosignature, the witness reads every table and writes the cosignatures and the alerts.

Every "never delivered" here is proved by order, not by waiting: the forbidden messages go
first, then one the client may send; once that one arrives, anything before it would have
(mosquitto delivers a client's messages to a subscriber in the order it received them). The
observer that sees everything is the test's own, an extra user of the ACL (``topic read #``).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from support.fleet_broker import ClientFiles, FleetCa, ShippedBroker

from controller.fleet.client import tls_context
from controller.fleet.protocol import MAX_RECORD_BYTES

WAIT_S = 120.0  # a bound on every wait (a loaded machine is slow, never wrong)
OBSERVER_ACL = "user observer\ntopic read #\n"


class Client:
    """A paho client of the broker's TLS listener, with ``files``' certificate (None: none)
    checked against ``ca``; what it receives, in order."""

    def __init__(
        self,
        broker: ShippedBroker,
        files: ClientFiles | None,
        *,
        ca: Path,
        client_id: str = "",
        v5: bool = False,
    ) -> None:
        self.name = files.name if files is not None else "anonymous"
        self.messages: list[tuple[str, bytes]] = []
        self.outcome: str | None = None  # "connected", or why not
        self.disconnects = 0
        self._cond = threading.Condition()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or f"paigow-{self.name}",
            protocol=MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311,
        )
        if files is None:
            self.client.tls_set_context(ssl.create_default_context(cafile=str(ca)))
        else:
            self.client.tls_set_context(tls_context(str(ca), str(files.cert), str(files.key)))
        self.client.on_connect = self._on_connect
        self.client.on_connect_fail = lambda *_: self._decide("refused")
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *_: self._decide(None, subscribed=True)
        self._subscribed = 0
        try:
            self.client.connect("127.0.0.1", broker.port, keepalive=10)
        except (OSError, ssl.SSLError) as exc:
            self.outcome = f"refused: {exc}"
            return
        self.client.loop_start()

    def _decide(self, outcome: str | None, *, subscribed: bool = False) -> None:
        with self._cond:
            if outcome is not None and self.outcome is None:
                self.outcome = outcome
            self._subscribed += subscribed
            self._cond.notify_all()

    def _on_connect(self, client: mqtt.Client, _: Any, flags: Any, reason: Any, p: Any) -> None:
        self._decide("refused: " + str(reason) if reason.is_failure else "connected")

    def _on_disconnect(self, client: mqtt.Client, _: Any, flags: Any, reason: Any, p: Any) -> None:
        with self._cond:
            self.disconnects += 1
        self._decide(f"refused: {reason}")

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        with self._cond:
            self.messages.append((message.topic, message.payload))
            self._cond.notify_all()

    def wait(self, what: str, predicate: Callable[[], bool]) -> None:
        with self._cond:
            assert self._cond.wait_for(predicate, WAIT_S), (
                f"{self.name}: not {what}: {self.outcome}"
            )

    def is_connected(self) -> bool:
        """Whether the broker took it (it waits for the broker's answer, whatever it is)."""
        self.wait("answered", lambda: self.outcome is not None)
        return self.outcome == "connected"

    def subscribe(self, *topics: str) -> None:
        assert self.is_connected(), self.outcome
        with self._cond:
            before = self._subscribed
        self.client.subscribe([(t, 1) for t in topics])
        self.wait("subscribed", lambda: self._subscribed > before)

    def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        """QoS 1, acknowledged (the broker acknowledges what its ACL refuses, too)."""
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(WAIT_S)

    def wait_message(self, topic: str, payload: bytes) -> list[tuple[str, bytes]]:
        """Everything received, once (topic, payload) has been."""
        self.wait(f"given {payload[:40]!r} on {topic}", lambda: (topic, payload) in self.messages)
        with self._cond:
            return list(self.messages)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def settles(connect: Callable[[], Client], *, connected: bool) -> bool:
    """Whether clients made by ``connect`` come to be taken (``connected``) or refused, trying
    again until WAIT_S: mosquitto logs "Reloading config" before it reads the new CRL, so the
    first connection after the line may still meet the old one."""
    deadline = time.monotonic() + WAIT_S
    while True:
        client = connect()
        try:
            if client.is_connected() == connected:
                return True
        finally:
            client.close()
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> FleetCa:
    return FleetCa(tmp_path_factory.mktemp("fleet-ca"))


@pytest.fixture
def broker(tmp_path: Path, ca: FleetCa) -> Iterator[ShippedBroker]:
    b = ShippedBroker(tmp_path / "broker", ca, extra_acl=OBSERVER_ACL)
    b.start()
    try:
        yield b
    finally:
        b.kill()


@pytest.fixture(scope="module")
def certs(ca: FleetCa) -> dict[str, ClientFiles]:
    return {
        "A": ca.table("A"),
        "B": ca.table("B"),
        "witness": ca.witness(),
        "observer": ca.table("observer"),  # the test's eyes: its own user in the ACL
    }


@pytest.fixture
def clients(
    broker: ShippedBroker, ca: FleetCa, certs: dict[str, ClientFiles]
) -> Iterator[Callable[..., Client]]:
    made: list[Client] = []

    def connect(name: str | None, **options: Any) -> Client:
        files = None if name is None else certs[name]
        client = Client(broker, files, ca=certs["A"].ca, **options)
        made.append(client)
        return client

    yield connect
    for client in made:
        client.close()


def test_the_shipped_config_runs(broker: ShippedBroker) -> None:
    """mosquitto started on it: it read every line (it exits on one it does not know) and
    listens on TLS only."""
    log = broker.log_text()
    assert f"Opening ipv4 listen socket on port {broker.port}." in log
    assert log.count("listen socket") == 1
    assert "Error:" not in log
    assert broker.process is not None
    assert broker.process.poll() is None
    text = (broker.conf_d / "paigow.conf").read_text()
    assert text.count("listener ") == 1
    for line in (
        "require_certificate true",
        "use_identity_as_username true",
        "use_username_as_clientid true",
        "allow_anonymous false",
        "persistence true",
    ):
        assert f"\n{line}\n" in text


def test_only_a_certificate_of_the_casino_connects(
    broker: ShippedBroker, clients: Callable[..., Client], tmp_path: Path
) -> None:
    assert clients("A").is_connected()
    anonymous = clients(None)  # TLS, but no certificate
    assert not anonymous.is_connected()
    stranger_ca = FleetCa(tmp_path / "stranger", name="casino test fleet CA")  # the same name
    stranger = stranger_ca.table("A")
    other = Client(broker, stranger, ca=stranger.ca)  # it trusts its own CA's broker: refused
    try:
        assert not other.is_connected()
    finally:
        other.close()
    trusting = Client(broker, stranger, ca=broker.files["ca.pem"])
    try:
        assert not trusting.is_connected()  # it trusts the broker; the broker not its CA
    finally:
        trusting.close()
    assert "certificate verify failed" in broker.log_text()
    # MQTT without TLS on the TLS port: the broker reads no CONNECT, it answers none
    plain = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="plain")
    answered: list[Any] = []
    plain.on_connect = lambda *args: answered.append(args[3])
    try:
        plain.connect("127.0.0.1", broker.port, keepalive=5)
        for _ in range(50):
            if plain.loop(timeout=0.1) != mqtt.MQTT_ERR_SUCCESS:
                break
    except OSError:
        pass
    assert answered == []
    assert not plain.is_connected()


def test_a_table_publishes_its_own_topics_only(clients: Callable[..., Client]) -> None:
    observer, witness = clients("observer"), clients("witness", v5=True)
    observer.subscribe("#")
    witness.subscribe("paigow/v1/+/records", "paigow/v1/+/checkpoint", "paigow/v1/+/status")
    a = clients("A")
    a.subscribe("paigow/v1/A/cosignature")
    forged = b"forged by A"
    for topic in (
        "paigow/v1/B/records",
        "paigow/v1/B/checkpoint",
        "paigow/v1/B/status",
        "paigow/v1/A/cosignature",
        "paigow/v1/B/cosignature",
        "paigow/v1/alerts",
        "paigow/v1/A",
        "paigow/v2/A/records",
        "$SYS/broker/uptime",
    ):
        a.publish(topic, forged)
    for channel in ("records", "checkpoint", "status"):
        a.publish(f"paigow/v1/A/{channel}", f"A's {channel}".encode())
    seen = observer.wait_message("paigow/v1/A/status", b"A's status")
    assert [m for m in seen if m[1] == forged] == []
    assert [t for t, _ in seen] == [f"paigow/v1/A/{c}" for c in ("records", "checkpoint", "status")]
    assert witness.wait_message("paigow/v1/A/status", b"A's status") == seen
    assert [m for m in a.messages if m[1] == forged] == []  # not even its own cosignature
    assert a.is_connected()  # refused publishes are dropped, the table stays connected


def test_a_table_reads_its_own_cosignature_only(clients: Callable[..., Client]) -> None:
    a, b = clients("A"), clients("B")
    a.subscribe("paigow/v1/B/cosignature", "paigow/v1/+/records", "#", "paigow/v1/A/cosignature")
    b.subscribe("paigow/v1/B/cosignature")
    witness = clients("witness", v5=True)
    assert witness.is_connected()
    witness.publish("paigow/v1/B/cosignature", b"B cosigned", retain=True)
    witness.publish("paigow/v1/alerts", b"an alert")
    b.publish("paigow/v1/B/records", b"B's record")
    witness.publish("paigow/v1/A/cosignature", b"A cosigned", retain=True)
    assert a.wait_message("paigow/v1/A/cosignature", b"A cosigned") == [
        ("paigow/v1/A/cosignature", b"A cosigned")
    ]
    assert b.wait_message("paigow/v1/B/cosignature", b"B cosigned")
    late = clients("observer")  # the retained cosignatures: still each table's own
    late.subscribe("paigow/v1/+/cosignature")
    late.wait_message("paigow/v1/A/cosignature", b"A cosigned")
    a.close()
    again = clients("A")
    again.subscribe("paigow/v1/+/cosignature")
    assert again.wait_message("paigow/v1/A/cosignature", b"A cosigned") == [
        ("paigow/v1/A/cosignature", b"A cosigned")
    ]
    witness.publish("paigow/v1/B/cosignature", b"B again")
    witness.publish("paigow/v1/A/cosignature", b"A again")
    assert again.wait_message("paigow/v1/A/cosignature", b"A again")[-1] == (
        "paigow/v1/A/cosignature",
        b"A again",
    )
    assert not [m for m in again.messages if m[0] != "paigow/v1/A/cosignature"]


def test_a_table_reads_its_own_retained_status_only(clients: Callable[..., Client]) -> None:
    """The publisher reads its own retained status back at each connect (its connection numbers
    stay above the broker's); another table's it never sees."""
    a, b = clients("A"), clients("B")
    a.publish("paigow/v1/A/status", b"A's status", retain=True)
    b.publish("paigow/v1/B/status", b"B's status", retain=True)
    a.close()
    again = clients("A")  # its next connection (the broker ties the session to the CN)
    again.subscribe("paigow/v1/+/status")
    assert again.wait_message("paigow/v1/A/status", b"A's status") == [
        ("paigow/v1/A/status", b"A's status")
    ]
    b.publish("paigow/v1/B/status", b"B again", retain=True)
    again.publish("paigow/v1/A/status", b"A again", retain=True)
    assert again.wait_message("paigow/v1/A/status", b"A again")[-1] == (
        "paigow/v1/A/status",
        b"A again",
    )
    assert not [m for m in again.messages if m[0] != "paigow/v1/A/status"]


def test_the_witness_reads_every_table_and_writes_the_cosignatures(
    clients: Callable[..., Client],
) -> None:
    witness = clients("witness", v5=True)
    witness.subscribe("paigow/v1/+/records", "paigow/v1/+/checkpoint", "paigow/v1/+/status", "#")
    observer = clients("observer")
    observer.subscribe("paigow/v1/alerts", "paigow/v1/+/cosignature")
    a, b = clients("A"), clients("B")
    a.subscribe("paigow/v1/A/cosignature")
    b.subscribe("paigow/v1/B/cosignature")
    a.publish("paigow/v1/A/records", b"A 1")
    b.publish("paigow/v1/B/records", b"B 1")
    a.publish("paigow/v1/A/checkpoint", b"A at 1", retain=True)
    b.publish("paigow/v1/B/status", b"B online", retain=True)
    witness.wait_message("paigow/v1/A/checkpoint", b"A at 1")
    seen = witness.wait_message("paigow/v1/B/status", b"B online")
    assert ("paigow/v1/A/records", b"A 1") in seen
    assert ("paigow/v1/B/records", b"B 1") in seen
    witness.publish("paigow/v1/A/cosignature", b"A cosigned at 1", retain=True)
    witness.publish("paigow/v1/B/cosignature", b"B cosigned at 0", retain=True)
    witness.publish("paigow/v1/alerts", b"table B: silence")
    a.wait_message("paigow/v1/A/cosignature", b"A cosigned at 1")
    b.wait_message("paigow/v1/B/cosignature", b"B cosigned at 0")
    observer.wait_message("paigow/v1/alerts", b"table B: silence")
    # the witness reads no cosignature nor alert, not even its own
    assert not [t for t, _ in witness.messages if t.endswith(("cosignature", "alerts"))]


def test_a_message_over_the_size_limit_is_dropped_and_the_next_arrives(
    clients: Callable[..., Client],
) -> None:
    """message_size_limit (just above the protocol's largest record): 50 messages over it are
    dropped, their QoS 1 flow completed, and the table stays connected; a record at the
    protocol's largest passes, and so does the next."""
    witness = clients("witness", v5=True)
    witness.subscribe("paigow/v1/+/records")
    a = clients("A")
    assert a.is_connected()
    too_large = b"x" * (MAX_RECORD_BYTES + 4096)
    for _ in range(50):
        a.publish("paigow/v1/A/records", too_large)
    largest = b"y" * MAX_RECORD_BYTES
    a.publish("paigow/v1/A/records", largest)
    a.publish("paigow/v1/A/records", b"the next record")
    seen = witness.wait_message("paigow/v1/A/records", b"the next record")
    assert [len(payload) for _, payload in seen] == [MAX_RECORD_BYTES, len(b"the next record")]
    assert (a.disconnects, a.outcome) == (0, "connected")


def test_a_client_cannot_take_another_ones_session(
    broker: ShippedBroker, clients: Callable[..., Client]
) -> None:
    """The client id is the certificate's CN (use_username_as_clientid): B asking for A's id,
    or the witness's, takes nobody's session; B is B."""
    a = clients("A")
    witness = clients("witness", v5=True)
    witness.subscribe("paigow/v1/+/records")
    impostor = clients("B", client_id="paigow-A")
    assert impostor.is_connected()
    thief = clients("observer", client_id="paigow-witness")
    assert thief.is_connected()
    a.publish("paigow/v1/A/records", b"A still here")
    impostor.publish("paigow/v1/A/records", b"B as A")  # as B: refused by the ACL
    impostor.publish("paigow/v1/B/records", b"B as B")
    seen = witness.wait_message("paigow/v1/B/records", b"B as B")
    assert ("paigow/v1/A/records", b"A still here") in seen
    assert ("paigow/v1/A/records", b"B as A") not in seen
    assert (a.disconnects, witness.disconnects) == (0, 0)
    log = broker.log_text()
    assert "as B (" in log
    assert "as paigow-A" not in log


def test_a_revoked_certificate_is_refused(
    broker: ShippedBroker, ca: FleetCa, clients: Callable[..., Client]
) -> None:
    """fleet-ca revoke, the CRL to the broker's crlfile, systemctl reload (SIGHUP): the
    revoked table is refused from its next connection on, others are not. A connection open
    before stays open until mosquitto restarts (docs/casino-it.md: restart, not reload)."""
    revoked, probe = ca.table("C"), ca.table("C-probe")
    early = Client(broker, revoked, ca=revoked.ca, client_id="paigow-C")
    try:
        assert early.is_connected()
        ca.revoke(probe)
        broker.install_crl(ca.revoke(revoked))
        # the new CRL is read once a second revoked table is refused (a connection with C's
        # own certificate would be client C and take over early's session)
        assert settles(lambda: Client(broker, probe, ca=probe.ca), connected=False)
        witness = clients("witness", v5=True)
        witness.subscribe("paigow/v1/+/records")
        early.publish("paigow/v1/C/records", b"still connected")
        witness.wait_message("paigow/v1/C/records", b"still connected")
    finally:
        early.close()
    later = Client(broker, revoked, ca=revoked.ca)
    try:
        assert not later.is_connected()
    finally:
        later.close()
    assert clients("B").is_connected()
    broker.stop()
    broker.start()
    again = Client(broker, revoked, ca=revoked.ca)
    try:
        assert not again.is_connected()
    finally:
        again.close()
    assert "certificate revoked" in broker.log_text() or "verify failed" in broker.log_text()


def test_an_expired_crl_refuses_everyone(
    broker: ShippedBroker, ca: FleetCa, clients: Callable[..., Client], tmp_path: Path
) -> None:
    """Why fleet-ca crl exists: past the CRL's next update, OpenSSL refuses every client."""
    from datetime import UTC, datetime, timedelta

    from controller.fleet import pki

    cert, key = pki.load_ca(
        (ca.ca_dir / "ca.pem").read_bytes(), (ca.ca_dir / "ca.key").read_bytes()
    )
    stale = pki.make_crl(cert, key, [], number=1, now=datetime.now(UTC) - timedelta(days=3), days=1)
    (tmp_path / "stale.crl").write_bytes(pki.crl_pem(stale))
    broker.install_crl(tmp_path / "stale.crl")
    assert settles(lambda: clients("A"), connected=False), broker.log_text()[-3000:]
    broker.install_crl(ca.ca_dir / "crl.pem")
    assert settles(lambda: clients("B"), connected=True), broker.log_text()[-3000:]
    assert clients("A").is_connected()
