"""The fleet publisher: every audit record, the latest signed checkpoint and the table's status
to the casino's MQTT broker ([fleet], topics in ``controller.fleet.protocol``), and the
witness's cosignature back.

**The log is the outbox.** The publisher reads the records from the audit log itself, through a
read-only connection of its own (``controller.fleet.outbox``), in sequence order, and sends each
as one line of ``paigow-controller export`` with QoS 1, at most ``WINDOW`` unacknowledged at a
time. On each PUBACK it moves its cursor, the highest sequence number acknowledged with every one
before it, kept in the state directory (``fleet-cursor``, written at most every
``PERSIST_EVERY_S`` and at the stop). On every connection it sends again from the cursor on: a
broker that was down, a network cut or a controller restart loses nothing, and a record may
arrive twice (a consumer drops a duplicate by its ``seq``). A cursor beyond the log's end or
naming a record the log no longer holds (the log was rolled back or replaced) is logged as an
error and the log is published again from its first record, so that the witness sees it.

The latest signed checkpoint is published (retained) only once every record it signs was
acknowledged.

**Signed statuses.** The status (retained) is a note signed with the log's own key
(``protocol.sign_status``, through a :class:`~controller.fleet.protocol.StatusSigner` that can
sign nothing else), so nobody else on the broker can say a table is online, offline or showing
a fault. It names the connection (a number that only grows across the table's life:
``fleet-connection``, the rule in ``controller.fleet.outbox``, written durably before each
connect) and its place in it (1, 2, ... per connection). It says ``online`` with the screen at
each change; the broker's will, signed at connect, is the connection's ``offline`` status with
seq ``END_OF_CONNECTION`` (the end of that connection, for a controller that vanished); an
orderly stop sends what is left for at most ``[fleet] stop_flush_s``, says ``offline`` with
the connection's next seq and disconnects. A reader takes a status only if its
``(connection, seq)`` is greater than the last it took. A log with no key (its identity in
doubt) publishes no status.

**It never holds up the table.** The control thread only sets an event after each commit and
hands over each screen (``committed``, ``observe``: a lock and an assignment). One thread of
the publisher's own owns the MQTT connection (a new paho client for each connection, so that
paho never resends what the cursor will send again) and the log reader. A broker that cannot
be reached is tried again with a growing delay; a failure is logged, never a fault of the
table, and never decides what the table shows.

**Cosignatures.** With ``[fleet] witness_key`` the publisher takes the witness's cosignatures
(``paigow/v1/<table>/cosignature``). One is accepted only if the witness's signature verifies
with that key (``open_cosignature``), the log's own with the log's key (``open_checkpoint``),
and its size and root are the log's (the root over the log's first ``size`` records, computed
from the log). The newest accepted is shown (``on_anchor``); one that covers a round close (a
``close`` or ``void`` record) that no recorded cosignature covered yet is recorded, through
the control loop's queue (a ``COSIGNED`` event), so at most one ``cosigned`` record per round
and no loop of records begetting checkpoints begetting cosignatures.

**The cursor is the witness's cosignature** (``controller.fleet.resend``): the size ``S`` of
the newest accepted cosignature (before one comes, the one the log's last ``cosigned`` record
names) is what is known to be safe. A new connection sends from ``min(cursor, S) + 1``; the
connection's first cosignature, behind where it started, sends again from after it at once;
while connected, records acknowledged past ``S`` with a checkpoint past ``S`` published and
``S`` not grown for ``RESEND_AFTER_S`` are sent again from ``S + 1`` (backing off to
``RESEND_MAX_S``). Records a broker acknowledged and then lost reach the
witness by themselves; ``fleet-cursor`` is never deleted by hand.

**A cosignature that proves the log was longer.** One whose witness's signature and whose
inner checkpoint's signature, by this log's own key, both verify, but of more records than the
log holds or of another root at a size it holds: this log's key signed a history the log no
longer has (it went back: an older copy, a card swapped). That is evidence, not a refusal: it
goes to the control loop as ``ROLLBACK_EVIDENCE`` (the core records it as
``rollback_evidence`` and latches ``log_rollback``), once per (size, root): a restart does
not send it again when the log already records it. One whose inner checkpoint is not signed by
this log's key is refused and logged (anyone can make one), as is garbage or another key's.
"""

from __future__ import annotations

import base64
import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from controller.core.config import FleetConfig
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    SIGNATURE_DASH,
    Cosigned,
    Verifier,
    open_checkpoint,
    open_cosignature,
)
from controller.core.record_data import cosigned_data
from controller.core.state import RollbackEvidence, Screen, WitnessCosigned
from controller.errors import AuditLogError, CursorError, FleetError, NoteError, ProtocolError
from controller.fleet.client import read_credentials, send_at_once, tls_context
from controller.fleet.outbox import (
    CONNECTION_FILE,
    CURSOR_FILE,
    Cursor,
    LogOutbox,
    Outgoing,
    next_connection,
    read_connection,
    read_cursor,
    write_connection,
    write_cursor,
)
from controller.fleet.protocol import (
    END_OF_CONNECTION,
    QOS,
    Channel,
    Presence,
    SignedStatus,
    Status,
    StatusSigner,
    decode_note,
    open_status,
    topic,
)
from controller.fleet.resend import WitnessCursor
from controller.ports import EventSink, monotonic_ms

log = logging.getLogger("paigow.fleet")

WINDOW = 64  # records sent and not yet acknowledged, at most
POLL_S = 0.5  # the log is looked at this often even without a commit's wake-up
NETWORK_S = 0.05  # the longest the thread waits on the socket before it looks at the log
# The cursor is written (durably: a file fsync and a rename) at most this often, and at the
# stop: at a table's pace a round's three commits would otherwise add three fsyncs to the
# log's three (bench/bench_writes.py). After a power cut at most this much is sent again, which
# at least once delivery allows (consumers drop duplicates by seq).
PERSIST_EVERY_S = 30.0
RECONNECT_MIN_S = 0.5
RECONNECT_MAX_S = 30.0
OFFLINE_GRACE_S = 1.0  # after the flush: for "offline" to be acknowledged
MAX_REFUSALS_LOGGED = 10  # refused cosignatures logged one by one per minute; then counted
MAX_SAFE_TIMESTAMP = 2**53 - 1  # a record's integers are I-JSON's (controller/core/canonical)


@dataclass(frozen=True, slots=True)
class Anchor:
    """A cosignature this publisher accepted: the log up to ``size`` records, as the witness
    saw it at ``timestamp`` (POSIX seconds)."""

    witness: str
    size: int
    timestamp: int

    def as_display(self) -> dict[str, object]:
        return {"witness": self.witness, "size": self.size, "timestamp": self.timestamp}


@dataclass(frozen=True, slots=True)
class _Flush:
    """A stop under way: the records up to ``target`` sent by ``deadline`` (monotonic)."""

    deadline: float
    target: int


def utc_text(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Publisher:
    """One table's publisher (see the module docstring). ``start`` starts its thread,
    ``committed`` and ``observe`` are called by the control thread, ``close`` flushes."""

    def __init__(
        self,
        config: FleetConfig,
        *,
        table: str,
        state_dir: Path,
        signer: StatusSigner | None,
        events: EventSink | None = None,
        on_anchor: Callable[[Mapping[str, object]], None] | None = None,
        wall_clock: Callable[[], int] | None = None,
        mode: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``signer``: the log's key, for the statuses only (None: a log whose key is not
        known; no status is published and no cosignature taken). ``clock``: the monotonic
        clock of the witness's cursor (when to send again). Raises :class:`FleetError` when
        the configured files cannot be used."""
        broker = config.broker
        if broker is None:
            raise FleetError("[fleet] mqtt_url is not set")
        self.config = config
        self.broker = broker
        self.table = table
        self.state_dir = Path(state_dir)
        self._signer = signer
        self.log_key = None if signer is None else signer.verifier
        self.events = events
        self.on_anchor = on_anchor
        self._wall = wall_clock or (lambda: time.time_ns() // 1_000_000)
        self._credentials = (
            read_credentials(Path(config.credentials_file)) if config.credentials_file else None
        )
        self._tls = (
            tls_context(config.ca_file, config.cert_file, config.key_file) if broker.tls else None
        )
        self._witness = (
            Verifier.parse(config.witness_key, ALG_COSIGNATURE_V1) if config.witness_key else None
        )
        self._topics = {channel: topic(table, channel) for channel in Channel}
        self.cursor_path = self.state_dir / CURSOR_FILE
        self.connection_path = self.state_dir / CONNECTION_FILE
        self._outbox = LogOutbox(self.state_dir)
        # shared with the control thread and the callers of close (under _lock)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._flush_s = float(config.stop_flush_s)  # set by close: what is left is sent so long
        self._status = Status(Presence.ONLINE, mode=mode)
        self._status_changed = True
        self._thread = threading.Thread(target=self._run, name="fleet-publisher", daemon=True)
        # the publisher's thread only
        self._client: mqtt.Client | None = None
        self._connected = False
        self._backoff_s = RECONNECT_MIN_S
        self._next_attempt = 0.0
        self._cursor = Cursor()
        self._saved = Cursor()
        self._last_saved_at = 0.0
        self._next_seq = 1
        self._in_flight: dict[int, Outgoing] = {}  # by message id
        self._acked_ahead: dict[int, str] = {}  # acknowledged past a gap: seq -> hash
        self._published_checkpoint = 0  # no checkpoint up to this size is published again
        self._checkpoint_acked = 0  # the newest checkpoint the broker acknowledged, this run
        self._checkpoint_mid: tuple[int, int] | None = None  # (mid, size) in flight
        self._status_mid: int | None = None
        self._offline_mid: int | None = None
        self._offline_acked = False
        # the signed statuses: this connection's number, the last seq it used, the greatest
        # number used or seen (the broker's retained status) in this run
        self.connection = 0
        self._status_seq = 0
        self._connection_seen = 0
        self._status_probe = False  # the first message on the status topic is still to come
        self._reconnect_as_newer = False
        self._recorded_close = 0  # the round close the last cosigned record covers
        self._anchor: Anchor | None = None
        self._clock = clock
        self._witness_cursor = WitnessCursor()
        self.resends = 0  # how many times records were sent again from the cosignature
        self._evidence: set[tuple[int, str]] = set()  # (size, root) of rollback evidence
        self._refusals = 0
        self._refusals_minute = 0
        self.is_connected = False  # for the service status and the tests (read anywhere)

    # --- from the control thread -----------------------------------------------------------

    def start(self) -> None:
        if self._signer is None:
            log.warning("fleet: the log's key is not known: no status is published")
        self._load_cursor()
        try:
            last = self._outbox.last_cosigned()
        except AuditLogError as exc:
            log.warning("fleet: %s", exc)
            last = {}
        close, size = last.get("close"), last.get("size")
        self._recorded_close = close if type(close) is int else 0
        if self._witness is not None and last.get("witness_key") == str(self._witness):
            # where a connection starts until the witness says what it holds
            self._witness_cursor.recorded = size if type(size) is int and size > 0 else 0
        self._thread.start()
        log.info("fleet: publishing table %s to %s", self.table, self.broker)

    def committed(self, *_: object) -> None:
        """After each commit (the log's ``on_commit``): there is something new to send."""
        self._wake.set()

    def observe(self, screen: Screen, data: Mapping[str, object]) -> None:
        """Each screen the table shows (a display's observer): the retained status follows.
        Only memory is touched; a notice (a refused key) is not a change of the table."""
        if screen is Screen.REFUSED:
            return
        try:
            number = data.get("round")
            faults = data.get("faults")
            mode = data.get("mode")
            with self._lock:
                old = self._status
                self._status = Status(
                    Presence.ONLINE,
                    screen=str(screen),
                    mode=str(mode) if isinstance(mode, str) else old.mode,
                    round=number if type(number) is int and number >= 0 else old.round,
                    faults=tuple(str(f) for f in faults)[:32]
                    if isinstance(faults, list | tuple)
                    else (),
                    time=utc_text(self._wall()),
                )
                self._status_changed = True
        except Exception:  # never the control thread's problem
            log.exception("fleet: the status could not be taken")
        self._wake.set()

    def close(self, *, timeout: float | None = None) -> None:
        """An orderly stop: what is left is sent for at most ``[fleet] stop_flush_s``, the
        status says offline, the cursor is written. Safe to call twice. ``timeout``: the
        longest this waits in all (the appliance's stop budget); the flush is shortened to fit
        (a second for "offline" and the cursor kept), and a thread stuck past it (a TLS
        handshake with a broker that never answers) is left behind, a daemon."""
        wait_s = self.config.stop_flush_s + OFFLINE_GRACE_S + 5
        if timeout is not None:
            wait_s = max(0.0, min(wait_s, timeout))
        with self._lock:
            if self._stopping:
                return
            self._flush_s = max(0.0, min(self.config.stop_flush_s, wait_s - OFFLINE_GRACE_S - 1))
            self._stopping = True
        self._wake.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=wait_s)
            if self._thread.is_alive():
                # its reader stays open: the thread (a daemon) may still be using it
                log.error("fleet: the publisher did not stop in time")
                return
        self._outbox.close()

    @property
    def anchor(self) -> Anchor | None:
        return self._anchor

    @property
    def acked(self) -> int:
        return self._cursor.acked

    # --- the publisher's thread ------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._serve()
        except Exception:
            log.exception("fleet: the publisher failed; the table plays on without it")
        finally:
            self._save_cursor(force=True)
            # without "offline" acknowledged, no DISCONNECT: the broker says its will
            self._drop_client(orderly=self._offline_acked)
            self.is_connected = False

    def _serve(self) -> None:
        """Connect, send what is due, and keep at it until stopped; then flush (records up
        to the log's size when the stop came, and their checkpoint) for at most the flush
        time, and say "offline"."""
        flush: _Flush | None = None
        last_poll = 0.0
        while True:
            now = time.monotonic()
            if flush is None:
                flush = self._flush_if_stopping(now)
            if flush is not None and (now >= flush.deadline or self._flushed(flush.target)):
                self._say_offline()
                return
            if self._client is None and now >= self._next_attempt:
                self._connect()
            if self._client is not None:
                self._network()
            if self._reconnect_as_newer:
                self._reconnect_as_newer = False
                self._drop_client(orderly=True)  # no will: it would name the older number
                self._next_attempt = 0.0
                continue
            if self._connected and (self._wake.is_set() or now - last_poll >= POLL_S):
                self._wake.clear()
                last_poll = now
                self._send_what_is_due()
            self._save_cursor()
            if self._client is None:
                self._wait_to_connect(None if flush is None else flush.deadline)

    def _flush_if_stopping(self, now: float) -> _Flush | None:
        """The flush, once a stop is asked for: no more waiting out a back-off."""
        with self._lock:
            stopping, flush_s = self._stopping, self._flush_s
        if not stopping:
            return None
        self._next_attempt = 0.0  # no waiting out a back-off now
        target = self._size_or(self._cursor.acked)
        log.info("fleet: stopping; sending records up to %d", target)
        return _Flush(deadline=now + flush_s, target=target)

    def _send_what_is_due(self) -> None:
        self._resend_if_behind()
        self._fill_window()
        self._publish_checkpoint()
        self._publish_status()

    def _wait_to_connect(self, deadline: float | None) -> None:
        """Until the next attempt (at most a poll), a wake, or the flush's end."""
        wait = max(0.0, min(self._next_attempt - time.monotonic(), POLL_S))
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - time.monotonic()))
        self._wake.wait(wait)

    def _size_or(self, default: int) -> int:
        try:
            return self._outbox.size()
        except AuditLogError as exc:
            log.error("fleet: %s", exc)
            return default

    def _flushed(self, target: int) -> bool:
        return (
            self._connected
            and self._cursor.acked >= target
            and (target == 0 or self._published_checkpoint >= self._checkpoint_target(target))
        )

    def _checkpoint_target(self, acked: int) -> int:
        try:
            found = self._outbox.checkpoint_within(acked)
        except AuditLogError:
            return 0
        return 0 if found is None else found[0]

    # --- the connection -----------------------------------------------------------------

    def _connect(self) -> None:
        if not self._number_connection():
            return
        client = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=f"paigow-{self.table}",
            clean_session=True,
            protocol=mqtt.MQTTv311,
        )
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        send_at_once(client)
        client.max_inflight_messages_set(WINDOW + 8)
        # the will: this connection's end, signed now (the broker says it when the table vanishes)
        will = self._signed(
            Status(Presence.OFFLINE, time=utc_text(self._wall())), END_OF_CONNECTION
        )
        if will is not None:
            client.will_set(self._topics[Channel.STATUS], will, qos=QOS, retain=True)
        if self._credentials is not None:
            client.username_pw_set(*self._credentials)
        if self._tls is not None:
            client.tls_set_context(self._tls)
        with self._lock:
            stopping, flush_s = self._stopping, self._flush_s
        # a stop waits at most [fleet] stop_flush_s in all
        client.connect_timeout = min(5.0, max(0.5, flush_s)) if stopping else 5.0
        try:
            client.connect(self.broker.host, self.broker.port, keepalive=self.config.keepalive_s)
        except (OSError, ValueError, ssl.SSLError) as exc:
            self._retry_later(f"cannot connect to {self.broker}: {exc}")
            return
        self._client = client

    def _number_connection(self) -> bool:
        """The next connection's number, written durably before it is used (the rule in
        ``controller.fleet.outbox``); False (tried again later) when it cannot be written."""
        try:
            saved = read_connection(self.connection_path)
        except CursorError as exc:
            log.error("fleet: %s; the connection is numbered from the log and the broker", exc)
            saved = 0
        number = next_connection(saved=saved, seen=self._connection_seen, log_size=self._size_or(0))
        try:
            write_connection(self.connection_path, number)
        except OSError as exc:
            self._retry_later(
                f"the connection number {self.connection_path} cannot be written: {exc}"
            )
            return False
        self.connection = self._connection_seen = number
        self._status_seq = 0
        return True

    def _signed(self, status: Status, seq: int) -> bytes | None:
        """The status note of this connection at ``seq``, signed; None without the key."""
        if self._signer is None:
            return None
        return self._signer.sign(SignedStatus(self.table, self.connection, seq, status))

    def _retry_later(self, why: str) -> None:
        if self._backoff_s <= RECONNECT_MIN_S:
            log.warning("fleet: %s; trying again", why)
        else:
            log.info("fleet: %s; trying again in %.0f s", why, self._backoff_s)
        self._next_attempt = time.monotonic() + self._backoff_s
        self._backoff_s = min(RECONNECT_MAX_S, self._backoff_s * 2)

    def _network(self) -> None:
        client = self._client
        assert client is not None
        rc = client.loop(timeout=NETWORK_S)
        if rc != mqtt.MQTT_ERR_SUCCESS and self._client is client:
            self._lost(f"connection to {self.broker} lost ({mqtt.error_string(rc)})")

    def _lost(self, why: str) -> None:
        was = self._connected
        self._drop_client(orderly=False)
        if was:
            log.warning("fleet: %s; %d records acknowledged", why, self._cursor.acked)
        self._retry_later(why)

    def _drop_client(self, *, orderly: bool) -> None:
        client, self._client = self._client, None
        self._connected = self.is_connected = False
        self._in_flight.clear()
        self._acked_ahead.clear()
        self._checkpoint_mid = self._status_mid = None
        if client is None:
            return
        try:
            if orderly:
                client.disconnect()
                client.loop(timeout=NETWORK_S)
            else:
                sock = client.socket()
                if sock is not None:
                    sock.close()
        except Exception:
            log.debug("fleet: closing the connection failed", exc_info=True)

    def _on_connect(
        self, client: mqtt.Client, _: Any, flags: Any, reason: Any, properties: Any
    ) -> None:
        if client is not self._client:
            return
        if reason.is_failure:
            # not authorised, a bad user name or password: said once per attempt
            log.error("fleet: the broker %s refused the connection: %s", self.broker, reason)
            self._drop_client(orderly=False)
            self._retry_later(f"refused: {reason}")
            return
        self._connected = self.is_connected = True
        self._backoff_s = RECONNECT_MIN_S
        # From the broker's cursor, but never past what the witness is known to hold: what a
        # broker acknowledged and then lost (a restart without persistence) goes again.
        self._next_seq = self._witness_cursor.first_on_connection(self._cursor.acked)
        # Never a checkpoint smaller than one published before, here or by an earlier run
        # (the witness would see the log cut back). Each was of at most the records the log
        # held then, so from now on only checkpoints of at least the records it holds now are
        # published: the latest, once the records after the cursor (which may lag by
        # PERSIST_EVERY_S) are acknowledged again. A log rolled back holds fewer records than
        # before: its checkpoint goes out, smaller, and the witness sees what happened.
        self._published_checkpoint = max(0, self._size_or(0) - 1)
        with self._lock:
            self._status_changed = True
        log.info(
            "fleet: connected to %s as connection %d; sending from record %d",
            self.broker,
            self.connection,
            self._next_seq,
        )
        if self._signer is not None:
            # Before this connection's first status: the first message on the topic is then
            # the status the broker retained (an earlier connection's) or, with none, our own.
            self._status_probe = True
            client.subscribe(self._topics[Channel.STATUS], qos=QOS)
        if self._witness is not None:
            client.subscribe(self._topics[Channel.COSIGNATURE], qos=QOS)
        self._wake.set()

    def _on_disconnect(
        self, client: mqtt.Client, _: Any, flags: Any, reason: Any, properties: Any
    ) -> None:
        if client is self._client and self._connected:
            self._lost(f"disconnected from {self.broker} ({reason})")

    # --- records, checkpoint, status -----------------------------------------------------

    def _fill_window(self) -> None:
        client = self._client
        room = WINDOW - len(self._in_flight)
        if client is None or room <= 0:
            return
        try:
            batch = self._outbox.records(self._next_seq, room)
        except AuditLogError as exc:
            log.error("fleet: %s", exc)
            return
        for record in batch:
            info = client.publish(self._topics[Channel.RECORDS], record.payload, qos=QOS)
            if info.rc != mqtt.MQTT_ERR_SUCCESS:
                self._lost(f"a record could not be sent ({mqtt.error_string(info.rc)})")
                return
            self._in_flight[info.mid] = record
            self._next_seq = record.seq + 1

    def _on_publish(
        self, client: mqtt.Client, _: Any, mid: int, reason: Any, properties: Any
    ) -> None:
        if client is not self._client:
            return
        record = self._in_flight.pop(mid, None)
        if record is not None and record.seq <= self._cursor.acked:
            pass  # sent again (from the witness's cosignature): acknowledged before
        elif record is not None:
            self._acked_ahead[record.seq] = record.hash
            acked = self._cursor
            while acked.acked + 1 in self._acked_ahead:
                seq = acked.acked + 1
                acked = Cursor(seq, self._acked_ahead.pop(seq))
            self._cursor = acked
            self._wake.set()
        elif self._checkpoint_mid is not None and mid == self._checkpoint_mid[0]:
            self._published_checkpoint = self._checkpoint_mid[1]
            self._checkpoint_acked = max(self._checkpoint_acked, self._checkpoint_mid[1])
            self._checkpoint_mid = None
        elif mid == self._status_mid:
            self._status_mid = None
        elif mid == self._offline_mid:
            self._offline_acked = True

    def _publish_checkpoint(self) -> None:
        """The newest signed checkpoint whose records were all acknowledged, retained."""
        client = self._client
        if client is None or self._checkpoint_mid is not None:
            return
        try:
            found = self._outbox.checkpoint_within(self._cursor.acked)
        except AuditLogError as exc:
            log.error("fleet: %s", exc)
            return
        if found is None or found[0] <= self._published_checkpoint:
            return
        size, note = found
        info = client.publish(self._topics[Channel.CHECKPOINT], note.encode(), qos=QOS, retain=True)
        if info.rc == mqtt.MQTT_ERR_SUCCESS:
            self._checkpoint_mid = (info.mid, size)

    def _publish_status(self) -> None:
        client = self._client
        if client is None or self._status_mid is not None:
            return
        with self._lock:
            if not self._status_changed:
                return
            status, self._status_changed = self._status, False
        self._status_seq += 1
        payload = self._signed(status, self._status_seq)
        if payload is None:
            return
        info = client.publish(self._topics[Channel.STATUS], payload, qos=QOS, retain=True)
        if info.rc == mqtt.MQTT_ERR_SUCCESS:
            self._status_mid = info.mid

    def _say_offline(self) -> None:
        """The end of an orderly stop: ``offline``, retained, waited for a moment."""
        client = self._client
        if client is None or not self._connected:
            log.warning(
                "fleet: stopped without the broker; %d records acknowledged (the rest goes at"
                " the next start)",
                self._cursor.acked,
            )
            return
        with self._lock:
            status = Status(
                Presence.OFFLINE,
                screen=self._status.screen,
                mode=self._status.mode,
                round=self._status.round,
                time=utc_text(self._wall()),
            )
        self._status_seq += 1
        payload = self._signed(status, self._status_seq)
        if payload is None:  # no key, no status: the broker's will is not set either
            self._offline_acked = True
            log.info("fleet: stopped; %d records acknowledged", self._cursor.acked)
            return
        info = client.publish(self._topics[Channel.STATUS], payload, qos=QOS, retain=True)
        self._offline_mid = info.mid
        end = time.monotonic() + OFFLINE_GRACE_S
        while self._client is client and not self._offline_acked and time.monotonic() < end:
            self._network()
        log.info("fleet: stopped; %d records acknowledged", self._cursor.acked)

    # --- the cursor ---------------------------------------------------------------------

    def _load_cursor(self) -> None:
        """The cursor a previous run left; checked against the log (see the module docstring)."""
        try:
            cursor = read_cursor(self.cursor_path)
        except CursorError as exc:
            log.error("fleet: %s; the log is published again from its first record", exc)
            cursor = Cursor()
        try:
            size = self._outbox.size()
            held = self._outbox.hash_at(cursor.acked) if 0 < cursor.acked <= size else None
        except AuditLogError as exc:
            log.error("fleet: %s", exc)
            size, held = cursor.acked, cursor.hash
        if cursor.acked > size:
            log.error(
                "fleet: the broker acknowledged %d records but the log holds %d: it was rolled"
                " back or replaced; published again from its first record",
                cursor.acked,
                size,
            )
            cursor = Cursor()
        elif held is not None and held != cursor.hash:
            log.error(
                "fleet: record %d is not the one the broker acknowledged: the log was replaced;"
                " published again from its first record",
                cursor.acked,
            )
            cursor = Cursor()
        self._cursor = self._saved = cursor
        self._next_seq = cursor.acked + 1

    def _save_cursor(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if self._cursor == self._saved:
            return
        if not force and now - self._last_saved_at < PERSIST_EVERY_S:
            return
        cursor = self._cursor
        try:
            write_cursor(self.cursor_path, cursor)
        except OSError as exc:
            log.error("fleet: the cursor %s cannot be written: %s", self.cursor_path, exc)
        else:
            self._saved = cursor
        self._last_saved_at = now

    # --- cosignatures ---------------------------------------------------------------------

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        if client is not self._client:
            return
        if message.topic == self._topics[Channel.STATUS]:
            self._probe_status(client, message)
            return
        if message.topic != self._topics[Channel.COSIGNATURE]:
            return
        try:
            self._take_cosignature(bytes(message.payload))
        except (ProtocolError, NoteError, FleetError) as exc:
            self._refused(str(exc))
        except AuditLogError as exc:
            log.error("fleet: a cosignature could not be checked: %s", exc)

    # --- the connection number against the broker's retained status -----------------------

    def _probe_status(self, client: mqtt.Client, message: mqtt.MQTTMessage) -> None:
        """The first message on this table's status topic after connecting: the status the
        broker retained from an earlier connection, or this connection's own (no retained
        one). A retained one signed by this log's key whose connection is not below this
        one's (the connection file was lost, or rolled back with the card) makes the
        publisher connect again under a greater number."""
        if not self._status_probe:
            return
        self._status_probe = False
        client.unsubscribe(self._topics[Channel.STATUS])
        if not message.retain or self.log_key is None:
            return
        try:
            earlier = open_status(bytes(message.payload), self.log_key, self.table)
        except ProtocolError as exc:
            log.debug("fleet: the retained status is not one of this log's key: %s", exc)
            return
        if earlier.connection < self.connection:
            return
        log.warning(
            "fleet: the broker holds this table's status of connection %d, not below this"
            " connection's %d (%s lost or rolled back): connecting again as %d",
            earlier.connection,
            self.connection,
            self.connection_path,
            earlier.connection + 1,
        )
        self._connection_seen = max(self._connection_seen, earlier.connection)
        self._reconnect_as_newer = True

    def _refused(self, why: str) -> None:
        minute = int(time.monotonic() // 60)
        if minute != self._refusals_minute:
            self._refusals_minute, self._refusals = minute, 0
        self._refusals += 1
        if self._refusals <= MAX_REFUSALS_LOGGED:
            log.warning("fleet: a cosignature refused: %s", why)

    def _take_cosignature(self, payload: bytes) -> None:
        """The witness's cosignature of a checkpoint of this log (FleetError: refused): the
        log's anchor when the log holds it, rollback evidence when it does not."""
        note, cosigned = self._open_cosignature(payload)
        witness = self._witness
        assert witness is not None
        # From here on the checkpoint is one this log's own key signed: if the log does not
        # hold it, the log went back (evidence, not a refusal).
        if not self._log_holds(note, cosigned):
            return
        size = cosigned.checkpoint.size
        again = self._witness_cursor.cosigned_at(size)
        if again is not None:
            log.warning(
                "fleet: the witness holds %d records, behind where this connection started:"
                " sending again from record %d",
                size,
                again,
            )
            self._send_again_from(again)
        if self._anchored(Anchor(witness.name, size, cosigned.timestamp)):
            self._record_close_covered(note, cosigned)

    def _open_cosignature(self, payload: bytes) -> tuple[str, Cosigned]:
        """The note and what it says, once it is the witness's cosignature of a checkpoint
        this log's key signed, with a timestamp in range (FleetError otherwise)."""
        witness, log_key = self._witness, self.log_key
        assert witness is not None
        note = decode_note(payload, "cosignature")
        cosigned = open_cosignature(note, witness)
        if log_key is None:
            raise FleetError("the log's key is not known: no cosignature is taken")
        signed = open_checkpoint(note, log_key)
        checkpoint = cosigned.checkpoint
        if signed != checkpoint or checkpoint.origin != log_key.name:
            raise FleetError("it is not a checkpoint of this log")
        if not 0 <= cosigned.timestamp <= MAX_SAFE_TIMESTAMP:
            raise FleetError(f"its timestamp {cosigned.timestamp} is out of range")
        return note, cosigned

    def _log_holds(self, note: str, cosigned: Cosigned) -> bool:
        """Whether the log holds the checkpoint cosigned (its size, and its root there); when
        it does not, the rollback evidence is sent on."""
        checkpoint = cosigned.checkpoint
        size = self._outbox.size()
        if checkpoint.size > size:
            self._rollback_evidence(note, cosigned, size)
            return False
        root = self._outbox.root_at(checkpoint.size)
        if root is None:
            raise FleetError(f"the log cannot say its root at {checkpoint.size} records")
        if root != checkpoint.root_hash:
            self._rollback_evidence(note, cosigned, size)
            return False
        return True

    def _anchored(self, anchor: Anchor) -> bool:
        """Whether ``anchor`` is newer than the log's anchor: then it is, and it is shown."""
        current = self._anchor
        if current is not None and (anchor.size, anchor.timestamp) <= (
            current.size,
            current.timestamp,
        ):
            return False
        self._anchor = anchor
        log.info("fleet: the log is anchored by %s at %d records", anchor.witness, anchor.size)
        if self.on_anchor is not None:
            try:
                self.on_anchor(anchor.as_display())
            except Exception:
                log.exception("fleet: the anchor could not be shown")
        return True

    def _record_close_covered(self, note: str, cosigned: Cosigned) -> None:
        """A newer close of the day the cosignature covers: recorded (``COSIGNED``)."""
        witness = self._witness
        assert witness is not None
        close = self._outbox.close_covered(cosigned.checkpoint.size)
        if close is None or close <= self._recorded_close or self.events is None:
            return
        self._recorded_close = close
        signature = _cosignature_bytes(note, witness)
        data = cosigned_data(witness, cosigned, signature, close=close)
        self.events.put(WitnessCosigned(at=monotonic_ms(), cosignature=data))

    def _rollback_evidence(self, note: str, cosigned: Cosigned, log_size: int) -> None:
        """The witness cosigned a checkpoint of this log's own key that the log no longer holds:
        to the control loop as ``ROLLBACK_EVIDENCE``, once per (size, root), and not when the
        log already records it (a restart, the witness's retained cosignature again)."""
        witness = self._witness
        assert witness is not None
        checkpoint = cosigned.checkpoint
        root = base64.b64encode(checkpoint.root_hash).decode()
        key = (checkpoint.size, root)
        if key in self._evidence:
            log.debug("fleet: the rollback evidence at %d records came again", checkpoint.size)
            return
        if self._outbox.rollback_evidence_recorded(checkpoint.size, root):
            self._evidence.add(key)
            log.info(
                "fleet: the witness's cosignature at %d records is already recorded as"
                " rollback evidence",
                checkpoint.size,
            )
            return
        log.error(
            "fleet: the witness %s cosigned this log at %d records (signed by this log's own"
            " key), but the log holds %s: the log went back to an older copy",
            witness.name,
            checkpoint.size,
            f"{log_size} records" if checkpoint.size > log_size else "another root at that size",
        )
        self._evidence.add(key)  # said once per (size, root), as sent once
        if self.events is None:
            return
        evidence = {
            "witness": witness.name,
            "witness_key": str(witness),
            "note": note,
            "size": checkpoint.size,
            "root": root,
            "timestamp": cosigned.timestamp,
            "log_size": log_size,
        }
        self.events.put(RollbackEvidence(at=monotonic_ms(), cosignature=evidence))

    # --- the witness's cosignature as the cursor ---------------------------------------------

    def _resend_if_behind(self) -> None:
        """Records the broker acknowledged past the witness's cosignature, a checkpoint past it
        published, and the cosignature not grown since (``controller.fleet.resend``): what is
        in flight is forgotten and the records go again from the cosignature's size + 1."""
        if self._witness is None:
            return
        cursor = self._witness_cursor
        start = cursor.resend_from(
            acked=self._cursor.acked,
            checkpoint=self._checkpoint_acked,
            sent_all=self._next_seq > self._cursor.acked,
            now=self._clock(),
        )
        if start is None:
            return
        log.warning(
            "fleet: the witness's cosignature stays at %d records while the broker acknowledged"
            " %d; sending again from record %d (next time after %.0f s)",
            cursor.held,
            self._cursor.acked,
            start,
            cursor.wait_s,
        )
        self._send_again_from(start)

    def _send_again_from(self, start: int) -> None:
        """What is in flight is forgotten (its acknowledgements move nothing) and the records
        go again from ``start``."""
        self.resends += 1
        self._in_flight.clear()
        self._acked_ahead.clear()
        self._next_seq = start


def _cosignature_bytes(note: str, witness: Verifier) -> bytes:
    """The bytes of ``witness``'s signature line in ``note`` (verified before)."""
    for line in note.rstrip("\n").split("\n"):
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] == SIGNATURE_DASH and parts[1] == witness.name:
            raw = base64.b64decode(parts[2])
            if raw[:4] == witness.key_id and len(raw) == 76:
                return raw
    raise NoteError("no cosignature line")  # pragma: no cover - open_cosignature found one
