"""The RECALL screen's read of the log, on a thread of its own (issue 31).

Game recall (AGCO 13.1.1) shows a round read back from the log itself: ``AuditLog.recall``, on a
read-only connection of its own. The control thread does not wait for it: it asks (:meth:`ask`),
goes on taking events, and is woken (the queue's ``wake``) when the rounds are read; it takes
them (:meth:`take`) and shows the screen if the table is still recalling that round. A read that
fails comes back as its exception, for the loop to latch as it would have at once. Only the
newest question is answered: the rounds recall reads do not depend on which one is shown, and a
supervisor stepping through them faster than the log is read sees the last one asked for.

Locks: one, a leaf (nothing is called while it is held).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

# What is asked: the screen's data (its ``back``: the round recalled) and the read to make.
Read = Callable[[], list[dict[str, Any]]]
# What comes back: the screen's data and the rounds read, or what the read raised.
Answer = tuple[Mapping[str, object], list[dict[str, Any]] | Exception]


class RecallReads:
    """One reader thread, started at the first question; ``wake`` is called (from it) once an
    answer waits. :meth:`close` ends the thread (a read under way is finished first)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._asked = threading.Condition(self._lock)
        self._question: tuple[Mapping[str, object], Read] | None = None
        self._answer: Answer | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.answered = 0  # reads made (for whoever watches the reader: a test)

    def ask(self, data: Mapping[str, object], read: Read) -> None:
        """From the control thread: read for the screen ``data`` (replacing a question not yet
        taken up by the reader)."""
        with self._lock:
            if self._closed:
                return
            self._question = (data, read)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="recall-reader", daemon=True
                )
                self._thread.start()
            self._asked.notify()

    def take(self) -> Answer | None:
        """From the control thread: the answer waiting, if any (taken once)."""
        with self._lock:
            answer, self._answer = self._answer, None
        return answer

    @property
    def is_answer_waiting(self) -> bool:
        with self._lock:
            return self._answer is not None

    def close(self, timeout: float = 5.0) -> None:
        """No more questions; waits up to ``timeout`` seconds for a read under way."""
        with self._lock:
            self._closed = True
            self._asked.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _serve(self) -> None:
        while True:
            with self._lock:
                while self._question is None and not self._closed:
                    self._asked.wait()
                if self._closed:
                    return
                assert self._question is not None
                (data, read), self._question = self._question, None
            rounds: list[dict[str, Any]] | Exception
            try:
                rounds = read()
            except Exception as exc:  # noqa: BLE001 - handed to the control thread, never lost
                rounds = exc
            with self._lock:
                self._answer = (data, rounds)
                self.answered += 1
            self._wake()
