"""Many tables through one broker and one witness: records per second, and the lag from a
table's checkpoint (published as the table's publisher does, right after its commit) to the
witness's cosignature of it, at p50 and p99.

N tables (1, 10, 50; FLEET_TABLES=1,10 for fewer) each replay a log of FLEET_ROUNDS rounds
(default 60, about 7 records a round) made by bench/loggen.py under its own table name and
key, through Debian's mosquitto on a loopback port, to ``paigow-controller witness`` in its
own process (SQLite store). Two runs per N:

- **throughput**: every table sends its whole log as fast as the broker takes it (QoS 1, in
  order, each round's checkpoint after its records); records per second from the first
  record sent to the last checkpoint cosigned;
- **lag at play**: every table sends one round (its records, then its checkpoint) every
  FLEET_ROUND_MS ms (default 1000: 50 tables make 350 records/s, some 60 times a casino
  floor's pace); the lag of each checkpoint to its cosignature.

The baseline, measured in the same run: the broker's own round trip of a QoS 1 message of a
record's size to a subscriber (no witness), p50/p99.
"""

from __future__ import annotations

import contextlib
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
from fleet_broker import MOSQUITTO, Broker
from loggen import generate

from controller.audit.log import load_signer
from controller.audit.recall import export_lines
from controller.core.note import checkpoint_size
from controller.fleet.client import send_at_once
from controller.fleet.protocol import QOS, Channel, encode_record, subscription, topic

ROUNDS = env_int("FLEET_ROUNDS", 60)
ROUND_MS = env_int("FLEET_ROUND_MS", 1000)
TABLES = [int(n) for n in os.environ.get("FLEET_TABLES", "1,10,50").split(",") if n.strip()]
TIMEOUT_S = float(env_int("FLEET_TIMEOUT_S", 600))


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


def make_tables(count: int, work: Path) -> tuple[list[Table], Path]:
    keys = work / "keys"
    keys.mkdir(parents=True)
    tables = []
    for i in range(count):
        name = f"t{i:03d}"
        state = work / "logs" / name
        generate(state, ROUNDS, table=name)
        signer = load_signer(state)
        assert signer is not None
        (keys / f"{name}.pub").write_text(f"{signer.verifier}\n")
        tables.append(Table(name, list(export_lines(state))))
    return tables, keys


class Cosignatures:
    """A subscriber to every table's cosignature: when each (table, size) arrived."""

    def __init__(self, broker: Broker) -> None:
        self.seen: dict[tuple[str, int], float] = {}
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
    state = work / "witness"
    log = (work / "witness.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller",
            "witness",
            "--mqtt-url",
            broker.url,
            "--state-dir",
            str(state),
            "--keys",
            str(keys),
            "--dashboard",
            "off",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    time.sleep(1.0)  # connected and subscribed (its persistent session queues from then on)
    if process.poll() is not None:
        raise SystemExit(
            f"the witness exited {process.returncode}: {(work / 'witness.log').read_text()[-500:]}"
        )
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run(count: int, *, paced: bool) -> tuple[float, list[float], int]:
    """(records per second, checkpoint→cosignature lags in ms, records) for ``count`` tables."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{count}-"))
    try:
        tables, keys = make_tables(count, work)
        broker = Broker(work / "broker")
        broker.start()
        witness = start_witness(broker, keys, work)
        watch = Cosignatures(broker)
        sent: dict[tuple[str, int], float] = {}
        sent_lock = threading.Lock()
        total = sum(len(t.lines) for t in tables)

        def play(table: Table, start: float) -> None:
            client = publisher(broker, table.name)
            records_topic = topic(table.name, Channel.RECORDS)
            checkpoint_topic = topic(table.name, Channel.CHECKPOINT)
            for index, (payloads, size, note_text) in enumerate(table.rounds):
                if paced:
                    delay = start + index * ROUND_MS / 1000 - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                infos = [client.publish(records_topic, p, qos=QOS) for p in payloads]
                for info in infos:
                    info.wait_for_publish(60)
                with sent_lock:
                    sent[(table.name, size)] = time.monotonic()
                client.publish(checkpoint_topic, note_text.encode(), qos=QOS, retain=True)
            client.loop_stop()
            client.disconnect()

        began = time.monotonic()
        threads = [
            threading.Thread(target=play, args=(t, began + i * 0.001)) for i, t in enumerate(tables)
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
            lost = sorted(wanted - watch.seen.keys())
            alerts = _alerts(work / "witness" / "witness.db")
            print(f"  not cosigned, the first: {lost[:8]}; the witness's alerts: {alerts[:8]}")
            os.environ["FLEET_KEEP"] = "1"  # the evidence stays
            missing = len(lost)
            raise SystemExit(
                f"{missing} of {len(wanted)} checkpoints were not cosigned in {TIMEOUT_S:.0f} s"
            )
        lags = [(watch.seen[k] - sent[k]) * 1000 for k in wanted]
        return total / (ended - began), lags, total
    finally:
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
        f"load at start: {machine_load()}; {ROUNDS} rounds a table;"
        f" paced: a round every {ROUND_MS} ms"
    )
    base = broker_round_trip()
    figure(
        "broker QoS 1 round trip (baseline)",
        f"p50 {percentile(base, 0.5):.2f} ms, p99 {percentile(base, 0.99):.2f} ms",
    )
    for count in TABLES:
        rate, _, total = run(count, paced=False)
        figure(f"{count} table(s), full speed: records/s", f"{rate:,.0f} ({total:,} records)")
        _, lags, _ = run(count, paced=True)
        p50, p99 = percentile(lags, 0.5), percentile(lags, 0.99)
        figure(
            f"{count} table(s), a round/{ROUND_MS} ms each: checkpoint → cosignature",
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms ({len(lags)} checkpoints;"
            f" {p50 / max(percentile(base, 0.5), 1e-3):.0f}x the broker's p50)",
        )


if __name__ == "__main__":
    main()
