"""``paigow-controller run ARGS`` on a simulated table at rest: gpiozero's mock pins with the
simulated shaker and panel of ``drivers/sim/hardware.py`` built on them first, the shaker
secured and its lid closed, as a table waiting for a player.

With ``GPIOZERO_PIN_FACTORY=mock`` alone every input floats to its pull-up, which reads as a
tamper loop open and a lid lifted: the daemon would start with the fault latch tripped, not
waiting for a player. This adds only building those mock pins before the command runs; the
command is the installed one (``controller.cli.main``), config file, sd_notify and all.

    .venv/bin/python bench/table_daemon.py --config F
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpiozero import Device
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.app.config_file import load_config
from controller.cli import main
from drivers.sim.hardware import SimPanel, SimShaker


def run(argv: list[str]) -> int:
    config = load_config(Path(argv[argv.index("--config") + 1]))
    factory = MockFactory(pin_class=MockPWMPin)
    Device.pin_factory = factory
    SimShaker(factory, config.pins, config.shaker, lid_closed=True, secured=True)
    SimPanel(factory, config.pins)
    return main(["run", *argv])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
