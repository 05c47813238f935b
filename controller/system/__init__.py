"""What a program systemd runs needs of it, shared by the table's controller (controller/app) and
the witness (controller/witness): telling systemd it is ready, alive or stopping
(``sdnotify``: sd_notify(3)), and logging to stderr with the syslog priorities journald keeps
(``logs``).

May import: ``controller.core`` and the standard library.
"""
