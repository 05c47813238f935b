"""The table of fault codes (controller/core/faults.py): pinned, never renumbered; the core's
rules of clearing agree with it; docs/faults.md is its generated text; systemd's status line
names the codes and never says "ready" while play is stopped."""

from __future__ import annotations

from pathlib import Path

from controller.core.faults import BY_NAME, FAULT_CODES, Clearer, Clearing, code_of, markdown
from controller.core.state import (
    DICE_LIFE_MS,
    ClockSync,
    Fault,
    Mode,
    RoundContext,
    State,
)
from controller.core.status import Facts, conditions, exit_code, report, systemd_status

DOCS = Path(__file__).resolve().parents[2] / "docs" / "faults.md"

# Never renumbered: a new condition takes the next code, an old one keeps its own.
PINNED = [
    ("F01", "tamper"),
    ("F02", "motor_overrun"),
    ("F03", "sensor_timeout"),
    ("F04", "sensor_lost"),
    ("F05", "sensor_hardware"),
    ("F06", "rng_failure"),
    ("F07", "storage"),
    ("F08", "internal"),
    ("F09", "log_rollback"),
    ("F10", "anchor_missing"),
    ("F11", "log_identity"),
    ("F12", "log_damaged"),
    ("F13", "dice_alarm"),
    ("F14", "software_identity"),
    ("F15", "reshake_limit"),
    ("F16", "dice_missing"),
    ("F17", "dice_expired"),
    ("F18", "tiles_missing"),
    ("F19", "tiles_expired"),
    ("F20", "clock_unsynchronised"),
    ("F21", "software_unverified"),
    ("F22", "controller_stopped"),
]


def test_the_codes_are_pinned() -> None:
    assert [(r.code, r.name) for r in FAULT_CODES] == PINNED


def test_every_fault_of_the_core_has_its_row_and_every_row_says_what_and_how() -> None:
    assert {str(f) for f in Fault} == {r.name for r in FAULT_CODES if r.is_core_fault}
    for row in FAULT_CODES:
        assert row.meaning.endswith("."), row.name
        assert row.how.endswith("."), row.name
        assert row.stops_play is (row.clearer is not Clearer.NOBODY), row.name
    for fault in Fault:
        assert fault.code == BY_NAME[str(fault)].code


def test_the_core_rules_of_clearing_agree_with_the_table() -> None:
    """The rules as they were written before the table (state.py's properties): the table
    must say the same, fault by fault."""
    dealer = {Fault.SENSOR_TIMEOUT, Fault.SENSOR_LOST}
    assert {f for f in Fault if not f.needs_supervisor} == dealer
    assert {f for f in Fault if f.needs_restart} == {Fault.LOG_IDENTITY, Fault.LOG_DAMAGED}
    assert {f for f in Fault if f.needs_reason} == {Fault.ANCHOR_MISSING}
    assert {f for f in Fault if f.needs_dice_action} == {Fault.DICE_ALARM}
    for fault in Fault:
        row = BY_NAME[str(fault)]
        assert (row.clearer is Clearer.DEALER) == (fault in dealer)
        assert (row.clearer is Clearer.TECHNICIAN) == fault.needs_restart
        if fault.needs_restart:
            assert "restart" in row.how
        if fault.needs_reason:
            assert "--note" in row.how
        if fault.needs_dice_action:
            assert "dice-replaced" in row.how
            assert "dice-kept" in row.how
        if row.clearing is Clearing.SUPERVISOR_KEY:
            assert "supervise clear-fault --employee ID" in row.how


def test_docs_faults_md_is_the_generated_table() -> None:
    """Regenerate with: paigow-controller status --fault-table --markdown > docs/faults.md"""
    assert DOCS.read_text(encoding="utf-8") == markdown()
    for code, name in PINNED:
        assert f"| {code} | `{name}` |" in markdown()


def test_an_unknown_name_still_has_a_row() -> None:
    row = code_of("a_fault_of_a_newer_release")
    assert row.code == "F??"
    assert row.stops_play


def _facts(ctx: RoundContext, **more: object) -> Facts:
    opened = {"mode": Mode.RNG, "clock": ClockSync.SYNCHRONISED, "wall": 0}
    return Facts(table="t1", is_running=True, context=ctx, **{**opened, **more})  # type: ignore[arg-type]


def test_systemd_status_is_ready_only_without_a_fault() -> None:
    healthy = RoundContext(round_number=7)
    line = systemd_status(_facts(healthy))
    assert line == "table t1: ready: bets open, round 7"
    assert report(_facts(healthy))["healthy"] is True
    faulty = RoundContext(
        state=State.FAULT,
        round_number=7,
        active_faults=frozenset({Fault.RNG_FAILURE, Fault.TAMPER}),
    )
    line = systemd_status(_facts(faulty, details={"rng_failure": "self-test\nfailed"}))
    assert "ready" not in line
    assert line == (
        "table t1: FAULT F01 tamper, F06 rng_failure: play stopped, round 7: self-test failed"
    )


def test_conditions_that_stop_play_without_a_fault_are_named() -> None:
    """The dice and tiles a table needs, the reshake limit, a log read only; the clock is a
    notice: play goes on, and the status says "ready" with its code."""
    ctx = RoundContext(state=State.LOCKED, no_rolls=5, tiles_set="T1", tiles_since_table=0)
    names = [c.row.name for c in conditions(_facts(ctx, mode=Mode.SHAKER))]
    assert names == ["reshake_limit", "dice_missing"]
    expired = RoundContext(dice_set="B1", dice_since_table=0, table_ms=DICE_LIFE_MS)
    names = [c.row.name for c in conditions(_facts(expired, mode=Mode.SHAKER))]
    assert names == ["dice_expired"]
    noticed = _facts(RoundContext(), clock=ClockSync.UNSYNCHRONISED)
    assert (
        systemd_status(noticed) == "table t1: ready: bets open, round 1 (F20 clock_unsynchronised)"
    )
    assert exit_code(report(noticed)) == 0  # a notice: play goes on
    assert exit_code(report(_facts(ctx, mode=Mode.SHAKER))) == 1
    locked = _facts(RoundContext(), log_locked="audit log: record 9: damaged")
    assert systemd_status(locked).startswith("table t1: FAULT F12 log_damaged: play stopped")
    assert "record 9: damaged" in systemd_status(locked)
