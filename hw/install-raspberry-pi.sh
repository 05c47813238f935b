#!/usr/bin/env bash
# Install the Pai Gow table controller on Raspberry Pi OS (Debian bookworm), as root, from a
# checkout of this repository:   sudo hw/install-raspberry-pi.sh
#
# What it does: a system user `paigow` in the gpio and dialout groups; a virtualenv under
# /opt/paigow-controller/venv with the product installed; the systemd unit; the udev rule giving
# the dice sensor a stable name; the example config in /etc/paigow-controller/ (never
# overwriting one that is there); then it checks the config and enables the service. Then the
# table display's kiosk (hw/kiosk/setup-kiosk.sh: Chromium in cage on tty1, fonts-noto-cjk for
# the page's Traditional Chinese); PAIGOW_KIOSK=no leaves it out (a box without a screen).
set -euo pipefail

prefix=/opt/paigow-controller
etc=/etc/paigow-controller
src=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" != 0 ]; then
    echo "install: run as root (sudo $0)" >&2
    exit 1
fi

echo "== system packages"
apt-get update
# python3-lgpio: gpiozero's default pin factory on a Pi (the venv sees it via system site packages)
DEBIAN_FRONTEND=noninteractive apt-get install -y python3 python3-venv python3-lgpio
if [ "${PAIGOW_KIOSK:-yes}" != no ]; then
    # the kiosk: the browser, its compositor, and CJK glyphs for the page's Traditional Chinese
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium cage fonts-noto-cjk
fi

echo "== user"
getent group gpio >/dev/null || groupadd --system gpio
getent group dialout >/dev/null || groupadd --system dialout
if ! id paigow >/dev/null 2>&1; then
    useradd --system --user-group --home-dir /var/lib/paigow-controller --no-create-home \
        --shell /usr/sbin/nologin paigow
fi
usermod -a -G gpio,dialout paigow

echo "== virtualenv in $prefix"
install -d -m 0755 "$prefix"
rm -rf "$prefix/src"
install -d -m 0755 "$prefix/src"
# Only what the product is built from: never a checkout's working files (demo-state/ and its
# log key, bench/.scratch, venvs, caches).
for part in controller drivers requirements pyproject.toml README.md; do
    cp -a "$src/$part" "$prefix/src/$part"
done
find "$prefix/src" -name __pycache__ -prune -exec rm -rf {} +
[ -x "$prefix/venv/bin/python" ] || python3 -m venv --system-site-packages "$prefix/venv"
# the runtime lock, hash-checked, then the product alone, built with the lock's setuptools
"$prefix/venv/bin/pip" --disable-pip-version-check install --require-hashes \
    -r "$prefix/src/requirements/runtime.txt"
"$prefix/venv/bin/pip" --disable-pip-version-check install --no-deps --no-build-isolation \
    --force-reinstall "$prefix/src"
install -m 0644 "$src/README.md" "$prefix/README.md"

echo "== config in $etc"
install -d -m 0755 "$etc"
if [ ! -e "$etc/config.toml" ]; then
    install -m 0644 "$src/hw/config.example.toml" "$etc/config.toml"
fi
"$prefix/venv/bin/paigow-controller" check-config --config "$etc/config.toml"

echo "== software manifest (program verification: README, \"Software identity\")"
# PAIGOW_MANIFEST: the release's MANIFEST.json, signed off the box (paigow-controller manifest);
# PAIGOW_RELEASE_PUB: its verifier key, installed beside it as release.pub (or set [software]
# public_key in the config). PAIGOW_RELEASE_KEY instead signs here: the signing key then passes
# through this box (a test table only). Neither: the table shows the software_identity fault
# unless [software] required = false.
pkg=$("$prefix/venv/bin/python" -c 'import controller, os; print(os.path.dirname(controller.__file__))')
rm -f "$pkg/MANIFEST.json" "$pkg/release.pub"  # pip leaves a previous release's in place
if [ -n "${PAIGOW_MANIFEST:-}" ]; then
    install -m 0644 "$PAIGOW_MANIFEST" "$pkg/MANIFEST.json"
    [ -z "${PAIGOW_RELEASE_PUB:-}" ] || install -m 0644 "$PAIGOW_RELEASE_PUB" "$pkg/release.pub"
elif [ -n "${PAIGOW_RELEASE_KEY:-}" ]; then
    "$prefix/venv/bin/paigow-controller" manifest --release-key "$PAIGOW_RELEASE_KEY" --out "$pkg/MANIFEST.json"
    "$prefix/venv/bin/python" -c 'import pathlib, sys
from controller.software.check import read_release_key
print(read_release_key(pathlib.Path(sys.argv[1])).verifier)' "$PAIGOW_RELEASE_KEY" > "$pkg/release.pub"
    chmod 0644 "$pkg/release.pub"
else
    echo "install: no software manifest (PAIGOW_MANIFEST= or PAIGOW_RELEASE_KEY=)" >&2
fi
if [ -e "$pkg/MANIFEST.json" ]; then
    "$prefix/venv/bin/paigow-controller" verify-software --config "$etc/config.toml"
fi

echo "== udev rule"
install -m 0644 "$src/hw/99-paigow-dice.rules" /etc/udev/rules.d/99-paigow-dice.rules
udevadm control --reload
udevadm trigger --subsystem-match=tty

echo "== systemd unit"
install -m 0644 "$src/systemd/paigow-controller.service" /etc/systemd/system/paigow-controller.service
systemctl daemon-reload
systemctl enable --now paigow-controller.service
systemctl --no-pager status paigow-controller.service || true

if [ "${PAIGOW_KIOSK:-yes}" != no ]; then
    echo "== kiosk"
    "$src/hw/kiosk/setup-kiosk.sh"
fi
echo "installed. Journal: journalctl -u paigow-controller -f"
