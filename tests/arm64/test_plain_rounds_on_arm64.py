"""The table on the Pi's architecture: Debian bookworm arm64 under qemu (tests/arm64/chroot.py),
the runtime lock installed with its hashes and the project on top, plays plain rounds on its
simulated hardware with no no roll, writes a log that verify-log passes (on arm64, and on this
x86_64 host: the log moves between machines), and the same seed gives the same results as on
x86_64 (round, dice, starting position), as it does in Python slowed ten times
(tests/e2e/test_simulated_time.py).

Under qemu Python runs several times slower: 50 rounds. The figures (wall and CPU seconds, rounds
per second on each architecture) are printed, never asserted. With ARM64_SUITE=1 a part of the
suite runs there too, with pytest and hypothesis from the test lock (tests/arm64/conftest.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from chroot import PROJECT, Chroot
from support import simulate_argv, what_happened

ROUNDS = 50
SEED = "7"
PLAIN = ("--seed", SEED, "--plain-rounds")
STATE = "/tmp/arm64-state"  # in the tree


def measured(argv: list[str], out: Path) -> tuple[int, float, float]:
    """Exit status, wall seconds and CPU seconds (user + system, its children's with it)."""
    started = time.monotonic()
    with (out / "stdout").open("w") as stdout, (out / "stderr").open("w") as stderr:
        process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, time.monotonic() - started, usage.ru_utime + usage.ru_stime


def test_plain_rounds_on_arm64_as_on_x86_64(arm64: Chroot, tmp_path: Path) -> None:
    machine = arm64.run(
        [f"{PROJECT}/.venv/bin/python", "-c", "import platform; print(platform.machine())"]
    )
    assert machine.stdout.strip() == "aarch64", machine.stdout
    print(f"seed {SEED}, {ROUNDS} plain rounds, no fault injected")
    state = arm64.root / STATE.lstrip("/")
    subprocess.run(["rm", "-rf", str(state)], check=True)
    (tmp_path / "x86_64").mkdir()
    (tmp_path / "arm64").mkdir()

    x86_state = tmp_path / "x86_64" / "state"
    x86 = measured(simulate_argv(x86_state, ROUNDS, *PLAIN), tmp_path / "x86_64")
    simulate = [f"{PROJECT}/.venv/bin/paigow-controller", *simulate_argv(state, ROUNDS)[3:]]
    simulate[simulate.index("--state-dir") + 1] = STATE
    arm = measured(arm64.argv([*simulate, *PLAIN]), tmp_path / "arm64")
    said = (tmp_path / "arm64" / "stderr").read_text() + (tmp_path / "arm64" / "stdout").read_text()
    assert x86[0] == 0, (tmp_path / "x86_64" / "stderr").read_text()
    assert arm[0] == 0, said
    for name, (_, wall, cpu) in (("x86_64", x86), ("arm64", arm)):
        print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU, {ROUNDS / wall:.2f} rounds/s")
    print(f"arm64 / x86_64: wall x{arm[1] / x86[1]:.1f}, CPU x{arm[2] / x86[2]:.1f}")
    done = re.search(r"done: (\d+) rounds, (\d+) no rolls, (\d+) faults", said)
    assert done is not None, said
    print(done.group(0))
    assert done.groups() == (str(ROUNDS), "0", "0")

    verified = arm64.run(
        [f"{PROJECT}/.venv/bin/paigow-controller", "verify-log", "--state-dir", STATE, "--json"],
        check=False,
    )
    print(f"verify-log on arm64: exit {verified.returncode}, {verified.stdout[:120]}")
    assert verified.returncode == 0, verified.stderr
    here = subprocess.run(
        [sys.executable, "-m", "controller", "verify-log", "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert here.returncode == 0, here.stderr

    results, wrong = what_happened(state)
    x86_results, x86_wrong = what_happened(x86_state)
    assert (wrong, x86_wrong) == ([], [])
    assert len(results) == ROUNDS
    assert results == x86_results


# Of the suite, the parts where the architecture could show: the RNG's bytes, the Merkle tree's
# and the canonical encoding's hashes, the pins on gpiozero's MockFactory and the dice sensor
# over a real pseudo-terminal (about 10 s of CPU here, six times that or more under qemu).
SUITE_PART = (
    "tests/core/test_rng.py",
    "tests/core/test_merkle.py",
    "tests/core/test_canonical.py",
    "tests/drivers/test_gpio_pinout.py",
    "tests/drivers/test_dice_sensor.py",
)


def test_part_of_the_suite_on_arm64(arm64_suite: Chroot) -> None:
    started = time.monotonic()
    done = arm64_suite.run(
        [
            f"{PROJECT}/.venv/bin/python",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *SUITE_PART,
        ],
        cwd=PROJECT,
        check=False,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    print(f"on arm64: {summary} ({time.monotonic() - started:.0f} s wall)")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", summary), summary
    assert "failed" not in summary, summary
