"""The appliance: the one control thread, and the composition roots that wire it up.

Owns the control loop (``loop``: events in, the core's actions out, a step a transaction), the
appliance (``appliance``: the real drivers, the log, the RNG and the display put together), the
simulation on simulated hardware (``simulate``), the technician's self-test (``selftest``),
small adapters between the loop and the drivers (``adapters``), the config file
(``config_file``) and the state directory's lock (``instance_lock``); systemd notifications
and logging are controller/system's, which the witness shares.

May import anything: this is where ``drivers`` are imported (``appliance``, ``simulate`` and
``selftest`` only). Nothing else in ``controller`` imports from here, except the command line,
which imports a module of it only when its command runs.
"""
