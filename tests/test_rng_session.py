"""RNG sessions: commit before draws, each draw recorded before it is returned, reveal at close
or after a restart, the seed file (0600) and no second selection."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from rng_fakes import MemoryLog, counter_source, manager

from controller.core import canonical
from controller.core.dice import Roll
from controller.core.drbg import HmacDrbg
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.rng_replay import commitment_of, replay_sessions, verify_rng_records
from controller.core.state import RngMode
from controller.errors import AuditLogError, RngError, RngSelfTestFailure
from controller.rng.session import SEED_FILE_PREFIX, RngSessionManager


def seed_files(state_dir: Path) -> list[Path]:
    return sorted(state_dir.glob(f"{SEED_FILE_PREFIX}*"))


# --- open -----------------------------------------------------------------------------------


def test_open_records_the_commitment_and_keeps_the_seed_in_a_0600_file(tmp_path: Path) -> None:
    log = MemoryLog()
    old_umask = os.umask(0)  # even with a permissive umask the file is 0600
    try:
        shown = manager(tmp_path, log).open()
    finally:
        os.umask(old_umask)
    [(seq, kind, data)] = log.records
    assert kind == RecordKind.RNG_COMMIT
    assert seq == shown.seq
    assert data["commitment"] == shown.commitment
    assert data["session"] == shown.session
    assert data["table"] == "table-7"
    assert data["positions"] == 8
    assert data["mode"] == "position"
    assert shown.as_display() == {
        "rng_session": shown.session,
        "rng_commitment": shown.commitment,
    }
    [path] = seed_files(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert shown.session in path.name


def test_the_seed_material_is_never_in_the_log_before_the_reveal(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    shown = rng.open()
    for round_number in range(1, 21):
        rng.draw(round_number, 1)
    [path] = seed_files(tmp_path)
    seed = json.loads(path.read_text())
    for secret in (seed["entropy"], seed["nonce"]):
        assert secret not in log.text()
        assert secret not in repr(vars(rng))
    assert (
        commitment_of(
            bytes.fromhex(seed["entropy"]),
            bytes.fromhex(seed["nonce"]),
            bytes.fromhex(seed["personalization"]),
        )
        == shown.commitment
    )
    rng.close()
    assert seed["entropy"] in log.text()
    assert seed_files(tmp_path) == []


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
    assert seed_files(tmp_path) == []
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
    kinds = [kind for _, kind, _ in log.records]
    assert kinds[-2:] == [RecordKind.RNG_REVEAL, RecordKind.RNG_COMMIT]
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
    assert seed_files(tmp_path) == []


def test_a_draw_never_opens_a_session(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    with pytest.raises(RngError, match="never in a draw"):
        rng.draw(1, 1)
    assert log.records == []


def test_close_without_a_session_does_nothing(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    rng.close()
    assert log.records == []


# --- restart --------------------------------------------------------------------------------


def test_a_restart_mid_session_repeats_the_recorded_number_and_takes_the_session_up(
    tmp_path: Path,
) -> None:
    log = MemoryLog()
    before = manager(tmp_path, log, entropy_source=counter_source(b"boot 1"))
    old = before.prepare()
    numbers = {r: before.draw(r, 1).number for r in range(1, 6)}
    # Power cut: ``before`` is gone without a close; the seed file and the log remain.
    del before
    assert len(seed_files(tmp_path)) == 1

    after = manager(tmp_path, log, entropy_source=counter_source(b"boot 2"))
    count = len(log.records)
    repeat = after.draw(5, 1)  # the interrupted round's number, shown again
    assert repeat.is_repeat
    assert repeat.number == numbers[5]
    assert repeat.session == old.session
    assert len(log.records) == count  # nothing re-drawn
    assert after.recorded_draw(5, 1) == repeat
    with pytest.raises(RngError, match="before the last draw"):
        after.draw(4, 1)

    assert after.prepare().session == old.session  # taken up, not replaced
    assert after.draw(5, 1).number == numbers[5]  # still the recorded one
    after.draw(6, 1)  # the DRBG was replayed to where it was: this draw proves
    assert [k for _, k, _ in log.records].count(RecordKind.RNG_COMMIT) == 1
    after.close()
    [session] = replay_sessions(log.records)
    assert [d.round for d in session.draws] == [1, 2, 3, 4, 5, 6]
    assert seed_files(tmp_path) == []


def test_a_draw_lost_in_a_power_cut_comes_out_the_same_after_it(tmp_path: Path) -> None:
    """The draw was made but its record failed: after the restart the same DRBG state and the
    same round identity give the same number, and the whole session still proves."""
    log = MemoryLog()
    before = manager(tmp_path, log)
    before.prepare()
    before.draw(1, 1)
    log.fail_on = RecordKind.RNG_DRAW
    with pytest.raises(AuditLogError):
        before.draw(2, 1)
    log.fail_on = None
    after = manager(tmp_path, log)
    second = after.draw(2, 1)
    assert not second.is_repeat
    after.close()
    [session] = replay_sessions(log.records)
    assert [(d.round, d.outcome) for d in session.draws][-1] == (2, second.number)


def test_two_restarts_in_the_same_round_still_repeat_the_first_number(tmp_path: Path) -> None:
    log = MemoryLog()
    first = manager(tmp_path, log, entropy_source=counter_source(b"1"))
    first.prepare()
    number = first.draw(1, 1).number
    second = manager(tmp_path, log, entropy_source=counter_source(b"2"))
    second.prepare()  # the round is still not closed: the same session
    third = manager(tmp_path, log, entropy_source=counter_source(b"3"))
    third.prepare()
    draw = third.draw(1, 1)
    assert draw.is_repeat
    assert draw.number == number
    assert [k for _, k, _ in log.records].count(RecordKind.RNG_COMMIT) == 1
    third.close()
    assert verify_rng_records(log.records) == 1


def test_a_forged_seed_file_is_refused_and_set_aside_never_drawn_from(tmp_path: Path) -> None:
    """A seed file consistent with itself, but not the seed of the session the log committed
    (a file swapped in to choose the numbers): an RNG fault, never used, never revealed."""
    log = MemoryLog()
    shown = manager(tmp_path, log).prepare()
    [path] = seed_files(tmp_path)
    forger = manager(tmp_path / "elsewhere", MemoryLog())
    (tmp_path / "elsewhere").mkdir()
    forger.prepare()
    [forged] = seed_files(tmp_path / "elsewhere")
    data = json.loads(forged.read_text())
    data["session"] = shown.session  # its own commitment, for the real session's name
    path.write_text(json.dumps(data))
    restarted = manager(tmp_path, log)
    with pytest.raises(RngError, match="not the seed of the session the log committed"):
        restarted.prepare()
    assert not path.exists()
    assert path.with_name(path.name + ".rejected").exists()
    fresh = restarted.prepare()  # after the supervisor clears: a new session, committed
    assert fresh.session != shown.session
    assert [d["session"] for _, k, d in log.records if k == RecordKind.RNG_REVEAL] == []


def test_a_seed_file_whose_commitment_never_reached_the_log_is_dropped(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    log.fail_on = RecordKind.RNG_COMMIT
    with pytest.raises(AuditLogError):
        rng.open()
    log.fail_on = None
    assert len(seed_files(tmp_path)) == 1
    rng.open()  # same process: the log might hold it, so the file is kept
    assert len(seed_files(tmp_path)) == 2
    rng.close()
    restarted = manager(tmp_path, log)
    restarted.open()  # the log has no such commitment: no number came from it
    assert [r[1] for r in log.records].count(RecordKind.RNG_REVEAL) == 1
    assert len(seed_files(tmp_path)) == 1
    restarted.close()
    assert verify_rng_records(log.records) == 2


def test_a_reveal_that_could_not_be_recorded_is_made_at_the_next_open(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    shown = rng.open()
    rng.draw(1, 1)
    log.fail_on = RecordKind.RNG_REVEAL
    with pytest.raises(AuditLogError):
        rng.close()
    log.fail_on = None
    assert len(seed_files(tmp_path)) == 1
    rng.open()
    assert [d["session"] for _, k, d in log.records if k == RecordKind.RNG_REVEAL] == [
        shown.session
    ]
    assert verify_rng_records(log.records) == 1


def test_a_tampered_seed_file_is_refused_not_revealed(tmp_path: Path) -> None:
    log = MemoryLog()
    manager(tmp_path, log).open()
    [path] = seed_files(tmp_path)
    data = json.loads(path.read_text())
    data["entropy"] = "ff" * 32
    path.write_text(json.dumps(data))
    with pytest.raises(RngError, match="does not match its commitment"):
        manager(tmp_path, log).open()


def test_the_manager_refuses_a_table_name_that_could_blur_the_identity(tmp_path: Path) -> None:
    with pytest.raises(RngError, match="table name"):
        RngSessionManager(
            state_dir=tmp_path,
            log=MemoryLog(),
            table="table 1 round=2",
            game=Game.TILES,
            mode=RngMode.POSITION,
            max_rounds=10,
            records=[],
        )


def test_the_daemon_port_prepares_rolls_over_and_repeats_after_a_restart(tmp_path: Path) -> None:
    from controller.rng.session import RngPort

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
    commits = [k for _, k, _ in log.records].count(RecordKind.RNG_COMMIT)
    assert commits == 2
    restarted = RngPort(manager(tmp_path, log, max_rounds=2))
    assert restarted.draw(round_number=3, attempt=1) == log.records[-1][2]["number"]
    restarted.prepare()
    restarted.draw(round_number=4, attempt=1)
    restarted.close("shutdown")
    assert verify_rng_records(log.records) == 2
    dice = RngPort(manager(tmp_path, MemoryLog(), mode=RngMode.DICE))
    dice.prepare()
    assert isinstance(dice.draw(round_number=1, attempt=1), Roll)


def recent_rng_records(log: MemoryLog, commits: int) -> list[tuple[int, str, dict[str, object]]]:
    """What the daemon hands the manager at start: the records from the ``commits``-th newest
    commitment on (AuditLog.recent_records)."""
    starts = [seq for seq, kind, _ in log.records if kind == RecordKind.RNG_COMMIT]
    first = starts[-commits] if len(starts) >= commits else 1
    return [r for r in log.records if r[0] >= first]


def lookup_in(log: MemoryLog) -> Callable[[str, bytes], bool]:
    def lookup(kind: str, fragment: bytes) -> bool:
        return any(k == kind and fragment in canonical.encode(d) for _, k, d in log.records)

    return lookup


def test_a_seed_file_older_than_the_records_read_at_start_is_looked_up_in_the_log(
    tmp_path: Path,
) -> None:
    """A start reads only the last sessions' records; a seed file of an older session still
    committed and never revealed is found through the log's look-up and revealed, and one
    already revealed is dropped without a second reveal."""
    log = MemoryLog()
    pending = manager(tmp_path, log).open()  # committed; its reveal will be missing
    [pending_file] = seed_files(tmp_path)
    kept_aside = tmp_path / "aside"
    kept_aside.mkdir()
    pending_file.rename(kept_aside / pending_file.name)
    revealed = manager(tmp_path, log, max_rounds=1)
    first = revealed.open()
    [revealed_file] = seed_files(tmp_path)
    stale = revealed_file.read_bytes()
    revealed.close()
    for _ in range(3):  # three later sessions, each committed and revealed
        later = manager(tmp_path, log)
        later.open()
        later.close()
    (kept_aside / pending_file.name).rename(pending_file)
    revealed_file.write_bytes(stale)  # a file whose reveal is in the log long ago
    reveals_before = [d["session"] for _, k, d in log.of_kind(RecordKind.RNG_REVEAL)]
    assert first.session in reveals_before
    assert pending.session not in reveals_before
    recent = recent_rng_records(log, 3)
    assert all(d.get("session") not in (pending.session, first.session) for _, _, d in recent)
    restarted = RngSessionManager(
        state_dir=tmp_path,
        log=log,
        table="table-7",
        game=Game.TILES,
        mode=RngMode.POSITION,
        max_rounds=500,
        records=recent,
        lookup=lookup_in(log),
    )
    restarted.open()
    reveals = [d["session"] for _, k, d in log.of_kind(RecordKind.RNG_REVEAL)]
    assert reveals[len(reveals_before) :] == [pending.session]
    assert reveals.count(first.session) == 1
    assert len(seed_files(tmp_path)) == 1  # the new session's only
    restarted.close()
    assert verify_rng_records(log.records) == 6
