"""The pure core: every decision the table makes, and nothing else.

Owns the round state machine (``state``: one transition table, the three modes of 621a.6(a)),
the dice and no-roll rules (``dice``), the starting position and the bank rules (``position``),
the side wagers and paytables (``wagers``), a round's result (``result``), the record kinds and
what records say (``records``, ``record_data``), the context snapshot (``snapshot``), the dice
sensor's frame codec (``sensor_protocol``), the HMAC_DRBG and its replay (``drbg``,
``rng_replay``), canonical JSON (``canonical``), RFC 6962 Merkle hashing (``merkle``), C2SP
signed notes and checkpoints (``note``), config validation (``config``: text to a Config; the
file is read outside) and numbers from outside (``digits``).

May import: the standard library's pure parts, ``cryptography`` (for Ed25519), and
``controller.errors``. Never gpiozero, serial, sqlite3, socket, threading, time, os, random or
file I/O: time and randomness arrive as data. ``tests/core/test_purity.py`` walks every module here
and enforces it.
"""
