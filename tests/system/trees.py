"""The source trees the system test installs: this checkout's product files, as they are or
as another version (a new release to upgrade to)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
# What a release is built from, plus the installer's own files (hw/, systemd/).
SOURCE_PARTS = (
    "controller",
    "drivers",
    "requirements",
    "pyproject.toml",
    "README.md",
    "docs",
    "hw",
    "systemd",
)


def source_tree(dest: Path, *, local_version: str | None = None) -> Path:
    """A copy of this checkout's product files; ``local_version`` gives it another version
    (PEP 440 local label), so that an install of it is a new release."""
    dest.mkdir(parents=True)
    for part in SOURCE_PARTS:
        source = CHECKOUT / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest / part)
    if local_version is not None:
        project = dest / "pyproject.toml"
        text, count = re.subn(
            r'(?m)^version = "([^"+]+)"$', rf'version = "\1+{local_version}"', project.read_text()
        )
        assert count == 1, "pyproject.toml: no version line"
        project.write_text(text)
    return dest
