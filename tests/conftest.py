"""How the suite is run in parallel (``make test``: ``pytest -n auto``, pytest-xdist).

``-n auto`` starts twice as many workers as there are cores: about half of the suite's wall time
is spent waiting on real timers (sensor timeouts, shakes, debouncing, the display going offline)
with the CPU idle. Each worker is handed one test at a time (``--dist load --maxschedchunk 1``),
the tests marked ``slow`` first, so that the longest ones start at once and the short ones fill
the gaps. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` sets another count.

Every test is safe beside any other: it writes under its own ``tmp_path`` (the stateful tests
in a fresh directory in /dev/shm; the browser tests' screenshots to test-output/display/, a
name each), takes the ports the system gives it, changes the environment only through
``monkeypatch``, and signals only the processes it started.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: none without it (-p no:xdist)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return 2 * len(os.sched_getaffinity(0))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow first
