#!/usr/bin/env bash
# Install, upgrade or roll back the Pai Gow table controller on Raspberry Pi OS (Debian
# bookworm), as root, from a checkout of this repository:
#
#   sudo hw/install-raspberry-pi.sh                  # install, or upgrade to this checkout
#   sudo hw/install-raspberry-pi.sh --rollback       # back to the release before the current one
#   sudo hw/install-raspberry-pi.sh --wheels DIR     # offline: the runtime lock's wheels in DIR
#   sudo hw/install-raspberry-pi.sh --no-kiosk       # a box without a screen (or PAIGOW_KIOSK=no)
#
# Releases: each is built whole in /opt/paigow-controller/releases/V (V = the version and the
# first 12 hex digits of the SHA-256 of the files it is built from; its own virtualenv with the
# hash-checked runtime lock, the product, its signed manifest), checked against the config in
# force, and only then made current by replacing the `current` link in one rename. The
# service is then restarted (systemd waits for READY=1, after the self-tests); a release that
# does not come up is rolled back at once. `previous` names the release before; --rollback
# swaps the two. The config (/etc/paigow-controller) and the state (/var/lib/paigow-controller)
# are never touched; nothing but what the product is built from is copied (never a checkout's
# demo-state/ with its log key, caches or venvs). The CLI is /usr/local/bin/paigow-controller
# (a link into `current`). Three releases are kept: current, previous, and one more.
#
# Also: a system user `paigow` in the gpio and dialout groups; the systemd unit; the udev rule
# giving the dice sensor a stable name; the example config (never overwriting one); then the
# table display's kiosk (hw/kiosk/setup-kiosk.sh). python3-lgpio (gpiozero's pin factory on a
# Pi, seen through the venv's system site packages) is required on a Raspberry Pi and
# installed elsewhere only when the system's archives have it (Debian does not).
set -euo pipefail

prefix=/opt/paigow-controller
etc=/etc/paigow-controller
unit=paigow-controller.service
bin_link=/usr/local/bin/paigow-controller
keep_releases=3
src=$(cd "$(dirname "$0")/.." && pwd)

usage="usage: install-raspberry-pi.sh [--rollback] [--wheels DIR] [--no-kiosk] [--no-start]"
say() { echo "install: $*" >&2; }
die() { say "$*"; exit 1; }

rollback=no
wheels=
kiosk=${PAIGOW_KIOSK:-yes}
start=yes
while [ $# -gt 0 ]; do
    case $1 in
        --rollback) rollback=yes ;;
        --wheels)
            [ $# -ge 2 ] || { echo "install: --wheels needs a directory; $usage" >&2; exit 2; }
            wheels=$2
            shift
            ;;
        --no-kiosk) kiosk=no ;;
        --no-start) start=no ;;
        -h | --help) echo "$usage"; exit 0 ;;
        *) echo "install: unknown argument '$1'; $usage" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$wheels" ] && [ ! -d "$wheels" ]; then
    echo "install: --wheels $wheels: not a directory" >&2
    exit 2
fi
[ "$(id -u)" = 0 ] || die "run as root (sudo $0)"

install -d -m 0755 "$prefix" "$prefix/releases"
# One installer at a time: a second waits for none and says so.
exec 9>"$prefix/.install.lock"
flock -n 9 || die "another install is running ($prefix/.install.lock)"

release_of() { # the release a link points at, or nothing
    local target
    target=$(readlink "$1" 2>/dev/null) || return 0
    basename "$target"
}

switch_to() { # make release $1 current (one rename), remembering the one it replaces
    local new=$1 old
    old=$(release_of "$prefix/current")
    ln -sfn "releases/$new" "$prefix/current.new"
    mv -T "$prefix/current.new" "$prefix/current"
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        ln -sfn "releases/$old" "$prefix/previous.new"
        mv -T "$prefix/previous.new" "$prefix/previous"
    fi
    sync -f "$prefix"
    echo "== current release: $new${old:+ (was $old)}"
}

restart_service() { # true when the unit reached active (Type=notify: after READY=1)
    [ "$start" = yes ] || return 0
    echo "== restarting $unit"
    systemctl restart "$unit" && systemctl is-active --quiet "$unit"
}

# Back to the release before, after a failed restart, or asked for with --rollback.
go_back() {
    local back
    back=$(release_of "$prefix/previous")
    if [ -z "$back" ] || [ ! -e "$prefix/releases/$back/.complete" ]; then
        die "no previous release to go back to"
    fi
    "$prefix/releases/$back/venv/bin/paigow-controller" check-config --config "$etc/config.toml" \
        >/dev/null || die "release $back refuses the config in force; nothing changed"
    switch_to "$back"
    restart_service || die "release $back did not start either: journalctl -u $unit"
}

if [ "$rollback" = yes ]; then
    go_back
    echo "rolled back. Journal: journalctl -u $unit -f"
    exit 0
fi

echo "== system packages"
need=()
for pkg in python3 python3-venv; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
        || need+=("$pkg")
done
if [ "$kiosk" != no ]; then
    # the kiosk: the browser, its compositor, and CJK glyphs for the page's Traditional Chinese
    need+=(chromium cage fonts-noto-cjk)
fi
if ! dpkg-query -W -f='${Status}' python3-lgpio 2>/dev/null | grep -q 'install ok installed'; then
    if grep -qs 'Raspberry Pi' /proc/device-tree/model; then
        need+=(python3-lgpio)
    elif apt-cache policy python3-lgpio 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        need+=(python3-lgpio)
    else
        say "python3-lgpio is not in this system's archives (not Raspberry Pi OS): left out;"
        say "  gpiozero finds no pin factory for a Pi's GPIO here (simulate and tests need none)"
    fi
fi
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
fi

echo "== user"
getent group gpio >/dev/null || groupadd --system gpio
getent group dialout >/dev/null || groupadd --system dialout
if ! id paigow >/dev/null 2>&1; then
    useradd --system --user-group --home-dir /var/lib/paigow-controller --no-create-home \
        --shell /usr/sbin/nologin paigow
fi
usermod -a -G gpio,dialout paigow

echo "== config in $etc"
install -d -m 0755 "$etc"
if [ ! -e "$etc/config.toml" ]; then
    # the log's anchor also in a second place, the unit's second StateDirectory= (README,
    # "Integrity"): a deleted anchor is then rewritten from the other, and both gone is a fault
    sed 's#^anchor_copy_dir = ""#anchor_copy_dir = "/var/lib/paigow-controller-anchor"#' \
        "$src/hw/config.example.toml" > "$etc/.config.toml.new"
    grep -q '^anchor_copy_dir = "/var/lib/paigow-controller-anchor"' "$etc/.config.toml.new" \
        || die "the example config has no anchor_copy_dir line"
    install -m 0644 "$etc/.config.toml.new" "$etc/config.toml"
    rm -f "$etc/.config.toml.new"
fi

# Only what the product is built from: never a checkout's working files (demo-state/ and its
# log key, bench/.scratch, venvs, caches).
parts=(controller drivers requirements pyproject.toml README.md)
version=$(python3 -c 'import sys, tomllib
print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$src/pyproject.toml")
digest=$(cd "$src" && find "${parts[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' \
    -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
release=$version-$digest
dir=$prefix/releases/$release

package_dir() { # where the release's controller package is installed
    "$dir/venv/bin/python" -c 'import controller, os; print(os.path.dirname(controller.__file__))'
}

if [ -e "$dir/.complete" ]; then
    echo "== release $release is built already"
else
    echo "== building release $release in $dir"
    rm -rf "$dir"  # a build that stopped half-way
    install -d -m 0755 "$dir/src"
    for part in "${parts[@]}"; do
        cp -a "$src/$part" "$dir/src/$part"
    done
    find "$dir/src" -name __pycache__ -prune -exec rm -rf {} +
    python3 -m venv --system-site-packages "$dir/venv"
    pip=("$dir/venv/bin/pip" --disable-pip-version-check install)
    [ -z "$wheels" ] || pip+=(--no-index --find-links "$wheels")
    # the runtime lock, hash-checked, then the product alone, built with the lock's setuptools
    "${pip[@]}" --require-hashes -r "$dir/src/requirements/runtime.txt"
    "${pip[@]}" --no-deps --no-build-isolation "$dir/src"
    rm -rf "$dir/src/build" "$dir/src/"*.egg-info  # setuptools' leftovers of the build

    echo "== software manifest (program verification: README, \"Software identity\")"
    # PAIGOW_MANIFEST: the release's MANIFEST.json, signed off the box (paigow-controller
    # manifest); PAIGOW_RELEASE_PUB: its verifier key, installed beside it as release.pub (or
    # set [software] public_key in the config). PAIGOW_RELEASE_KEY instead signs here: the
    # signing key then passes through this box (a test table only). Neither: the table shows
    # the software_identity fault unless [software] required = false.
    pkg=$(package_dir)
    if [ -n "${PAIGOW_MANIFEST:-}" ]; then
        install -m 0644 "$PAIGOW_MANIFEST" "$pkg/MANIFEST.json"
        [ -z "${PAIGOW_RELEASE_PUB:-}" ] || install -m 0644 "$PAIGOW_RELEASE_PUB" "$pkg/release.pub"
    elif [ -n "${PAIGOW_RELEASE_KEY:-}" ]; then
        "$dir/venv/bin/paigow-controller" manifest --release-key "$PAIGOW_RELEASE_KEY" \
            --out "$pkg/MANIFEST.json" >/dev/null
        "$dir/venv/bin/python" -c 'import pathlib, sys
from controller.software.check import read_release_key
print(read_release_key(pathlib.Path(sys.argv[1])).verifier)' "$PAIGOW_RELEASE_KEY" > "$pkg/release.pub"
        chmod 0644 "$pkg/release.pub"
    else
        say "no software manifest (PAIGOW_MANIFEST= or PAIGOW_RELEASE_KEY=)"
    fi
    find "$dir" -name __pycache__ -prune -exec rm -rf {} +  # the service writes no bytecode
    sync -f "$dir"
    touch "$dir/.complete"
fi

echo "== checking release $release against the config in force"
"$dir/venv/bin/paigow-controller" check-config --config "$etc/config.toml" >/dev/null \
    || die "release $release refuses $etc/config.toml (above); the current release stays"
if [ -e "$(package_dir)/MANIFEST.json" ]; then
    "$dir/venv/bin/paigow-controller" verify-software --config "$etc/config.toml" --json >/dev/null \
        || die "release $release does not match its manifest; the current release stays"
fi

echo "== udev rule"
install -D -m 0644 "$src/hw/99-paigow-dice.rules" /etc/udev/rules.d/99-paigow-dice.rules
if udevadm control --ping 2>/dev/null; then
    udevadm control --reload
    udevadm trigger --subsystem-match=tty
else
    say "udevd is not running: the rule applies from the next boot"
fi

echo "== systemd unit, the CLI on PATH"
install -m 0644 "$src/systemd/$unit" "/etc/systemd/system/$unit"
ln -sfn "$prefix/current/venv/bin/paigow-controller" "$bin_link"
ln -sfn current/src/README.md "$prefix/README.md"
systemctl daemon-reload
systemctl enable "$unit"

was_current=$(release_of "$prefix/current")
was_previous=$(release_of "$prefix/previous")
switch_to "$release"
if ! restart_service; then
    say "release $release did not start: journalctl -u $unit"
    back=$(release_of "$prefix/previous")
    if [ "$was_current" != "$release" ] && [ -n "$back" ] && [ "$back" != "$release" ]; then
        say "going back to $back"
        go_back
        # as before the attempt: the release before stays the one to roll back to, and the
        # release that failed goes (built again by the next install of its tree)
        if [ -n "$was_previous" ]; then
            ln -sfn "releases/$was_previous" "$prefix/previous.new"
            mv -T "$prefix/previous.new" "$prefix/previous"
        else
            rm -f "$prefix/previous"
        fi
        rm -rf "${prefix:?}/releases/$release"
        say "back on $back; release $release removed"
    fi
    exit 1
fi
systemctl --no-pager status "$unit" || true

# The layout before releases (a venv and src at the top): gone once a release runs.
rm -rf "$prefix/venv" "$prefix/src"
# Keep current, previous and the newest of the rest, up to $keep_releases.
current=$(release_of "$prefix/current")
previous=$(release_of "$prefix/previous")
kept=0
while IFS= read -r old; do
    if [ "$old" = "$current" ] || [ "$old" = "$previous" ]; then
        continue
    fi
    kept=$((kept + 1))
    if [ $((kept + 2)) -gt "$keep_releases" ]; then
        echo "== removing release $old"
        rm -rf "${prefix:?}/releases/$old"
    fi
done < <(ls -1t "$prefix/releases")

if [ "$kiosk" != no ]; then
    echo "== kiosk"
    "$src/hw/kiosk/setup-kiosk.sh"
fi
echo "installed $release. Journal: journalctl -u $unit -f"
