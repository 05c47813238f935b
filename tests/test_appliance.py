"""The appliance in-process, on gpiozero's MockFactory: an RNG draw interrupted by a power cut is
shown again after the restart, never drawn a second time (AGCO 5.1; no secondary selection)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from gpiozero import Device
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.appliance import Appliance, Options
from controller.audit_log import AuditLog, load_or_create_signer
from controller.audit_records import config_loaded_data
from controller.cli import main
from controller.config import Config
from controller.records import RecordKind
from controller.rng_session import RngSessionManager
from controller.state import Mode, Screen, State
from controller.verify_log import verify_state_dir
from drivers.sim_hardware import SimShaker
from drivers.sim_sensor import SimulatedSensor


class Screens:
    def __init__(self) -> None:
        self.shown: list[tuple[Screen, dict[str, object]]] = []

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        self.shown.append((screen, dict(data)))

    def close(self) -> None:
        return None


@pytest.fixture
def factory() -> Iterator[MockFactory]:
    f = MockFactory(pin_class=MockPWMPin)
    yield f
    f.close()


RNG_TABLE = dataclasses.replace(
    Config(), table=dataclasses.replace(Config().table, mode=Mode.RNG, name="t7")
)


def crash_after_the_draw(state_dir: Path) -> int:
    """What the log holds when the power fails right after round 1's number was recorded and
    before its result: written by the real log and the real RNG session manager."""
    with AuditLog.open(state_dir) as log:
        log.append(RecordKind.POWER_ON, {"previous": "first start", "last_seq": 0})
        log.append(RecordKind.CONFIG_LOADED, config_loaded_data(RNG_TABLE))
        log.append(RecordKind.ROUND_OPENED, {"round": 1})
        log.append(RecordKind.NO_MORE_BETS, {"round": 1, "bank": "dealer", "mode": "rng"})
        rng = RngSessionManager(
            state_dir=state_dir,
            log=log,
            table="t7",
            game=RNG_TABLE.table.game,
            mode=RNG_TABLE.rng.mode,
            max_rounds=100,
            records=[],
        )
        rng.open()
        draw = rng.draw(1, 1)
    assert draw.number is not None
    return draw.number


def test_a_recorded_rng_number_is_shown_again_after_a_power_cut(
    tmp_path: Path, factory: MockFactory
) -> None:
    number = crash_after_the_draw(tmp_path)
    screens = Screens()
    options = Options(
        pin_factory=factory, state_dir=tmp_path, web_display=False, displays=(screens,)
    )
    appliance = Appliance(RNG_TABLE, options)
    try:
        appliance.start()  # recovery carries out the interrupted draw before any event
        assert appliance.loop is not None
        assert appliance.loop.machine.state is State.RESULT
    finally:
        appliance.close()
    rows = [(r.seq, r.kind, r.data) for r in AuditLog.open(tmp_path).records()]
    draws = [data for _, kind, data in rows if kind == RecordKind.RNG_DRAW]
    assert len(draws) == 1, "no second selection"
    result = next(data for _, kind, data in rows if kind == RecordKind.RESULT)
    assert (result["round"], result["attempt"], result["count"]) == (1, 1, number)
    shown = [data for screen, data in screens.shown if screen is Screen.RESULT]
    assert shown[-1]["result"]["count"] == number  # type: ignore[index]
    power_on = [data for _, kind, data in rows if kind == RecordKind.POWER_ON]
    assert power_on[-1]["previous"] == "interrupted"
    # the interrupted session and the one opened for the next rounds (its commitment shown
    # before bets close) are both revealed at the shutdown, and every number replays
    assert [kind for _, kind, _ in rows].count(RecordKind.RNG_REVEAL) == 2
    report = verify_state_dir(tmp_path, load_or_create_signer(tmp_path).verifier)
    assert report.results == 1
    assert "2 revealed" in report.rng


def test_selftest_passes_on_healthy_hardware(
    tmp_path: Path, factory: MockFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """The technician's check on a healthy table: the simulated shaker holds the lid closed
    and the tamper loop secured on the pins, the simulated sensor answers on a pty."""
    config = Config()
    shaker = SimShaker(factory, config.pins, config.shaker)
    previous = Device.pin_factory
    Device.pin_factory = factory  # what GPIOZERO_PIN_FACTORY selects on a real board
    try:
        with SimulatedSensor(seed=3) as sensor:
            code = main(
                [
                    *("selftest", "--config", str(write_config(tmp_path))),
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
    assert set(report["checks"]) == {"config", "keys", "rng", "sensor", "pins"}
    assert "OptiDice" in report["checks"]["sensor"]["detail"]
    assert "lid closed" in report["checks"]["pins"]["detail"]


def write_config(directory: Path) -> Path:
    path = directory / "config.toml"
    path.write_text('[table]\nname = "t8"\n')
    return path
