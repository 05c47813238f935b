"""The table display's kiosk (issue 16): hw/kiosk/setup-kiosk.sh run into a DESTDIR (no root,
no user made, no systemctl), its unit checked by systemd-analyze, and its OFFLINE page in
Debian's chromium: OFFLINE while nothing answers, the table page once the controller does."""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "hw" / "kiosk" / "setup-kiosk.sh"
UNIT = "etc/systemd/system/paigow-kiosk.service"
PAGE = "opt/paigow-kiosk/offline.html"
CHROMIUM_FLAGS = (
    "--kiosk",
    "--noerrdialogs",
    "--disable-session-crashed-bubble",
    "--disable-infobars",
    "--check-for-update-interval=31536000",
    "--no-first-run",
    "--incognito",
)


def run_setup(
    destdir: Path, *, url: str | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The script with DESTDIR, and a PATH whose useradd, usermod, systemctl and apt-get only
    write down that they were called (none may be)."""
    fakes = destdir.parent / f"{destdir.name}-fakes"
    fakes.mkdir(exist_ok=True)
    calls = fakes / "calls"
    calls.unlink(missing_ok=True)
    for name in ("useradd", "usermod", "systemctl", "apt-get"):
        fake = fakes / name
        fake.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\n')
        fake.chmod(0o755)
    env = {**os.environ, "DESTDIR": str(destdir), "PATH": f"{fakes}:{os.environ['PATH']}"}
    env.pop("KIOSK_URL", None)
    if url is not None:
        env["KIOSK_URL"] = url
    proc = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return proc, calls


def unit_settings(text: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def test_the_script_writes_the_unit_the_page_and_the_url_under_destdir(tmp_path: Path) -> None:
    root = tmp_path / "root"
    proc, calls = run_setup(root)
    assert proc.returncode == 0, proc.stderr
    assert not calls.exists(), calls.read_text()  # no user, no package, no systemctl

    unit = unit_settings((root / UNIT).read_text())
    (exec_start,) = unit["ExecStart"]
    words = exec_start.split()
    assert words[:3] == ["/usr/bin/cage", "--", "/usr/bin/chromium"]
    for flag in CHROMIUM_FLAGS:
        assert flag in words, flag
    assert words[-1] == "file:///opt/paigow-kiosk/offline.html?target=${KIOSK_URL}"
    assert unit["Restart"] == ["always"]
    assert unit["User"] == ["kiosk"]
    assert any("paigow-controller.service" in after.split() for after in unit["After"])
    assert unit["EnvironmentFile"] == ["-/etc/default/paigow-kiosk"]
    assert unit["TTYPath"] == ["/dev/tty1"]
    assert unit["PAMName"] == ["paigow-kiosk"]
    assert (root / "etc/pam.d/paigow-kiosk").read_text().count("pam_systemd.so") == 1

    defaults = (root / "etc/default/paigow-kiosk").read_text()
    assert "KIOSK_URL=http://127.0.0.1:8080/\n" in defaults
    page = (root / PAGE).read_text()
    assert page == (ROOT / "hw/kiosk/offline.html").read_text()
    assert "OFFLINE — table controller not running" in page
    assert "離線" in page
    for path in (UNIT, PAGE, "etc/default/paigow-kiosk"):
        mode = stat.S_IMODE((root / path).stat().st_mode)
        assert mode == 0o644, (path, oct(mode))


def test_the_url_is_configurable_and_checked(tmp_path: Path) -> None:
    root = tmp_path / "root"
    proc, _ = run_setup(root, url="http://[::1]:8090/")
    assert proc.returncode == 0, proc.stderr
    assert "KIOSK_URL=http://[::1]:8090/\n" in (root / "etc/default/paigow-kiosk").read_text()
    for n, bad in enumerate(["javascript:alert(1)", "http://a b/", "http://x/$HOME", "file:///"]):
        proc, _ = run_setup(tmp_path / f"bad{n}", url=bad)
        assert proc.returncode == 2, bad
        assert proc.stderr.count("\n") == 1
        assert "KIOSK_URL" in proc.stderr
        assert not (tmp_path / f"bad{n}" / UNIT).exists()


def test_consoleblank_is_added_to_the_kernel_command_line_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    cmdline = root / "boot/firmware/cmdline.txt"
    cmdline.parent.mkdir(parents=True)
    cmdline.write_text("console=tty1 root=PARTUUID=1234-02 rootwait\n")
    for _ in range(2):  # a second run leaves it as the first made it
        proc, _calls = run_setup(root)
        assert proc.returncode == 0, proc.stderr
        assert cmdline.read_text() == (
            "console=tty1 root=PARTUUID=1234-02 rootwait consoleblank=0\n"
        )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    """As scripts/check-systemd-unit does for the controller's unit: verify checks that the
    executable exists, so the copy points at one that does here (cage is the Pi's)."""
    root = tmp_path / "root"
    assert run_setup(root)[0].returncode == 0
    text = (root / UNIT).read_text()
    assert "/usr/bin/cage " in text
    copy = tmp_path / "paigow-kiosk.service"
    copy.write_text(text.replace("/usr/bin/cage ", f"{shutil.which('true')} "))
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout + proc.stderr == ""  # no warnings either


# --- the OFFLINE page in Debian's chromium ------------------------------------------------------

SHOTS = ROOT / "test-output" / "kiosk"  # git-ignored
TABLE_PAGE = b"<!DOCTYPE html><html><body><h1 id='table'>the table page</h1></body></html>"


class _TablePage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(TABLE_PAGE)))
        self.end_headers()
        self.wfile.write(TABLE_PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chromium_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 800, "height": 480})
    yield context.new_page()
    context.close()


@pytest.mark.browser
def test_the_offline_page_shows_offline_until_the_controller_answers_then_goes_there(
    chromium_page: Any,
) -> None:
    page = chromium_page
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    port = free_port()  # nothing listens on it yet
    target = f"http://127.0.0.1:{port}/"
    shell = (ROOT / "hw/kiosk/offline.html").as_uri() + f"?target={target}"
    page.goto(shell)
    page.wait_for_function(
        "() => window.kioskAttempts >= 2", timeout=15_000
    )  # asked twice: no answer
    assert page.url == shell
    assert page.is_visible("text=OFFLINE — table controller not running")
    assert page.is_visible("text=離線 — 牌桌控制器未運行")
    assert page.text_content("#target") == target
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "offline-800x480.png"))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _TablePage)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        page.wait_for_url(target, timeout=15_000)
        assert page.text_content("#table") == "the table page"
    finally:
        server.shutdown()
        server.server_close()
        serving.join(timeout=5)
    assert errors == []


@pytest.mark.browser
def test_the_offline_page_goes_only_to_http_targets(chromium_page: Any) -> None:
    page = chromium_page
    shell = (ROOT / "hw/kiosk/offline.html").as_uri() + "?target=javascript:alert(1)"
    page.goto(shell)
    page.wait_for_function("() => window.kioskAttempts >= 1", timeout=15_000)
    assert page.evaluate("() => window.kioskTarget") == "http://127.0.0.1:8080/"
