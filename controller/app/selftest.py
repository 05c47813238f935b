"""``paigow-controller selftest``: a technician's check of the config, the log's key, the RNG,
the installed software against its manifest, the dice sensor and the pins, each named in the
report. A composition root, like the appliance: it opens the real drivers. It never creates
anything (a key is made by ``init`` or the first start)."""

from __future__ import annotations

import dataclasses
import queue
from collections.abc import Callable
from pathlib import Path

from controller.audit.log import DB_NAME, load_signer, peek_identity
from controller.core.config import Config
from controller.core.drbg import known_answer_test
from controller.core.state import Mode, Occurrence
from controller.errors import ControllerError
from controller.software.check import SoftwareVerifier
from drivers.dice_sensor import SerialDiceSensor
from drivers.table_io import build_table_io


def selftest(
    config: Config, *, config_name: str, state_dir: Path, sensor_url: str | None
) -> tuple[bool, dict[str, dict[str, object]]]:
    """Each check in turn: whether all passed, and each one's result by name."""
    checks: list[tuple[str, Callable[[], str]]] = [
        ("config", lambda: f"{config_name} sha256 {config.source_sha256[:16]}"),
        ("keys", lambda: _check_keys(state_dir)),
        ("rng", _check_rng),
        ("software", lambda: _check_software(config)),
    ]
    if config.round_settings().allowed_modes != {Mode.RNG}:
        url = sensor_url or config.sensor.url
        checks.append(("sensor", lambda: _check_sensor(config, url)))
    checks.append(("pins", lambda: _check_pins(config)))
    report: dict[str, dict[str, object]] = {}
    for name, check in checks:
        try:
            report[name] = {"ok": True, "detail": check()}
        except Exception as exc:  # noqa: BLE001 - each failure is reported by name, no traceback
            report[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    return all(r["ok"] for r in report.values()), report


def _check_keys(state_dir: Path) -> str:
    """The log's signing key is there and is the log's own. Never creates one: only
    ``paigow-controller init`` (or the first start on an empty directory) does."""
    signer = load_signer(state_dir)
    recorded = peek_identity(state_dir / DB_NAME)
    if signer is None:
        if recorded is None:
            raise ControllerError(
                f"no signing key in {state_dir}: run paigow-controller init --state-dir"
                f" {state_dir}, or start the controller once"
            )
        raise ControllerError(f"the signing key of {recorded[0]} (key id {recorded[1]}) is missing")
    key_id = signer.verifier.key_id.hex()
    if recorded is not None and (recorded[0], recorded[1]) != (signer.name, key_id):
        raise ControllerError(
            f"the signing key {signer.name} ({key_id}) is not the log's key"
            f" {recorded[0]} ({recorded[1]})"
        )
    return f"log signing key {signer.name} ({key_id}) in {state_dir}"


def _check_rng() -> str:
    known_answer_test()
    return "HMAC_DRBG SHA-256 known-answer test passed"


def _check_sensor(config: Config, url: str) -> str:
    events: queue.Queue[Occurrence] = queue.Queue()
    sensor = SerialDiceSensor.from_config(dataclasses.replace(config.sensor, url=url), events)
    try:
        identity = sensor.open()
        faults = sensor.status()
        if faults:
            raise ControllerError(f"sensor reports {', '.join(sorted(map(str, faults)))}")
    finally:
        sensor.close()
    return f"{identity.model} firmware {identity.firmware} serial {identity.serial_number}"


def _check_software(config: Config) -> str:
    """Program verification, as ``run`` does it at start (N.J.A.C. 13:69E-1.28H, 9 NYCRR
    5319.14, AGCO 22): every installed file against the signed manifest."""
    settings = config.software
    check = SoftwareVerifier.installed(
        manifest=settings.manifest, public_key=settings.public_key, required=settings.required
    ).check()
    if check.is_fault:
        raise ControllerError(check.summary())
    return check.summary()


def _check_pins(config: Config) -> str:
    events: queue.Queue[Occurrence] = queue.Queue()
    table_io = build_table_io(config, events)
    try:
        lid = "n/a"
        if table_io.shaker is not None:
            lid = "closed" if table_io.shaker.is_lid_closed else "open"
            if not table_io.shaker.is_secured:
                raise ControllerError("the shaker's tamper loop is open (not secured)")
    finally:
        table_io.close()
    return f"pins claimed; lid {lid}"
