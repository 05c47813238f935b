"""The fleet's topics and payloads (controller/fleet/protocol.py), the broker URL of [fleet],
C2SP cosignatures (controller/core/note.py), the table's signed status and its connection
number (controller/fleet/outbox.py): strict on the way in."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.config import ConfigError, parse_broker_url, parse_config
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    NoteError,
    Signer,
    Verifier,
    cosign_note,
    open_checkpoint,
    open_cosignature,
    sign_checkpoint,
)
from controller.fleet.outbox import (
    CursorError,
    next_connection,
    read_connection,
    write_connection,
)
from controller.fleet.protocol import (
    ALERTS_TOPIC,
    END_OF_CONNECTION,
    Alert,
    AlertKind,
    Channel,
    Presence,
    ProtocolError,
    SignedStatus,
    Status,
    StatusSigner,
    decode_json,
    open_status,
    parse_topic,
    sign_status,
    subscription,
    topic,
)

CHECKPOINT = Checkpoint("paigow-controller/table-1", 42, bytes(range(32)))


def test_topics_round_trip_and_refuse_anything_else() -> None:
    assert topic("table-1", Channel.RECORDS) == "paigow/v1/table-1/records"
    assert subscription(Channel.CHECKPOINT) == "paigow/v1/+/checkpoint"
    for channel in Channel:
        assert parse_topic(topic("T_9", channel)) == ("T_9", channel)
    for bad in (
        ALERTS_TOPIC,
        "paigow/v1/table-1/other",
        "paigow/v2/table-1/records",
        "paigow/v1/+/records",
        "paigow/v1/a/b/records",
        "paigow/v1//records",
        "paigow/v1/" + "x" * 33 + "/records",
        "paigow/v1/tåble/records",
    ):
        with pytest.raises(ProtocolError):
            parse_topic(bad)
    with pytest.raises(ProtocolError):
        topic("a/b", Channel.STATUS)


def test_status_and_alert_round_trip_and_bounds() -> None:
    status = Status(Presence.ONLINE, "result", "shaker", 12, ("tamper",), "2026-12-01T08:00:00Z")
    assert Status.decode(status.encode()) == status
    assert Status.decode(b'{"status": "offline"}').presence is Presence.OFFLINE
    alert = Alert("table-2", AlertKind.ROLLBACK, "size 10 after 12", "2026-12-01T08:00:00Z", 10)
    assert Alert.decode(alert.encode()) == alert
    for bad in (
        b"",
        b"[]",
        b"\xff",
        b'{"status": "maybe"}',
        b'{"status": "online", "round": -1}',
        b'{"status": "online", "round": true}',
        b'{"status": "online", "faults": ["a b"]}',
        b'{"status": "online", "screen": "\\u0007"}',
        b"[" * 100_000,
    ):
        with pytest.raises(ProtocolError):
            Status.decode(bad)
    with pytest.raises(ProtocolError):
        decode_json(b"{}" + b" " * 5000, 4096, "status")
    with pytest.raises(ProtocolError):
        Alert.decode(b'{"table": "t", "kind": "nope", "detail": "", "time": ""}')


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mqtt://broker.casino:1883", ("broker.casino", 1883, False)),
        ("mqtt://10.0.0.5", ("10.0.0.5", 1883, False)),
        ("mqtts://broker", ("broker", 8883, True)),
        ("mqtt://[::1]:1884", ("::1", 1884, False)),
    ],
)
def test_broker_urls(url: str, expected: tuple[str, int, bool]) -> None:
    address = parse_broker_url(url)
    assert (address.host, address.port, address.tls) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://broker",
        "mqtt://",
        "mqtt://user:pw@broker",
        "mqtt://broker/path",
        "mqtt://broker:0",
        "mqtt://broker:65536",
        "mqtt://broker:１８８３",
        "mqtt://broker:+1",
        "mqtt://bro ker",
        "mqtt://[::1",
    ],
)
def test_bad_broker_urls(url: str) -> None:
    with pytest.raises(ValueError, match=r"mqtt|port|host|IPv6"):
        parse_broker_url(url)


def test_fleet_config_names_the_key() -> None:
    witness = Signer.generate("witness.casino/w1", ALG_COSIGNATURE_V1).verifier
    config = parse_config(
        {"fleet": {"mqtt_url": "mqtt://127.0.0.1:1883", "witness_key": str(witness)}}
    )
    assert config.fleet.broker is not None
    assert parse_config({}).fleet.broker is None  # off by default
    cases = {
        "fleet.mqtt_url": {"mqtt_url": "tcp://x"},
        "fleet.ca_file": {"mqtt_url": "mqtts://x"},
        "fleet.key_file": {"mqtt_url": "mqtts://x", "ca_file": "/ca", "cert_file": "/c"},
        "fleet.credentials_file": {"mqtt_url": "mqtt://x", "credentials_file": "relative"},
        "fleet.witness_key": {
            "mqtt_url": "mqtt://x",
            "witness_key": str(Signer.generate("l").verifier),
        },
        "fleet.keepalive_s": {"keepalive_s": 1},
        "fleet.nope": {"nope": 1},
    }
    for key, section in cases.items():
        with pytest.raises(ConfigError) as raised:
            parse_config({"fleet": section})
        assert raised.value.key == key, (key, raised.value)


def test_a_cosignature_verifies_and_nothing_else_does() -> None:
    log = Signer.generate("paigow-controller/table-1")
    witness = Signer.generate("witness.casino/w1", ALG_COSIGNATURE_V1)
    note = sign_checkpoint(CHECKPOINT, log)
    cosigned = cosign_note(note, witness, 1_796_000_000)
    assert cosigned.startswith(note)
    assert open_checkpoint(cosigned, log.verifier) == CHECKPOINT  # the log's signature stands
    opened = open_cosignature(cosigned, witness.verifier)
    assert (opened.checkpoint, opened.timestamp) == (CHECKPOINT, 1_796_000_000)
    # the key ID is the cosignature's (0x04), not a log key's (0x01)
    line = cosigned.splitlines()[-1].split(" ")
    raw = base64.b64decode(line[2])
    assert (
        raw[:4]
        == witness.verifier.key_id
        != Verifier(witness.name, witness.verifier.public_key).key_id
    )
    assert len(raw) == 4 + 8 + 64
    assert Verifier.parse(str(witness.verifier), ALG_COSIGNATURE_V1) == witness.verifier
    with pytest.raises(NoteError):
        Verifier.parse(str(witness.verifier))  # not a log key
    assert Signer.parse(str(witness), ALG_COSIGNATURE_V1).verifier == witness.verifier
    # another witness, another checkpoint, a changed timestamp, a log key: refused
    with pytest.raises(NoteError):
        open_cosignature(cosigned, Signer.generate("other", ALG_COSIGNATURE_V1).verifier)
    other = Checkpoint(CHECKPOINT.origin, 43, CHECKPOINT.root_hash)
    forged = sign_checkpoint(other, log) + cosigned.splitlines(keepends=True)[-1]
    with pytest.raises(NoteError):
        open_cosignature(forged, witness.verifier)
    stamped = bytearray(raw)
    stamped[11] ^= 1
    moved = note + f"— {witness.name} {base64.b64encode(bytes(stamped)).decode()}\n"
    with pytest.raises(NoteError):
        open_cosignature(moved, witness.verifier)
    with pytest.raises(NoteError):
        open_cosignature(cosigned, log.verifier)
    with pytest.raises(NoteError):
        cosign_note(note, log, 1)  # a log key does not cosign


@given(st.binary(max_size=300))
def test_garbage_never_opens(data: bytes) -> None:
    witness = Signer.generate("w", ALG_COSIGNATURE_V1).verifier
    text = data.decode("utf-8", errors="replace")
    with pytest.raises(NoteError):
        open_cosignature(text, witness)


# --- the signed status ----------------------------------------------------------------------

STATUS = Status(Presence.ONLINE, "result", "shaker", 12, ("tamper",), "2026-12-01T08:00:00.000Z")


def test_a_signed_status_opens_with_the_tables_key_only() -> None:
    key = Signer.generate("casino.example/paigow/table-1")
    signer = StatusSigner(key)
    assert signer.verifier == key.verifier
    assert "PRIVATE" not in repr(signer)
    assert str(key.seed) not in repr(signer)
    signed = SignedStatus("table-1", 7, 3, STATUS)
    payload = signer.sign(signed)
    assert payload == sign_status(signed, key)
    assert open_status(payload, key.verifier, "table-1") == signed
    text = payload.decode()
    assert text.startswith("paigow-controller status v1\ntable table-1\nconnection 7\nseq 3\n{")
    # never a checkpoint: its second line is not a size
    with pytest.raises(NoteError):
        open_checkpoint(text, key.verifier)
    will = SignedStatus("table-1", 7, END_OF_CONNECTION, Status(Presence.OFFLINE))
    assert open_status(signer.sign(will), key.verifier, "table-1").order == (7, 2**53 - 1)
    assert will.order > signed.order > SignedStatus("table-1", 6, 99, STATUS).order


def test_a_status_of_another_key_or_another_table_or_altered_is_refused() -> None:
    key = Signer.generate("casino.example/paigow/table-1")
    payload = StatusSigner(key).sign(SignedStatus("table-1", 7, 3, STATUS))
    impostor = Signer.generate(key.name)  # the same name, another key
    with pytest.raises(ProtocolError, match="not signed by the table's key"):
        open_status(
            StatusSigner(impostor).sign(SignedStatus("table-1", 7, 3, STATUS)),
            key.verifier,
            "table-1",
        )
    with pytest.raises(ProtocolError, match="of table 'table-2'"):
        open_status(
            StatusSigner(key).sign(SignedStatus("table-2", 7, 3, STATUS)), key.verifier, "table-1"
        )
    for bad in (
        payload.replace(b"connection 7", b"connection 8"),
        payload.replace(b"seq 3", b"seq 4"),
        payload.replace(b'"online"', b'"offline"'),
        Status(Presence.ONLINE).encode(),  # the plain JSON status of protocol v1
        b"\xff" * 10,
        payload + b"x" * 5000,
    ):
        with pytest.raises(ProtocolError):
            open_status(bad, key.verifier, "table-1")
    with pytest.raises(ProtocolError):
        sign_status(SignedStatus("table-1", END_OF_CONNECTION + 1, 1, STATUS), key)


# --- the connection number ------------------------------------------------------------------


def test_the_connection_number_never_goes_back() -> None:
    # the file's number + 1, above what this run used or saw, at least the log's size x 2^20
    assert next_connection(saved=0, seen=0, log_size=0) == 1
    assert next_connection(saved=41, seen=0, log_size=0) == 42
    assert next_connection(saved=41, seen=50, log_size=0) == 51
    assert next_connection(saved=0, seen=0, log_size=3) == 3 << 20
    assert next_connection(saved=(3 << 20) + 5, seen=0, log_size=3) == (3 << 20) + 6
    # the file lost: the log grew since the last start (its power_on), so the number did not
    # go back
    last = next_connection(saved=(3 << 20) + 5, seen=0, log_size=3)
    assert next_connection(saved=0, seen=0, log_size=4) > last
    # bounded: never past 2^53 - 1, whatever the log's size
    assert next_connection(saved=0, seen=0, log_size=2**62) <= END_OF_CONNECTION
    assert next_connection(saved=END_OF_CONNECTION, seen=0, log_size=0) == END_OF_CONNECTION


def test_the_connection_file_is_digits_or_refused(tmp_path: Path) -> None:
    path = tmp_path / "fleet-connection"
    assert read_connection(path) == 0  # none yet
    write_connection(path, 12_345)
    assert path.read_bytes() == b"12345\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_connection(path) == 12_345
    for bad in (b"", b"\n", b"-1\n", b"1.5\n", b"\xd9\xa3\n", b"x", b"9" * 17, b"9" * 100):
        path.write_bytes(bad)
        with pytest.raises(CursorError):
            read_connection(path)
    path.write_bytes(b"%d\n" % (END_OF_CONNECTION + 1))
    with pytest.raises(CursorError):
        read_connection(path)
