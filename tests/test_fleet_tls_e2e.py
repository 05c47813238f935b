"""The product on the casino's broker as shipped: ``paigow-controller simulate`` with [fleet]
over mqtts:// with its table's certificate, ``paigow-controller witness`` with the witness's,
mosquitto on hw/mosquitto/ (TLS only, the ACL by certificate, the client id the CN). The
witness cosigns the table's log, and the table reads and records the cosignature: everything
the two need, the ACL grants (and tests/test_fleet_broker_acl.py: nothing more)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from fleet_broker import FleetCa, ShippedBroker
from paho.mqtt.enums import CallbackAPIVersion

from controller.audit.recall import export_lines
from controller.core.note import ALG_COSIGNATURE_V1, Verifier, checkpoint_size, open_cosignature
from controller.fleet.client import tls_context

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
WAIT_S = 60.0

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


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict[str, Any]]:
    ca = FleetCa(tmp_path / "fleet-ca")
    broker = ShippedBroker(tmp_path / "broker", ca, extra_acl="user observer\ntopic read #\n")
    broker.start()
    observer = Observer(broker, ca)
    witness_proc = None
    try:
        observer.wait_for("the observer subscribed", lambda: observer.subscribed)
        witness_dir, keys = tmp_path / "witness", tmp_path / "keys"
        keys.mkdir()
        made = controller("witness-key", "--state-dir", str(witness_dir))
        assert made.returncode == 0, made.stderr
        witness_key = made.stdout.splitlines()[0].strip()  # the cosigner's (the alert key 2nd)
        table = ca.table("east")
        state, config = tmp_path / "east", tmp_path / "east.toml"
        config.write_text(
            f'[table]\nname = "east"\n[fleet]\nmqtt_url = "{broker.url}"\n'
            f'ca_file = "{table.ca}"\ncert_file = "{table.cert}"\nkey_file = "{table.key}"\n'
            f'witness_key = "{witness_key}"\nkeepalive_s = 5\nstop_flush_s = 10\n'
        )
        assert (
            controller("init", "--state-dir", str(state), "--config", str(config)).returncode == 0
        )
        exported = controller("export-key", "--state-dir", str(state))
        assert exported.returncode == 0, exported.stderr
        (keys / "east.pub").write_text(exported.stdout)
        witness = ca.witness()
        witness_proc = subprocess.Popen(
            [
                sys.executable, "-m", "controller", "witness", "--mqtt-url", broker.url,
                "--ca-file", str(witness.ca), "--cert-file", str(witness.cert),
                "--key-file", str(witness.key), "--state-dir", str(witness_dir),
                "--keys", str(keys), "--dashboard", "off",
            ],
            cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        # A retained record of a table the witness has no key for: its alert says the witness
        # has subscribed (what a table sends before that, the broker does not keep for it).
        probe = ca.table("probe")
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="probe")
        client.tls_set_context(tls_context(str(probe.ca), str(probe.cert), str(probe.key)))
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        client.publish("paigow/v1/probe/records", b"{}", 1, True).wait_for_publish(10)
        client.disconnect()
        client.loop_stop()
        observer.wait_for("the witness's alert", lambda: observer.alerts)
        yield {
            "broker": broker,
            "observer": observer,
            "witness_key": witness_key,
            "state": state,
            "config": config,
        }
    finally:
        observer.close()
        if witness_proc is not None:
            witness_proc.terminate()
            _, err = witness_proc.communicate(timeout=30)
            assert witness_proc.returncode == 0, err
        broker.kill()


def play(fleet: dict[str, Any], rounds: int) -> int:
    done = controller(
        "simulate", "--fast", "--plain-rounds", "--faults", "none", "--rounds", str(rounds),
        "--config", str(fleet["config"]), "--state-dir", str(fleet["state"]),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return max(line["seq"] for line in export_lines(fleet["state"]))


def test_a_table_is_cosigned_over_the_shipped_broker(fleet: dict[str, Any]) -> None:
    observer = fleet["observer"]
    cosigner = Verifier.parse(fleet["witness_key"], ALG_COSIGNATURE_V1)
    size = play(fleet, 3)
    observer.wait_for(
        f"east cosigned at {size}",
        lambda: checkpoint_size(observer.cosigned.get("east", "")) == size,
    )
    assert open_cosignature(observer.cosigned["east"], cosigner).checkpoint.size == size
    # the table reads its cosignature through the ACL and records it
    size = play(fleet, 3)
    observer.wait_for(
        f"east cosigned at {size}",
        lambda: checkpoint_size(observer.cosigned.get("east", "")) == size,
    )
    recorded = [line for line in export_lines(fleet["state"]) if line["kind"] == "cosigned"]
    assert recorded, "the table recorded no cosignature"
    log = fleet["broker"].log_text()
    assert "Denied" not in log, [line for line in log.splitlines() if "Denied" in line]
    assert " as east (" in log  # the client id is the CN, not paigow-east
    assert " as witness (" in log
