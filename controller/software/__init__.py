"""Software identity: hashing the installed packages, the release key, and building and checking
the signed manifest (``controller/core/software.py`` holds the format and the comparison)."""
