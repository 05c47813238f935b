"""A simulated optical dice sensor that speaks DS1 (``hw/dice-sensor-protocol.md``).

It sits at the far end of a real pseudo-terminal (``os.openpty`` in raw mode, reached through a
stable symlink the way udev gives ``/dev/paigow-dice``) or of a ``socket://`` listener on
127.0.0.1, so the controller's driver runs its real pyserial path against it.

Three seeded virtual dice (one red, two blue) lie in a 200 x 200 mm tray. :meth:`roll` rolls
them (the simulated shaker calls it at the end of a shake); reads in between see the same dice.
:meth:`inject` arms a fault for the next ``count`` replies it applies to.

    with SimulatedSensor(seed=7) as sim:
        sensor = SerialDiceSensor(sim.url, queue.Queue())
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import select
import socket
import tempfile
import threading
import time
import tty
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Literal

from controller.core.dice import DieColour
from controller.core.sensor_protocol import (
    DieField,
    FaultReport,
    FrameParser,
    Hello,
    Identity,
    Reading,
    ReadNow,
    Reply,
    SensorFault,
    Status,
    StatusRequest,
    encode,
    encode_body,
    seal,
)

log = logging.getLogger(__name__)

TRAY_MM = 200
DIE_MM = 16
_MAX_LATE = 32  # replies held back at once (bounded)


class SimFault(StrEnum):
    """What the simulated sensor can be made to do wrong."""

    # what the camera sees (the reply is a valid frame; the controller must call it a no roll)
    TILTED_DIE = "tilted_die"
    DIE_OUT = "die_out"
    MISSING_DIE = "missing_die"
    EXTRA_OBJECT = "extra_object"
    WRONG_COLOURS = "wrong_colours"
    LOW_CONFIDENCE = "low_confidence"
    UNREADABLE_DIE = "unreadable_die"
    # the sensor's own hardware (a FL reply to a read; the status shows it)
    CAMERA_FAULT = "camera_fault"
    LIGHTING_FAULT = "lighting_fault"
    LENS_BLOCKED = "lens_blocked"
    # the line (applies to the next reply of any kind)
    GARBLED_BYTES = "garbled_bytes"
    BAD_CHECKSUM = "bad_checksum"
    TRUNCATED_FRAME = "truncated_frame"
    NO_REPLY = "no_reply"
    # held back, and sent right after the sensor's next reply (the answer to the driver's
    # retry), or ``late_by_s`` after it was held if no other reply goes out first
    LATE_REPLY = "late_reply"
    DUPLICATED_FRAME = "duplicated_frame"
    DISCONNECT = "disconnect"  # on the next request: unplug, and plug back in after a while
    # the handshake
    WRONG_FIRMWARE = "wrong_firmware"


_SCENE_FAULTS = (
    SimFault.TILTED_DIE,
    SimFault.DIE_OUT,
    SimFault.MISSING_DIE,
    SimFault.EXTRA_OBJECT,
    SimFault.WRONG_COLOURS,
    SimFault.LOW_CONFIDENCE,
    SimFault.UNREADABLE_DIE,
)
_HARDWARE = {
    SimFault.CAMERA_FAULT: SensorFault.CAMERA,
    SimFault.LIGHTING_FAULT: SensorFault.LIGHTING,
    SimFault.LENS_BLOCKED: SensorFault.LENS,
}
_LINE_FAULTS = (
    SimFault.NO_REPLY,
    SimFault.GARBLED_BYTES,
    SimFault.BAD_CHECKSUM,
    SimFault.TRUNCATED_FRAME,
    SimFault.LATE_REPLY,
    SimFault.DUPLICATED_FRAME,
)


@dataclass(frozen=True, slots=True)
class VirtualDie:
    colour: DieColour
    face: int
    position: tuple[int, int]
    confidence: int


class _Link:
    """One end of the line: the pty master or an accepted socket."""

    def __init__(self, fd: int, sock: socket.socket | None = None) -> None:
        self.fd = fd
        self.sock = sock

    def read(self) -> bytes:
        if self.sock is not None:
            return self.sock.recv(4096)
        return os.read(self.fd, 4096)

    def write(self, data: bytes) -> None:
        if self.sock is not None:
            self.sock.sendall(data)
            return
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        else:
            with contextlib.suppress(OSError):
                os.close(self.fd)


class SimulatedSensor:
    """A DS1 dice sensor on a pty (``transport="pty"``) or a TCP socket (``"socket"``).

    ``url`` is what the driver opens: the stable symlink to the current pty, or
    ``socket://127.0.0.1:<port>``. It stays the same across :meth:`unplug` / :meth:`replug`.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        transport: Literal["pty", "socket"] = "pty",
        model: str = "OptiDice-3",
        firmware: str = "1.4.2",
        wrong_firmware: str = "0.9.7",
        serial_number: str = "SIM-0001",
        reply_delay_s: float = 0.0,
        late_by_s: float = 1.0,
        reconnect_after_s: float = 0.3,
        link_dir: Path | None = None,
        dice_bias: Mapping[DieColour, Sequence[float]] | None = None,
    ) -> None:
        self._random = random.Random(seed)  # noqa: S311 - simulated dice, reproducible by seed
        # Loaded dice (``simulate --dice-bias``): each colour's chances of faces 1..6
        self._bias = dict(dice_bias or {})
        self._seed = seed
        self.transport = transport
        self.model = model
        self.firmware = firmware
        self.wrong_firmware = wrong_firmware
        self.serial_number = serial_number
        self.reply_delay_s = reply_delay_s
        self.late_by_s = late_by_s
        self.reconnect_after_s = reconnect_after_s
        self._own_dir = link_dir is None
        self._dir = Path(tempfile.mkdtemp(prefix="sim-dice-")) if link_dir is None else link_dir
        self._symlink = self._dir / "dice-sensor"
        self._lock = threading.Lock()
        self._faults: Counter[SimFault] = Counter()
        self._dice: tuple[VirtualDie, ...] = ()
        self._misread_next = False  # the next roll's red die is read as another face
        self._misread = False  # this roll's is
        self._rolls = 0
        self._images = 0
        self._parser = FrameParser()
        self._link: _Link | None = None
        self._pty_slave: int | None = None
        self._listener: socket.socket | None = None
        self._port = 0
        self._late: list[tuple[float, bytes]] = []
        self._replug_at: float | None = None
        self._stopping = threading.Event()
        # Written to wake the sensor's thread at once when the line changes (plugged, pulled):
        # a select on a descriptor another thread closed would otherwise wait out its timeout,
        # or see the new pty that took the old descriptor's number.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        self._sent = threading.Condition(self._lock)
        self.device_path = ""
        self.requests: Counter[str] = Counter()
        self.frames_sent = 0
        self.roll()

    # --- life ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.transport == "socket":
            return f"socket://127.0.0.1:{self._port}"
        return str(self._symlink)

    def start(self) -> SimulatedSensor:
        if self._thread is None:
            self._plug()
            self._thread = threading.Thread(target=self._run, name="sim-dice-sensor", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread, close the line, remove the symlink. Safe to call twice."""
        self._stopping.set()
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self._unplug_now()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._thread is None or not self._thread.is_alive():
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake_r = self._wake_w = -1
        if self._own_dir:
            with contextlib.suppress(OSError):
                self._dir.rmdir()

    def __enter__(self) -> SimulatedSensor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- the dice --------------------------------------------------------------------------

    def _face(self, colour: DieColour, draw: random.Random) -> int:
        chances = self._bias.get(colour)
        if chances is None:
            return draw.randint(1, 6)
        return draw.choices(range(1, 7), weights=chances)[0]

    def roll(self) -> tuple[VirtualDie, ...]:
        """Roll the three dice: new faces and new places in the tray. Each roll draws from a
        series of its own (the seed and the roll's number), so the dice of the n-th roll do not
        depend on how many frames were garbled or read before it on a loaded machine."""
        colours = (DieColour.RED, DieColour.BLUE, DieColour.BLUE)
        with self._lock:
            number = self._rolls + 1
        draw = random.Random(f"{self._seed}/roll/{number}")  # noqa: S311 - simulated dice
        places: list[tuple[int, int]] = []
        while len(places) < len(colours):
            place = (
                draw.randint(DIE_MM, TRAY_MM - DIE_MM),
                draw.randint(DIE_MM, TRAY_MM - DIE_MM),
            )
            if all(abs(place[0] - x) > DIE_MM or abs(place[1] - y) > DIE_MM for x, y in places):
                places.append(place)
        dice = tuple(
            VirtualDie(colour, self._face(colour, draw), place, draw.randint(90, 100))
            for colour, place in zip(colours, places, strict=True)
        )
        with self._lock:
            self._dice = dice
            self._rolls += 1
            self._misread, self._misread_next = self._misread_next, False
        return dice

    def misread_next_roll(self) -> None:
        """The camera misreads the red die of the next roll, every time it is read: the face
        one above (6: 1), with full confidence. The dice themselves (``dice``) are as they
        lie; a supervisor who looks at them corrects the result."""
        with self._lock:
            self._misread_next = True

    @property
    def dice(self) -> tuple[VirtualDie, ...]:
        return self._dice

    # --- faults ----------------------------------------------------------------------------

    def inject(self, fault: SimFault, count: int = 1) -> None:
        """Arm ``fault`` for the next ``count`` replies it applies to."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            self._faults[fault] += count

    def unplug(self, *, replug_after_s: float | None = None) -> None:
        """Pull the cable. With ``replug_after_s`` it comes back by itself."""
        with self._lock:
            self._replug_at = None if replug_after_s is None else time.monotonic() + replug_after_s
        self._unplug_now()

    @property
    def is_plugged(self) -> bool:
        if self.transport == "socket":
            return self._listener is not None
        return self._link is not None

    def replug(self) -> None:
        """Plug the cable back in now (the url is the same as before)."""
        with self._lock:
            self._replug_at = None
        if not self.is_plugged:
            self._plug()

    def wait_for_sent(self, frames: int, timeout: float) -> bool:
        """Wait until ``frames`` frames (or broken frames) have gone out in total."""
        with self._sent:
            return self._sent.wait_for(lambda: self.frames_sent >= frames, timeout)

    # --- the line --------------------------------------------------------------------------

    def _plug(self) -> None:
        if self.transport == "socket":
            if self._listener is None:
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", self._port))
                listener.listen(1)
                self._port = listener.getsockname()[1]
                self._listener = listener
                self._wake()
            return
        master, slave = os.openpty()
        tty.setraw(master)
        tty.setraw(slave)
        # Keep our own slave fd open so the master never sees a hang-up when the controller
        # closes and reopens its end.
        self._pty_slave = slave
        self._link = _Link(master)
        self.device_path = os.ttyname(slave)
        temporary = self._dir / "dice-sensor.new"
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        temporary.symlink_to(self.device_path)
        temporary.replace(self._symlink)
        self._wake()  # a driver may open it now: answer from its first frame on

    def _unplug_now(self) -> None:
        with self._lock:
            link, self._link = self._link, None
            slave, self._pty_slave = self._pty_slave, None
            self._late.clear()
            self._parser.reset()
        if self.transport == "socket" and self._listener is not None:
            self._listener.close()
            self._listener = None
        with contextlib.suppress(FileNotFoundError):
            self._symlink.unlink()
        if link is not None:
            link.close()
        if slave is not None:
            with contextlib.suppress(OSError):
                os.close(slave)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake is pending anyway) or closed
            os.write(self._wake_w, b"\0")

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._turn()
            except OSError as exc:
                # The controller hung up (socket) or the pty went away: wait for the next one.
                log.debug("simulated sensor: line error %s", exc)
                if self.transport == "socket":
                    with self._lock:
                        link, self._link = self._link, None
                    if link is not None:
                        link.close()
                else:
                    self._stopping.wait(0.01)

    def _turn(self) -> None:
        now = time.monotonic()
        if self._replug_at is not None and now >= self._replug_at:
            self._replug_at = None
            if not self.is_plugged:
                self._plug()
        link, listener = self._link, self._listener
        ready = self._wait(link, listener, now)
        if link is not self._link or listener is not self._listener:
            return  # the line changed while this turn waited: look again
        if link is None and listener is not None and ready:
            self._accept(listener)
            return
        if link is not None and ready and not self._take_frames(link):
            return
        self._send_late(link)

    def _wait(self, link: _Link | None, listener: socket.socket | None, now: float) -> list[int]:
        """The line's descriptors ready within the turn's wait: until a frame comes, the
        cable is plugged back in, or a late reply is due. Unplugged, only the wake pipe is
        watched (emptied, never returned)."""
        watch: list[int] = [self._wake_r]
        if link is not None:
            watch.append(link.fd)
        elif listener is not None:
            watch.append(listener.fileno())
        wait = 0.5  # idle: a frame from the controller wakes select at once
        if self._replug_at is not None:
            wait = max(0.0, min(wait, self._replug_at - now))
        if self._late:
            wait = max(0.0, min(wait, min(due for due, _ in self._late) - now))
        ready, _, _ = select.select(watch, [], [], wait)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)
            ready.remove(self._wake_r)
        return ready

    def _accept(self, listener: socket.socket) -> None:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._link = _Link(conn.fileno(), conn)
            self._parser.reset()

    def _take_frames(self, link: _Link) -> bool:
        """What the controller sent, answered frame by frame; False if the line was unplugged
        before it was read."""
        with self._lock:  # an unplug swaps the link under this lock before it closes it
            if self._link is not link:
                return False
            data = link.read()  # ready: does not block
        if not data:
            raise ConnectionResetError("the controller closed the line")
        for frame in self._parser.feed(data):
            if self._link is not link:
                break  # unplugged while answering
            self._answer(link, frame)
        return True

    def _send_late(self, link: _Link | None) -> None:
        now = time.monotonic()
        with self._lock:
            due = [data for when, data in self._late if when <= now]
            self._late = [(when, data) for when, data in self._late if when > now]
        if link is not None:
            for data in due:
                self._write(link, data)

    def _write(self, link: _Link, data: bytes) -> None:
        link.write(data)
        with self._sent:
            self.frames_sent += 1
            self._sent.notify_all()

    def _take(self, fault: SimFault) -> bool:
        with self._lock:
            if self._faults[fault] > 0:
                self._faults[fault] -= 1
                return True
            return False

    # --- answering -------------------------------------------------------------------------

    def _answer(self, link: _Link, frame: object) -> None:
        if not isinstance(frame, Hello | ReadNow | StatusRequest):
            return  # the sensor ignores anything that is not a request
        self.requests[type(frame).__name__] += 1
        if self._take(SimFault.DISCONNECT):
            self.unplug(replug_after_s=self.reconnect_after_s)
            return
        reply = self._reply_to(frame)
        if self.reply_delay_s:
            time.sleep(self.reply_delay_s)  # the sensor's exposure and processing time
        self._send(link, reply)

    def _reply_to(self, frame: Hello | ReadNow | StatusRequest) -> Reply:
        if isinstance(frame, Hello):
            firmware = self.wrong_firmware if self._take(SimFault.WRONG_FIRMWARE) else self.firmware
            return Identity(frame.seq, self.model, firmware, self.serial_number)
        if isinstance(frame, StatusRequest):
            with self._lock:
                faults = frozenset(_HARDWARE[f] for f in _HARDWARE if self._faults[f] > 0)
            return Status(frame.seq, faults)
        hardware = frozenset(_HARDWARE[f] for f in _HARDWARE if self._take(f))
        if hardware:
            return FaultReport(frame.seq, hardware)
        return self._reading(frame.seq)

    def _reading(self, seq: int) -> Reading:
        with self._lock:
            dice = self._dice
            self._images += 1
            image = f"seed {self._seed} roll {self._rolls} image {self._images} {dice}"
            misread = self._misread
        objects = [DieField(d.colour, d.face, True, True, d.position, d.confidence) for d in dice]
        if misread and objects and objects[0].face is not None:
            objects[0] = replace(objects[0], face=objects[0].face % 6 + 1)
        if self._take(SimFault.TILTED_DIE):
            objects[0] = replace(objects[0], is_flat=False)
        if self._take(SimFault.DIE_OUT):
            objects[1] = replace(objects[1], is_inside=False, position=None)
        if self._take(SimFault.WRONG_COLOURS):
            objects[2] = replace(objects[2], colour=DieColour.RED)
        if self._take(SimFault.LOW_CONFIDENCE):
            objects[1] = replace(objects[1], confidence=42)
        if self._take(SimFault.UNREADABLE_DIE):
            objects[2] = replace(objects[2], face=None, confidence=0)
        if self._take(SimFault.EXTRA_OBJECT):
            objects.append(DieField(DieColour.OTHER, None, True, True, (TRAY_MM // 2, 8), 88))
        if self._take(SimFault.MISSING_DIE):
            del objects[-1]
        digest = hashlib.sha256(image.encode("ascii")).hexdigest()
        return Reading(seq, digest, tuple(objects))

    def _send(self, link: _Link, reply: Reply) -> None:
        data = encode(reply)
        if self._take(SimFault.NO_REPLY):
            return
        if self._take(SimFault.GARBLED_BYTES):
            noise = bytes(self._random.randrange(256) for _ in range(self._random.randint(3, 12)))
            broken = bytearray(data)
            where = self._random.randrange(1, len(broken) - 7)  # inside the CRC-covered body
            broken[where] ^= self._random.randrange(1, 256)
            self._write(link, noise.replace(b"$", b"#") + bytes(broken))
            return
        if self._take(SimFault.BAD_CHECKSUM):
            body = encode_body(reply)
            good = seal(body)
            crc = int(good[-6:-2], 16) ^ 0x0100
            self._write(link, b"$" + body + b"*" + f"{crc:04X}".encode("ascii") + b"\r\n")
            return
        if self._take(SimFault.TRUNCATED_FRAME):
            self._write(link, data[: len(data) // 2])
            return
        if self._take(SimFault.LATE_REPLY):
            with self._lock:
                if len(self._late) < _MAX_LATE:
                    self._late.append((time.monotonic() + self.late_by_s, data))
            return
        self._write(link, data)
        if self._take(SimFault.DUPLICATED_FRAME):
            self._write(link, data)
        self._send_held(link)

    def _send_held(self, link: _Link) -> None:
        """The late replies held so far go out after this reply, whatever their time: a late
        reply comes after the retry's answer however long the driver took to retry."""
        with self._lock:
            held, self._late = [data for _, data in self._late], []
        for data in held:
            self._write(link, data)
