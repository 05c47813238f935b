"""The computerized RNG's sessions (621a.6(a)(1)): commit, draw, reveal, and take up again.

Owns the session manager and the control loop's port over it (``session``): the seed files in
the state directory and the records the sessions add to the log. The DRBG itself and the
replay a verifier runs are pure and live in ``controller.core`` (``drbg``, ``rng_replay``).

May import: ``controller.core``, ``controller.ports``, ``controller.files``,
``controller.errors`` and the standard library.
"""
