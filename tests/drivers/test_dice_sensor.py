"""The serial driver against the simulated sensor, through pyserial on a real pty.

Every injected fault must end as the right event or the right no-roll reason from
``controller.core.dice``, and never as a wrong result.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import pytest
import serial

from controller.core.dice import (
    DiceReading,
    NoRollReason,
    ReadPolicy,
    ReadProgress,
    Verdict,
    judge_reading,
    next_read,
)
from controller.core.sensor_protocol import SensorFault
from controller.core.state import Event, Fault, Occurrence
from controller.errors import (
    SensorDisconnected,
    SensorHardwareFault,
    SensorTimeout,
    SensorVersionError,
)
from drivers.dice_sensor import SerialDiceSensor
from drivers.sim.sensor import SimFault, SimulatedSensor

TIMEOUT_S = 0.2
RETRIES = 2
WAIT = 5.0  # generous bound for any event; tests never sleep
POLICY = ReadPolicy()

Events = queue.Queue[Occurrence]


def _driver(sim: SimulatedSensor, events: Events, **options: object) -> SerialDiceSensor:
    return SerialDiceSensor(
        sim.url,
        events,
        timeout_s=TIMEOUT_S,
        retries=RETRIES,
        backoff_initial_s=0.05,
        backoff_max_s=0.4,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture
def sim() -> Iterator[SimulatedSensor]:
    with SimulatedSensor(seed=11, late_by_s=5.0, reconnect_after_s=0.2) as simulated:
        yield simulated


@pytest.fixture
def events() -> Events:
    return queue.Queue()


@pytest.fixture
def sensor(sim: SimulatedSensor, events: Events) -> Iterator[SerialDiceSensor]:
    with _driver(sim, events) as driver:
        yield driver


def _next(events: Events, expected: Event) -> Occurrence:
    occurrence = events.get(timeout=WAIT)
    assert occurrence.event is expected, occurrence
    return occurrence


def _read(sensor: SerialDiceSensor, events: Events) -> DiceReading:
    sensor.request_read(round_number=1, attempt=1)
    reading = _next(events, Event.READING).reading
    assert reading is not None
    return reading


def _faces(sim: SimulatedSensor) -> tuple[int, int, int]:
    red, blue1, blue2 = sim.dice
    return (red.face, blue1.face, blue2.face)


def _assert_true_roll(reading: DiceReading, sim: SimulatedSensor) -> Verdict:
    verdict = judge_reading(reading, min_confidence=POLICY.min_confidence)
    assert verdict.roll is not None, verdict
    assert verdict.roll.faces == _faces(sim)
    assert verdict.positions == tuple(d.position for d in sim.dice)
    return verdict


def test_handshake_reports_identity(sim: SimulatedSensor, sensor: SerialDiceSensor) -> None:
    assert sensor.identity is not None
    assert sensor.identity.model == "OptiDice-3"
    assert sensor.identity.firmware == "1.4.2"
    assert sensor.identity.serial_number == "SIM-0001"
    assert sensor.identity.protocol_version == 1
    assert sim.requests["Hello"] == 1


def test_read_gives_the_dice_in_the_tray(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events
) -> None:
    reading = _read(sensor, events)
    _assert_true_roll(reading, sim)
    assert len(reading.image_digest) == 64
    assert _assert_true_roll(sensor.read_once(), sim)
    assert events.empty()  # read_once emits no event


def test_event_time_comes_from_the_injected_clock(sim: SimulatedSensor, events: Events) -> None:
    with _driver(sim, events, clock=lambda: 123_456) as sensor:
        assert _read(sensor, events) is not None
    # the reading's Occurrence carried the injected clock's time
    with _driver(sim, events, clock=lambda: 42) as sensor:
        sensor.request_read(round_number=2, attempt=1)
        assert _next(events, Event.READING).at == 42


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (SimFault.TILTED_DIE, NoRollReason.NOT_FLAT),
        (SimFault.DIE_OUT, NoRollReason.DIE_OUT),
        (SimFault.MISSING_DIE, NoRollReason.MISSING_DIE),
        (SimFault.EXTRA_OBJECT, NoRollReason.EXTRA_DIE),
        (SimFault.WRONG_COLOURS, NoRollReason.WRONG_COLOURS),
        (SimFault.LOW_CONFIDENCE, NoRollReason.LOW_CONFIDENCE),
        (SimFault.UNREADABLE_DIE, NoRollReason.UNREADABLE),
    ],
)
def test_scene_faults_are_no_rolls_with_their_reason(
    sim: SimulatedSensor,
    sensor: SerialDiceSensor,
    events: Events,
    fault: SimFault,
    reason: NoRollReason,
) -> None:
    sim.inject(fault)
    step = next_read(ReadProgress(), _read(sensor, events), policy=POLICY, previous_roll=None)
    assert step.roll is None
    assert step.no_roll_reason is reason
    # the fault was one reading long: the next reading is the true roll again
    _assert_true_roll(_read(sensor, events), sim)


@pytest.mark.parametrize(
    "fault",
    [
        SimFault.GARBLED_BYTES,
        SimFault.BAD_CHECKSUM,
        SimFault.TRUNCATED_FRAME,
        SimFault.NO_REPLY,
        SimFault.DUPLICATED_FRAME,
        SimFault.LATE_REPLY,
    ],
)
def test_line_faults_are_retried_and_never_give_a_wrong_result(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events, fault: SimFault
) -> None:
    sim.inject(fault)
    sent = sim.frames_sent
    _assert_true_roll(_read(sensor, events), sim)
    if fault is SimFault.LATE_REPLY:
        # the late reply to the first request goes out right after the retry's reply
        assert sim.wait_for_sent(sent + 2, timeout=WAIT)
    # A second read: its reading is the next event, so nothing else came of the fault.
    _assert_true_roll(_read(sensor, events), sim)
    assert events.empty()
    if fault in (SimFault.DUPLICATED_FRAME, SimFault.LATE_REPLY):
        assert sensor.stats.replies_ignored == 1
        assert sensor.stats.retries == (1 if fault is SimFault.LATE_REPLY else 0)
    else:
        assert sensor.stats.retries == 1
        assert sensor.stats.replies_ignored == 0
    if fault in (SimFault.GARBLED_BYTES, SimFault.BAD_CHECKSUM, SimFault.TRUNCATED_FRAME):
        assert sensor.rejections


@pytest.mark.parametrize("sent", [True, False], ids=["frame_sent", "frame_lost"])
@pytest.mark.parametrize("when", ["handshake", "read"])
def test_a_write_timeout_is_retried_like_a_missing_reply(
    sim: SimulatedSensor, events: Events, monkeypatch: pytest.MonkeyPatch, sent: bool, when: str
) -> None:
    """pyserial times a write around the whole call: on a busy machine a frame that went out
    can still raise ``SerialTimeoutException``. Sent or not, the request keeps its deadline
    (DS1 section 3): its reply is used if it comes, otherwise it is retried. The error never
    leaves the driver."""
    real_write = serial.Serial.write
    armed = {"left": 1 if when == "handshake" else 0}

    def write(port: serial.Serial, data: bytes) -> int | None:
        if armed["left"]:
            armed["left"] -= 1
            if sent:
                real_write(port, data)
            raise serial.SerialTimeoutException("Write timeout")
        return real_write(port, data)

    monkeypatch.setattr(serial.Serial, "write", write)
    with _driver(sim, events) as sensor:
        assert sensor.identity is not None
        if when == "read":
            armed["left"] = 1
        _assert_true_roll(_read(sensor, events), sim)
        assert events.empty()
        assert armed["left"] == 0
        assert sensor.stats.write_timeouts == 1
        assert sensor.stats.retries == (0 if sent else 1)
        assert sim.requests["Hello" if when == "handshake" else "ReadNow"] == 1  # one reached it


@pytest.mark.parametrize(
    "fault", [SimFault.BAD_CHECKSUM, SimFault.NO_REPLY, SimFault.GARBLED_BYTES]
)
def test_a_fault_outlasting_the_retries_is_a_sensor_timeout(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events, fault: SimFault
) -> None:
    sim.inject(fault, count=RETRIES + 1)
    sensor.request_read(round_number=3, attempt=1)
    timeout = _next(events, Event.SENSOR_TIMEOUT)
    assert "round 3 attempt 1" in timeout.detail
    assert sim.requests["ReadNow"] == RETRIES + 1
    _assert_true_roll(_read(sensor, events), sim)


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (SimFault.CAMERA_FAULT, SensorFault.CAMERA),
        (SimFault.LIGHTING_FAULT, SensorFault.LIGHTING),
        (SimFault.LENS_BLOCKED, SensorFault.LENS),
    ],
)
def test_sensor_hardware_faults(
    sim: SimulatedSensor,
    sensor: SerialDiceSensor,
    events: Events,
    fault: SimFault,
    code: SensorFault,
) -> None:
    sim.inject(fault, count=2)
    assert sensor.status() == frozenset({code})
    sensor.request_read(round_number=1, attempt=1)
    occurrence = _next(events, Event.FAULT)
    assert occurrence.fault is Fault.SENSOR_HARDWARE
    assert code.value in occurrence.detail
    with pytest.raises(SensorHardwareFault):
        sensor.read_once()
    assert sensor.status() == frozenset()


def test_unapproved_firmware_is_refused_at_the_handshake(
    sim: SimulatedSensor, events: Events
) -> None:
    sim.inject(SimFault.WRONG_FIRMWARE)
    driver = _driver(sim, events)
    with pytest.raises(SensorVersionError, match=r"0\.9\.7"):
        driver.open()
    driver.close()
    with _driver(sim, events, approve_firmware={"1.4.2"}) as sensor:
        assert sensor.identity is not None
    with pytest.raises(SensorVersionError):
        _driver(sim, events, approve_firmware={"1.5.0"}).open()


def test_no_answer_at_the_handshake_is_a_timeout(sim: SimulatedSensor, events: Events) -> None:
    sim.inject(SimFault.NO_REPLY, count=RETRIES + 1)
    with pytest.raises(SensorTimeout):
        _driver(sim, events).open()


def test_a_port_that_does_not_exist(events: Events, tmp_path: object) -> None:
    with pytest.raises(SensorDisconnected):
        SerialDiceSensor("/nonexistent/dice", events, timeout_s=0.1).open()


def test_unplug_in_the_middle_of_a_read_recovers(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events
) -> None:
    sim.inject(SimFault.DISCONNECT)  # the sensor vanishes on the next request
    sensor.request_read(round_number=5, attempt=1)
    lost = _next(events, Event.SENSOR_LOST)
    assert "SerialException" in lost.detail
    back = _next(events, Event.SENSOR_BACK)
    assert "SIM-0001" in back.detail
    assert sensor.is_connected
    assert sim.requests["Hello"] == 2
    _assert_true_roll(_read(sensor, events), sim)
    assert events.empty()  # the interrupted read never answers late
    assert sensor.stats.disconnects == 1
    assert sensor.stats.reconnects == 1


def test_unplugged_for_a_while_then_back(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events
) -> None:
    sim.unplug()
    _next(events, Event.SENSOR_LOST)
    sensor.request_read(round_number=6, attempt=1)  # while lost: reported, not queued
    assert "not connected" in _next(events, Event.SENSOR_LOST).detail
    with pytest.raises(SensorDisconnected):
        sensor.read_once()
    sim.replug()
    _next(events, Event.SENSOR_BACK)
    _assert_true_roll(_read(sensor, events), sim)


def test_replugged_sensor_with_wrong_firmware_is_not_taken_back(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events
) -> None:
    sim.inject(SimFault.WRONG_FIRMWARE)
    sim.unplug(replug_after_s=0.05)
    _next(events, Event.SENSOR_LOST)
    _next(events, Event.SENSOR_BACK)  # only after a handshake with approved firmware
    assert sim.requests["Hello"] >= 3
    _assert_true_roll(_read(sensor, events), sim)


def test_reader_thread_turns_an_unexpected_error_into_events(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = sensor._parser
    real_feed = parser.feed
    calls = {"n": 0}

    def broken_feed(data: bytes) -> list[object]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("bug in a parser")
        return real_feed(data)  # type: ignore[return-value]

    monkeypatch.setattr(parser, "feed", broken_feed)
    sensor.request_read(round_number=7, attempt=1)
    fault = _next(events, Event.FAULT)
    assert fault.fault is Fault.INTERNAL
    assert "bug in a parser" in fault.detail
    _next(events, Event.SENSOR_LOST)
    _next(events, Event.SENSOR_BACK)
    _assert_true_roll(_read(sensor, events), sim)


def test_dice_that_did_not_move_are_seen_as_such(
    sim: SimulatedSensor, sensor: SerialDiceSensor, events: Events
) -> None:
    """Reads between rolls see the same dice in the same places (dice_did_not_move)."""

    def roll_from_reads(previous: Verdict | None) -> tuple[Verdict, NoRollReason | None]:
        progress = ReadProgress()
        while True:
            step = next_read(progress, _read(sensor, events), policy=POLICY, previous_roll=previous)
            if not step.needs_another_read:
                return step.verdict, step.no_roll_reason
            progress = step.progress

    first, reason = roll_from_reads(None)
    assert reason is None
    _, reason = roll_from_reads(first)
    assert reason is NoRollReason.DICE_DID_NOT_MOVE
    sim.roll()
    _, reason = roll_from_reads(first)
    assert reason is None


def test_socket_transport(events: Events) -> None:
    with (
        SimulatedSensor(seed=5, transport="socket", reconnect_after_s=0.1) as sim,
        _driver(sim, events) as sensor,
    ):
        assert sim.url.startswith("socket://127.0.0.1:")
        _assert_true_roll(_read(sensor, events), sim)
        sim.inject(SimFault.DISCONNECT)
        sensor.request_read(round_number=1, attempt=2)
        _next(events, Event.SENSOR_LOST)
        _next(events, Event.SENSOR_BACK)
        _assert_true_roll(_read(sensor, events), sim)


def test_close_twice_and_the_sim_url_is_stable(sim: SimulatedSensor, events: Events) -> None:
    url = sim.url
    device = sim.device_path
    driver = _driver(sim, events)
    driver.open()
    driver.close()
    driver.close()
    assert not driver.is_connected
    sim.unplug()
    sim.replug()
    with _driver(sim, events) as sensor:
        assert sensor.identity is not None
    assert sim.url == url  # the symlink, like udev's, survives the replug
    assert sim.device_path.startswith("/dev/pts/")
    assert device.startswith("/dev/pts/")


def test_the_close_wakes_a_reader_waiting_longer_than_its_join(
    sim: SimulatedSensor, events: Events
) -> None:
    """The reader waits for a byte, or for the request in flight to be due: it never wakes
    just to look for a close (idle, it waits for a byte only); the close cancels its read. With
    a request timeout longer than the close's join, a reader woken only by its timeout would
    outlive the close."""
    driver = SerialDiceSensor(sim.url, events, timeout_s=60.0, poll_s=0.01)
    driver.open()
    try:
        _assert_true_roll(_read(driver, events), sim)  # the reader now waits up to timeout_s
    finally:
        driver.close()
    assert not [t for t in threading.enumerate() if t.name == "dice-sensor-reader"]
