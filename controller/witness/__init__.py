"""The witness (issue 18): it keeps every table's records as they come over MQTT, verifies the
chain, the Merkle tree and every signature, checks that each checkpoint extends the last one
it accepted, and cosigns it (C2SP tlog-cosignature); a rollback, a fork, a gap, a bad
signature or a silent table is an alert. ``ports.py`` holds its seams, ``tables.py`` the
per-table verification, ``store.py`` the storage (SQLite or PostgreSQL), ``keys.py`` the
keys, ``service.py`` the MQTT side; ``floor.py`` what the floor's dashboard shows of every table,
``dashboard.py`` its page; ``command.py`` its arguments and ``main.py`` its entry point
(``paigow-witness``, ``python -m controller.witness``; ``paigow-controller witness`` runs it too).

May import: ``controller.core``, ``controller.fleet``, ``controller.audit`` (the log's format and
its checks), ``controller.web`` (the dashboard's server), ``controller.system`` (systemd and
logging), ``controller.cli.args`` (the command line's parser and checks), ``controller.files``,
``controller.errors`` and the standard library; nothing of ``controller.app`` or
``controller.display``.
"""
