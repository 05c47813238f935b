"""The witness on the broker: a paho-mqtt subscriber with a persistent session (a fixed client
id, ``clean_start`` off, a session that outlives a stop by ``session_expiry_s``), so that the
broker keeps every table's records while the witness is down and hands them over when it is
back.

One control thread. paho's network thread only puts each message on a bounded queue (waiting
when it is full: the broker then holds the rest); the control thread takes them in batches,
lets the :class:`~controller.witness.tables.Witness` decide inside one store transaction,
publishes what it decided (cosignatures retained, alerts) only once that committed, and only
then acknowledges the messages (paho's manual acknowledgement): a message the witness did not
keep is delivered again. The timers (gap, silence) run on the same thread between messages,
and so does a user's acknowledgement of an alert (the dashboard's thread hands it over with
:meth:`WitnessService.acknowledge` and waits for the commit): one writer to the store.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from controller.core.config import BrokerAddress
from controller.fleet.client import send_at_once, tls_context
from controller.fleet.protocol import MAX_RECORD_BYTES, QOS, Channel, subscription, topic
from controller.witness.ports import StoredAlert
from controller.witness.tables import Witness

log = logging.getLogger("paigow.witness")

DEFAULT_CLIENT_ID = "paigow-witness"
SESSION_EXPIRY_S = 7 * 24 * 3600  # the broker keeps the witness's queue a week
MAX_PACKET_BYTES = MAX_RECORD_BYTES + 64 * 1024  # the broker sends nothing larger
QUEUE_MESSAGES = 1024
BATCH_MESSAGES = 256  # messages decided in one transaction
ACK_TIMEOUT_S = 5.0  # an acknowledgement waits this long for the control thread


@dataclass(frozen=True)
class Connection:
    """Where the broker is and how the witness logs in."""

    address: BrokerAddress
    client_id: str = DEFAULT_CLIENT_ID
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    username: str = ""
    password: str = ""
    keepalive_s: int = 30
    session_expiry_s: int = SESSION_EXPIRY_S
    # () every table (wildcard subscriptions; a table without a key is an alert); else only
    # these tables' topics: one witness of several, the tables split between them
    tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Message:
    topic: str
    payload: bytes
    mid: int
    qos: int


@dataclass
class _Ack:
    """A user's acknowledgement, from the dashboard's thread; ``done`` once it committed."""

    alert_id: int
    user: str
    done: threading.Event = field(default_factory=threading.Event)
    result: tuple[StoredAlert | None, bool] = (None, False)


_CONNECTED = object()  # put on the queue at each connection: republish the cosignatures


class WitnessService:
    def __init__(self, connection: Connection, *, tick_s: float = 1.0) -> None:
        self.connection = connection
        self.tick_s = tick_s
        self._queue: queue.Queue[_Message | object] = queue.Queue(maxsize=QUEUE_MESSAGES)
        self._stopping = threading.Event()
        self.connected = threading.Event()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=connection.client_id,
            protocol=MQTTProtocolVersion.MQTTv5,
            manual_ack=True,
        )
        if connection.ca_file:
            self.client.tls_set_context(
                tls_context(connection.ca_file, connection.cert_file, connection.key_file)
            )
        send_at_once(self.client)
        if connection.username:
            self.client.username_pw_set(connection.username, connection.password)
        self.client.reconnect_delay_set(1, 30)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def publish(self, topic: str, payload: bytes, retain: bool) -> None:
        """QoS 1; paho keeps it until the broker has it (while connected; a cosignature lost
        with the connection is published again at the next one)."""
        self.client.publish(topic, payload, qos=QOS, retain=retain)

    def acknowledge(
        self, alert_id: int, user: str, *, timeout_s: float = ACK_TIMEOUT_S
    ) -> tuple[StoredAlert | None, bool]:
        """The dashboard's ``POST /alerts/<id>/ack``, decided on the control thread once the
        store committed it; TimeoutError when that did not happen within ``timeout_s``."""
        ack = _Ack(alert_id, user)
        try:
            self._queue.put(ack, timeout=timeout_s)
        except queue.Full:
            raise TimeoutError("the witness is busy") from None
        if not ack.done.wait(timeout_s):
            raise TimeoutError("the witness did not record the acknowledgement in time")
        return ack.result

    def run(
        self,
        witness: Witness,
        stop: threading.Event,
        *,
        ready: Callable[[], object] | None = None,
    ) -> None:
        """Until ``stop`` is set. Raises what the store raises (the witness must restart)."""
        properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        properties.SessionExpiryInterval = self.connection.session_expiry_s
        properties.MaximumPacketSize = MAX_PACKET_BYTES
        address = self.connection.address
        self.client.connect_async(
            address.host,
            address.port,
            keepalive=self.connection.keepalive_s,
            clean_start=False,
            properties=properties,
        )
        self.client.loop_start()
        try:
            if ready is not None:
                ready()
            while not stop.is_set():
                self._step(witness, self._take())
        finally:
            self._stopping.set()
            with contextlib.suppress(Exception):
                self.client.disconnect()
            self.client.loop_stop()
            if witness.refused:
                log.info("refused or dropped: %s", dict(witness.refused))

    def _take(self) -> list[_Message | object]:
        try:
            first = self._queue.get(timeout=self.tick_s)
        except queue.Empty:
            return []
        batch = [first]
        while len(batch) < BATCH_MESSAGES:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _step(self, witness: Witness, batch: list[_Message | object]) -> None:
        acks = []
        users = []
        try:
            with witness.store.transaction():
                for item in batch:
                    if item is _CONNECTED:
                        witness.republish()
                    elif isinstance(item, _Message):
                        witness.receive(item.topic, item.payload)
                        if item.qos:
                            acks.append(item)
                    elif isinstance(item, _Ack):
                        item.result = witness.acknowledge(item.alert_id, item.user)
                        users.append(item)
                witness.tick()
        except BaseException:
            witness.discard()
            raise
        witness.flush()
        for message in acks:
            self.client.ack(message.mid, message.qos)
        for user in users:
            user.done.set()

    # --- paho's thread --------------------------------------------------------------------

    def _on_connect(
        self,
        client: mqtt.Client,
        userdata: object,
        flags: mqtt.ConnectFlags,
        reason: ReasonCode,
        properties: Properties | None,
    ) -> None:
        if reason.is_failure:
            log.error("the broker refused the witness: %s", reason)
            return
        log.info(
            "connected to %s (%s session)",
            self.connection.address,
            "resumed" if flags.session_present else "new",
        )
        channels = (Channel.RECORDS, Channel.CHECKPOINT, Channel.STATUS)
        if self.connection.tables:
            # the session may hold the wildcards of an earlier start: only these tables now
            client.unsubscribe([subscription(channel) for channel in channels])
            wanted = [topic(t, c) for t in self.connection.tables for c in channels]
        else:
            wanted = [subscription(channel) for channel in channels]
        client.subscribe([(name, SubscribeOptions(qos=QOS)) for name in wanted])
        self._put(_CONNECTED)

    def _on_subscribe(
        self,
        client: mqtt.Client,
        userdata: object,
        mid: int,
        reasons: list[ReasonCode],
        properties: Properties | None,
    ) -> None:
        failed = [str(r) for r in reasons if r.is_failure]
        if failed:
            log.error("the broker refused the witness's subscriptions: %s", ", ".join(failed))
            return
        if not self.connected.is_set():
            log.info("subscribed: what the tables send from now on comes to the witness")
        self.connected.set()  # connected and subscribed: what the tables send now comes here

    def _on_disconnect(
        self,
        client: mqtt.Client,
        userdata: object,
        flags: mqtt.DisconnectFlags,
        reason: ReasonCode,
        properties: Properties | None,
    ) -> None:
        self.connected.clear()
        if not self._stopping.is_set():
            log.warning("disconnected from the broker (%s); reconnecting", reason)

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        try:
            name = message.topic
        except UnicodeDecodeError:  # MQTT topics are UTF-8; the witness refuses the rest
            name = ""
        self._put(_Message(name, bytes(message.payload), message.mid, message.qos))

    def _put(self, item: _Message | object) -> None:
        """Wait while the queue is full (the broker holds the rest); give up only when the
        witness stops (the message, not acknowledged, comes again next time)."""
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
