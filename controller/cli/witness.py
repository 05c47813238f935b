"""``witness`` and ``witness-key``: the fleet's witness (controller/witness), run on the casino's
server under systemd (systemd/paigow-witness.service).

``witness`` is the witness's own entry point (``paigow-witness``, controller/witness/main.py)
under this command line: the same arguments, the same exit codes (0 stopped by SIGTERM or
SIGINT, or a reset done; 1 its store failed or another witness holds the state directory; 2 a
bad argument; 78 a bad key file, keys directory, credentials file or ``--db-file``).
"""

from __future__ import annotations

import argparse
import sys

from controller.cli.args import describe, directory_argument
from controller.witness.command import key_name, witness_arguments

__all__ = ["witness", "witness_arguments", "witness_key", "witness_key_arguments"]


def witness(args: argparse.Namespace) -> int:
    from controller.witness.main import witness as run_witness

    return run_witness(args)


# --- witness-key ------------------------------------------------------------------------------


def witness_key_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The witness's cosigner key (C2SP cosignature/v1) and its alert key: made in"
        " witness.key and alerts.key (mode 0600) in the state directory when there are none,"
        " never replaced. Prints their verifier keys: the first line the cosigner's, for each"
        " table's [fleet] witness_key; the second the alert key's (Ed25519, the same name),"
        " for whoever reads the signed alerts on paigow/v1/alerts.",
        "example:\n"
        "  paigow-controller witness-key --state-dir /var/lib/paigow-witness | head -1 > w.pub",
    )
    p.add_argument("--state-dir", required=True, help="the witness's directory")
    p.add_argument("--name", type=key_name, help="the key's name, for a new key")


def witness_key(args: argparse.Namespace) -> int:
    from controller.witness.keys import load_or_create_alert_key, load_or_create_key

    state_dir = directory_argument(args.state_dir)
    assert state_dir is not None
    signer, _ = load_or_create_key(state_dir, args.name)
    alert_key, _ = load_or_create_alert_key(state_dir, signer)
    sys.stdout.write(f"{signer.verifier}\n{alert_key.verifier}\n")
    return 0
