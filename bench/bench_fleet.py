"""Many tables through one broker and one witness: records per second, the lag from a
table's checkpoint (published as the table's publisher does, right after its commit) to the
witness's cosignature of it at p50 and p99, and the catch-up after an 8-hour outage.

N tables (1, 100, 1000; FLEET_TABLES=1,100 for fewer) each replay a log made by
bench/loggen.py under its own table name and key (FLEET_ROUNDS rounds, default 30, fewer when
N tables would make more than FLEET_RECORDS records, default 30,000: 4 rounds at 1,000
tables), through Debian's mosquitto on a loopback port, to ``paigow-controller witness`` in
its own process (SQLite store), started and waited for until it says it subscribed. The
tables share FLEET_CONNECTIONS connections (default 50; the bench broker has no ACL, each
table's topics are its own). Two runs per N:

- **throughput**: every table sends its whole log as fast as the broker takes it (QoS 1, in
  order, each round's checkpoint after its records); records per second from the first
  record sent to the last checkpoint cosigned;
- **lag at play**: the tables together offer FLEET_PACE records a second (default 350, a
  round every N/50 s at each table, at least every second: some 3 times 1,000 tables at a
  round a minute); the lag of each checkpoint to its cosignature.

**Catch-up after an outage** (FLEET_OUTAGE_TABLES tables, default 10, each with the real
``controller.fleet.publisher.Publisher``): the tables play 10 rounds, cosigned; the witness
stops and the broker is restarted without its persistence; the tables play 8 hours at a round
a minute (480 rounds each), which the broker acknowledged and lost (their ``fleet-cursor`` at
the log's end); the witness starts and the publishers start: how long until every table is
cosigned at its end, by the publishers' own resend from the witness's cosignature.

The baseline, measured in the same run: the broker's own round trip of a QoS 1 message of a
record's size to a subscriber (no witness), p50/p99.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import paho.mqtt.client as mqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from common import env_int, figure, machine_load, note, percentile, title
from loggen import generate
from support.fleet_broker import MOSQUITTO, Broker

from controller.audit.log import load_signer
from controller.audit.recall import export_lines
from controller.core.config import FleetConfig
from controller.core.note import checkpoint_size
from controller.fleet.client import send_at_once
from controller.fleet.outbox import CURSOR_FILE, Cursor, LogOutbox, write_cursor
from controller.fleet.protocol import QOS, Channel, StatusSigner, encode_record, subscription, topic
from controller.fleet.publisher import Publisher

ROUNDS = env_int("FLEET_ROUNDS", 30)
RECORDS = env_int("FLEET_RECORDS", 30_000)
PACE = env_int("FLEET_PACE", 350)  # records a second offered by all the tables together
CONNECTIONS = env_int("FLEET_CONNECTIONS", 50)
TABLES = [int(n) for n in os.environ.get("FLEET_TABLES", "1,100,1000").split(",") if n.strip()]
OUTAGE_TABLES = env_int("FLEET_OUTAGE_TABLES", 10)
OUTAGE_ROUNDS = 8 * 60  # 8 hours at a round a minute
TIMEOUT_S = float(env_int("FLEET_TIMEOUT_S", 900))
RECORDS_A_ROUND = 7  # about, in a plain round (bench/loggen.py)


@dataclass
class Table:
    name: str
    lines: list[dict[str, object]]
    checkpoints: dict[int, str] = field(default_factory=dict)  # size -> note

    @property
    def rounds(self) -> list[tuple[list[bytes], int, str]]:
        """(the round's record payloads, the size its checkpoint covers, the note)."""
        out: list[tuple[list[bytes], int, str]] = []
        batch: list[bytes] = []
        for line in self.lines:
            batch.append(encode_record(line))
            note_text = line.get("checkpoint")
            if isinstance(note_text, str):
                out.append((batch, int(str(line["seq"])), note_text))
                batch = []
        return out


def rounds_for(count: int) -> int:
    return max(2, min(ROUNDS, RECORDS // (RECORDS_A_ROUND * count)))


def make_tables(count: int, rounds: int, work: Path) -> tuple[list[Table], Path]:
    keys = work / "keys"
    keys.mkdir(parents=True)
    tables = []
    for i in range(count):
        name = f"t{i:04d}"
        state = work / "logs" / name
        generate(state, rounds, table=name)
        signer = load_signer(state)
        assert signer is not None
        (keys / f"{name}.pub").write_text(f"{signer.verifier}\n")
        tables.append(Table(name, list(export_lines(state))))
    return tables, keys


class Cosignatures:
    """A subscriber to every table's cosignature: when each (table, size) arrived."""

    def __init__(self, broker: Broker) -> None:
        self.seen: dict[tuple[str, int], float] = {}
        self.newest: dict[str, int] = {}
        self.lock = threading.Condition()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-watch")
        send_at_once(self.client)
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", broker.port)
        self.client.subscribe(subscription(Channel.COSIGNATURE), qos=QOS)
        self.client.loop_start()

    def _message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        now = time.monotonic()
        table = message.topic.split("/")[2]
        size = checkpoint_size(message.payload.decode(errors="replace"))
        with self.lock:
            self.seen.setdefault((table, size), now)
            self.newest[table] = max(self.newest.get(table, 0), size)
            self.lock.notify_all()

    def wait_for(self, wanted: set[tuple[str, int]], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while not wanted <= self.seen.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
        return True

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def publisher(broker: Broker, name: str) -> mqtt.Client:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-{name}")
    send_at_once(client)  # as the table's publisher does
    client.max_inflight_messages_set(100)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    return client


def start_witness(broker: Broker, keys: Path, work: Path) -> subprocess.Popen[bytes]:
    """The witness, once it says it subscribed (its persistent session queues from then on)."""
    state = work / "witness"
    said = work / "witness.log"
    with said.open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "controller", "witness", "--mqtt-url", broker.url,
                "--state-dir", str(state), "--keys", str(keys), "--dashboard", "off",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    before = said.read_text(errors="replace").count("subscribed:")
    deadline = time.monotonic() + 120
    while said.read_text(errors="replace").count("subscribed:") <= before:
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise SystemExit(
                f"the witness did not subscribe (exit {process.returncode}):"
                f" {said.read_text(errors='replace')[-500:]}"
            )
        time.sleep(0.05)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run(count: int, *, paced: bool) -> tuple[float, list[float], int, float]:
    """(records per second, checkpoint→cosignature lags in ms, records, the seconds between
    two rounds of a table) for ``count`` tables."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{count}-"))
    try:
        tables, keys = make_tables(count, rounds_for(count), work)
        broker = Broker(work / "broker")
        broker.start()
        witness = start_witness(broker, keys, work)
        watch = Cosignatures(broker)
        sent: dict[tuple[str, int], float] = {}
        sent_lock = threading.Lock()
        total = sum(len(t.lines) for t in tables)
        interval_s = max(1.0, count * RECORDS_A_ROUND / PACE) if paced else 0.0

        def play(group: list[Table], index: int, start: float) -> None:
            """One connection's tables: each round of each table when it is due (its records,
            their acknowledgements awaited, then its checkpoint)."""
            client = publisher(broker, f"c{index}")
            due: list[tuple[float, int, int]] = []  # (when, table, round)
            for k in range(len(group)):
                offset = (index + k * CONNECTIONS) / max(count, 1) * interval_s
                heapq.heappush(due, (start + offset, k, 0))
            rounds = [t.rounds for t in group]
            while due:
                when, k, r = heapq.heappop(due)
                delay = when - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                table = group[k]
                payloads, size, note_text = rounds[k][r]
                records_topic = topic(table.name, Channel.RECORDS)
                infos = [client.publish(records_topic, p, qos=QOS) for p in payloads]
                for info in infos:
                    info.wait_for_publish(60)
                with sent_lock:
                    sent[(table.name, size)] = time.monotonic()
                client.publish(
                    topic(table.name, Channel.CHECKPOINT), note_text.encode(), qos=QOS, retain=True
                )
                if r + 1 < len(rounds[k]):
                    heapq.heappush(due, (when + interval_s, k, r + 1))
            client.loop_stop()
            client.disconnect()

        groups = [tables[i::CONNECTIONS] for i in range(min(CONNECTIONS, count))]
        began = time.monotonic()
        threads = [
            threading.Thread(target=play, args=(group, i, began)) for i, group in enumerate(groups)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wanted = {(t.name, size) for t in tables for (_, size, _) in t.rounds}
        complete = watch.wait_for(wanted, TIMEOUT_S)
        ended = max(watch.seen.get(k, time.monotonic()) for k in wanted)
        watch.close()
        stop(witness)
        broker.kill()
        if not complete:
            _not_cosigned(work, sorted(wanted - watch.seen.keys()), len(wanted))
        lags = [(watch.seen[k] - sent[k]) * 1000 for k in wanted]
        return total / (ended - began), lags, total, interval_s
    finally:
        _clean(work)


def catch_up(count: int) -> tuple[float, int, int]:
    """The 8-hour outage (the module's docstring): (seconds from the publishers' start until
    every table is cosigned at its end, the records of the outage, the resends the publishers
    made)."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-fleet-outage-{count}-"))
    try:
        tables, keys = make_tables(count, 10, work)
        broker = Broker(work / "broker")
        broker.start()
        witness = start_witness(broker, keys, work)
        watch = Cosignatures(broker)
        witness_key = _witness_key(work / "witness")
        states = {t.name: work / "logs" / t.name for t in tables}

        def publishers() -> list[Publisher]:
            made = []
            for name, state in states.items():
                signer = load_signer(state)
                assert signer is not None
                config = FleetConfig(mqtt_url=broker.url, witness_key=witness_key, keepalive_s=30)
                made.append(
                    Publisher(config, table=name, state_dir=state, signer=StatusSigner(signer))
                )
            return made

        # before: 10 rounds a table, cosigned
        running = publishers()
        for one in running:
            one.start()
        before = {name: _size(state) for name, state in states.items()}
        if not watch.wait_for(set(before.items()), TIMEOUT_S):
            _not_cosigned(work, sorted(set(before.items()) - watch.seen.keys()), len(before))
        for one in running:
            one.close()
        # the outage: the witness down, the broker restarted without its persistence, and
        # 8 hours of play the broker acknowledged and lost
        stop(witness)
        broker.kill()
        for saved in broker.directory.glob("mosquitto.db*"):
            saved.unlink()
        broker.start()
        ends = {}
        for name, state in states.items():
            generate(state, OUTAGE_ROUNDS, table=name)
            with contextlib.closing(LogOutbox(state)) as outbox:
                size = outbox.size()
                held = outbox.hash_at(size)
            assert held is not None
            write_cursor(state / CURSOR_FILE, Cursor(size, held))
            ends[name] = size
        watch.close()
        witness = start_witness(broker, keys, work)
        watch = Cosignatures(broker)
        began = time.monotonic()
        running = publishers()
        for one in running:
            one.start()
        wanted = set(ends.items())
        complete = watch.wait_for(wanted, TIMEOUT_S)
        ended = max(watch.seen.get(k, time.monotonic()) for k in wanted)
        resends = sum(one.resends for one in running)
        for one in running:
            one.close()
        watch.close()
        stop(witness)
        broker.kill()
        if not complete:
            _not_cosigned(work, sorted(wanted - watch.seen.keys()), len(wanted))
        again = sum(ends[name] - before[name] for name in ends)
        return ended - began, again, resends
    finally:
        _clean(work)


def _size(state: Path) -> int:
    with contextlib.closing(LogOutbox(state)) as outbox:
        return outbox.size()


def _witness_key(state: Path) -> str:
    made = subprocess.run(
        [sys.executable, "-m", "controller", "witness-key", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        check=True,
    )
    return made.stdout.splitlines()[0].strip()


def _not_cosigned(work: Path, lost: list[tuple[str, int]], wanted: int) -> None:
    alerts = _alerts(work / "witness" / "witness.db")
    print(f"  not cosigned, the first: {lost[:8]}; the witness's alerts: {alerts[:8]}")
    os.environ["FLEET_KEEP"] = "1"  # the evidence stays
    raise SystemExit(f"{len(lost)} of {wanted} checkpoints were not cosigned in {TIMEOUT_S:.0f} s")


def _clean(work: Path) -> None:
    if os.environ.get("FLEET_KEEP"):
        print(f"  kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def _alerts(db: Path) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        query = "SELECT table_name, kind, detail, size FROM alerts ORDER BY id LIMIT 20"
        return con.execute(query).fetchall()


def broker_round_trip() -> list[float]:
    """The baseline: QoS 1 messages of a record's size through the broker, one at a time."""
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-rt-"))
    broker = Broker(work / "broker")
    broker.start()
    got = threading.Event()
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="rt-sub")
    sub.on_message = lambda c, u, m: got.set()
    sub.connect("127.0.0.1", broker.port)
    sub.subscribe("rt", qos=QOS)
    sub.loop_start()
    pub = publisher(broker, "rt")
    time.sleep(0.3)
    payload = b"x" * 900
    times = []
    for _ in range(300):
        got.clear()
        t0 = time.monotonic()
        pub.publish("rt", payload, qos=QOS)
        got.wait(5)
        times.append((time.monotonic() - t0) * 1000)
    sub.loop_stop()
    pub.loop_stop()
    broker.kill()
    shutil.rmtree(work, ignore_errors=True)
    return times


def main() -> None:
    if not Path(MOSQUITTO).exists():
        raise SystemExit(
            "bench_fleet: needs Debian's mosquitto (scripts/install-system-deps, run by make test)"
        )
    title("fleet: tables → mosquitto → witness (SQLite)")
    note(
        f"load at start: {machine_load()}; at most {ROUNDS} rounds and {RECORDS:,} records a"
        f" run; the paced runs offer {PACE} records/s; {CONNECTIONS} connections"
    )
    base = broker_round_trip()
    figure(
        "broker QoS 1 round trip (baseline)",
        f"p50 {percentile(base, 0.5):.2f} ms, p99 {percentile(base, 0.99):.2f} ms",
    )
    for count in TABLES:
        rate, _, total, _ = run(count, paced=False)
        figure(
            f"{count} table(s), full speed: records/s",
            f"{rate:,.0f} ({total:,} records, {rounds_for(count)} rounds a table)",
        )
        _, lags, _, interval_s = run(count, paced=True)
        p50, p99 = percentile(lags, 0.5), percentile(lags, 0.99)
        figure(
            f"{count} table(s), a round every {interval_s:.0f} s each: checkpoint → cosignature",
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms ({len(lags)} checkpoints;"
            f" {p50 / max(percentile(base, 0.5), 1e-3):.0f}x the broker's p50)",
        )
    if OUTAGE_TABLES:
        seconds, records, resends = catch_up(OUTAGE_TABLES)
        figure(
            f"{OUTAGE_TABLES} table(s) after an 8-hour outage the broker lost: catch-up",
            f"{seconds:.1f} s for {records:,} records ({records / seconds:,.0f} records/s;"
            f" {resends} resend(s) by the publishers)",
        )


if __name__ == "__main__":
    main()
