#!/usr/bin/env bash
# The table display's kiosk on Raspberry Pi OS (Debian bookworm; Lite, without a desktop):
# Chromium in kiosk mode inside cage, a Wayland kiosk compositor, on tty1, as a dedicated
# `kiosk` user, started by systemd (paigow-kiosk.service, after the controller) and restarted
# whenever it stops. Chromium opens a local page first, /opt/paigow-kiosk/offline.html, which
# says OFFLINE in English and Traditional Chinese and asks the controller every 2 s; once the
# controller answers it goes to the table page. So a display without a controller shows
# OFFLINE, never a browser error page. The table page reloads itself when the controller
# restarts (its settings' instance changes).
#
#   sudo hw/kiosk/setup-kiosk.sh                     # as root: packages, user, files, unit enabled
#   sudo KIOSK_URL=http://127.0.0.1:8080/ hw/kiosk/setup-kiosk.sh   # the table page (default)
#   DESTDIR=/tmp/root hw/kiosk/setup-kiosk.sh        # only writes the files under /tmp/root
#
# With DESTDIR set it installs no package, makes no user and calls no systemctl (tests run it
# so, without root). The screen never blanks: cage has no idle blanking, and the kernel's
# console blanking is turned off with consoleblank=0 on /boot/firmware/cmdline.txt.
# A quiet boot: on the same line the kernel's console moves from tty1 (the screen) to tty3,
# and quiet, loglevel=3, logo.nologo, vt.global_cursor_default=0, systemd.show_status=false
# and udev's log level 3 keep boot text and the text cursor off the screen; the Pi's rainbow
# splash goes with disable_splash=1 in /boot/firmware/config.txt. Each is added once.
# The screen's rotation is [display] rotation in /etc/paigow-controller/config.toml, applied
# by kiosk-session at each start of the kiosk (systemctl restart paigow-kiosk).
# The page's fonts come with it (the controller serves them); the OFFLINE page's are inline in
# offline-fonts.css: the kiosk needs no font package.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
destdir=${DESTDIR:-}
url=${KIOSK_URL:-http://127.0.0.1:8080/}
user=kiosk
page_dir=/opt/paigow-kiosk
unit=paigow-kiosk.service
cmdline=/boot/firmware/cmdline.txt

# The URL goes into a systemd environment file and a query string: a plain http(s) URL only.
plain_url='^https?://[][A-Za-z0-9.:/_~%-]+$'
if [[ ! $url =~ $plain_url ]]; then
    echo "setup-kiosk: KIOSK_URL must be a plain http:// or https:// URL, not: $url" >&2
    exit 2
fi

if [ -z "$destdir" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup-kiosk: run as root (sudo $0), or set DESTDIR to write the files elsewhere" >&2
        exit 1
    fi
    echo "== packages: cage, chromium, wlr-randr"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y cage chromium wlr-randr
fi

echo "== files under ${destdir:-/}"
install -d -m 0755 "$destdir$page_dir" "$destdir/etc/systemd/system" "$destdir/etc/default" \
    "$destdir/etc/pam.d"
install -m 0644 "$here/offline.html" "$destdir$page_dir/offline.html"
install -m 0644 "$here/offline-fonts.css" "$destdir$page_dir/offline-fonts.css"
install -m 0755 "$here/kiosk-session" "$destdir$page_dir/kiosk-session"
install -m 0644 "$here/paigow-kiosk.service" "$destdir/etc/systemd/system/$unit"
install -m 0644 "$here/paigow-kiosk.pam" "$destdir/etc/pam.d/paigow-kiosk"
cat > "$destdir/etc/default/paigow-kiosk" <<EOF
# The table page the kiosk goes to once the controller answers (hw/kiosk/setup-kiosk.sh).
KIOSK_URL=$url
EOF
chmod 0644 "$destdir/etc/default/paigow-kiosk"

# The kernel command line's one line: the console's blanking off (it would blank the screen
# before cage starts, and after it stops), the console on tty3, a quiet boot; each once.
if [ -f "$destdir$cmdline" ]; then
    if grep -qE '(^| )console=tty1( |$)' "$destdir$cmdline"; then
        sed -i -E '1 s/(^| )console=tty1( |$)/\1console=tty3\2/' "$destdir$cmdline"
        echo "console=tty1 changed to console=tty3 in $cmdline"
    fi
    for option in consoleblank=0 quiet loglevel=3 logo.nologo vt.global_cursor_default=0 \
        systemd.show_status=false rd.udev.log_level=3 udev.log_level=3; do
        if ! grep -qE "(^|[[:space:]])${option//./[.]}([[:space:]]|\$)" "$destdir$cmdline"; then
            sed -i "1 s/\$/ $option/" "$destdir$cmdline"
            echo "$option added to $cmdline (takes effect at the next boot)"
        fi
    done
fi
# The Pi's rainbow splash at power-on
boot_config=/boot/firmware/config.txt
if [ -f "$destdir$boot_config" ] && ! grep -qx 'disable_splash=1' "$destdir$boot_config"; then
    printf '\n# the table display boots quietly (hw/kiosk/setup-kiosk.sh)\ndisable_splash=1\n' \
        >> "$destdir$boot_config"
    echo "disable_splash=1 added to $boot_config"
fi

if [ -n "$destdir" ]; then
    exit 0
fi

echo "== user $user"
if ! id "$user" >/dev/null 2>&1; then
    useradd --system --user-group --home-dir /var/lib/paigow-kiosk --no-create-home \
        --shell /usr/sbin/nologin "$user"
fi
for group in video render input; do
    if getent group "$group" >/dev/null; then
        usermod -a -G "$group" "$user"
    fi
done

echo "== systemd unit"
systemctl daemon-reload
systemctl disable getty@tty1.service >/dev/null 2>&1 || true
systemctl enable --now "$unit"
systemctl --no-pager status "$unit" || true
echo "kiosk installed. Journal: journalctl -u paigow-kiosk -f"
