#!/usr/bin/env bash
# Install, upgrade, repair or roll back the Pai Gow table controller on Raspberry Pi OS (Debian
# bookworm), as root, from a checkout of this repository. Signing comes first (the technician's
# guide, "Signing"): each release is installed with its signed manifest, so the table can check
# its own software (`run` faults on a release without one):
#
#   sudo PAIGOW_MANIFEST=MANIFEST.json PAIGOW_RELEASE_PUB=release.pub hw/install-raspberry-pi.sh
#                    # a table: the manifest signed off the box, with the release key's .pub
#   sudo PAIGOW_RELEASE_KEY=/root/release.key hw/install-raspberry-pi.sh
#                    # a test table: signed here (the signing key passes through the box)
#   sudo hw/install-raspberry-pi.sh --rollback       # back to the release before the current one
#   ... --wheels DIR     # offline: the runtime lock's wheels in DIR, .deb files in DIR/debs;
#                        # nothing from the network (a kiosk whose packages are missing: skipped)
#   ... --no-kiosk       # a box without a screen (or PAIGOW_KIOSK=no)
#   ... --no-start       # install, start nothing
#
# Neither PAIGOW_MANIFEST nor PAIGOW_RELEASE_KEY: refused in one line (exit 2), nothing installed.
#
# Releases: each is built whole in /opt/paigow-controller/releases/ID (controller/software/
# release.py: ID = the version and 12 hex digits of the SHA-256 of every file the installer
# installs: the product's sources, the systemd unit, the udev rule, the example config, the
# kiosk's files). The release holds them (src/, system/), its own virtualenv with the
# hash-checked runtime lock and the product, its signed manifest and RELEASE (its id, printed by
# `paigow-controller --version`). It is checked against the config in force and its manifest,
# its unit and udev rule are installed from it, and only then is it made current by replacing
# the `current` link in one rename. The service is then restarted (systemd waits for READY=1,
# after the self-tests; the start-rate counter is reset first, so repeated installs never meet
# StartLimitBurst=); a release that does not come up is rolled back at once. `previous` names
# the release before; --rollback swaps the two, its unit and udev rule and kiosk files with
# them. The config (/etc/paigow-controller) and the state (/var/lib/paigow-controller) are never
# touched. The CLI is /usr/local/bin/paigow-controller (a link into `current`). Three releases
# are kept: current, previous, and one more.
#
# Running it again repairs: a release built already is compared with the checkout (every file
# of src/ and system/, and the installed packages) and checked against its signed manifest;
# whatever differs is named, then the release is built again (its service stopped while it
# is, when it is the one running) and checked again. An installed unit or udev rule that is not
# the release's is named and replaced.
#
# Also: a system user `paigow` in the gpio and dialout groups; the example config (never
# overwriting one); the table display's kiosk (system/kiosk/setup-kiosk.sh of the release).
# python3-lgpio (gpiozero's pin factory on a Pi, seen through the venv's system site packages)
# is required on a Raspberry Pi and installed elsewhere only when the system's archives have it.
set -euo pipefail

prefix=/opt/paigow-controller
etc=/etc/paigow-controller
unit=paigow-controller.service
unit_path=/etc/systemd/system/$unit
udev_rule=/etc/udev/rules.d/99-paigow-dice.rules
bin_link=/usr/local/bin/paigow-controller
keep_releases=3
kiosk_packages=(cage chromium wlr-randr)  # the page brings its own fonts
src=$(cd "$(dirname "$0")/.." && pwd)

usage="usage: [PAIGOW_MANIFEST=FILE PAIGOW_RELEASE_PUB=FILE | PAIGOW_RELEASE_KEY=FILE] install-raspberry-pi.sh [--rollback] [--wheels DIR] [--no-kiosk] [--no-start]"
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
[ "$kiosk" = no ] || kiosk=yes # PAIGOW_KIOSK: "no", or anything else for yes
if [ -n "$wheels" ] && [ ! -d "$wheels" ]; then
    echo "install: --wheels $wheels: not a directory" >&2
    exit 2
fi
if [ -n "$wheels" ]; then
    wheels=$(cd "$wheels" && pwd)
fi
# Signing first: a release without its signed manifest faults under `run` (software_identity),
# so none is installed. Checked before anything is written, in one line.
if [ "$rollback" = no ]; then
    manifest=${PAIGOW_MANIFEST:-}
    release_key=${PAIGOW_RELEASE_KEY:-}
    release_pub=${PAIGOW_RELEASE_PUB:-}
    if [ -z "$manifest" ] && [ -z "$release_key" ]; then
        echo "install: no release signing: give PAIGOW_MANIFEST=FILE (signed off the box) with PAIGOW_RELEASE_PUB=FILE, or PAIGOW_RELEASE_KEY=FILE (made once by paigow-controller release-key); nothing installed" >&2
        exit 2
    fi
    for given in "$manifest" "$release_key" "$release_pub"; do
        if [ -n "$given" ] && [ ! -f "$given" ]; then
            echo "install: $given: no such file (PAIGOW_MANIFEST, PAIGOW_RELEASE_KEY, PAIGOW_RELEASE_PUB name files); nothing installed" >&2
            exit 2
        fi
    done
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
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        echo "== current release: $new (was $old)"
    else
        echo "== current release: $new"
    fi
}

restart_service() { # true when the unit reached active (Type=notify: after READY=1)
    [ "$start" = yes ] || return 0
    echo "== restarting $unit"
    # systemd counts every start against StartLimitBurst= (5 in 300 s): installs in a row, a
    # rollback, a repair would meet it and the start would be refused. reset-failed flushes
    # the counter, as systemd.unit(5) says, before each start the installer asks for.
    systemctl reset-failed "$unit" 2>/dev/null || true
    systemctl restart "$unit" && systemctl is-active --quiet "$unit"
}

# The unit and the udev rule of release $1, from its system/. One that is neither that
# release's nor the current release's was changed on the box: named, then replaced (a repair
# says what it restores). A release built by an older installer has none.
install_system_files() {
    local files=$prefix/releases/$1/system pair name to was
    was=$prefix/releases/$(release_of "$prefix/current")/system
    if [ ! -d "$files" ]; then
        say "release $1 holds no system files (built by an older installer): the unit and the udev rule in place stay"
        return 0
    fi
    for pair in "paigow-controller.service:$unit_path" "99-paigow-dice.rules:$udev_rule"; do
        name=${pair%%:*}
        to=${pair#*:}
        if [ -e "$to" ] && ! cmp -s "$files/$name" "$to" && ! cmp -s "$was/$name" "$to"; then
            say "$to was changed on this box (it is no release's): replaced by release $1's"
        fi
        install -D -m 0644 "$files/$name" "$to"
    done
    systemctl daemon-reload
    if udevadm control --ping 2>/dev/null; then
        udevadm control --reload
        udevadm trigger --subsystem-match=tty
    else
        say "udevd is not running: the rule applies from the next boot"
    fi
}

# The kiosk's files of release $1 where a kiosk is installed already (a rollback): written by
# its setup-kiosk.sh with DESTDIR (files only: no package, no user, no systemctl).
lay_kiosk_files() {
    local setup=$prefix/releases/$1/system/kiosk/setup-kiosk.sh
    [ -e /etc/systemd/system/paigow-kiosk.service ] && [ -x "$setup" ] || return 0
    echo "== kiosk files of release $1"
    KIOSK_URL=$(kiosk_url) DESTDIR=/ "$setup" >/dev/null
    systemctl daemon-reload
    systemctl try-restart paigow-kiosk.service || say "the kiosk did not restart: journalctl -u paigow-kiosk"
}

kiosk_url() { # KIOSK_URL, else the one installed, else the table page
    local url=${KIOSK_URL:-}
    if [ -z "$url" ] && [ -r /etc/default/paigow-kiosk ]; then
        url=$(sed -n 's/^KIOSK_URL=//p' /etc/default/paigow-kiosk | tail -n 1)
    fi
    echo "${url:-http://127.0.0.1:8080/}"
}

# Back to the release before, after a failed restart, or asked for with --rollback: its code,
# its unit and udev rule, its kiosk files.
go_back() {
    local back
    back=$(release_of "$prefix/previous")
    if [ -z "$back" ] || [ ! -e "$prefix/releases/$back/.complete" ]; then
        die "no previous release to go back to"
    fi
    "$prefix/releases/$back/venv/bin/paigow-controller" check-config --config "$etc/config.toml" \
        >/dev/null || die "release $back refuses the config in force; nothing changed"
    install_system_files "$back"
    switch_to "$back"
    restart_service || die "release $back did not start either: journalctl -u $unit"
    lay_kiosk_files "$back"
}

if [ "$rollback" = yes ]; then
    go_back
    echo "rolled back. Journal: journalctl -u $unit -f"
    exit 0
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing_of() { # those of the packages $@ not installed, one a line
    local pkg
    for pkg in "$@"; do installed "$pkg" || echo "$pkg"; done
}

echo "== system packages"
base=(python3 python3-venv)
if ! installed python3-lgpio; then
    if grep -qs 'Raspberry Pi' /proc/device-tree/model; then
        base+=(python3-lgpio)
    elif apt-cache policy python3-lgpio 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        base+=(python3-lgpio)
    else
        say "python3-lgpio is not in this system's archives (not Raspberry Pi OS): left out;"
        say "  gpiozero finds no pin factory for a Pi's GPIO here (simulate and tests need none)"
    fi
fi
wanted=("${base[@]}")
[ "$kiosk" = no ] || wanted+=("${kiosk_packages[@]}") # the browser, its compositor, the screen rotation
mapfile -t need < <(missing_of "${wanted[@]}")
if [ ${#need[@]} -gt 0 ] && [ -z "$wheels" ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
elif [ ${#need[@]} -gt 0 ]; then
    # --wheels: nothing from the network. Debian packages only from DIR/debs (with what they
    # depend on), installed by apt told of no archive at all (no sources.list: nothing it
    # could download; apt-get's --no-download refuses local .deb files).
    debs=()
    [ ! -d "$wheels/debs" ] || mapfile -t debs < <(find "$wheels/debs" -maxdepth 1 -name '*.deb' | sort)
    if [ ${#debs[@]} -gt 0 ]; then
        echo "== ${#debs[@]} packages from $wheels/debs (no download)"
        no_sources=$(mktemp -d)
        DEBIAN_FRONTEND=noninteractive apt-get install -y -o Dir::Etc::SourceList=/dev/null \
            -o Dir::Etc::SourceParts="$no_sources" "${debs[@]}" \
            || die "the packages in $wheels/debs do not install without the network (above); nothing else installed"
        rmdir "$no_sources"
    fi
    mapfile -t lacking < <(missing_of "${base[@]}")
    if [ ${#lacking[@]} -gt 0 ]; then
        die "${lacking[*]} not installed, and --wheels takes nothing from the network: put the .deb files in $wheels/debs"
    fi
    if [ "$kiosk" = yes ]; then
        mapfile -t lacking < <(missing_of "${kiosk_packages[@]}")
        if [ ${#lacking[@]} -gt 0 ]; then
            say "kiosk skipped: ${lacking[*]} not installed, and --wheels takes nothing from the network (their .deb files in $wheels/debs install it)"
            kiosk=skipped
        fi
    fi
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

# What the release holds, copied from the checkout in the release's layout (never a
# checkout's working files: demo-state/ and its log key, bench/.scratch, venvs, caches), and
# its id from that copy. The checkout's own release.py does it, never a built release's code.
release_py=("$(command -v python3)" -I -B "$src/controller/software/release.py")
stage=$prefix/releases/.stage
rm -rf "$stage"
trap 'rm -rf "$stage"' EXIT
"${release_py[@]}" stage "$src" "$stage" || die "the checkout $src cannot be a release (above)"
release=$("${release_py[@]}" id "$stage") || die "the checkout $src cannot be a release (above)"
dir=$prefix/releases/$release

package_dir() { # where the release's controller package is installed
    "$dir/venv/bin/python" -c 'import controller, os; print(os.path.dirname(controller.__file__))'
}
cli() { "$dir/venv/bin/paigow-controller" "$@"; }
summary() { # the one line of verify-software's JSON on stdin (else its first line)
    python3 -c 'import json, sys
text = sys.stdin.read()
try:
    print(json.loads(text)["summary"])
except (ValueError, KeyError, TypeError):
    print(next((line for line in text.splitlines() if line.strip()), "(no report)"))'
}
verifier_of_key() {
    "$dir/venv/bin/python" -c 'import pathlib, sys
from controller.software.check import read_release_key
print(read_release_key(pathlib.Path(sys.argv[1])).verifier)' "$release_key"
}
# The packages against a manifest (the given one, else the installed one checked with the
# release key): nothing when they match, else what differs, in one line. $1: another root
# holding controller/ and drivers/ (default: the release's installed packages).
manifest_problem() {
    local out args=(verify-software --config "$etc/config.toml" --json)
    [ $# -eq 0 ] || args+=(--root "$1")
    if [ -n "$manifest" ]; then
        args+=(--manifest "$manifest")
        [ -z "$release_pub" ] || args+=(--public-key "$(cat "$release_pub")")
    else
        args+=(--public-key "$(verifier_of_key)")
    fi
    if ! out=$(cli "${args[@]}" 2>&1); then
        printf '%s\n' "$out" | summary
    fi
}

rebuild=no
if [ -e "$dir/.complete" ]; then
    # Running again repairs. First the release against the checkout it is built from: every
    # file, by the checkout's own code (a release's code is not trusted to judge itself).
    echo "== release $release is built already: checking it"
    if ! differs=$("${release_py[@]}" compare "$dir" "$stage"); then
        say "release $release is not what it was built from:"
        printf '%s\n' "$differs" | sed 's/^/install:   /' >&2
        rebuild=yes
    elif problem=$(manifest_problem) && [ -n "$problem" ]; then
        # Then against the signed manifest (the release's code is the checkout's now). A
        # manifest given that does not name the checkout's files is refused before anything
        # changes; else the release is built again (and signed again, with a key).
        if [ -n "$manifest" ] && [ -n "$(manifest_problem "$stage/src")" ]; then
            die "the manifest $manifest is not this checkout's: $(manifest_problem "$stage/src"); nothing changed"
        fi
        say "release $release does not match its manifest: $problem"
        rebuild=yes
    fi
fi
if [ "$rebuild" = yes ]; then
    if [ "$(release_of "$prefix/current")" = "$release" ] && systemctl is-active --quiet "$unit"; then
        say "stopping $unit while its release is built again"
        systemctl stop "$unit"
    fi
    rm -f "$dir/.complete"
fi

if [ ! -e "$dir/.complete" ]; then
    echo "== building release $release in $dir"
    rm -rf "$dir" # a build that stopped half-way, or a release being repaired
    install -d -m 0755 "$dir"
    mv "$stage/src" "$stage/system" "$dir/"
    python3 -m venv --system-site-packages "$dir/venv"
    pip=("$dir/venv/bin/pip" --disable-pip-version-check install)
    [ -z "$wheels" ] || pip+=(--no-index --find-links "$wheels")
    # the runtime lock, hash-checked, then the product alone, built with the lock's setuptools
    "${pip[@]}" --require-hashes -r "$dir/src/requirements/runtime.txt"
    "${pip[@]}" --no-deps --no-build-isolation "$dir/src"
    rm -rf "$dir/src/build" "$dir/src/"*.egg-info # setuptools' leftovers of the build
    # Bytecode, compiled here once: the service writes none (PYTHONDONTWRITEBYTECODE=1,
    # ProtectSystem=strict), and without it every start compiles every module it imports.
    # pip's caches go (timestamp-based, and the product's are not the release's); the
    # product's are compiled by its own bytecode.py in a fresh interpreter (the same bytes as
    # the signer's: the signed manifest names each .pyc), the other packages' by compileall,
    # both PEP 552 checked-hash (a .pyc whose source changed is not used).
    find "$dir" -name __pycache__ -prune -exec rm -rf {} +
    site=$("$dir/venv/bin/python" -I -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$dir/venv/bin/python" -I -S "$dir/src/controller/software/bytecode.py" --write "$site" >/dev/null \
        || die "the release's modules do not compile (above)"
    "$dir/venv/bin/python" -I -m compileall -q -j 0 --invalidation-mode checked-hash \
        -x '/site-packages/(controller|drivers)/' "$site" >/dev/null \
        || say "some modules of the runtime's packages did not compile (they run from source)"
    echo "$release" > "$dir/RELEASE"
    chmod 0644 "$dir/RELEASE"
fi

echo "== software manifest (program verification: the technician's guide, \"Signing\")"
pkg=$(package_dir)
if [ -n "$manifest" ]; then
    # signed off the box: it must name these very files, else it is refused and nothing moves
    problem=$(manifest_problem)
    [ -z "$problem" ] || die "the manifest $manifest is not release $release's: $problem"
    install -m 0644 "$manifest" "$pkg/MANIFEST.json"
    [ -z "$release_pub" ] || install -m 0644 "$release_pub" "$pkg/release.pub"
elif [ ! -e "$dir/.complete" ]; then
    # signed here, from the files just built (a test table: the key passes through this box)
    cli manifest --release-key "$release_key" --out "$pkg/MANIFEST.json" >/dev/null
    verifier_of_key > "$pkg/release.pub"
    chmod 0644 "$pkg/release.pub"
fi
if [ ! -e "$dir/.complete" ]; then
    sync -f "$dir"
    touch "$dir/.complete"
fi

echo "== checking release $release against the config in force"
cli check-config --config "$etc/config.toml" >/dev/null \
    || die "release $release refuses $etc/config.toml (above); the current release stays"
if ! out=$(cli verify-software --config "$etc/config.toml" --json 2>&1); then
    die "release $release does not match its manifest: $(printf '%s\n' "$out" | summary); the current release stays"
fi

echo "== systemd unit, udev rule, the CLI on PATH"
install_system_files "$release"
ln -sfn "$prefix/current/venv/bin/paigow-controller" "$bin_link"
ln -sfn current/src/README.md "$prefix/README.md"
ln -sfn current/src/docs "$prefix/docs"
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
if [ "$start" = no ] && [ "$rebuild" = yes ]; then
    say "--no-start: $unit stays stopped (systemctl start $unit)"
fi
[ "$start" = no ] || systemctl --no-pager status "$unit" || true

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

setup_kiosk=$dir/system/kiosk/setup-kiosk.sh
if [ "$kiosk" = yes ] && [ -z "$wheels" ]; then
    echo "== kiosk"
    KIOSK_URL=$(kiosk_url) "$setup_kiosk"
elif [ "$kiosk" = yes ]; then
    # offline, its packages installed: the kiosk's own script lays its files (DESTDIR: no
    # apt), then its user and unit, as that script does with the network
    echo "== kiosk (offline: its packages are installed)"
    KIOSK_URL=$(kiosk_url) DESTDIR=/ "$setup_kiosk"
    if ! id kiosk >/dev/null 2>&1; then
        useradd --system --user-group --home-dir /var/lib/paigow-kiosk --no-create-home \
            --shell /usr/sbin/nologin kiosk
    fi
    for group in video render input; do
        if getent group "$group" >/dev/null; then usermod -a -G "$group" kiosk; fi
    done
    systemctl daemon-reload
    systemctl disable getty@tty1.service >/dev/null 2>&1 || true
    systemctl enable paigow-kiosk.service
    [ "$start" = no ] || systemctl restart paigow-kiosk.service || say "the kiosk did not start: journalctl -u paigow-kiosk"
fi
echo "installed $release. Journal: journalctl -u $unit -f"
