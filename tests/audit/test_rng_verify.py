"""Replay of revealed RNG sessions from the log: every number reproduces; any tampering with a
commitment, a reveal or a draw names the record."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from support.rng_fakes import AUDITOR, OTHER_AUDITOR, MemoryLog, counter_source, manager

from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.rng_audit import EscrowOpening, open_escrowed_sessions, reveals_from_document
from controller.core.rng_escrow import escrow_key_of
from controller.core.rng_replay import (
    SeedReveal,
    SessionReplayer,
    replay_sessions,
    verify_rng_records,
)
from controller.core.state import RngMode
from controller.errors import EscrowError, LogIntegrityError, RngError

Records = list[tuple[int, str, dict[str, Any]]]


def session_log(
    tmp_path: Path,
    *,
    rounds: int = 40,
    mode: RngMode = RngMode.POSITION,
    game: Game = Game.TILES,
    sessions: int = 1,
) -> Records:
    """A log of ``sessions`` closed sessions with ``rounds`` draws each, and other records."""
    log = MemoryLog()
    log.append(RecordKind.POWER_ON, {"boot": 1})
    rng = manager(tmp_path, log, mode=mode, game=game, entropy_source=counter_source())
    round_number = 0
    for _ in range(sessions):
        rng.open()
        for _ in range(rounds):
            round_number += 1
            log.append(RecordKind.ROUND_OPENED, {"round": round_number})
            rng.draw(round_number, 1)
        rng.close()
    return log.records


def seq_of(records: Records, kind: RecordKind, index: int = 0) -> int:
    return [seq for seq, k, _ in records if k == kind][index]


def data_of(records: Records, seq: int) -> dict[str, Any]:
    return records[seq - 1][2]


def failing_record(records: Records) -> int | None:
    with pytest.raises(LogIntegrityError) as caught:
        verify_rng_records(records)
    return caught.value.record


# --- an independent derivation, written from the module's docstring -------------------------


def _reference_drbg_numbers(
    entropy: bytes, nonce: bytes, pers: bytes, identities: list[bytes], n: int
) -> list[int]:
    """HMAC_DRBG SHA-256 and simple discard, from SP 800-90A, without controller.core.drbg."""

    def mac(key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, hashlib.sha256).digest()

    def update(k: bytes, v: bytes, data: bytes) -> tuple[bytes, bytes]:
        k = mac(k, v + b"\x00" + data)
        v = mac(k, v)
        if data:
            k = mac(k, v + b"\x01" + data)
            v = mac(k, v)
        return k, v

    k, v = update(b"\x00" * 32, b"\x01" * 32, entropy + nonce + pers)
    out = []
    bits = (n - 1).bit_length()
    for identity in identities:
        while True:
            k, v = update(k, v, identity)
            v = mac(k, v)
            value = int.from_bytes(v[: (bits + 7) // 8], "big") & ((1 << bits) - 1)
            k, v = update(k, v, identity)
            if value < n:
                out.append(value)
                break
    return out


@pytest.mark.parametrize(
    ("mode", "game"), [(RngMode.POSITION, Game.TILES), (RngMode.DICE, Game.POKER)]
)
def test_replay_of_a_whole_session_matches_an_independent_derivation(
    tmp_path: Path, mode: RngMode, game: Game
) -> None:
    records = session_log(tmp_path, rounds=150, mode=mode, game=game)
    [replay] = replay_sessions(records)
    reveal = data_of(records, replay.reveal_seq)
    commit = data_of(records, replay.commit_seq)
    draws = [d for _, k, d in records if k == RecordKind.RNG_DRAW]
    assert len(replay.draws) == len(draws) == 150
    identities = [
        f"paigow-controller rng v1 table={commit['table']} session={replay.session}"
        f" round={d['round']} attempt={d['attempt']}".encode()
        for d in draws
    ]
    n = 216 if mode is RngMode.DICE else commit["positions"]
    values = _reference_drbg_numbers(
        bytes.fromhex(reveal["entropy"]),
        bytes.fromhex(reveal["nonce"]),
        bytes.fromhex(reveal["personalization"]),
        identities,
        n,
    )
    if mode is RngMode.DICE:
        expected = [{"red": v // 36 + 1, "blue": [v // 6 % 6 + 1, v % 6 + 1]} for v in values]
        assert [d["dice"] for d in draws] == expected
    else:
        assert [d["number"] for d in draws] == [v + 1 for v in values]
    assert (
        hashlib.sha256(
            bytes.fromhex(reveal["entropy"] + reveal["nonce"] + reveal["personalization"])
        ).hexdigest()
        == commit["commitment"]
    )


def test_every_closed_session_verifies_and_counts(tmp_path: Path) -> None:
    records = session_log(tmp_path, rounds=10, sessions=3)
    assert verify_rng_records(records) == 3
    assert verify_rng_records(iter(records)) == 3  # any iterable, one pass


def test_an_open_session_is_not_counted_and_not_an_error(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    rng.open()
    rng.draw(1, 1)
    assert verify_rng_records(log.records) == 0
    assert verify_rng_records([]) == 0


# --- tampering ------------------------------------------------------------------------------


def _flip_hex(text: str, at: int = 5) -> str:
    return text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1 :]


@pytest.mark.parametrize("field", ["entropy", "nonce", "personalization"])
def test_a_tampered_reveal_is_named(tmp_path: Path, field: str) -> None:
    records = session_log(tmp_path)
    reveal = seq_of(records, RecordKind.RNG_REVEAL)
    data_of(records, reveal)[field] = _flip_hex(data_of(records, reveal)[field])
    assert failing_record(records) == reveal


def test_a_tampered_commitment_is_detected_at_the_reveal(tmp_path: Path) -> None:
    records = session_log(tmp_path)
    commit = seq_of(records, RecordKind.RNG_COMMIT)
    data_of(records, commit)["commitment"] = _flip_hex(data_of(records, commit)["commitment"])
    with pytest.raises(LogIntegrityError, match=f"commitment in record {commit}") as caught:
        verify_rng_records(records)
    assert caught.value.record == seq_of(records, RecordKind.RNG_REVEAL)


def test_a_reveal_of_another_seed_with_a_matching_commitment_still_fails_the_draws(
    tmp_path: Path,
) -> None:
    # An insider rewrites both the commitment and the reveal: the draws no longer replay.
    records = session_log(tmp_path)
    commit, reveal = seq_of(records, RecordKind.RNG_COMMIT), seq_of(records, RecordKind.RNG_REVEAL)
    forged = data_of(records, reveal)
    forged["entropy"] = "ab" * 32
    data_of(records, commit)["commitment"] = hashlib.sha256(
        bytes.fromhex(forged["entropy"] + forged["nonce"] + forged["personalization"])
    ).hexdigest()
    assert failing_record(records) == seq_of(records, RecordKind.RNG_DRAW, 0)


def test_a_changed_number_is_named(tmp_path: Path) -> None:
    records = session_log(tmp_path)
    draw = seq_of(records, RecordKind.RNG_DRAW, 17)
    data = data_of(records, draw)
    data["number"] = data["number"] % 8 + 1
    with pytest.raises(LogIntegrityError, match="does not replay") as caught:
        verify_rng_records(records)
    assert caught.value.record == draw


def test_changed_dice_are_named(tmp_path: Path) -> None:
    records = session_log(tmp_path, mode=RngMode.DICE)
    draw = seq_of(records, RecordKind.RNG_DRAW, 3)
    dice = data_of(records, draw)["dice"]
    dice["red"] = dice["red"] % 6 + 1
    assert failing_record(records) == draw


def test_a_number_moved_to_another_round_is_named(tmp_path: Path) -> None:
    # Swapping the round identities of two draws: each is bound to its own round.
    records = session_log(tmp_path)
    a, b = seq_of(records, RecordKind.RNG_DRAW, 4), seq_of(records, RecordKind.RNG_DRAW, 5)
    da, db = data_of(records, a), data_of(records, b)
    assert da["number"] != db["number"]  # fixed by the deterministic test entropy
    da["number"], db["number"] = db["number"], da["number"]
    assert failing_record(records) == a


def test_a_deleted_draw_breaks_the_replay_of_the_next(tmp_path: Path) -> None:
    records = session_log(tmp_path)
    gone = seq_of(records, RecordKind.RNG_DRAW, 10)
    kept = [r for r in records if r[0] != gone]
    bad = failing_record(kept)
    assert bad is not None
    assert bad > gone


def test_a_draw_outside_any_committed_session_is_named(tmp_path: Path) -> None:
    records = session_log(tmp_path)
    stray = copy.deepcopy(data_of(records, seq_of(records, RecordKind.RNG_DRAW)))
    stray["session"] = "0123456789abcdef"
    stray["round"] = 999
    seq = len(records) + 1
    records.append((seq, str(RecordKind.RNG_DRAW), stray))
    with pytest.raises(LogIntegrityError, match="outside any committed session") as caught:
        verify_rng_records(records)
    assert caught.value.record == seq


def test_a_draw_after_its_reveal_is_named(tmp_path: Path) -> None:
    records = session_log(tmp_path)
    late = copy.deepcopy(data_of(records, seq_of(records, RecordKind.RNG_DRAW)))
    late["round"] = 999
    seq = len(records) + 1
    records.append((seq, str(RecordKind.RNG_DRAW), late))
    with pytest.raises(LogIntegrityError, match="after its reveal"):
        verify_rng_records(records)


def test_a_second_selection_for_a_round_is_named(tmp_path: Path) -> None:
    records = session_log(tmp_path, sessions=2, rounds=5)
    second = seq_of(records, RecordKind.RNG_DRAW, 5)  # the second session's first draw
    data_of(records, second)["round"] = 1
    with pytest.raises(
        LogIntegrityError, match="second RNG selection: round 1 attempt 1"
    ) as caught:
        verify_rng_records(records)
    assert caught.value.record == second


def test_a_redraw_of_the_interrupted_round_in_the_next_session_is_named(tmp_path: Path) -> None:
    records = session_log(tmp_path, sessions=2, rounds=5)
    last_of_first = seq_of(records, RecordKind.RNG_DRAW, 4)
    redraw = seq_of(records, RecordKind.RNG_DRAW, 5)
    data_of(records, redraw)["round"] = data_of(records, last_of_first)["round"]
    with pytest.raises(
        LogIntegrityError, match=f"was drawn \\(record {last_of_first}\\)"
    ) as caught:
        verify_rng_records(records)
    assert caught.value.record == redraw


def test_the_first_bad_record_is_named_when_there_are_several(tmp_path: Path) -> None:
    records = session_log(tmp_path)
    early = seq_of(records, RecordKind.RNG_DRAW, 2)
    data_of(records, early)["number"] = data_of(records, early)["number"] % 8 + 1
    # and a structural fault later in the log
    records.append((len(records) + 1, str(RecordKind.RNG_REVEAL), {"session": "nothex"}))
    assert failing_record(records) == early


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        (RecordKind.RNG_COMMIT, "positions", 7),
        (RecordKind.RNG_COMMIT, "algorithm", "MT19937"),
        (RecordKind.RNG_COMMIT, "mode", "coin"),
        (RecordKind.RNG_COMMIT, "max_rounds", True),
        (RecordKind.RNG_COMMIT, "commitment", "AB" * 32),
        (RecordKind.RNG_DRAW, "round", 1.0),
        (RecordKind.RNG_DRAW, "number", 9),
        (RecordKind.RNG_DRAW, "number", 0),
        (RecordKind.RNG_DRAW, "mode", "dice"),
        (RecordKind.RNG_REVEAL, "entropy", "00" * 31),
        (RecordKind.RNG_REVEAL, "reason", "because"),
        (RecordKind.RNG_REVEAL, "session", None),
    ],
)
def test_a_malformed_field_is_named(
    tmp_path: Path, kind: RecordKind, field: str, value: object
) -> None:
    records = session_log(tmp_path, rounds=5)
    seq = seq_of(records, kind)
    data_of(records, seq)[field] = value
    assert failing_record(records) == seq


def test_double_commit_double_reveal_and_reveal_without_commit_are_named(tmp_path: Path) -> None:
    records = session_log(tmp_path, rounds=3)
    commit = seq_of(records, RecordKind.RNG_COMMIT)
    reveal = seq_of(records, RecordKind.RNG_REVEAL)
    twice = [*records, (len(records) + 1, str(RecordKind.RNG_REVEAL), data_of(records, reveal))]
    assert failing_record(twice) == len(records) + 1
    again = [*records, (len(records) + 1, str(RecordKind.RNG_COMMIT), data_of(records, commit))]
    assert failing_record(again) == len(records) + 1
    orphan = [r for r in records if r[0] != commit]
    assert failing_record(orphan) == seq_of(records, RecordKind.RNG_DRAW, 0)


def test_records_of_other_kinds_are_ignored(tmp_path: Path) -> None:
    records = session_log(tmp_path, rounds=3)
    records.append((len(records) + 1, "result", {"round": 1, "number": 99}))
    assert verify_rng_records(records) == 1


# --- the escrow, the end at a restart and the auditor's reveals --------------------------------


def interrupted_log(tmp_path: Path, *, rounds: int = 6) -> tuple[Records, str]:
    """A session drawn for ``rounds`` rounds and ended by a restart, then a new session closed
    after one more round; and the id of the one that ended."""
    log = MemoryLog()
    log.append(RecordKind.POWER_ON, {"boot": 1})
    before = manager(tmp_path, log, entropy_source=counter_source(b"1"))
    lost = before.prepare().session
    for round_number in range(1, rounds + 1):
        before.draw(round_number, 1)
    log.append(RecordKind.POWER_ON, {"boot": 2})
    after = manager(tmp_path, log, entropy_source=counter_source(b"2"))
    after.prepare()
    after.draw(rounds + 1, 1)
    after.close()
    return log.records, lost


def test_a_malformed_escrow_names_its_commitment(tmp_path: Path) -> None:
    records = session_log(tmp_path, rounds=3)
    commit = seq_of(records, RecordKind.RNG_COMMIT)
    data_of(records, commit)["escrow"]["ciphertext"] = "00" * 10
    with pytest.raises(LogIntegrityError, match="escrow ciphertext") as caught:
        verify_rng_records(records)
    assert caught.value.record == commit


def test_a_commitment_without_an_escrow_is_of_an_older_version_and_verifies(
    tmp_path: Path,
) -> None:
    records = session_log(tmp_path, rounds=3)
    del data_of(records, seq_of(records, RecordKind.RNG_COMMIT))["escrow"]
    assert verify_rng_records(records) == 1


def test_an_interrupted_session_verifies_and_is_left_to_the_auditor(tmp_path: Path) -> None:
    records, lost = interrupted_log(tmp_path)
    replayer = SessionReplayer()
    for record in records:
        replayer.feed(*record)
    [pending] = replayer.unrevealed()
    assert (pending.session, pending.draws) == (lost, 6)
    assert pending.interrupted_seq == seq_of(records, RecordKind.RNG_INTERRUPTED)
    assert len(replayer.finish()) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"draws": 5}, "ended with 5 draw"),
        ({"draws": -1}, "draws is missing"),
        ({"draws": True}, "draws is missing"),
        ({"reason": "power"}, "reason is not"),
        ({"session": "0123456789abcdef"}, "never committed"),
    ],
)
def test_a_wrong_interruption_is_named(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    records, _ = interrupted_log(tmp_path)
    seq = seq_of(records, RecordKind.RNG_INTERRUPTED)
    data_of(records, seq).update(change)
    with pytest.raises(LogIntegrityError, match=message) as caught:
        verify_rng_records(records)
    assert caught.value.record == seq


def test_a_draw_or_a_reveal_after_the_interruption_is_named(tmp_path: Path) -> None:
    records, lost = interrupted_log(tmp_path)
    draw = copy.deepcopy(data_of(records, seq_of(records, RecordKind.RNG_DRAW, 5)))
    draw["round"] = 99
    late = [*records, (len(records) + 1, str(RecordKind.RNG_DRAW), draw)]
    with pytest.raises(LogIntegrityError, match="after it ended with a restart") as caught:
        verify_rng_records(late)
    assert caught.value.record == len(records) + 1
    reveal = copy.deepcopy(data_of(records, seq_of(records, RecordKind.RNG_REVEAL)))
    reveal["session"] = lost
    revealed = [*records, (len(records) + 1, str(RecordKind.RNG_REVEAL), reveal)]
    with pytest.raises(LogIntegrityError, match="ended unrevealed"):
        verify_rng_records(revealed)
    twice = [
        *records,
        (len(records) + 1, *records[seq_of(records, RecordKind.RNG_INTERRUPTED) - 1][1:]),
    ]
    with pytest.raises(LogIntegrityError, match="interrupted twice"):
        verify_rng_records(twice)


def auditor_opens(records: Records, **kwargs: Any) -> EscrowOpening:
    return open_escrowed_sessions(records, AUDITOR, **kwargs)


def replayed_with(records: Records, reveals: list[SeedReveal]) -> SessionReplayer:
    replayer = SessionReplayer()
    for record in records:
        replayer.feed(*record)
    replayer.finish(reveals)
    return replayer


def test_the_auditor_opens_the_interrupted_session_and_its_draws_replay(tmp_path: Path) -> None:
    records, lost = interrupted_log(tmp_path)
    opening = auditor_opens(records)
    [opened] = opening.opened
    assert opened.session.session == lost
    assert opening.not_revealed == []
    [replay] = replayed_with(records, [opened.reveal]).revealed_by_auditor
    assert replay.reveal_seq is None
    assert [d.round for d in replay.draws] == [1, 2, 3, 4, 5, 6]
    draws = [d["number"] for _, k, d in records if k == RecordKind.RNG_DRAW][:6]
    assert [d.outcome for d in replay.draws] == draws


def test_an_auditors_reveal_that_does_not_match_names_the_commitment_or_the_draw(
    tmp_path: Path,
) -> None:
    records, _ = interrupted_log(tmp_path)
    [opened] = auditor_opens(records).opened
    reveal = opened.reveal
    commit = opened.session.commit_seq
    wrong = SeedReveal(reveal.session, b"\xab" * 32, reveal.nonce, reveal.personalization)
    with pytest.raises(LogIntegrityError, match="auditor's reveal") as caught:
        replayed_with(records, [wrong])
    assert caught.value.record == commit
    draw = seq_of(records, RecordKind.RNG_DRAW, 3)
    data_of(records, draw)["number"] = data_of(records, draw)["number"] % 8 + 1
    with pytest.raises(LogIntegrityError, match="does not replay") as caught:
        replayed_with(records, [reveal])
    assert caught.value.record == draw
    stranger = SeedReveal("0123456789abcdef", reveal.entropy, reveal.nonce, b"x")
    with pytest.raises(LogIntegrityError, match="never committed"):
        replayed_with(session_log(tmp_path, rounds=2), [stranger])


def test_the_auditor_never_opens_a_session_that_may_still_be_drawing(tmp_path: Path) -> None:
    log = MemoryLog()
    log.append(RecordKind.POWER_ON, {"boot": 1})
    rng = manager(tmp_path, log)
    open_now = rng.prepare().session
    rng.draw(1, 1)
    opening = auditor_opens(log.records)
    assert opening.opened == []
    [(session, why)] = opening.not_revealed
    assert session == open_now
    assert "may still be open" in why
    with pytest.raises(RngError, match="may still be open"):
        auditor_opens(log.records, only=open_now)
    log.append(RecordKind.POWER_ON, {"boot": 2})  # a restart: its seed is gone from memory
    [opened] = auditor_opens(log.records).opened  # ended, even before its rng_interrupted
    assert opened.session.session == open_now


def test_the_auditor_opens_one_session_or_says_why_not(tmp_path: Path) -> None:
    records, lost = interrupted_log(tmp_path)
    [opened] = auditor_opens(records, only=lost).opened
    assert opened.session.session == lost
    revealed = data_of(records, seq_of(records, RecordKind.RNG_REVEAL))["session"]
    with pytest.raises(RngError, match="revealed in the log already"):
        auditor_opens(records, only=revealed)
    with pytest.raises(RngError, match="not committed"):
        auditor_opens(records, only="0123456789abcdef")
    other = open_escrowed_sessions(records, OTHER_AUDITOR)
    assert other.opened == []
    assert other.not_revealed == [
        (lost, f"sealed to another auditor key (fingerprint {escrow_key_of(AUDITOR).fingerprint})")
    ]
    with pytest.raises(RngError, match="another auditor key"):
        open_escrowed_sessions(records, OTHER_AUDITOR, only=lost)
    del data_of(records, seq_of(records, RecordKind.RNG_COMMIT))["escrow"]
    [(_, why)] = auditor_opens(records).not_revealed
    assert "without an escrow" in why


def test_an_altered_seal_names_its_commitment(tmp_path: Path) -> None:
    records, _ = interrupted_log(tmp_path)
    commit = seq_of(records, RecordKind.RNG_COMMIT)
    escrow = data_of(records, commit)["escrow"]
    escrow["ciphertext"] = escrow["ciphertext"][:-2] + (
        "00" if escrow["ciphertext"][-2:] != "00" else "01"
    )
    with pytest.raises(LogIntegrityError, match="does not open") as caught:
        auditor_opens(records)
    assert caught.value.record == commit


def test_the_reveals_document_is_read_back_strictly(tmp_path: Path) -> None:
    records, lost = interrupted_log(tmp_path)
    document = json.loads(json.dumps(auditor_opens(records).as_document()))
    [reveal] = reveals_from_document(document)
    assert reveal.session == lost
    [first] = document["reveals"]
    bad = [
        [],
        {**document, "extra": 1},
        {**document, "format": "v2"},
        {**document, "reveals": {}},
        {**document, "reveals": [{**first, "entropy": "AB" * 32}]},
        {**document, "reveals": [{**first, "nonce": "00" * 15}]},
        {**document, "reveals": [{**first, "session": "nothex"}]},
        {**document, "reveals": [{**first, "personalization": "abc"}]},
        {**document, "reveals": [first, first]},
        {**document, "reveals": [{k: v for k, v in first.items() if k != "draws"}]},
    ]
    for value in bad:
        with pytest.raises(EscrowError):
            reveals_from_document(value)


def test_the_draws_of_an_ended_session_are_kept_only_for_a_reveal_to_come(tmp_path: Path) -> None:
    records, lost = interrupted_log(tmp_path)
    [opened] = auditor_opens(records).opened
    kept = SessionReplayer(replay_later={lost})
    dropped = SessionReplayer(replay_later=frozenset())
    for record in records:
        kept.feed(*record)
        dropped.feed(*record)
    kept.finish([opened.reveal])
    assert len(kept.revealed_by_auditor[0].draws) == 6
    assert [s.draws for s in dropped.unrevealed()] == [6]  # still counted
    with pytest.raises(ValueError, match="not kept"):
        dropped.finish([opened.reveal])
