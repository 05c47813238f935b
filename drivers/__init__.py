"""Hardware adapters: the shaker and panel through gpiozero, the dice sensor through pyserial.

Lock order
----------
A thread that holds one of these locks takes only locks further down the list, never one
further up, so no two threads can each hold what the other waits for:

1. an input's lock (``DebouncedInput._lock``, one per lid, tamper loop and key), held while
   that input's ``on_change`` or ``on_error`` runs: those handlers may take 2 to 4 and may trip
   the fault latch.
2. the shaker's state lock (``GpioShaker._lock``).
3. the shaker's watchdog lock (``GpioShaker._watch``), around the guarded shake's deadline.
4. the leaf locks of the outputs: ``GpioShaker._motor_lock`` (every write of the motor pin,
   with the shake's flags, the safe epoch, the motion window and the motion count) and
   ``GpioPanel._lock`` (every write of the lamps). Under a leaf lock nothing is called but the
   pin write (and, for the motor lock, the pin factory's ``ticks_diff`` arithmetic), and nothing
   waits. The motion sensor's edge callback takes the motor lock alone, on whichever thread
   delivers the edge (gpiozero's callback thread on a Pi, the driving thread with mock pins);
   the shake's pattern thread waits for late edges holding no lock. (The simulated shaker
   answers a motor write with its stroke's motion pulse on the same thread: the motor lock is
   re-entrant for that.)

The fault latch's lock (``FaultLatch._lock``) stands outside this order: the latch holds it for
its own bookkeeping only, never while it calls a handler or anything else (it marks itself
tripped under the lock, then calls each handler, guarded, outside it). Drivers read the latch
(``is_tripped``, ``reason``) without its lock, and call ``trip``, ``register`` and
``unregister`` only while holding none of their own locks but an input's (1): a tamper loop
that breaks trips the latch from its handler. A latch handler (``drive_safe``) takes only its
driver's leaf lock. ``close`` waits for a driver's threads while holding none of its locks.

Signal handlers: the appliance trips the latch from its SIGTERM handler, which Python runs on
the main thread between any two bytecodes, possibly inside one of these locked sections. The
locks a latch handler takes are therefore re-entrant (``RLock``), each locked section leaves
its flags whole at every step, and the code that a handler may interrupt re-checks, before its
next pin write, whether it was driven safe meanwhile (the shake's ``ended`` flag and the safe
epochs). No handler sets a ``threading.Event`` (whose own lock a signal handler could find taken
by its own thread): the latch and the shake use :class:`drivers.safety.SignalSafeFlag`. The latch
never waits for another thread from the main thread (see :mod:`drivers.safety`).
"""
