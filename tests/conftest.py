"""How the suite is run in parallel (``make test``: ``pytest -n auto``, pytest-xdist).

``-n auto`` starts one and a half workers per core (3 on 2 cores): about half of the suite's
wall time is spent waiting on real timers (sensor timeouts, shakes, debouncing, the display going
offline) with the CPU idle, while its timing tests (a shake's pattern against its motor limit, a
late sensor reply against the timeout) need the CPU when their timers fire. Twice as many workers
as cores was hardly faster and left those tests less room on a busy machine.
Each worker is handed one test at a time (``--dist load --maxschedchunk 1``), the tests marked
``slow`` first, so that the longest ones start at once and the short ones fill the gaps.
``PYTEST_XDIST_AUTO_NUM_WORKERS`` sets another count.

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
    return max(2, 3 * len(os.sched_getaffinity(0)) // 2)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow first
