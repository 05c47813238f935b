#!/usr/bin/env bash
# Install the fleet's broker and witness on the casino's server (Debian bookworm), as root,
# from a checkout of this repository (README, "The casino's broker: certificates, ACL, step by
# step"):
#
#   sudo hw/install-witness.sh --broker-certs DIR --witness-certs DIR
#       [--partition NAME]... [--db-url-file FILE] [--crl FILE] [--no-start] [--root DIR]
#
#   --broker-certs DIR   what `paigow-controller fleet-ca issue --broker HOST --ip 127.0.0.1
#                        --out DIR` wrote: broker.pem, broker.key, ca.pem, crl.pem
#   --witness-certs DIR  what `fleet-ca issue --witness [NAME] --out DIR` wrote: one
#                        witness*.pem, its key, ca.pem (witness-NAME: this witness is one of
#                        several, it watches only the tables whose keys it has)
#   --partition NAME     the broker also serves the witness witness-NAME of another server
#                        (its lines in the ACL); repeat for more
#   --db-url-file FILE   the witness's store in PostgreSQL: FILE holds the postgresql:// URL,
#                        its password too; installed root's alone (0600) and handed to the
#                        service as a credential, never on a command line
#   --crl FILE           a new CRL of the fleet CA (fleet-ca revoke or crl); without it the
#                        one in --broker-certs is installed only where none is yet, so an old
#                        directory never brings a revoked certificate back
#   --no-start           install, enable, but start nothing
#   --root DIR           write every file under DIR instead of / and do nothing else (no
#                        packages, users, release, ownership or systemctl): what a test reads
#
# It installs: mosquitto (Debian's) with hw/mosquitto/paigow.conf in /etc/mosquitto/conf.d/,
# the ACL, the CA, the broker's certificate and key (0640 root:mosquitto: mosquitto drops root
# before it reads them) and the CRL; the witness's certificate and key (the key root's, 0600:
# systemd hands it to the service, LoadCredential=) in /etc/paigow-witness/tls/; a system user
# paigow-witness; the product's release in /opt/paigow-controller (as install-raspberry-pi.sh
# builds it: its own virtualenv from the hash-checked runtime lock) and the CLI on PATH; the
# unit systemd/paigow-witness.service (and a drop-in for a partition or PostgreSQL). Then it
# restarts mosquitto, starts the witness, and says what the technician does next.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: install-witness.sh --broker-certs DIR --witness-certs DIR [--partition NAME]... [--db-url-file FILE] [--crl FILE] [--no-start] [--root DIR]"
say() { echo "install-witness: $*" >&2; }
bad() { say "$* (--help for the usage)"; exit 2; } # one line, before anything is written
die() { say "$*"; exit 1; }

root=
broker_certs=
witness_certs=
partitions=()
db_url_file=
crl=
start=yes
while [ $# -gt 0 ]; do
    case $1 in
        --broker-certs | --witness-certs | --partition | --db-url-file | --crl | --root)
            [ $# -ge 2 ] || bad "$1 needs a value"
            case $1 in
                --broker-certs) broker_certs=$2 ;;
                --witness-certs) witness_certs=$2 ;;
                --partition) partitions+=("$2") ;;
                --db-url-file) db_url_file=$2 ;;
                --crl) crl=$2 ;;
                --root) root=$2 ;;
            esac
            shift
            ;;
        --no-start) start=no ;;
        -h | --help) echo "$usage"; exit 0 ;;
        *) bad "unknown argument '$1'" ;;
    esac
    shift
done

# --- the arguments, all checked before anything is written -------------------------------------
[ -n "$broker_certs" ] || bad "--broker-certs DIR is required (fleet-ca issue --broker ... --out DIR)"
[ -n "$witness_certs" ] || bad "--witness-certs DIR is required (fleet-ca issue --witness --out DIR)"
for f in broker.pem broker.key ca.pem crl.pem; do
    [ -f "$broker_certs/$f" ] || bad "--broker-certs $broker_certs has no $f"
done
shopt -s nullglob
witness_pems=("$witness_certs"/witness-*.pem)
shopt -u nullglob
[ ! -f "$witness_certs/witness.pem" ] || witness_pems+=("$witness_certs/witness.pem")
[ ${#witness_pems[@]} -eq 1 ] || bad "--witness-certs $witness_certs must hold one witness*.pem (it holds ${#witness_pems[@]})"
witness_pem=${witness_pems[0]}
witness_cn=$(basename "$witness_pem" .pem)
[ -f "$witness_certs/$witness_cn.key" ] || bad "--witness-certs $witness_certs has no $witness_cn.key"
[ -f "$witness_certs/ca.pem" ] || bad "--witness-certs $witness_certs has no ca.pem"
cmp -s "$witness_certs/ca.pem" "$broker_certs/ca.pem" \
    || bad "the witness's ca.pem is not the broker's: both from one fleet CA"
own_partition=
case $witness_cn in witness-*) own_partition=${witness_cn#witness-} ;; esac
is_name() { [[ $1 =~ ^[A-Za-z0-9_-]{1,32}$ ]]; }
for p in "${partitions[@]}"; do
    is_name "$p" || bad "--partition '$p': 1-32 of A-Z a-z 0-9 - _"
done
if [ -n "$db_url_file" ]; then
    [ -f "$db_url_file" ] || bad "--db-url-file $db_url_file is not a file"
    grep -Eq '^postgres(ql)?://' "$db_url_file" || bad "--db-url-file $db_url_file holds no postgresql:// URL"
fi
[ -z "$crl" ] || [ -f "$crl" ] || bad "--crl $crl is not a file"
if [ -n "$root" ]; then
    [ -d "$root" ] || bad "--root $root is not a directory"
    root=$(cd "$root" && pwd)
else
    [ "$(id -u)" = 0 ] || die "run as root (sudo $0), or --root DIR"
fi

r() { echo "$root$1"; } # a path under the root
skipped() { echo "   (--root: not $*)"; }

prefix=/opt/paigow-controller
unit=paigow-witness.service
dropin_dir=/etc/systemd/system/$unit.d
etc_witness=/etc/paigow-witness

# --- packages, user, release (not under --root) ------------------------------------------------
echo "== system packages"
if [ -n "$root" ]; then
    skipped "installing mosquitto, python3, python3-venv"
else
    need=()
    pkgs=(mosquitto python3 python3-venv)
    [ -z "$db_url_file" ] || pkgs+=(python3-psycopg) # the store in PostgreSQL
    for pkg in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
            || need+=("$pkg")
    done
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
    fi
fi

echo "== user paigow-witness"
if [ -n "$root" ]; then
    skipped "adding the user"
elif ! id paigow-witness >/dev/null 2>&1; then
    useradd --system --user-group --home-dir /var/lib/paigow-witness --no-create-home \
        --shell /usr/sbin/nologin paigow-witness
fi

echo "== the product's release in $prefix"
if [ -n "$root" ]; then
    skipped "building the release"
else
    # As hw/install-raspberry-pi.sh names and builds a release (no manifest: the witness is
    # not a table under program verification).
    parts=(controller drivers requirements pyproject.toml README.md)
    version=$(python3 -c 'import sys, tomllib
print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$src/pyproject.toml")
    digest=$(cd "$src" && find "${parts[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' \
        -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
    release=$version-$digest
    dir=$prefix/releases/$release
    install -d -m 0755 "$prefix" "$prefix/releases"
    if [ -e "$dir/.complete" ]; then
        echo "   release $release is built already"
    else
        rm -rf "$dir"
        install -d -m 0755 "$dir/src"
        for part in "${parts[@]}"; do
            cp -a "$src/$part" "$dir/src/$part"
        done
        find "$dir/src" -name __pycache__ -prune -exec rm -rf {} +
        python3 -m venv --system-site-packages "$dir/venv"
        pip=("$dir/venv/bin/pip" --disable-pip-version-check install)
        "${pip[@]}" --require-hashes -r "$dir/src/requirements/runtime.txt"
        "${pip[@]}" --no-deps --no-build-isolation "$dir/src"
        rm -rf "$dir/src/build" "$dir/src/"*.egg-info
        find "$dir" -name __pycache__ -prune -exec rm -rf {} +
        sync -f "$dir"
        touch "$dir/.complete"
    fi
    ln -sfn "releases/$release" "$prefix/current.new"
    mv -T "$prefix/current.new" "$prefix/current"
    ln -sfn "$prefix/current/venv/bin/paigow-controller" /usr/local/bin/paigow-controller
    ln -sfn current/src/README.md "$prefix/README.md"
    echo "   current release: $release"
fi

# --- the broker ---------------------------------------------------------------------------------
mosq=/etc/mosquitto
echo "== mosquitto: $mosq/conf.d/paigow.conf, the ACL, the certificates"
install -d -m 0755 "$(r $mosq)" "$(r $mosq/conf.d)" "$(r $mosq/certs)" "$(r $mosq/ca_certificates)"
install -m 0644 "$src/hw/mosquitto/paigow.conf" "$(r $mosq/conf.d/paigow.conf)"
acl_block() { # the witness's lines of the shipped ACL, for the user witness-$1
    awk -v user="witness-$1" '
        /^user witness$/ { on = 1; print "user " user; next }
        /^user / { on = 0 }
        on && /^topic / { print }' "$src/hw/mosquitto/paigow.acl"
}
{
    cat "$src/hw/mosquitto/paigow.acl"
    seen=" "
    for p in ${own_partition:+"$own_partition"} "${partitions[@]}"; do
        case $seen in *" $p "*) continue ;; esac
        seen="$seen$p "
        printf '\n# witness-%s: one of several witnesses (install-witness.sh --partition)\n' "$p"
        acl_block "$p"
    done
} > "$(r $mosq/paigow.acl.new)"
chmod 0644 "$(r $mosq/paigow.acl.new)"
mv -f "$(r $mosq/paigow.acl.new)" "$(r $mosq/paigow.acl)"
install -m 0644 "$broker_certs/ca.pem" "$(r $mosq/ca_certificates/paigow-fleet-ca.pem)"
install -m 0644 "$broker_certs/broker.pem" "$(r $mosq/certs/paigow-broker.pem)"
install -m 0640 "$broker_certs/broker.key" "$(r $mosq/certs/paigow-broker.key)"
if [ -z "$root" ]; then
    chown root:mosquitto "$mosq/certs/paigow-broker.key"
fi
if [ -n "$crl" ]; then
    install -m 0644 "$crl" "$(r $mosq/paigow-fleet.crl)"
    echo "   CRL installed from $crl"
elif [ ! -e "$(r $mosq/paigow-fleet.crl)" ]; then
    install -m 0644 "$broker_certs/crl.pem" "$(r $mosq/paigow-fleet.crl)"
else
    echo "   the CRL installed stays (a newer one: --crl FILE)"
fi

# --- the witness --------------------------------------------------------------------------------
echo "== the witness: $etc_witness, the unit $unit"
# the certificates are public; the key is root's alone (0600), read by systemd for the unit
install -d -m 0755 "$(r $etc_witness)" "$(r $etc_witness/tables)" "$(r $etc_witness/tls)"
install -m 0644 "$witness_certs/ca.pem" "$(r $etc_witness/tls/ca.pem)"
install -m 0644 "$witness_pem" "$(r $etc_witness/tls/witness.pem)"
install -m 0600 "$witness_certs/$witness_cn.key" "$(r $etc_witness/tls/witness.key)"
install -d -m 0755 "$(r /etc/systemd/system)"
install -m 0644 "$src/systemd/$unit" "$(r /etc/systemd/system/$unit)"
exec_start=$(sed -n 's/^ExecStart=//p' "$src/systemd/$unit")
[ -n "$exec_start" ] || die "systemd/$unit has no ExecStart="
extra=()
credentials=()
if [ -n "$own_partition" ]; then
    extra+=(--partition)
fi
if [ -n "$db_url_file" ]; then
    install -m 0600 "$db_url_file" "$(r $etc_witness/db.url)"
    credentials+=("LoadCredential=db.url:$etc_witness/db.url")
    extra+=(--db-file %d/db.url)
fi
dropin=$(r "$dropin_dir/10-install-witness.conf")
if [ ${#extra[@]} -gt 0 ]; then
    install -d -m 0755 "$(r "$dropin_dir")"
    {
        echo "# Written by hw/install-witness.sh: the shipped ExecStart with ${extra[*]}."
        echo "[Service]"
        for line in "${credentials[@]}"; do echo "$line"; done
        echo "ExecStart="
        echo "ExecStart=$exec_start ${extra[*]}"
    } > "$dropin"
    chmod 0644 "$dropin"
    echo "   drop-in $dropin_dir/10-install-witness.conf: ${extra[*]}"
else
    rm -f "$dropin"
fi

# --- start ----------------------------------------------------------------------------------
if [ -n "$root" ]; then
    echo "== systemd"
    skipped "reloading systemd, restarting mosquitto, starting $unit"
else
    echo "== systemd: mosquitto, $unit"
    systemctl daemon-reload
    systemctl enable mosquitto "$unit"
    if [ "$start" = yes ]; then
        systemctl restart mosquitto || die "mosquitto did not start: journalctl -u mosquitto"
        systemctl restart "$unit" || die "$unit did not start: journalctl -u $unit"
        systemctl --no-pager status mosquitto "$unit" || true
    fi
fi

host=$(sed -n 's/^ExecStart=.*--mqtt-url mqtts:\/\/\([^ ]*\).*/\1/p' "$src/systemd/$unit")
cat <<EOF

installed${root:+ under $root}. What the technician does next:

 1. The witness's cosigner key, for every table's [fleet] witness_key:
      sudo -u paigow-witness paigow-controller witness-key --state-dir /var/lib/paigow-witness
 2. For each table T, on the fleet CA's machine:
      paigow-controller fleet-ca issue --dir CA --table T --out T/
    then on the table, as root:
      install -m 0644 T/ca.pem /etc/paigow-controller/broker-ca.pem
      install -m 0644 T/T.pem /etc/paigow-controller/T.pem
      install -o paigow -g paigow -m 0600 T/T.key /etc/paigow-controller/T.key
    and in its /etc/paigow-controller/config.toml:
      [fleet]
      mqtt_url = "mqtts://BROKER-HOST:8883"   # the name fleet-ca issue --broker gave
      ca_file = "/etc/paigow-controller/broker-ca.pem"
      cert_file = "/etc/paigow-controller/T.pem"
      key_file = "/etc/paigow-controller/T.key"
      witness_key = "<the line of step 1>"
    then: systemctl restart paigow-controller
 3. Each table's log key to this witness (on the table: paigow-controller export-key):
      /etc/paigow-witness/tables/T.pub, then: systemctl restart $unit
 4. The firewall: TCP 8883 open to the tables' network only; this witness reaches the
    broker at $host over TLS like every client (no plain port is open).
 5. A table lost or retired: fleet-ca revoke --dir CA --serial N (fleet-ca list prints
    them), then here: hw/install-witness.sh ... --crl CA/crl.pem (or copy it to
    $mosq/paigow-fleet.crl) and systemctl restart mosquitto (a reload refuses only its
    next connection). Once a year, before the CRL's next update (fleet-ca list):
    fleet-ca crl --dir CA and the same copy: an expired CRL refuses every client.
 6. Check: journalctl -u mosquitto -u $unit -f (a table's "New client connected ... as T",
    the witness's "witnessing N table(s)").
EOF
