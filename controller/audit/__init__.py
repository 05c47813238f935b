"""The audit log: storing it, anchoring it, verifying it and reading it back.

Owns the SQLite log with its signing key (``log``), the anchor kept outside the database
(``anchor``), the verifier an auditor runs (``verify``, ``checks``, ``parallel``), game recall
and export (``recall``), the counts read back from the records (``dice_stats``,
``meters``), and how those readers go past a damaged record (``damage``). What a record says
and how it is encoded is the core's (``controller.core``).

May import: ``controller.core``, ``controller.ports``, ``controller.files``,
``controller.errors``, sqlite3 and the standard library. Never a driver or the display.
"""
