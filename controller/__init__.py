"""The Pai Gow table controller: the decisions (pure) and the daemon that carries them out."""

import os as _os
import sys as _sys

# An installed release (its signed manifest beside this file) runs on the bytecode the
# installer compiled and the manifest names: a command run by root on the box must not write
# caches of its own over them (the unit's PYTHONDONTWRITEBYTECODE=1 says so for the service).
# A checkout has no manifest here and keeps writing its caches.
if _os.path.exists(_os.path.join(_os.path.dirname(__file__), "MANIFEST.json")):
    _sys.dont_write_bytecode = True
