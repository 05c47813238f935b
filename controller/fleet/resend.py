"""When the publisher sends records again: the witness's cosignature is the cursor. Pure: no
I/O, the time comes as data.

The broker's acknowledgement (the publisher's cursor, ``fleet-cursor``) says a record reached
the broker, not that it reached the witness: a broker restarted without its persistence, one
that crashed before its autosave, or a witness's session taken over with a clean start loses
records it acknowledged. What is known to be safe is the witness's verified cosignature, of
``S`` records. So:

- a new connection sends from ``min(cursor, S) + 1``. Before a cosignature is verified, ``S``
  is the size of the last ``cosigned`` record of this witness the log holds (what the witness
  vouched for before the publisher started); with none, the connection sends from the cursor;
- the first cosignature verified on a connection says what the witness holds now (the one the
  broker retained, or its answer to this connection's records). It is taken as ``S`` even when
  it is smaller than the one before (the witness's store was restored, or a record was lost
  between them); if it is behind where the connection started, the records after it go again
  at once;
- later on the connection, ``S`` only grows. When the broker acknowledged records past ``S``
  and a checkpoint past ``S`` was published, and ``S`` has not grown for ``RESEND_AFTER_S``
  since, the publisher sends again from record ``S + 1`` (duplicates are harmless: the
  witness drops them by seq). With no ``S`` known at all it is 0: a witness that never
  cosigned this log gets it all.

A witness that is down, or that stopped cosigning this table, must not make the table send its
log in a loop: each resend doubles the wait (10, 20, 40 ... s, at most ``RESEND_MAX_S``), and
the wait is back to ``RESEND_AFTER_S`` when ``S`` grows. A resend is never started before the
last one has been sent whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RESEND_AFTER_S = 10.0
RESEND_MAX_S = 300.0  # 10 s doubled five times is 320: at most every five minutes


@dataclass(slots=True)
class WitnessCursor:
    """The witness's cosigned size ``S`` as the publisher knows it, and when to send again."""

    after_s: float = RESEND_AFTER_S
    most_s: float = RESEND_MAX_S
    cosigned: int = 0  # the size of the newest verified cosignature (0: none known)
    known: bool = False  # a cosignature was verified since the publisher started
    recorded: int = 0  # the size the log's last ``cosigned`` record of this witness names
    wait_s: float = field(init=False)
    behind_since: float | None = None  # since when records and a checkpoint are past S
    start: int = 1  # the record this connection sent first
    fresh: bool = False  # no cosignature verified on this connection yet

    def __post_init__(self) -> None:
        self.wait_s = self.after_s

    @property
    def held(self) -> int:
        """``S``: what the witness is taken to hold (the verified cosignature, else the log's
        record of one, else 0)."""
        return self.cosigned if self.known else self.recorded

    def first_on_connection(self, acked: int) -> int:
        """The record a new connection sends first: after the broker's cursor, and never past
        ``S`` once one is known. The wait is counted anew."""
        some = self.known or self.recorded > 0
        self.start = (min(acked, self.held) if some else acked) + 1
        self.fresh = True
        self.behind_since = None
        return self.start

    def cosigned_at(self, size: int) -> int | None:
        """A verified cosignature of ``size`` records: the record to send again from at once
        (the connection's first cosignature is behind where it started), else None. When ``S``
        grows the wait starts again from ``after_s``."""
        first, self.fresh = self.fresh, False
        if not first and self.known and size <= self.cosigned:
            return None
        if not self.known or size > self.cosigned:
            self.wait_s = self.after_s
            self.behind_since = None
        self.cosigned, self.known = size, True
        if first and size + 1 < self.start:
            self.start = size + 1
            self.behind_since = None
            return size + 1
        return None

    def resend_from(self, *, acked: int, checkpoint: int, sent_all: bool, now: float) -> int | None:
        """The record to send again from when it is time (the wait is then doubled), else
        None. ``acked``: the broker's cursor; ``checkpoint``: the size of the newest checkpoint
        the broker acknowledged; ``sent_all``: every record up to ``acked`` was sent since the
        connection began or the last resend."""
        held = self.held
        if acked <= held or checkpoint <= held:
            self.behind_since = None
            return None
        if self.behind_since is None:
            self.behind_since = now
            return None
        if not sent_all or now - self.behind_since < self.wait_s:
            return None
        self.behind_since = now
        self.wait_s = min(self.most_s, self.wait_s * 2)
        return held + 1
