"""RNG sessions: commit (with the seed sealed to the auditor) before draws, each draw recorded
before it is returned, the reveal at close from memory, no seed in any file, and after a
restart a new session instead of the old one taken up; no second selection."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from support.rng_fakes import (
    AUDITOR,
    AUDITOR_KEY,
    MemoryLog,
    RecordingSource,
    counter_source,
    legacy_session,
    manager,
)

from controller.audit.log import AuditLog
from controller.core import canonical
from controller.core.dice import Roll
from controller.core.drbg import HmacDrbg
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.rng_escrow import SealedSeed, open_sealed_seed
from controller.core.rng_replay import (
    SeedReveal,
    SessionReplayer,
    commitment_of,
    personalization_for,
    replay_sessions,
    verify_rng_records,
)
from controller.core.state import RngMode
from controller.errors import AuditLogError, RngError, RngSelfTestFailure, RngSessionLost
from controller.rng.session import SEED_FILE_PREFIX, RngPort, RngSessionManager


def seed_files(state_dir: Path) -> list[Path]:
    return sorted(state_dir.glob(f"{SEED_FILE_PREFIX}*"))


def kinds(log: MemoryLog) -> list[str]:
    return [kind for _, kind, _ in log.records]


def seed_of(log: MemoryLog, session: str) -> SeedReveal:
    """The seed of a committed session, opened from its escrow with the auditor's key."""
    data = next(
        d for _, k, d in log.records if k == RecordKind.RNG_COMMIT and d["session"] == session
    )
    entropy, nonce = open_sealed_seed(
        AUDITOR,
        SealedSeed.from_record(data["escrow"]),
        table=data["table"],
        session=session,
        commitment=data["commitment"],
    )
    return SeedReveal(session, entropy, nonce, personalization_for(data["table"], session))


# --- open -----------------------------------------------------------------------------------


def test_open_records_the_commitment_with_its_sealed_seed_and_writes_no_file(
    tmp_path: Path,
) -> None:
    log = MemoryLog()
    source = RecordingSource()
    shown = manager(tmp_path, log, entropy_source=source).open()
    [(seq, kind, data)] = log.records
    assert kind == RecordKind.RNG_COMMIT
    assert seq == shown.seq
    assert data["commitment"] == shown.commitment
    assert data["session"] == shown.session
    assert data["table"] == "table-7"
    assert data["positions"] == 8
    assert data["mode"] == "position"
    assert set(data["escrow"]) == {"algorithm", "recipient", "ephemeral", "ciphertext"}
    assert shown.as_display() == {
        "rng_session": shown.session,
        "rng_commitment": shown.commitment,
    }
    assert list(tmp_path.iterdir()) == []  # the seed rests in no file
    [(entropy, nonce)] = source.seeds()
    assert seed_of(log, shown.session) == SeedReveal(
        shown.session, entropy, nonce, personalization_for("table-7", shown.session)
    )


def test_the_seed_material_is_never_in_the_log_before_the_reveal(tmp_path: Path) -> None:
    log = MemoryLog()
    source = RecordingSource()
    rng = manager(tmp_path, log, entropy_source=source)
    shown = rng.open()
    for round_number in range(1, 21):
        rng.draw(round_number, 1)
    [(entropy, nonce)] = source.seeds()
    for secret in (entropy.hex(), nonce.hex()):
        assert secret not in log.text()
        assert secret not in repr(vars(rng))
    personalization = personalization_for("table-7", shown.session)
    assert commitment_of(entropy, nonce, personalization) == shown.commitment
    rng.close()
    assert entropy.hex() in log.text()  # revealed from memory
    assert verify_rng_records(log.records) == 1


def test_no_file_in_the_state_directory_ever_holds_the_seed(tmp_path: Path) -> None:
    """The real log (audit.db and its -wal) and whatever else is in the state directory, read
    byte for byte while the session draws and after a power cut: neither the entropy nor the
    nonce, raw or in hex, until the reveal."""
    state = tmp_path / "state"
    log = AuditLog.open(state)
    source = RecordingSource()
    rng = RngSessionManager(
        state_dir=state,
        log=log,
        table="table-7",
        game=Game.TILES,
        mode=RngMode.POSITION,
        max_rounds=500,
        records=[],
        escrow=AUDITOR_KEY,
        entropy_source=source,
    )
    rng.open()
    for round_number in range(1, 31):
        rng.draw(round_number, 1)
    [(entropy, nonce)] = source.seeds()
    secrets = [entropy, nonce, entropy.hex().encode(), nonce.hex().encode()]
    secrets += [s.hex().upper().encode() for s in (entropy, nonce)]

    def files_holding_a_secret() -> list[str]:
        files = [p for p in state.rglob("*") if p.is_file()]
        assert any(p.name == "audit.db" for p in files)
        return [p.name for p in files for s in secrets if s in p.read_bytes()]

    assert any(p.name == "audit.db-wal" for p in state.iterdir())
    assert files_holding_a_secret() == []
    log.close()  # the power cut: the manager never closed, the log's WAL folded in
    assert files_holding_a_secret() == []


def test_a_failing_known_answer_test_refuses_the_session_and_records_nothing(
    tmp_path: Path,
) -> None:
    class Broken(HmacDrbg):
        def _hmac(self, key: bytes, message: bytes) -> bytes:
            digest = super()._hmac(key, message)
            return digest[:-1] + bytes([digest[-1] ^ 0x80])

    log = MemoryLog()
    rng = manager(tmp_path, log, drbg_class=Broken)
    with pytest.raises(RngSelfTestFailure):
        rng.open()
    assert log.records == []
    assert list(tmp_path.iterdir()) == []
    assert not rng.is_open
    with pytest.raises(RngError, match="no RNG session"):
        rng.draw(1, 1)


def test_a_stuck_entropy_source_is_refused(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log, entropy_source=lambda n: b"\x00" * n)
    with pytest.raises(RngSelfTestFailure, match="entropy"):
        rng.open()
    repeating = manager(tmp_path, log, entropy_source=lambda n: bytes(range(n)))
    repeating.open()
    repeating.close()
    with pytest.raises(RngSelfTestFailure, match="entropy"):
        repeating.open()


def test_open_twice_is_refused(tmp_path: Path) -> None:
    rng = manager(tmp_path, MemoryLog())
    rng.open()
    with pytest.raises(RngError, match="already open"):
        rng.open()


# --- draws ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("game", "positions"), [(Game.TILES, 8), (Game.POKER, 7)])
def test_position_draws_cover_the_table_and_are_recorded_before_returned(
    tmp_path: Path, game: Game, positions: int
) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log, game=game, entropy_source=counter_source())
    rng.open()
    seen = set()
    for round_number in range(1, 201):
        draw = rng.draw(round_number, 1)
        seq, kind, data = log.records[-1]
        assert (seq, kind) == (draw.seq, RecordKind.RNG_DRAW)
        assert data == {
            "session": draw.session,
            "round": round_number,
            "attempt": 1,
            "mode": "position",
            "number": draw.number,
        }
        assert draw.number is not None
        assert draw.roll is None
        assert not draw.is_repeat
        seen.add(draw.number)
    assert seen == set(range(1, positions + 1))


def test_dice_draws_are_three_virtual_dice_red_first(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log, mode=RngMode.DICE, entropy_source=counter_source())
    rng.open()
    rolls = [rng.draw(r, 1).roll for r in range(1, 301)]
    assert all(isinstance(roll, Roll) for roll in rolls)
    assert {roll.red for roll in rolls if roll} == set(range(1, 7))
    _, _, data = log.records[-1]
    assert data["dice"] == rolls[-1].as_record() if rolls[-1] else False
    assert "number" not in data
    rng.close()
    assert verify_rng_records(log.records) == 1


def test_the_same_round_and_attempt_is_never_drawn_twice(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    rng.open()
    first = rng.draw(1, 1)
    count = len(log.records)
    again = rng.draw(1, 1)
    assert again.is_repeat
    assert (again.number, again.seq) == (first.number, first.seq)
    assert len(log.records) == count
    rng.draw(1, 2)
    rng.draw(2, 1)
    with pytest.raises(RngError, match="before the last draw"):
        rng.draw(1, 3)
    with pytest.raises(RngError):
        rng.draw(0, 1)


def test_a_failed_record_stops_the_session_but_keeps_it_provable(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log, entropy_source=counter_source())
    rng.open()
    rng.draw(1, 1)
    log.fail_on = RecordKind.RNG_DRAW
    with pytest.raises(AuditLogError):
        rng.draw(2, 1)
    log.fail_on = None
    with pytest.raises(RngError, match="failed draw"):
        rng.draw(2, 1)
    rng.close()
    assert verify_rng_records(log.records) == 1


def draws_of(log: MemoryLog) -> list[tuple[int, int, object]]:
    drawn = log.of_kind(RecordKind.RNG_DRAW)
    return [(d["round"], d["attempt"], d.get("number")) for _, _, d in drawn]


def twin_draws(tmp_path: Path, rounds: list[tuple[int, int]]) -> list[object]:
    """The numbers a session of the same entropy gives for ``rounds`` when nothing fails."""
    log = MemoryLog()
    rng = manager(tmp_path / "twin", log, entropy_source=counter_source())
    rng.open()
    return [rng.draw(r, a).number for r, a in rounds]


def test_a_failed_draw_is_taken_again_from_the_same_state_never_redrawn(tmp_path: Path) -> None:
    """The append of round 2's draw fails and did not reach the log: once the log answers
    again, the generator is put back and round 2 draws the very number it drew before (HMAC_DRBG
    is deterministic), recorded once; the session goes on and replays from its seed."""
    log = MemoryLog()
    rng = manager(tmp_path, log, entropy_source=counter_source(), lookup=lookup_in(log))
    rng.open()
    rng.draw(1, 1)
    log.fail_on = RecordKind.RNG_DRAW
    with pytest.raises(AuditLogError):
        rng.draw(2, 1)
    with pytest.raises(AuditLogError):  # the log still fails: still unsure, nothing drawn
        rng.draw(2, 1)
    log.fail_on = None
    again = rng.draw(2, 1)
    assert not again.is_repeat
    rng.draw(3, 1)
    expected = twin_draws(tmp_path, [(1, 1), (2, 1), (3, 1)])
    assert draws_of(log) == [(r, 1, n) for r, n in zip((1, 2, 3), expected, strict=True)]
    rng.close()
    assert verify_rng_records(log.records) == 1


def test_a_failed_draw_that_reached_the_log_stands_as_recorded(tmp_path: Path) -> None:
    """The append was reported failed but the record is on the disk: the draw stands as the
    log holds it, returned again, never appended twice, and the generator is not put back."""
    log = LandsThenRaises(RecordKind.RNG_DRAW)
    rng = manager(tmp_path, log, entropy_source=counter_source(), lookup=lookup_in(log))
    rng.open()
    with pytest.raises(AuditLogError):
        rng.draw(1, 1)
    landed = rng.draw(1, 1)
    assert landed.seq is None  # found in the log, not appended by this call
    assert rng.draw(1, 1).is_repeat  # and from then on a recorded draw
    rng.draw(2, 1)
    expected = twin_draws(tmp_path, [(1, 1), (2, 1)])
    assert landed.number == expected[0]
    assert draws_of(log) == [(1, 1, expected[0]), (2, 1, expected[1])]
    rng.close()
    assert verify_rng_records(log.records) == 1


def test_a_failed_draw_of_a_round_voided_since_leaves_no_trace_in_the_generator(
    tmp_path: Path,
) -> None:
    """Round 2's draw failed and the supervisor voided the round: the next round draws from
    the generator as it was before round 2's draw, so the log (with no draw for round 2)
    still replays from the seed."""
    log = MemoryLog()
    rng = manager(tmp_path, log, entropy_source=counter_source(), lookup=lookup_in(log))
    rng.open()
    rng.draw(1, 1)
    log.fail_on = RecordKind.RNG_DRAW
    with pytest.raises(AuditLogError):
        rng.draw(2, 1)
    log.fail_on = None
    rng.draw(3, 1)
    assert [r for r, _, _ in draws_of(log)] == [1, 3]
    rng.close()
    assert verify_rng_records(log.records) == 1


def test_a_continuous_test_failure_stops_draws_and_the_session_stays_provable(
    tmp_path: Path,
) -> None:
    class Stuckable(HmacDrbg):
        is_stuck = False

        def _hmac(self, key: bytes, message: bytes) -> bytes:
            # Stuck: V = HMAC(K, V) gives the last output block again.
            if Stuckable.is_stuck and message == self._value and self._previous_block:
                return self._previous_block
            return super()._hmac(key, message)

    log = MemoryLog()
    rng = manager(tmp_path, log, drbg_class=Stuckable)
    rng.open()
    rng.draw(1, 1)
    rng.draw(2, 1)
    Stuckable.is_stuck = True
    try:
        with pytest.raises(RngSelfTestFailure, match="continuous"):
            rng.draw(3, 1)
        with pytest.raises(RngError):
            rng.draw(3, 1)
    finally:
        Stuckable.is_stuck = False
    assert len(log.of_kind(RecordKind.RNG_DRAW)) == 2
    rng.close()
    assert verify_rng_records(log.records) == 1


# --- session limits and close --------------------------------------------------------------


def test_a_session_reveals_at_its_round_limit_and_the_next_is_committed_first(
    tmp_path: Path,
) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log, max_rounds=3, entropy_source=counter_source())
    first = rng.open()
    rng.draw(1, 1)
    rng.draw(1, 2)  # a second attempt of the same round is the same round
    rng.draw(2, 1)
    assert rng.rollover_if_due() is None
    rng.draw(3, 1)
    assert rng.rounds_left() == 0
    second = rng.rollover_if_due()
    assert second is not None
    assert second.session != first.session
    assert kinds(log)[-2:] == [RecordKind.RNG_REVEAL, RecordKind.RNG_COMMIT]
    assert log.records[-2][2]["reason"] == "max_rounds"
    # A draw never opens a session: past the limit it is refused until bets open again.
    rng.draw(4, 1)
    rng.draw(5, 1)
    rng.draw(6, 1)
    with pytest.raises(RngError, match="committed when bets open"):
        rng.draw(7, 1)
    third = rng.prepare()
    assert third.session not in (first.session, second.session)
    rng.draw(7, 1)
    assert rng.prepare() == third  # rounds left: the same session
    rng.close()
    replays = replay_sessions(log.records)
    assert [len({d.round for d in s.draws}) for s in replays] == [3, 3, 1]
    assert list(tmp_path.iterdir()) == []


def test_a_draw_never_opens_a_session(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    with pytest.raises(RngError, match="never in a draw") as caught:
        rng.draw(1, 1)
    assert not isinstance(caught.value, RngSessionLost)  # no session was lost: none was open
    assert log.records == []


def test_close_without_a_session_does_nothing(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    rng.close()
    assert log.records == []


def test_a_reveal_that_could_not_be_recorded_is_made_at_the_next_open(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    shown = rng.open()
    rng.draw(1, 1)
    log.fail_on = RecordKind.RNG_REVEAL
    with pytest.raises(AuditLogError):
        rng.close()
    log.fail_on = None
    rng.open()  # the seed was kept in memory for it
    assert [d["session"] for _, k, d in log.records if k == RecordKind.RNG_REVEAL] == [
        shown.session
    ]
    assert verify_rng_records(log.records) == 1


def lookup_in(log: MemoryLog) -> Callable[[str, bytes], bool]:
    def lookup(kind: str, fragment: bytes) -> bool:
        return any(k == kind and fragment in canonical.encode(d) for _, k, d in log.records)

    return lookup


class LandsThenRaises(MemoryLog):
    """A log whose first append of ``kind`` is reported failed after it reached the disk."""

    def __init__(self, kind: RecordKind) -> None:
        super().__init__()
        self.kind = kind
        self.raised = False

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        seq = super().append(kind, data)
        if kind is self.kind and not self.raised:
            self.raised = True
            raise AuditLogError("the commit was reported failed, but it is on the disk")
        return seq


def test_a_reveal_whose_failed_append_reached_the_log_is_not_made_twice(tmp_path: Path) -> None:
    log = LandsThenRaises(RecordKind.RNG_REVEAL)
    rng = manager(tmp_path, log, lookup=lookup_in(log))
    rng.open()
    with pytest.raises(AuditLogError):
        rng.close()
    rng.open()
    assert kinds(log).count(RecordKind.RNG_REVEAL) == 1
    assert verify_rng_records(log.records) == 1


def test_a_commitment_whose_append_failed_is_revealed_if_the_log_holds_it(tmp_path: Path) -> None:
    log = LandsThenRaises(RecordKind.RNG_COMMIT)
    rng = manager(tmp_path, log, lookup=lookup_in(log))
    with pytest.raises(AuditLogError):
        rng.open()
    rng.open()  # the first is revealed (no number was drawn from it), the second committed
    assert kinds(log) == [RecordKind.RNG_COMMIT, RecordKind.RNG_REVEAL, RecordKind.RNG_COMMIT]
    rng.close()
    assert verify_rng_records(log.records) == 2
    forgetful = MemoryLog()
    forgetful.fail_on = RecordKind.RNG_COMMIT
    rng = manager(tmp_path, forgetful, lookup=lookup_in(forgetful))
    with pytest.raises(AuditLogError):
        rng.open()
    forgetful.fail_on = None
    rng.open()  # not in the log: nothing to reveal
    assert kinds(forgetful) == [RecordKind.RNG_COMMIT]


# --- restart --------------------------------------------------------------------------------


def test_a_restart_records_the_session_interrupted_and_commits_a_new_one(tmp_path: Path) -> None:
    log = MemoryLog()
    before = manager(tmp_path, log, entropy_source=counter_source(b"boot 1"))
    old = before.prepare()
    for round_number in range(1, 6):
        before.draw(round_number, 1)
    del before  # the power cut: no close, and the seed with the process

    after = manager(tmp_path, log, entropy_source=counter_source(b"boot 2"))
    count = len(log.records)
    new = after.prepare()
    assert new.session != old.session  # never taken up
    assert kinds(log)[count:] == [RecordKind.RNG_INTERRUPTED, RecordKind.RNG_COMMIT]
    assert log.records[count][2] == {"session": old.session, "reason": "restart", "draws": 5}
    after.draw(6, 1)
    after.close()
    assert verify_rng_records(log.records) == 1  # the new one; the old is the auditor's
    replayer = SessionReplayer()
    for record in log.records:
        replayer.feed(*record)
    replayer.finish([seed_of(log, old.session)])
    [revealed] = replayer.revealed_by_auditor
    assert [d.round for d in revealed.draws] == [1, 2, 3, 4, 5]


def test_a_recorded_draw_is_returned_again_after_a_restart_without_any_seed(
    tmp_path: Path,
) -> None:
    log = MemoryLog()
    before = manager(tmp_path, log)
    before.prepare()
    numbers = {r: before.draw(r, 1).number for r in range(1, 6)}
    del before
    after = manager(tmp_path, log)
    count = len(log.records)
    repeat = after.draw(5, 1)  # the interrupted round's number, shown again
    assert repeat.is_repeat
    assert repeat.number == numbers[5]
    assert len(log.records) == count  # nothing drawn, nothing recorded
    assert after.recorded_draw(5, 1) == repeat
    with pytest.raises(RngError, match="before the last draw"):
        after.draw(4, 1)
    after.prepare()
    assert after.draw(5, 1).number == numbers[5]  # still the recorded one


def test_an_unrecorded_draw_after_a_restart_is_a_lost_session(tmp_path: Path) -> None:
    """The round's bets closed under the session committed before the restart; its number was
    not recorded (or its record was lost in the power cut): it cannot be drawn, from the old
    session (gone) or from a new one (committed after its bets closed)."""
    log = MemoryLog()
    before = manager(tmp_path, log)
    old = before.prepare()
    before.draw(1, 1)
    log.fail_on = RecordKind.RNG_DRAW
    with pytest.raises(AuditLogError):
        before.draw(2, 1)  # drawn, but its record never reached the log
    log.fail_on = None
    after = manager(tmp_path, log)
    count = len(log.records)
    with pytest.raises(RngSessionLost, match=old.session) as caught:
        after.draw(2, 1)
    assert isinstance(caught.value, RngError)
    with pytest.raises(RngSessionLost):
        after.draw(1, 2)  # another attempt of the round already drawn: lost as well
    assert len(log.records) == count  # nothing drawn, nothing recorded
    # The table voids round 2; bets open for round 3 under a new session.
    after.prepare()
    assert after.draw(3, 1).session != old.session
    after.close()
    replayer = SessionReplayer()
    for record in log.records:
        replayer.feed(*record)
    replayer.finish([seed_of(log, old.session)])  # the old one's one draw replays
    assert len(replayer.revealed_by_auditor) == 1


def test_two_restarts_record_one_interruption(tmp_path: Path) -> None:
    log = MemoryLog()
    first = manager(tmp_path, log, entropy_source=counter_source(b"1"))
    first.prepare()
    first.draw(1, 1)
    second = manager(tmp_path, log, entropy_source=counter_source(b"2"))
    with pytest.raises(RngSessionLost):
        second.draw(2, 1)  # nothing recorded by the lost session's round
    third = manager(tmp_path, log, entropy_source=counter_source(b"3"))
    assert third.draw(1, 1).is_repeat
    third.prepare()
    fourth = manager(tmp_path, log, entropy_source=counter_source(b"4"))
    fourth.prepare()
    assert kinds(log).count(RecordKind.RNG_INTERRUPTED) == 2  # one for each session that was open
    assert kinds(log).count(RecordKind.RNG_COMMIT) == 3
    assert len({d["session"] for _, k, d in log.of_kind(RecordKind.RNG_INTERRUPTED)}) == 2
    fourth.close()
    assert verify_rng_records(log.records) == 1


def test_a_close_after_a_restart_records_the_lost_session_ended(tmp_path: Path) -> None:
    log = MemoryLog()
    manager(tmp_path, log).prepare()
    after = manager(tmp_path, log)
    after.close("shutdown")  # an orderly stop before any round: nothing to reveal
    assert kinds(log) == [RecordKind.RNG_COMMIT, RecordKind.RNG_INTERRUPTED]
    assert verify_rng_records(log.records) == 0


def test_the_daemon_port_prepares_rolls_over_and_after_a_restart_repeats_or_is_lost(
    tmp_path: Path,
) -> None:
    log = MemoryLog()
    port = RngPort(manager(tmp_path, log, max_rounds=2))
    with pytest.raises(RngError):
        port.draw(round_number=1, attempt=1)  # bets opened without prepare: refused
    port.prepare()
    first = port.draw(round_number=1, attempt=1)
    assert isinstance(first, int)
    assert log.records[0][1] == RecordKind.RNG_COMMIT  # committed (and shown) before the draw
    port.prepare()
    port.draw(round_number=2, attempt=1)
    port.prepare()  # the round limit: revealed, and the next session committed first
    port.draw(round_number=3, attempt=1)
    assert kinds(log).count(RecordKind.RNG_COMMIT) == 2
    restarted = RngPort(manager(tmp_path, log, max_rounds=2))
    assert restarted.draw(round_number=3, attempt=1) == log.records[-1][2]["number"]
    with pytest.raises(RngSessionLost):
        restarted.draw(round_number=3, attempt=2)
    restarted.prepare()
    restarted.draw(round_number=4, attempt=1)
    restarted.close("shutdown")
    assert kinds(log).count(RecordKind.RNG_INTERRUPTED) == 1
    assert verify_rng_records(log.records) == 2
    dice = RngPort(manager(tmp_path, MemoryLog(), mode=RngMode.DICE))
    dice.prepare()
    assert isinstance(dice.draw(round_number=1, attempt=1), Roll)


def test_the_manager_refuses_a_table_name_that_could_blur_the_identity(tmp_path: Path) -> None:
    with pytest.raises(RngError, match="table name"):
        manager(tmp_path, MemoryLog(), table="table 1 round=2")


# --- seed files an older version left -------------------------------------------------------


def test_a_seed_file_of_an_older_version_is_revealed_and_removed_at_start(
    tmp_path: Path,
) -> None:
    log = MemoryLog()
    old = legacy_session(tmp_path, log, rounds=range(1, 4))
    after = manager(tmp_path, log)
    assert after.draw(3, 1).is_repeat  # a recorded draw is repeated, as always
    with pytest.raises(RngSessionLost):
        after.draw(4, 1)  # never taken up, even with its file there
    new = after.prepare()
    assert new.session != old
    assert seed_files(tmp_path) == []
    [(_, _, reveal)] = log.of_kind(RecordKind.RNG_REVEAL)
    assert (reveal["session"], reveal["reason"]) == (old, "restart")
    assert log.of_kind(RecordKind.RNG_INTERRUPTED) == []
    after.close()
    assert verify_rng_records(log.records) == 2


def test_a_forged_seed_file_is_refused_and_set_aside_never_revealed(tmp_path: Path) -> None:
    """A seed file consistent with itself, but not the seed of the session the log committed
    (a file swapped in to choose the numbers): an RNG fault, never used, never revealed."""
    log = MemoryLog()
    session = legacy_session(tmp_path, log)
    [path] = seed_files(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    legacy_session(elsewhere, MemoryLog())
    [forged] = seed_files(elsewhere)
    data = json.loads(forged.read_text())
    data["session"] = session  # its own commitment, for the real session's name
    path.write_text(json.dumps(data))
    restarted = manager(tmp_path, log)
    with pytest.raises(RngError, match="not the seed of the session the log committed"):
        restarted.prepare()
    assert not path.exists()
    assert path.with_name(path.name + ".rejected").exists()
    fresh = restarted.prepare()  # after the supervisor clears: a new session, committed
    assert fresh.session != session
    assert log.of_kind(RecordKind.RNG_REVEAL) == []
    [(_, _, ended)] = log.of_kind(RecordKind.RNG_INTERRUPTED)
    assert ended == {"session": session, "reason": "restart", "draws": 3}


def test_a_tampered_seed_file_is_refused_not_revealed(tmp_path: Path) -> None:
    log = MemoryLog()
    legacy_session(tmp_path, log)
    [path] = seed_files(tmp_path)
    data = json.loads(path.read_text())
    data["entropy"] = "ff" * 32
    path.write_text(json.dumps(data))
    with pytest.raises(RngError, match="does not match its commitment"):
        manager(tmp_path, log).open()
    assert log.of_kind(RecordKind.RNG_REVEAL) == []


def test_a_seed_file_nested_deeper_than_the_stack_is_refused_not_a_recursion_error(
    tmp_path: Path,
) -> None:
    log = MemoryLog()
    legacy_session(tmp_path, log)
    [path] = seed_files(tmp_path)
    path.write_bytes(b"[" * 4000)  # within the seed file's bound
    with pytest.raises(RngError, match="nested too deep"):
        manager(tmp_path, log).open()
    assert log.of_kind(RecordKind.RNG_REVEAL) == []


def test_a_seed_file_the_log_never_committed_is_dropped(tmp_path: Path) -> None:
    legacy_session(tmp_path, MemoryLog())  # its commitment never reached this log
    log = MemoryLog()
    manager(tmp_path, log).open()
    assert seed_files(tmp_path) == []
    assert kinds(log) == [RecordKind.RNG_COMMIT]


def recent_rng_records(log: MemoryLog, commits: int) -> list[tuple[int, str, dict[str, object]]]:
    """What the daemon hands the manager at start: the records from the ``commits``-th newest
    commitment on (AuditLog.recent_records)."""
    starts = [seq for seq, kind, _ in log.records if kind == RecordKind.RNG_COMMIT]
    first = starts[-commits] if len(starts) >= commits else 1
    return [r for r in log.records if r[0] >= first]


def test_a_seed_file_older_than_the_records_read_at_start_is_looked_up_in_the_log(
    tmp_path: Path,
) -> None:
    """A start reads only the last sessions' records; a seed file of an older session still
    committed and never revealed is found through the log's look-up and revealed, one already
    revealed is dropped without a second reveal, and one of a session the log says ended
    unrevealed is set aside, never revealed after its end."""
    log = MemoryLog()
    pending = legacy_session(tmp_path, log, rounds=range(1, 3))  # its reveal will be missing
    [pending_file] = seed_files(tmp_path)
    kept_aside = tmp_path / "aside"
    kept_aside.mkdir()
    pending_file.rename(kept_aside / pending_file.name)
    revealed = legacy_session(tmp_path, log, rounds=range(3, 5))
    [revealed_file] = seed_files(tmp_path)
    stale = revealed_file.read_bytes()
    ended = legacy_session(tmp_path, log, rounds=range(5, 6))
    [ended_file] = [p for p in seed_files(tmp_path) if ended in p.name]
    ended_file.rename(kept_aside / ended_file.name)
    own = [r for r in log.records if r[2]["session"] in (revealed, ended)]
    manager(tmp_path, log, records=own).close()  # reveals one, ends the other (no file)
    for _ in range(3):  # three later sessions, each committed and revealed
        later = manager(tmp_path, log, records=[])
        later.open()
        later.close()
    (kept_aside / pending_file.name).rename(pending_file)
    (kept_aside / ended_file.name).rename(ended_file)
    revealed_file.write_bytes(stale)  # a file whose reveal is in the log long ago
    reveals_before = [d["session"] for _, _, d in log.of_kind(RecordKind.RNG_REVEAL)]
    assert revealed in reveals_before
    assert pending not in reveals_before
    recent = recent_rng_records(log, 3)
    assert all(d["session"] not in (pending, revealed, ended) for _, _, d in recent)
    restarted = manager(tmp_path, log, records=recent, lookup=lookup_in(log))
    restarted.open()
    reveals = [d["session"] for _, _, d in log.of_kind(RecordKind.RNG_REVEAL)]
    assert reveals[len(reveals_before) :] == [pending]
    assert reveals.count(revealed) == 1
    assert seed_files(tmp_path) == [ended_file.with_name(ended_file.name + ".rejected")]
    restarted.close()
    assert verify_rng_records(log.records) == 6
