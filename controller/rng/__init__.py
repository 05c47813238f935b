"""The computerized RNG's sessions (621a.6(a)(1)): commit, draw, reveal, and end at a restart.

Owns the session manager and the control loop's port over it (``session``), the seed's escrow
on the box's side (``escrow``: each session's ephemeral key, the auditor's key file) and the
records the sessions add to the log. The seed material is kept in memory only. The DRBG, the
escrow's construction and the replay a verifier runs are pure and live in ``controller.core``
(``drbg``, ``rng_escrow``, ``rng_replay``, ``rng_audit``).

May import: ``controller.core``, ``controller.ports``, ``controller.files``,
``controller.errors``, ``cryptography`` and the standard library.
"""
