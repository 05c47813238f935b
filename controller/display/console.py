"""A terminal rendering of the table display: one line per round, for ``simulate`` and the
technician's console."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TextIO

from controller.core.state import Screen

log = logging.getLogger("paigow.display")


class ConsoleDisplay:
    """Writes a line per finished round (with the no-roll reasons of the round), per fault,
    and, with ``progress_every``, a progress line instead of each round."""

    def __init__(self, out: TextIO, *, progress_every: int = 0, total_rounds: int = 0) -> None:
        self.out = out
        self.progress_every = progress_every
        self.total_rounds = total_rounds
        self.rounds = 0
        self._decided: set[object] = set()
        self.no_rolls = 0
        self.faults = 0
        self._reasons: list[str] = []
        self._lock = threading.Lock()

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        with self._lock:
            if screen is Screen.NO_ROLL and "reason" in data:
                self._reasons.append(str(data["reason"]))
                self.no_rolls += 1
            elif screen is Screen.LOCKED and "reason" in data:
                self._reasons.append(str(data["reason"]))
                self.no_rolls += 1
                self._write(f"  round locked after {data.get('no_rolls')} no rolls\n")
            elif screen is Screen.FAULT:
                self.faults += 1
                back = data.get("returns")
                came_back = (
                    f" (came back: {', '.join(f'{f} {n} in a row' for f, n in back.items())})"
                    if isinstance(back, dict) and back
                    else ""
                )
                faults = ", ".join(map(str, _list(data.get("faults"))))
                self._write(f"  FAULT {faults}{came_back}\n")
            elif screen is Screen.READY and isinstance(voided := data.get("voided"), dict):
                # 621a.12(c),(e): the round before was void, every wager returned
                if not self.progress_every:
                    self._write(
                        f"  round {voided.get('round')} void ({voided.get('reason')}):"
                        " every wager returned\n"
                    )
            elif screen is Screen.RESULT and data.get("service"):
                self._write("  SERVICE test " + result_line(data, []) + "\n")
            elif screen is Screen.RESULT:
                self._result(data, seq)

    def _result(self, data: Mapping[str, object], seq: int | None) -> None:
        # A round counts once: a result corrected, or shown again after a restart, is the same
        # round.
        if isinstance(data.get("corrected"), dict) and data.get("round") in self._decided:
            if not self.progress_every:
                self._write("  corrected: " + result_line(data) + "\n")
            return
        self._decided.add(data.get("round"))
        is_new = len(self._decided) > self.rounds
        self.rounds = len(self._decided)
        reasons, self._reasons = self._reasons, []
        if self.progress_every:
            if is_new and (
                self.rounds % self.progress_every == 0 or self.rounds == self.total_rounds
            ):
                of = f"/{self.total_rounds}" if self.total_rounds else ""
                self._write(
                    f"progress: {self.rounds}{of} rounds, {self.no_rolls} no rolls,"
                    f" {self.faults} faults\n"
                )
            return
        self._write(result_line(data, reasons) + "\n")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def close(self) -> None:
        return None


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def result_line(data: Mapping[str, object], reasons: Sequence[str] = ()) -> str:
    result = data.get("result")
    if not isinstance(result, dict):
        return f"round {data.get('round')}: result"
    head = f"round {data.get('round', '?'):>4}"
    where = f"first stack: {result.get('starting_position')}"
    if "dice" in result:
        dice = result["dice"]
        body = (
            f"dice R{dice['red']} B{dice['blue'][0]} B{dice['blue'][1]}"
            f"  total {result.get('total'):>2}  {where:<24}"
        )
        wagers = result.get("wagers")  # none for an RNG's dice (current 621a.5(e)(2)-(4))
        if isinstance(wagers, dict):
            sums = ",".join(k for k, v in wagers["sum"].items() if v) or "-"
            match = ",".join(f"{k}x{v}" for k, v in wagers["match"].items() if v >= 2) or "-"
            beat = ",".join(k for k, v in wagers["beat_it"].items() if v) or "-"
            body += f"  sum {sums:<14} match {match:<5} beat-it {beat}"
    else:
        body = f"RNG number {result.get('count'):>2}  {where}"
    tail = f"  no rolls: {', '.join(reasons)}" if reasons else ""
    return f"{head}  {body}{tail}"
