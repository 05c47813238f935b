#!/usr/bin/env bash
# Run Debian's dieharder on the controller's raw HMAC_DRBG output (not in CI: hours).
#
#   sudo apt-get install dieharder
#   bench/dieharder.sh            # the whole battery (-a)
#   bench/dieharder.sh -d 0       # one test (dieharder -l lists them)
#
# The stream comes from `paigow-controller rng-stream --bytes 0`: one HMAC_DRBG instance,
# freshly seeded from the OS, generating in 64 KiB requests until dieharder closes the pipe.
# Generator 200 is dieharder's stdin_input_raw. The stream runs at about 20 MB/s on a desktop
# core in pure Python, so the full battery takes hours (more on a Pi); -a is what the
# laboratory reports quote. Expect a few WEAK results in a full run: at dieharder's default
# thresholds a good generator shows them by chance; rerun those tests with -d N -Y 1.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${PAIGOW_CONTROLLER:-.venv/bin/paigow-controller}"
command -v dieharder >/dev/null || { echo "dieharder is not installed (apt-get install dieharder)" >&2; exit 69; }
if [ "$#" -eq 0 ]; then set -- -a; fi
"$BIN" rng-stream --bytes 0 | dieharder -g 200 "$@"
