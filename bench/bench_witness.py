"""The witness's own cost, without a broker: a table's log fed to ``Witness.receive`` in batches
of 64 messages a transaction (as service.py does), on a SQLite store in a temporary directory.

- **common case**: every record in order, one candidate per seq, each round's close carrying
  its checkpoint and the same checkpoint after it on the checkpoint topic (stale); records per
  second, the median of WITNESS_RUNS runs (default 5);
- **a flood** (protocol v2 only): before each round's records, 3 forged records at each of its
  seqs (a chain of their own by ``prev``, each a well-formed export line no key signed), so
  that 4 candidates stand at every seq when the checkpoint comes; the table's records per
  second, and the chain walks and their steps per checkpoint.

The baseline is the same witness fed the same log in the same process: compare the two
figures of one run, or one run of this file on another commit (it adapts to the witness of
protocol v1, which takes no alert key and knows no candidates).

    python bench/bench_witness.py          # WITNESS_ROUNDS=300 rounds (about 2,100 records)
"""

from __future__ import annotations

import inspect
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from common import env_int, figure, machine_load, note, title
from loggen import generate

from controller.audit.log import load_signer
from controller.audit.recall import export_line, export_lines
from controller.core import canonical
from controller.core.note import ALG_COSIGNATURE_V1, Signer
from controller.core.records import StoredRecord
from controller.fleet.protocol import Channel, encode_record, topic
from controller.witness.store import SqliteStore
from controller.witness.tables import Witness

ROUNDS = env_int("WITNESS_ROUNDS", 300)
RUNS = env_int("WITNESS_RUNS", 5)
BATCH = 64
TABLE = "table-1"


def messages(lines: list[dict[str, Any]], forged: int = 0) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    start = 0
    for i, line in enumerate(lines):
        if "checkpoint" not in line:
            continue
        round_lines = lines[start : i + 1]
        for n in range(forged):  # a chain of forgeries over the round's seqs
            after = lines[start - 1] if start else None
            for k, genuine in enumerate(round_lines):
                value = canonical.decode(genuine["leaf"].encode())
                assert isinstance(value, dict)
                value["data"] = {"round": 10_000 * n + k}
                value["kind"] = "round_opened"
                if after is not None:
                    value["prev"] = after["hash"]
                leaf = canonical.encode(value)
                after = export_line(StoredRecord(value["seq"], "round_opened", leaf), None)
                out.append((topic(TABLE, Channel.RECORDS), encode_record(after)))
        for each in round_lines:
            out.append((topic(TABLE, Channel.RECORDS), encode_record(each)))
        out.append((topic(TABLE, Channel.CHECKPOINT), line["checkpoint"].encode()))
        start = i + 1
    return out


def feed(state: Path, run: int, keys: dict[str, Any], feed_in: list[tuple[str, bytes]]) -> Any:
    store = SqliteStore(state / f"w{run}.db")
    cosigner = Signer.generate("witness.bench/w", ALG_COSIGNATURE_V1)
    options: dict[str, Any] = {"clock": time.time, "publish": lambda *a: None}
    if "alert_key" in inspect.signature(Witness).parameters:
        options["alert_key"] = Signer.generate(cosigner.name)
    witness = Witness(store, keys, cosigner, **options)
    began = time.perf_counter()
    for i in range(0, len(feed_in), BATCH):
        with store.transaction():
            for name, payload in feed_in[i : i + BATCH]:
                witness.receive(name, payload)
            witness.tick()
        witness.flush()
    took = time.perf_counter() - began
    size = store.heads()[TABLE].cosigned_size
    store.close()
    return took, size, witness.refused


def main() -> None:
    title("witness: a table's log fed in batches, no broker (SQLite)")
    note(machine_load())
    with tempfile.TemporaryDirectory(prefix="bench-witness-") as work:
        base = Path(work)
        generate(base / "table", ROUNDS, table=TABLE)
        lines = list(export_lines(base / "table"))
        signer = load_signer(base / "table")
        assert signer is not None
        keys = {TABLE: signer.verifier}
        v2 = "alert_key" in inspect.signature(Witness).parameters
        cases = [("common case", 0)] + ([("a flood, 3 forged per seq", 3)] if v2 else [])
        for name, forged in cases:
            feed_in = messages(lines, forged)
            rates = []
            refused: Any = {}
            for run in range(RUNS):
                took, size, refused = feed(base, run + 10 * forged, keys, feed_in)
                assert size == len(lines), (size, len(lines))
                rates.append(len(lines) / took)
            figure(f"{name}: records/s (median of {RUNS})", f"{statistics.median(rates):,.0f}")
            checkpoints = sum(1 for line in lines if "checkpoint" in line)
            if v2:
                walks = refused.get(f"{TABLE}: chain walks", 0)
                steps = refused.get(f"{TABLE}: chain walk steps", 0)
                figure(
                    f"{name}: per checkpoint",
                    f"{walks / checkpoints:.1f} walks, {steps / checkpoints:.1f} steps",
                )


if __name__ == "__main__":
    main()
