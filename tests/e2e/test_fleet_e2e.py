"""Two tables, one broker, one witness, all real: ``paigow-controller simulate`` with [fleet]
for each table, ``paigow-controller witness`` in its own process, Debian's mosquitto.

Each table's log is cosigned by the witness and the table records the cosignature; then one
table's state directory is replaced by an older copy of itself (the card swapped for an older
image: the log, its anchor and the publisher's cursor all older, so nothing on the box can see
it) and played on. The witness raises a rollback alert for that table and cosigns it no more,
while the other table goes on being cosigned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from support.fleet_broker import Broker, free_port

from controller.audit.recall import export_lines
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Verifier,
    checkpoint_size,
    open_checkpoint,
    open_cosignature,
)
from controller.fleet.protocol import Alert, AlertKind, Presence, Status, open_alert

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
WAIT_S = 60.0
TABLES = ("east", "west")

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


class Floor:
    """A subscriber to every cosignature and alert: the latest cosigned note of each table."""

    def __init__(self, broker: Broker) -> None:
        self.alert_key: Verifier | None = None  # the witness's (witness-key's second line)
        self.cosigned: dict[str, str] = {}
        self.alerts: list[Alert] = []
        self._cond = threading.Condition()
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2)
        self.subscribed = False
        self.client.on_connect = lambda c, *_: c.subscribe(
            [("paigow/v1/+/cosignature", 1), ("paigow/v1/alerts", 1)]
        )
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self.client.connect_async("127.0.0.1", broker.port, keepalive=5)
        self.client.loop_start()

    def _on_subscribe(self, *_: Any) -> None:
        with self._cond:
            self.subscribed = True
            self._cond.notify_all()

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        with self._cond:
            if message.topic == "paigow/v1/alerts":
                assert self.alert_key is not None
                self.alerts.append(open_alert(message.payload, self.alert_key))
            else:
                self.cosigned[message.topic.split("/")[2]] = message.payload.decode()
            self._cond.notify_all()

    def wait_for(self, what: str, predicate: Callable[[], bool]) -> None:
        with self._cond:
            seen = {t: checkpoint_size(n) for t, n in self.cosigned.items()}
            assert self._cond.wait_for(predicate, WAIT_S), (
                f"not within {WAIT_S:.0f} s: {what} (cosigned: {seen}; alerts: {self.alerts})"
            )

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@pytest.fixture
def fleet(broker: Broker, tmp_path: Path) -> Iterator[dict[str, Any]]:
    witness_dir, keys = tmp_path / "witness", tmp_path / "keys"
    keys.mkdir()
    dashboard_port = free_port()
    made = controller("witness-key", "--state-dir", str(witness_dir))
    assert made.returncode == 0, made.stderr
    witness_key, alert_key = made.stdout.splitlines()
    tables: dict[str, dict[str, Path]] = {}
    for name in TABLES:
        state, config = tmp_path / name, tmp_path / f"{name}.toml"
        config.write_text(
            f'[table]\nname = "{name}"\n[fleet]\nmqtt_url = "{broker.url}"\n'
            f'witness_key = "{witness_key}"\nkeepalive_s = 5\nstop_flush_s = 10\n'
        )
        assert (
            controller("init", "--state-dir", str(state), "--config", str(config)).returncode == 0
        )
        exported = controller("export-key", "--state-dir", str(state))
        assert exported.returncode == 0, exported.stderr
        (keys / f"{name}.pub").write_text(exported.stdout)
        tables[name] = {"state": state, "config": config}
    floor = Floor(broker)
    floor.alert_key = Verifier.parse(alert_key)
    floor.wait_for("the floor subscribed", lambda: floor.subscribed)
    # A retained status of a table the witness has no key for: its alert says the witness has
    # subscribed (what a table sends before that, the broker does not keep for it).
    probe = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2)
    probe.connect("127.0.0.1", broker.port)
    probe.loop_start()
    probe.publish(
        "paigow/v1/probe/status", Status(Presence.ONLINE).encode(), 1, True
    ).wait_for_publish(10)
    probe.loop_stop()
    probe.disconnect()
    witness = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller",
            "witness",
            "--mqtt-url",
            broker.url,
            "--state-dir",
            str(witness_dir),
            "--keys",
            str(keys),
            "--dashboard",
            f"127.0.0.1:{dashboard_port}",
        ],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    floor.wait_for(
        "the witness subscribed",
        lambda: any(a.table == "probe" and a.kind is AlertKind.UNKNOWN_TABLE for a in floor.alerts),
    )
    try:
        yield {
            "tables": tables,
            "witness_key": witness_key,
            "floor": floor,
            "dashboard": f"http://127.0.0.1:{dashboard_port}",
        }
    finally:
        floor.close()
        witness.terminate()
        _, err = witness.communicate(timeout=30)
        assert witness.returncode == 0, err


def play(table: dict[str, Path], rounds: int) -> None:
    done = controller(
        "simulate", "--fast", "--plain-rounds", "--faults", "none", "--rounds", str(rounds),
        "--config", str(table["config"]), "--state-dir", str(table["state"]),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def head(state: Path) -> int:
    return max(line["seq"] for line in export_lines(state))


OFFLINE = AlertKind.DEVICE_OFFLINE


def test_each_log_is_cosigned_and_an_older_copy_is_a_rollback(fleet: dict[str, Any]) -> None:
    tables, floor = fleet["tables"], fleet["floor"]
    cosigner = Verifier.parse(fleet["witness_key"], ALG_COSIGNATURE_V1)
    east, west = tables["east"], tables["west"]

    # 1. Both tables play; the witness cosigns each log up to its last record.
    play(east, 4)
    play(west, 4)
    for name in TABLES:
        size = head(tables[name]["state"])
        floor.wait_for(
            f"{name} cosigned at {size}",
            lambda n=name, s=size: checkpoint_size(floor.cosigned.get(n, "")) == s,
        )  # type: ignore[misc]
        opened = open_cosignature(floor.cosigned[name], cosigner)
        key = Verifier.parse((tables[name]["state"].parent / "keys" / f"{name}.pub").read_text())
        assert open_checkpoint(floor.cosigned[name], key) == opened.checkpoint
    older = east["state"].parent / "east-older"
    shutil.copytree(east["state"], older)  # the card's image, as it is now

    # 2. East plays on: the table records the witness's cosignatures of its round closes.
    play(east, 4)
    anchored = head(east["state"])
    floor.wait_for(
        f"east cosigned at {anchored}",
        lambda: checkpoint_size(floor.cosigned.get("east", "")) == anchored,
    )
    recorded = [line for line in export_lines(east["state"]) if line["kind"] == "cosigned"]
    assert recorded, "the table recorded no cosignature"
    assert all(line["data"]["size"] <= anchored for line in recorded)
    assert controller("verify-log", "--state-dir", str(east["state"])).returncode == 0

    # 3. East's card is swapped for the older image and played on: nothing on the box can
    # see it (the anchor and the cursor are as old as the log); the witness can.
    shutil.rmtree(east["state"])
    shutil.copytree(older, east["state"])
    play(east, 3)
    floor.wait_for(
        "a rollback alert for east",
        lambda: any(a.table == "east" and a.kind is AlertKind.ROLLBACK for a in floor.alerts),
    )
    # an orderly stop of a simulation says offline: the witness's device_offline, nothing else
    assert not [a for a in floor.alerts if a.table == "west" and a.kind is not OFFLINE]
    # the table itself learns it from the witness's cosignature of its longer log (retained):
    # recorded as evidence, log_rollback latched (the simulated supervisor then clears it)
    lines = list(export_lines(east["state"]))
    evidence = [line["data"] for line in lines if line["kind"] == "rollback_evidence"]
    assert evidence, "the rolled-back table recorded no evidence"
    assert evidence[0]["size"] == anchored
    assert evidence[0]["log_size"] < anchored
    assert any(
        line["kind"] == "fault" and line["data"]["fault"] == "log_rollback" for line in lines
    )
    assert controller("verify-log", "--state-dir", str(east["state"])).returncode == 0

    # 4. West goes on being cosigned; east is cosigned no more (its last cosignature stands).
    play(west, 2)
    size = head(west["state"])
    floor.wait_for(
        f"west cosigned at {size}", lambda: checkpoint_size(floor.cosigned.get("west", "")) == size
    )
    assert checkpoint_size(floor.cosigned["east"]) == anchored
    alerts = [json.loads(a.encode()) for a in floor.alerts if a.table == "east"]
    assert {a["kind"] for a in alerts} <= {"rollback", "device_offline"}, alerts

    # 5. The floor dashboard of the witness says the same.
    with urllib.request.urlopen(f"{fleet['dashboard']}/state.json", timeout=10) as answer:
        state = json.loads(answer.read())
    shown = {t["table"]: t for t in state["tables"]}
    assert shown["east"]["witness_alert"]["kind"] == "rollback"
    assert shown["east"]["alerting"] is True
    assert shown["east"]["anchored_size"] == anchored
    west_alert = shown["west"]["witness_alert"]  # a stopped simulation is offline, no worse
    assert west_alert is None or west_alert["kind"] == "device_offline", west_alert
    assert shown["west"]["anchored_size"] == size
    assert shown["west"]["last_result"]["round"] >= 6
