"""Where the control thread's time goes between the sensor's frame that decides a round and the
result on the feed and the page: the stages of that one dispatch, for finding what to cut
(bench_latency.py gives the end-to-end figure and its goal; this prints no goal).

    .venv/bin/python bench/latency_stages.py          # LATENCY_STAGES_ROUNDS=150

Method. ``simulate --fast --web-display`` runs in this process (the steady simulation of
bench/common.py), its state directory on a tmpfs. The functions of each stage are wrapped while
a ``reading`` event is dispatched; the dispatches that leave the READING state (the frame that
decides: a result, or a no roll) are kept: per stage, the median and the 90th percentile of
its wall time (``perf_counter_ns``), and of the dispatch's CPU time (``thread_time_ns``), which
another process's load moves less. Stages nest: ``log_state.append`` holds the leaf encoding and
the schema check, ``_tell`` (the feed's lines) runs inside the commit, ``show`` is the page and
the panel. ``frame -> dispatch`` is the pty, the reader thread and the queue. The wrapping adds a
little to each figure; compare runs of this script, not with bench_latency's.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import env_int, free_ports, machine_load, note, steady_simulation, title, tmpfs_dir

from controller.app import committer, simulate
from controller.app import loop as loop_module
from controller.audit import log as log_module
from controller.core import log_state, record_schema
from controller.core.config import Config
from controller.core.sensor_protocol import Reading

# the log's stages: the checkpoint's signature inside log_state.append, the transaction, and the
# feed's lines (the log's listener) after it
STAGES_OF_THE_LOG = {
    "_sign": "  signature (Ed25519)",
    "_transaction": "SQLite transaction",
    "_tell": "feed lines (_tell)",
}
ORDER = (
    "frame -> dispatch",
    "dispatch",
    "dispatch, CPU",
    "core step",
    "encode context",
    "log_state.append",
    "  schema check",
    "  leaf encoding",
    "  signature (Ed25519)",
    "SQLite transaction",
    "feed lines (_tell)",
    "show",
)

_spent: collections.Counter[str] = collections.Counter()
_timing = False
_frame_ns = 0


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        if not _timing:
            return fn(*args, **kwargs)
        start = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            _spent[name] += time.perf_counter_ns() - start

    return timed


class _FrameSensor(simulate.CrewsSimulatedSensor):
    """The simulation's sensor, noting when each reading frame's bytes go to the pty."""

    _is_reading = False

    def _send(self, link: Any, reply: Any) -> None:
        self._is_reading = isinstance(reply, Reading)
        super()._send(link, reply)

    def _write(self, link: Any, data: bytes) -> None:
        global _frame_ns  # noqa: PLW0603 - one simulation in this process
        if self._is_reading:
            _frame_ns = time.perf_counter_ns()
        super()._write(link, data)


def _wrap() -> list[dict[str, int]]:
    """Every stage wrapped; the list the deciding dispatches' figures are added to."""
    kept: list[dict[str, int]] = []
    loop_module.step = _timed("core step", loop_module.step)  # type: ignore[attr-defined]
    committer.encode_context = _timed("encode context", committer.encode_context)  # type: ignore[attr-defined]
    log_state.append = _timed("log_state.append", log_state.append)
    record_schema.check = _timed("  schema check", record_schema.check)
    log_state.leaf_of = _timed("  leaf encoding", log_state.leaf_of)
    for name, stage in STAGES_OF_THE_LOG.items():
        setattr(log_module.AuditLog, name, _timed(stage, getattr(log_module.AuditLog, name)))
    loop_module.ControlLoop._show = _timed("show", loop_module.ControlLoop._show)  # type: ignore[method-assign]
    dispatch = loop_module.ControlLoop.dispatch

    def dispatching(self: loop_module.ControlLoop, occ: Any) -> None:
        global _timing  # noqa: PLW0603
        if str(occ.event) != "reading":
            dispatch(self, occ)
            return
        _spent.clear()
        _timing = True
        before = self.machine.context.state
        start, cpu = time.perf_counter_ns(), time.thread_time_ns()
        dispatch(self, occ)
        end, cpu_end = time.perf_counter_ns(), time.thread_time_ns()
        _timing = False
        if self.machine.context.state is not before:
            kept.append(
                {
                    "frame -> dispatch": start - _frame_ns,
                    "dispatch": end - start,
                    "dispatch, CPU": cpu_end - cpu,
                    **_spent,
                }
            )

    loop_module.ControlLoop.dispatch = dispatching  # type: ignore[method-assign]
    simulate.CrewsSimulatedSensor = _FrameSensor  # type: ignore[misc]
    return kept


def main() -> None:
    rounds = env_int("LATENCY_STAGES_ROUNDS", 150)
    title(f"the deciding frame's dispatch on the control thread, by stage: {rounds} rounds")
    note(machine_load())
    kept = _wrap()
    steady_simulation()
    config = Config()
    http, feed = free_ports(2)
    display = dataclasses.replace(config.display, http_port=http, feed_port=feed)
    with (
        tempfile.TemporaryDirectory(dir=tmpfs_dir()) as state,
        open(os.devnull, "w") as out,
    ):
        simulate.run_simulation(
            dataclasses.replace(config, display=display),
            rounds=rounds,
            seed=1,
            fast=True,
            faults={},
            state_dir=Path(state),
            out=out,
            web_display=True,
            plain_rounds=True,
        )
    if not kept:
        raise SystemExit("latency_stages: no dispatch decided a round")
    note(f"{len(kept)} deciding dispatches; median and 90th percentile, microseconds")
    for stage in ORDER:
        values = sorted(figures.get(stage, 0) / 1000 for figures in kept)
        p90 = values[int(len(values) * 0.9)]
        note(f"{stage:<24} {statistics.median(values):9.1f} {p90:9.1f}")


if __name__ == "__main__":
    main()
