"""Small adapters the appliance puts between the control loop and the drivers.

``NoShaker`` stands where a manual-shaker or RNG table has no motor: it has nothing to start and
its safe state is already true. ``SensorKeeper`` owns the dice sensor's start-up: a sensor that
is absent or silent at power-on becomes a ``SENSOR_LOST`` fault, not a crash, and a background
thread keeps trying the handshake until the sensor answers (``SENSOR_BACK``).
"""

from __future__ import annotations

import logging
import threading

from controller.core.state import SensorBack, SensorLost
from controller.errors import SensorError, ShakerError
from controller.ports import DiceSensor, EventSink, SensorIdentity, monotonic_ms

log = logging.getLogger("paigow.sensor")


class NoShaker:
    """The shaker port of a table without a player-activated shaker."""

    def start_shake(self) -> None:
        raise ShakerError("this table has no player-activated shaker")

    def stop(self) -> None:
        return None

    def drive_safe(self) -> None:
        return None

    def close(self) -> None:
        return None


class SensorKeeper:
    """The ``DiceSensor`` port over the serial driver, with retried start-up."""

    def __init__(
        self,
        sensor: DiceSensor,
        events: EventSink,
        *,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 10.0,
    ) -> None:
        self.sensor = sensor
        self.events = events
        self.identity: SensorIdentity | None = None
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> SensorIdentity:
        """The handshake. The sensor's identity goes into the audit log (a ``sensor`` record
        through ``SENSOR_BACK``), so that every reading can be traced to the device."""
        self.identity = identity = self.sensor.open()
        detail = (
            f"{identity.model} {identity.serial_number} firmware {identity.firmware}"
            f" protocol {identity.protocol_version}"
        )
        log.info("dice sensor %s", detail)
        self.events.put(SensorBack(at=monotonic_ms(), detail=detail))
        return identity

    def open_or_keep_trying(self) -> bool:
        """The self-test handshake. On failure: ``SENSOR_LOST`` now, ``SENSOR_BACK`` later."""
        try:
            self.open()
        except SensorError as exc:
            log.error("dice sensor handshake failed: %s", exc)
            self.events.put(SensorLost(at=monotonic_ms(), detail=str(exc)))
            self._thread = threading.Thread(
                target=self._keep_trying, name="dice-sensor-start", daemon=True
            )
            self._thread.start()
            return False
        return True

    def _keep_trying(self) -> None:
        delay = self._retry_initial_s
        while not self._stopping.wait(delay):
            try:
                self.open()
            except SensorError as exc:
                log.debug("dice sensor still not answering: %s", exc)
                delay = min(delay * 2, self._retry_max_s)
                continue
            except Exception as exc:  # the thread reports, never dies silently
                log.exception("dice sensor start-up failed")
                self.events.put(SensorLost(at=monotonic_ms(), detail=str(exc)))
                delay = self._retry_max_s
                continue
            return

    def request_read(self, *, round_number: int, attempt: int) -> None:
        self.sensor.request_read(round_number=round_number, attempt=attempt)

    def close(self) -> None:
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self.sensor.close()
