"""The audit log's identity: its signing key (``audit-log.key`` or a systemd credential) and
its origin (``[fleet] origin``, else ``paigow-controller/<table>``).

A key is created only for a new log and never replaces one; a key file must be readable by its
owner only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from controller.audit.reader import peek_identity
from controller.audit.store import DB_NAME, storage_error
from controller.core.note import Signer
from controller.errors import ConfigError, LogIdentityError, NoteError
from controller.files import write_new

if TYPE_CHECKING:
    from controller.core.config import Config

KEY_FILE = "audit-log.key"  # also the name of the systemd credential (LoadCredential=)
MAX_KEY_FILE_BYTES = 4096


def origin_for(table: str) -> str:
    """The origin (C2SP tlog-checkpoint) and key name a table's new log gets when ``[fleet]
    origin`` is not set: one per table name (a casino's names are not unique across casinos;
    ``[fleet] origin`` is)."""
    return f"paigow-controller/{table}"


DEFAULT_ORIGIN = origin_for("table-1")


def configured_origin(config: Config) -> str:
    """The origin a new log of this configuration gets, and the one its log must have when
    ``[fleet] origin`` is set (:func:`require_origin`)."""
    return config.fleet.origin or origin_for(config.table.name)


def require_origin(state_dir: Path, config: Config) -> None:
    """With ``[fleet] origin`` set, the log in ``state_dir`` (if it holds one) must be of that
    origin: a log is never renamed (its checkpoints and every copy of its key name it), so the
    configuration is what is wrong. :class:`ConfigError` naming ``fleet.origin`` otherwise.
    Unset, the log is opened as before (a log of another origin is then a LogIdentityError)."""
    wanted = config.fleet.origin
    if not wanted:
        return
    recorded = peek_identity(Path(state_dir) / DB_NAME)
    if recorded is not None and recorded[0] != wanted:
        raise ConfigError(
            "fleet.origin",
            f"the log's origin is {recorded[0]!r}, not {wanted!r}: a log keeps the origin it"
            " was made with (set [fleet] origin to it, or make a new state directory)",
        )


def load_signer(state_dir: Path) -> Signer | None:
    """The log's signing key: from systemd's credentials directory when it provides one, else
    ``audit-log.key`` in the state directory; None when there is none. Never creates one."""
    credentials = os.environ.get("CREDENTIALS_DIRECTORY")
    if credentials:
        provided = Path(credentials) / KEY_FILE
        if provided.exists():
            return _read_signer(provided, check_mode=False)
    path = Path(state_dir) / KEY_FILE
    if path.exists():
        return _read_signer(path, check_mode=True)
    return None


def create_signer(state_dir: Path, origin: str) -> Signer:
    """A new signing key in ``audit-log.key`` (mode 0600), for a new log only. Refuses to
    replace a key that exists."""
    state_dir = Path(state_dir)
    signer = Signer.generate(origin)
    path = state_dir / KEY_FILE
    try:
        write_new(path, f"{signer}\n".encode(), 0o600, replace=False)  # never replaces a key
    except FileExistsError:
        raise LogIdentityError(f"audit log: {path} exists: a key is never replaced") from None
    except OSError as exc:
        raise storage_error(exc, f"cannot create the signing key {path}") from exc
    return signer


def _read_signer(path: Path, *, check_mode: bool) -> Signer:
    try:
        if check_mode and stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise LogIdentityError(f"audit log: {path} must be readable by its owner only (0600)")
        with path.open("rb") as file:
            raw = file.read(MAX_KEY_FILE_BYTES + 1)
        if len(raw) > MAX_KEY_FILE_BYTES:
            raise LogIdentityError(f"audit log: {path} is too large to be a signing key")
        return Signer.parse(raw.decode("ascii"))
    except (OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, LogIdentityError):
            raise
        raise LogIdentityError(f"audit log: cannot read the signing key {path}: {exc}") from exc
    except NoteError as exc:
        raise LogIdentityError(f"audit log: {path} is not a signing key: {exc}") from exc
