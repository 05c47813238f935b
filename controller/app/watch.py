"""What the appliance checks now and then between events (``controller.app.loop.Duty``): the
installed software against its signed manifest, and whether the OS keeps the clock
synchronised. Each check returns the event the core records, or None."""

from __future__ import annotations

import logging

from controller.audit.log import AuditLog
from controller.core.records import RecordKind
from controller.core.software import SoftwareCheck, SoftwareIdentity
from controller.core.state import (
    ClockChanged,
    ClockSync,
    Occurrence,
    SoftwareChecked,
    TableTime,
)
from controller.errors import AuditLogError
from controller.ports import ClockStatus, ProgramVerification

log = logging.getLogger("paigow.appliance")

# How far back a start looks for the last software check (the records have no index by kind):
# an hour of play holds about a thousand records and a check is made every hour (and at every
# start). The look-back costs about 6 ms per 10,000 records here (bench/.scratch's log of 20,000
# rounds): it is paid in full only at the first start of a log without software checks.
SOFTWARE_LOOKBACK_RECORDS = 20_000
CLOCK_EVERY_MS = 60_000  # how often the clock's status is asked (its change is recorded)
# How often the table's time goes in the log (``table_time``): the dice's 24 hours and the
# tiles' 12 are counted in it, so a power cut after hours of idling loses at most this much
TABLE_TIME_EVERY_MS = 15 * 60_000


def table_time(at: int) -> Occurrence:
    """The periodic note of the table's time (the core records it with the wall clock)."""
    return TableTime(at=at)


def last_software_identity(audit: AuditLog) -> SoftwareIdentity | None:
    """The identity the last ``software_check`` recorded (None: none within the look-back,
    as on a log from before program verification, or a log that cannot be read)."""
    try:
        record = audit.last_record(RecordKind.SOFTWARE_CHECK, within=SOFTWARE_LOOKBACK_RECORDS)
        if record is None:
            return None
        data = record.data
    except (AuditLogError, ValueError) as exc:
        log.warning("the last software check cannot be read: %s", exc)
        return None
    return SoftwareIdentity.from_record(
        {"version": data.get("version"), "manifest": data.get("manifest")}
    )


class SoftwareWatch:
    """Program verification at start (``first``) and then periodically (``check``), each
    result compared by the core with the one before it (``software_changed``)."""

    def __init__(self, verifier: ProgramVerification, *, before: SoftwareIdentity | None) -> None:
        self.verifier = verifier
        self.before = before

    def first(self) -> tuple[SoftwareCheck, SoftwareIdentity | None]:
        """The check at start, and the identity the log held before it."""
        check, before = self._check(), self.before
        self.before = check.identity
        return check, before

    def check(self, at: int) -> Occurrence:
        check = self._check()
        occ = SoftwareChecked(at=at, software=check, software_before=self.before)
        self.before = check.identity
        return occ

    def _check(self) -> SoftwareCheck:
        check = self.verifier.check()
        if check.is_fault:
            log.error("%s", check.summary())
        elif check.result != "ok":
            log.warning("%s", check.summary())
        else:
            log.info("%s", check.summary())
        return check


class ClockWatch:
    """Whether the OS's clock is synchronised: asked at start (``now``) and then every
    ``CLOCK_EVERY_MS``; an event only when the answer changed."""

    def __init__(self, status: ClockStatus) -> None:
        self.status = status
        self.last: ClockSync | None = None

    def now(self) -> ClockSync:
        self.last = ClockSync.of(self.status.is_synchronised())
        if self.last is not ClockSync.SYNCHRONISED:
            log.warning("the clock is %s: record times may be wrong", self.last)
        return self.last

    def check(self, at: int) -> Occurrence | None:
        clock = ClockSync.of(self.status.is_synchronised())
        if clock is self.last:
            return None
        log.warning("the clock is now %s", clock)
        self.last = clock
        return ClockChanged(at=at, clock=clock)
