"""No secret on the command line: every user's ``ps`` (and /proc/PID/cmdline) shows it, and so
do a unit's ExecStart= (``systemctl cat``, ``systemctl show``) and a shell's history. A secret
comes from a file only its owner may read, or from the environment (/proc/PID/environ is the
process's user's and root's only)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import build_parser, main
from controller.cli.args import path_argument
from controller.errors import ControllerError

SECRET_WORDS = ("password", "passwd", "secret", "token", "passphrase", "credential", "key", "pin")


def test_every_option_that_names_a_secret_takes_a_file() -> None:
    """Every option of every command whose name speaks of a key, a password, a token or a
    credential takes the name of a file (a path), never the secret itself."""
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, sub in commands.choices.items():
        for action in sub._actions:
            option = " ".join(action.option_strings)
            words = option.lstrip("-").replace("-", " ").split()
            public = "public" in words  # a verifier key is no secret
            public |= words[:2] == ["supervisor", "key"]  # simulate's key switch: on or off
            if action.nargs != 0 and not public and any(w.startswith(SECRET_WORDS) for w in words):
                found.append(f"{name} {option}")
                assert action.type is path_argument, f"{name} {option} takes a secret itself"
    assert "witness --credentials-file" in found  # the check sees what it should
    assert "rng-reveal --escrow-key" in found


@pytest.fixture
def store_url(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The store URL ``witness --reset-table`` opens (the store itself is not opened)."""
    opened: list[str | None] = []

    def open_store(state_dir: Path, db: str | None) -> Any:
        opened.append(db)
        raise ControllerError("not opened in this test")

    monkeypatch.setattr("controller.witness.store.open_store", open_store)
    monkeypatch.delenv("PAIGOW_WITNESS_DB", raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    return opened


def reset(capsys: pytest.CaptureFixture[str], state: Path, *argv: str) -> tuple[int, str]:
    state.mkdir(exist_ok=True)
    code = main(["witness", "--state-dir", str(state), "--reset-table", "t", *argv])
    out, err = capsys.readouterr()
    assert out == ""
    return code, err


SECRET_URL = "postgresql://witness:s3cret@db.casino/witness"


@pytest.mark.parametrize(
    "url",
    [
        SECRET_URL,
        "postgresql://witness:@db.casino/witness",
        "postgres://witness:pa/ss@db.casino/witness",
        "postgresql://db.casino/witness?sslmode=require&password=s3cret",
        "postgresql://db.casino?password=s3cret",
        "postgresql://db.casino/witness?%70assword=s3cret",
        "postgresql://db.casino/witness?sslpassword=s3cret",
    ],
)
def test_a_password_in_db_is_refused(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: list[str | None]
) -> None:
    code, err = reset(capsys, tmp_path / "w", "--db", url)
    assert (code, err.count("\n"), store_url) == (2, 1, [])
    assert "--db-file" in err
    assert "PAIGOW_WITNESS_DB" in err
    assert "s3cret" not in err


def test_a_db_without_a_password_is_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: list[str | None]
) -> None:
    for url in (
        "postgresql://witness@db.casino/witness",
        "postgresql://postgres@/postgres?host=/run/postgresql&port=5432",
        "postgresql://db.casino:5432/witness?application_name=a@b",
    ):
        reset(capsys, tmp_path / "w", "--db", url)
    assert store_url == [
        "postgresql://witness@db.casino/witness",
        "postgresql://postgres@/postgres?host=/run/postgresql&port=5432",
        "postgresql://db.casino:5432/witness?application_name=a@b",
    ]


def test_the_url_from_a_file_only_its_owner_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: list[str | None]
) -> None:
    secret = tmp_path / "db.url"
    secret.write_text(f"{SECRET_URL}\n")
    for mode in (0o600, 0o400):
        secret.chmod(mode)
        code, err = reset(capsys, tmp_path / "w", "--db-file", str(secret))
        assert (code, "not opened" in err) == (1, True)
    assert store_url == [SECRET_URL, SECRET_URL]
    for mode in (0o640, 0o604, 0o644, 0o660):
        secret.chmod(mode)
        code, err = reset(capsys, tmp_path / "w", "--db-file", str(secret))
        assert (code, err.count("\n")) == (78, 1)
        assert f"{secret} is readable by group or others" in err
        assert "s3cret" not in err
    secret.chmod(0o600)
    for bad, why in (
        ("", "one line"),
        (f"{SECRET_URL}\n{SECRET_URL}\n", "one line"),
        ("mysql://x\n", "postgresql://"),
        ("x" * 5000, "larger than"),
    ):
        secret.write_text(bad)
        code, err = reset(capsys, tmp_path / "w", "--db-file", str(secret))
        assert (code, err.count("\n"), why in err) == (78, 1, True), err
    code, err = reset(capsys, tmp_path / "w", "--db-file", str(tmp_path / "missing"))
    assert (code, "cannot be read" in err) == (78, True)
    assert len(store_url) == 2
    code, err = reset(capsys, tmp_path / "w", "--db-file", str(secret), "--db", "postgresql://h/d")
    assert (code, err.count("\n")) == (2, 1)


def test_a_systemd_credential_is_taken_as_systemd_made_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    store_url: list[str | None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LoadCredential= gives the service's user read access by an ACL, whose mask stat shows
    as the group's bits (0440): in $CREDENTIALS_DIRECTORY that is the service's file alone."""
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    secret = credentials / "db.url"
    secret.write_text(f"{SECRET_URL}\n")
    secret.chmod(0o440)
    code, err = reset(capsys, tmp_path / "w", "--db-file", str(secret))
    assert (code, "readable by group" in err) == (78, True)  # not a credential: the group's
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    code, _ = reset(capsys, tmp_path / "w", "--db-file", str(secret))
    assert (code, store_url) == (1, [SECRET_URL])
    secret.chmod(0o444)  # others, never
    code, _ = reset(capsys, tmp_path / "w", "--db-file", str(secret))
    assert code == 78


def test_the_url_from_the_environment(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    store_url: list[str | None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAIGOW_WITNESS_DB", SECRET_URL)
    code, _ = reset(capsys, tmp_path / "w")
    assert (code, store_url) == (1, [SECRET_URL])
    code, _ = reset(capsys, tmp_path / "w", "--db", "postgresql://other@h/d")  # the option wins
    assert store_url[-1] == "postgresql://other@h/d"
    monkeypatch.setenv("PAIGOW_WITNESS_DB", "mysql://x")
    code, err = reset(capsys, tmp_path / "w")
    assert (code, err.count("\n"), "PAIGOW_WITNESS_DB" in err) == (78, 1, True)
    monkeypatch.setenv("PAIGOW_WITNESS_DB", "")
    reset(capsys, tmp_path / "w")
    assert store_url[-1] is None  # empty: SQLite


def test_the_help_says_where_a_password_goes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["witness", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--db-file" in text
    assert "PAIGOW_WITNESS_DB" in text
    assert json.dumps(text)  # printable
