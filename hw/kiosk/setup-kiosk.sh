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
    echo "== packages: cage, chromium, fonts-noto-cjk"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y cage chromium fonts-noto-cjk
fi

echo "== files under ${destdir:-/}"
install -d -m 0755 "$destdir$page_dir" "$destdir/etc/systemd/system" "$destdir/etc/default" \
    "$destdir/etc/pam.d"
install -m 0644 "$here/offline.html" "$destdir$page_dir/offline.html"
install -m 0644 "$here/paigow-kiosk.service" "$destdir/etc/systemd/system/$unit"
install -m 0644 "$here/paigow-kiosk.pam" "$destdir/etc/pam.d/paigow-kiosk"
cat > "$destdir/etc/default/paigow-kiosk" <<EOF
# The table page the kiosk goes to once the controller answers (hw/kiosk/setup-kiosk.sh).
KIOSK_URL=$url
EOF
chmod 0644 "$destdir/etc/default/paigow-kiosk"

# The kernel's console blanking off (it would blank the screen before cage starts, and after
# it stops); once, on the kernel command line's one line.
if [ -f "$destdir$cmdline" ] && ! grep -qw 'consoleblank=0' "$destdir$cmdline"; then
    sed -i '1 s/$/ consoleblank=0/' "$destdir$cmdline"
    echo "consoleblank=0 added to $cmdline (takes effect at the next boot)"
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
