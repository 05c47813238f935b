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

from controller.core.state import Screen

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hw" / "kiosk" / "setup-kiosk.sh"
UNIT = "etc/systemd/system/paigow-kiosk.service"
PAGE = "opt/paigow-kiosk/offline.html"
FONTS = "opt/paigow-kiosk/offline-fonts.css"
SESSION = "opt/paigow-kiosk/kiosk-session"
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
    assert exec_start.split() == ["/usr/bin/cage", "--", "/" + SESSION]
    session = (root / SESSION).read_text()
    assert session == (ROOT / "hw/kiosk/kiosk-session").read_text()
    for flag in CHROMIUM_FLAGS:
        assert f" {flag} " in session.replace("\n", " "), flag
    assert '"file://$page_dir/offline.html?target=$url"' in session
    assert stat.S_IMODE((root / SESSION).stat().st_mode) == 0o755
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
    assert (root / FONTS).read_text() == (ROOT / "hw/kiosk/offline-fonts.css").read_text()
    for path in (UNIT, PAGE, FONTS, "etc/default/paigow-kiosk"):
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


def test_the_boot_is_quiet_and_its_console_off_the_screen_set_once(tmp_path: Path) -> None:
    """No boot text on the table display: the kernel's console on tty3, not tty1 (the kiosk's),
    a quiet kernel and systemd, no text cursor, no console blanking, no rainbow splash."""
    root = tmp_path / "root"
    cmdline = root / "boot/firmware/cmdline.txt"
    cmdline.parent.mkdir(parents=True)
    cmdline.write_text("console=serial0,115200 console=tty1 root=PARTUUID=1234-02 rootwait\n")
    boot_config = root / "boot/firmware/config.txt"
    boot_config.write_text("dtparam=audio=on\n")
    for _ in range(2):  # a second run leaves them as the first made them
        proc, _calls = run_setup(root)
        assert proc.returncode == 0, proc.stderr
        assert cmdline.read_text() == (
            "console=serial0,115200 console=tty3 root=PARTUUID=1234-02 rootwait consoleblank=0"
            " quiet loglevel=3 logo.nologo vt.global_cursor_default=0 systemd.show_status=false"
            " rd.udev.log_level=3 udev.log_level=3\n"
        )
        assert boot_config.read_text().count("disable_splash=1\n") == 1
        assert boot_config.read_text().startswith("dtparam=audio=on\n")


def run_session(tmp_path: Path, config: str | None) -> tuple[subprocess.CompletedProcess[str], str]:
    """kiosk-session with a wlr-randr that lists one output and writes down how it was asked to
    turn it, and a chromium that writes down its arguments."""
    fakes = tmp_path / "fakes"
    fakes.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    calls.write_text("")
    (fakes / "wlr-randr").write_text(
        "#!/bin/sh\n"
        f"if [ $# = 0 ]; then printf 'HDMI-A-1 \"Dell\"\\n  Enabled: yes\\n'; exit 0; fi\n"
        f'echo "wlr-randr $*" >> "{calls}"\n'
    )
    (fakes / "chromium").write_text(f'#!/bin/sh\necho "chromium $*" >> "{calls}"\n')
    for fake in fakes.iterdir():
        fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "KIOSK_CHROMIUM": str(fakes / "chromium"),
        "KIOSK_URL": "http://127.0.0.1:8080/",
        "KIOSK_CONFIG": str(tmp_path / "config.toml"),
    }
    if config is not None:
        (tmp_path / "config.toml").write_text(config)
    proc = subprocess.run(
        ["bash", str(ROOT / "hw/kiosk/kiosk-session")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc, calls.read_text()


@pytest.mark.parametrize(
    ("config", "transform"),
    [
        ("[display]\nrotation = 90\n", "90"),
        ("[display]\nrotation = 270\n", "270"),
        ("[display]\nrotation = 180\n", "180"),
        ("[display]\nrotation = 0\n", "normal"),
        ("[display]\nlanguages = ['en']\n", "normal"),
        (None, "normal"),  # no configuration readable: as it is
    ],
)
def test_the_session_turns_the_screen_as_the_configuration_says(
    tmp_path: Path, config: str | None, transform: str
) -> None:
    proc, calls = run_session(tmp_path, config)
    assert proc.returncode == 0, proc.stderr
    lines = calls.splitlines()
    assert lines[0] == f"wlr-randr --output HDMI-A-1 --transform {transform}"
    assert lines[1].startswith("chromium --kiosk ")
    assert lines[1].endswith(" file:///opt/paigow-kiosk/offline.html?target=http://127.0.0.1:8080/")
    assert len(lines) == 2


@pytest.mark.parametrize("value", ["45", '"90"', "true", "90.0"])
def test_a_rotation_the_controller_refuses_leaves_the_screen_as_it_is(
    tmp_path: Path, value: str
) -> None:
    proc, calls = run_session(tmp_path, f"[display]\nrotation = {value}\n")
    assert proc.returncode == 0, proc.stderr
    assert calls.splitlines()[0] == "wlr-randr --output HDMI-A-1 --transform normal"
    assert "display.rotation must be 0, 90, 180 or 270" in proc.stderr


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
KIOSK_WAIT_MS = 60_000  # a bound on liveness (the page asks every 2 s), not a measure of speed
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
        "() => window.kioskAttempts >= 2", timeout=KIOSK_WAIT_MS
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
        page.wait_for_url(target, timeout=KIOSK_WAIT_MS)
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
    page.wait_for_function("() => window.kioskAttempts >= 1", timeout=KIOSK_WAIT_MS)
    assert page.evaluate("() => window.kioskTarget") == "http://127.0.0.1:8080/"


# --- the table page in the kiosk: its own waiting page, never the browser's error page ---------


@pytest.mark.browser
def test_a_reload_while_the_controller_is_down_shows_the_waiting_page_then_the_table(
    browser: Any, tmp_path: Path
) -> None:
    """The kiosk's service worker (kiosk-sw.js): the table page loaded again while nothing
    answers (a reload, the browser restarted on it) is the kiosk's waiting page at the same
    address, not chrome-error://; once the controller answers, the table page again."""
    from support.browser import WAIT_MS, wait_current
    from support.display_table import Table, start_display

    port = free_port()
    table = Table(tmp_path / "state")
    table.display = start_display(table.log, http_port=port)
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        url = table.display.url
        page.goto(url)
        table.open_round()
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        page.wait_for_function("() => navigator.serviceWorker.controller !== null", timeout=WAIT_MS)
        table.display.close()  # the controller stops
        for _ in range(2):  # a reload, and a second one from the waiting page itself
            page.reload(wait_until="load")
            assert page.url == url  # not chrome-error://chromewebdata/
            page.wait_for_selector("#waiting", timeout=WAIT_MS)
            assert page.is_visible("text=OFFLINE — table controller not running")
            assert page.is_visible("text=離線 — 牌桌控制器未運行")
        page.wait_for_function("() => window.kioskAttempts >= 2", timeout=WAIT_MS)  # no answer
        assert page.evaluate("() => getComputedStyle(document.body).cursor") == "none"
        fonts = page.evaluate(
            "() => document.fonts.ready.then(() => [...document.fonts]"
            ".filter((f) => f.status === 'loaded').map((f) => f.family))"
        )
        assert '"Table Sans CJK TC"' in fonts or "Table Sans CJK TC" in fonts  # from the cache
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "waiting-1280x720.png"))

        table.display = start_display(table.log, http_port=port)  # the controller is back
        table.show(Screen.READY, round=1)
        page.wait_for_selector("#waiting", state="detached", timeout=WAIT_MS)
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        assert page.url == url
    finally:
        context.close()
        table.close()
    assert errors == []


@pytest.mark.browser
def test_the_table_page_takes_no_cursor_selection_or_long_press_menu(
    browser: Any, tmp_path: Path
) -> None:
    from support.browser import WAIT_MS, wait_current
    from support.display_table import Table, start_display

    table = Table(tmp_path / "state")
    table.display = start_display(table.log)
    context = browser.new_context(viewport={"width": 800, "height": 480}, has_touch=True)
    try:
        page = context.new_page()
        page.goto(table.display.url)
        table.open_round()
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        style = page.evaluate(
            """() => { const s = getComputedStyle(document.getElementById('headline'));
              return [s.cursor, s.userSelect]; }"""
        )
        assert style == ["none", "none"]
        # iOS's long-press callout: Chromium has no such property, the CSS says it for others
        kiosk_css = (ROOT / "controller/display/assets/display.css").read_text().split("kiosk")[-1]
        assert "-webkit-touch-callout: none" in kiosk_css
        page.evaluate("() => document.execCommand('selectAll')")
        assert page.evaluate("() => String(window.getSelection())").strip() == ""
        prevented = page.evaluate(
            """() => { const e = new MouseEvent('contextmenu', {bubbles: true, cancelable: true});
              document.getElementById('headline').dispatchEvent(e); return e.defaultPrevented; }"""
        )
        assert prevented is True
        # the supervisor's view keeps its cursor (it may be a desk's screen with a mouse)
        sup = context.new_page()
        sup.goto(table.display.url + "supervisor")
        assert sup.evaluate("() => getComputedStyle(document.body).cursor") == "auto"
    finally:
        context.close()
        table.close()


@pytest.mark.browser
def test_the_offline_page_is_drawn_in_its_own_font(chromium_page: Any) -> None:
    """No font of the machine's (the browser sees DejaVu only): offline-fonts.css's inline
    faces draw every text of the OFFLINE page, English and Chinese."""
    page = chromium_page
    page.goto((ROOT / "hw/kiosk/offline.html").as_uri() + "?target=http://127.0.0.1:9/")
    page.wait_for_function("() => window.kioskAttempts >= 1", timeout=KIOSK_WAIT_MS)
    page.evaluate("() => document.fonts.ready.then(() => null)")
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    drawn = 0
    for selector in (".offline span", "p.why", "p.target span"):
        for node_id in cdp.send(
            "DOM.querySelectorAll",
            {"nodeId": cdp.send("DOM.getDocument")["root"]["nodeId"], "selector": selector},
        )["nodeIds"]:
            for font in cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]:
                assert font["isCustomFont"], (selector, font)
                assert font["familyName"] == "Noto Sans CJK TC", (selector, font)
                drawn += 1
    assert drawn >= 6
