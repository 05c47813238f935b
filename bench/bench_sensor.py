"""Dice sensor figures: parse throughput, and request-to-reading latency over a real pty.

Run: ``.venv/bin/python bench/bench_sensor.py`` (``make bench`` runs every bench_*.py).
Prints figures only; nothing here is a pass/fail test.
"""

from __future__ import annotations

import hashlib
import queue
import statistics
import time

from controller.core.dice import DieColour
from controller.core.sensor_protocol import DieField, FrameParser, Reading, encode
from controller.core.state import Event, Occurrence
from drivers.dice_sensor import SerialDiceSensor
from drivers.sim.sensor import SimulatedSensor

BAUD = 115200
BYTES_PER_SECOND_ON_THE_LINE = BAUD / 10  # 8N1: ten bit times per byte


def bench_parse(frames: int = 20_000, chunk: int = 64) -> None:
    reading = Reading(
        1,
        hashlib.sha256(b"bench").hexdigest(),
        (
            DieField(DieColour.RED, 5, True, True, (120, 45), 97),
            DieField(DieColour.BLUE, 2, True, True, (60, 150), 99),
            DieField(DieColour.BLUE, 6, True, True, (170, 140), 95),
        ),
    )
    frame = encode(reading)
    stream = frame * frames
    chunks = [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
    parser = FrameParser()
    start = time.perf_counter()
    count = 0
    for piece in chunks:
        count += len(parser.feed(piece))
    elapsed = time.perf_counter() - start
    assert count == frames
    rate = frames / elapsed
    line_rate = BYTES_PER_SECOND_ON_THE_LINE / len(frame)
    print(f"parse: {len(frame)}-byte reading frames fed in {chunk}-byte chunks")
    print(f"  {rate:,.0f} frames/s, {rate * len(frame) / 1e6:.2f} MB/s")
    print(
        f"  the 115200-baud line carries at most {line_rate:,.0f} such frames/s:"
        f" the parser runs at {rate / line_rate:,.1f}x the line rate"
    )


def bench_latency(reads: int = 300) -> None:
    events: queue.Queue[Occurrence] = queue.Queue()
    samples: list[float] = []
    with SimulatedSensor(seed=1) as sim, SerialDiceSensor(sim.url, events, poll_s=0.05) as sensor:
        for n in range(reads):
            start = time.perf_counter()
            sensor.request_read(round_number=n, attempt=1)
            occurrence = events.get(timeout=5)
            samples.append((time.perf_counter() - start) * 1000)
            assert occurrence.event is Event.READING
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"request -> READING event over a pty (pyserial, simulated sensor), {reads} reads")
    print(
        f"  median {statistics.median(samples):.2f} ms, p99 {p99:.2f} ms, max {samples[-1]:.2f} ms"
    )
    print(
        "  (a pty has no baud-rate delay; a 137-byte reading takes 11.9 ms on a real 115200 line)"
    )


if __name__ == "__main__":
    bench_parse()
    bench_latency()
