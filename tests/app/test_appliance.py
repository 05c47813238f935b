"""The appliance in-process, on gpiozero's MockFactory: an RNG draw interrupted by a power cut is
shown again after the restart, never drawn a second time (AGCO 5.1; no secondary selection)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from gpiozero import Device
from gpiozero.pins.mock import MockFactory
from support import opening
from support.rng_fakes import AUDITOR, AUDITOR_KEY

from controller.app.appliance import Appliance, Options
from controller.audit.log import AuditLog, load_signer
from controller.audit.verify import verify_state_dir
from controller.cli import main
from controller.core.config import Config
from controller.core.records import RecordKind
from controller.core.rng_audit import open_escrowed_sessions
from controller.core.state import DiceSet, Mode, NoMoreBets, Screen, State
from controller.software.check import (
    build_manifest,
    create_release_key,
    installed_root,
    running_version,
    write_manifest,
)
from drivers.sim.hardware import SimShaker
from drivers.sim.sensor import SimulatedSensor


class Screens:
    def __init__(self) -> None:
        self.shown: list[tuple[Screen, dict[str, object]]] = []

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        self.shown.append((screen, dict(data)))

    def close(self) -> None:
        return None


RNG_TABLE = dataclasses.replace(
    Config(),
    table=dataclasses.replace(Config().table, mode=Mode.RNG, name="t7"),
    rng=dataclasses.replace(Config().rng, escrow_public_key=AUDITOR_KEY.text),
)


class PowerCut(BaseException):
    """The power fails: nothing after this point runs (not an error the loop may catch)."""


def crash_after_the_draw(state_dir: Path, factory: MockFactory) -> int:
    """The power fails right after round 1's number was recorded and before its result: the
    real appliance, its log and its RNG session, stopped dead at that point."""
    # (no service terminal: its listening socket, which the kernel would close, stays open
    # in this process, and the next start would rightly refuse to take it over)
    appliance = Appliance(
        RNG_TABLE,
        Options(
            pin_factory=factory, state_dir=state_dir, web_display=False, service_terminal=False
        ),
    )
    appliance.start()
    assert appliance.loop is not None
    rng = appliance.loop.ports.rng
    assert rng is not None
    drawn: list[int] = []
    real_draw = rng.draw

    def draw_then_die(*, round_number: int, attempt: int) -> int:
        value = real_draw(round_number=round_number, attempt=attempt)
        assert isinstance(value, int)
        drawn.append(value)
        raise PowerCut

    rng.draw = draw_then_die  # type: ignore[method-assign]
    for occ in opening(1):  # the tiles inspected (an RNG table needs no dice)
        appliance.loop.dispatch(occ)
    appliance.loop.dispatch(NoMoreBets(at=1))
    with pytest.raises(PowerCut):
        appliance.loop.dispatch(DiceSet(at=1))  # the style settled: draw
    for close in reversed(appliance._closables):  # what the kernel releases; no shutdown step
        close()
    return drawn[0]


def test_a_recorded_rng_number_is_shown_again_after_a_power_cut(
    tmp_path: Path, factory: MockFactory
) -> None:
    number = crash_after_the_draw(tmp_path, factory)
    screens = Screens()
    options = Options(
        pin_factory=factory, state_dir=tmp_path, web_display=False, displays=(screens,)
    )
    appliance = Appliance(RNG_TABLE, options)
    try:
        appliance.start()  # the core takes up the pending draw before any event
        assert appliance.loop is not None
        assert appliance.loop.machine.state is State.RESULT
    finally:
        appliance.close()
    rows = [
        (r.seq, r.kind, r.data)
        for r in AuditLog.open(tmp_path, origin="paigow-controller/t7").records()
    ]
    kinds = [kind for _, kind, _ in rows]
    draws = [data for _, kind, data in rows if kind == RecordKind.RNG_DRAW]
    assert len(draws) == 1, "no second selection"
    result = next(data for _, kind, data in rows if kind == RecordKind.RESULT)
    assert (result["round"], result["attempt"], result["count"]) == (1, 1, number)
    shown = [data for screen, data in screens.shown if screen is Screen.RESULT]
    assert shown[-1]["result"]["count"] == number  # type: ignore[index]
    power_on = [data for _, kind, data in rows if kind == RecordKind.POWER_ON]
    assert power_on[-1]["previous"] == "interrupted"
    # one session, committed before the bets closed; its recorded number shown again without
    # its seed (gone with the power cut, never taken up); at the shutdown it is recorded as
    # ended by the restart, and the auditor's reveal from its escrow replays its number
    assert kinds.count(RecordKind.RNG_COMMIT) == 1
    assert kinds.index(RecordKind.RNG_COMMIT) < kinds.index(RecordKind.NO_MORE_BETS)
    assert kinds.count(RecordKind.RNG_REVEAL) == 0
    [ended] = [data for _, kind, data in rows if kind == RecordKind.RNG_INTERRUPTED]
    assert (ended["reason"], ended["draws"]) == ("restart", 1)
    signer = load_signer(tmp_path)
    assert signer is not None
    report = verify_state_dir(tmp_path, signer.verifier)
    assert report.results == 1
    assert report.sessions_escrowed == [ended["session"]]
    [opened] = open_escrowed_sessions(rows, AUDITOR).opened
    report = verify_state_dir(tmp_path, signer.verifier, rng_reveals=[opened.reveal])
    assert report.sessions_revealed_by_auditor == [ended["session"]]


def test_selftest_passes_on_healthy_hardware(
    tmp_path: Path, factory: MockFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """The technician's check on a healthy table: the simulated shaker holds the lid closed
    and the tamper loop secured on the pins, the simulated sensor answers on a pty, and the
    installed files match their signed manifest (here a manifest of this checkout, signed with
    a throw-away release key)."""
    config = Config()
    shaker = SimShaker(factory, config.pins, config.shaker)
    previous = Device.pin_factory
    Device.pin_factory = factory  # what GPIOZERO_PIN_FACTORY selects on a real board
    signer = create_release_key(tmp_path / "release.key")
    manifest = tmp_path / "MANIFEST.json"
    blob = build_manifest(installed_root(), signer, running_version(), bytecode_as_found=True)
    write_manifest(manifest, blob)
    config_file = write_config(
        tmp_path, f'[software]\nmanifest = "{manifest}"\npublic_key = "{signer.verifier}"\n'
    )
    assert main(["init", "--config", str(config_file), "--state-dir", str(tmp_path / "state")]) == 0
    assert capsys.readouterr().out.startswith("paigow-controller/t8+")  # the verifier key
    try:
        with SimulatedSensor(seed=3) as sensor:
            code = main(
                [
                    *("selftest", "--config", str(config_file)),
                    *("--sensor-url", sensor.url, "--state-dir", str(tmp_path / "state")),
                ]
            )
    finally:
        Device.pin_factory = previous
        shaker.close()
    out = capsys.readouterr().out
    report = json.loads(out)
    assert code == 0, report
    assert report["ok"] is True
    assert set(report["checks"]) == {"config", "keys", "rng", "software", "sensor", "pins"}
    assert "OptiDice" in report["checks"]["sensor"]["detail"]
    assert "lid closed" in report["checks"]["pins"]["detail"]
    assert "files match the manifest" in report["checks"]["software"]["detail"]


def test_selftest_names_software_without_a_manifest_where_one_is_required(
    tmp_path: Path,
    factory: MockFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """N.J.A.C. 13:69E-1.28H: the technician's check verifies the program as a start does;
    no manifest where [software] required (the default) fails that check, by name."""
    monkeypatch.setattr(Device, "pin_factory", factory)  # mock pins, never a board's
    config_file = write_config(tmp_path, f'[software]\nmanifest = "{tmp_path / "none.json"}"\n')
    code = main(
        [
            *("selftest", "--config", str(config_file), "--state-dir", str(tmp_path / "s")),
            *("--sensor-url", str(tmp_path / "no-sensor")),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["checks"]["software"]["ok"] is False
    assert "no manifest" in report["checks"]["software"]["detail"]


def write_config(directory: Path, more: str = "") -> Path:
    path = directory / "config.toml"
    path.write_text('[table]\nname = "t8"\n' + more)
    return path
