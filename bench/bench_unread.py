"""What looking at a display client costs: one look at what it has not taken (SIOCOUTQ and
TCP_INFO, controller/web/clients.py), against sending it a heartbeat and reading it.

    .venv/bin/python bench/bench_unread.py      # BENCH_UNREAD_CALLS=20000 (five runs)

Each client is looked at once per heartbeat (a second) while it is live, and between the slices
of a send that waits: the look is to cost less than the heartbeat it goes with. Both over one
loopback connection in this process, interleaved; the figures are the medians over the runs.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from common import env_int, figure, machine_load, median, note, title

from controller.web.clients import UnreadWatch

HEARTBEAT = b"x" * 100  # about a page's heartbeat with its clock


def per_call_us(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        call()
    return (time.perf_counter_ns() - start) / calls / 1000


def main() -> None:
    calls = env_int("BENCH_UNREAD_CALLS", 20000)
    title(f"a look at a client's unsent bytes against a heartbeat: 5 runs of {calls} calls")
    note(machine_load())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    watch = UnreadWatch(server, bound_s=10.0, clock=time.monotonic)

    def heartbeat() -> None:
        server.send(HEARTBEAT)
        client.recv(4096)

    looks, beats = [], []
    for _ in range(5):
        looks.append(per_call_us(watch.check, calls))
        beats.append(per_call_us(heartbeat, calls))
    look, beat = median(looks), median(beats)
    figure("one look (SIOCOUTQ + TCP_INFO)", f"{look:.2f} us")
    figure("one heartbeat sent and read (baseline)", f"{beat:.2f} us")
    figure("look / heartbeat", f"{look / beat:.2f}", "< 1", look < beat)
    server.close()
    client.close()


if __name__ == "__main__":
    main()
