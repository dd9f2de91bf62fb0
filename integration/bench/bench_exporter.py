"""Benchmark: exports/s through AccumuloExporter for an inverted-index workload (each export = one delete
of the old index cell + one put of the new one, at ts = seq), next to raw client writes of the same cells,
in one run against one embedded cluster. Prints figures and a final ``ratio=<exporter/raw>`` line.

Both sides work on Arrow batches, as the drain does: the exporter gets each batch of serialized exports
(key, JSON value, seq, as read from the queue) through ``export_batch``; the raw side gets the batch's
cells, already made, through ``BatchWriter.add_cells`` and one flush per batch. So the ratio is the cost
of translating natively on top of the same writes. Preparing the batches is not timed on either side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa  # noqa: E402

from connector.accumulo import UPDATE_SCHEMA  # noqa: E402
from connector.export import AccumuloExporter, SequencedExport  # noqa: E402
from integration.harness import clusters  # noqa: E402


def workload(n: int) -> list[SequencedExport]:
    """Document d's word changes from w_old to w_new: delete index cell (w_old, d), put (w_new, d)."""
    out = []
    for i in range(n):
        doc = f"d{i % 50_000:06d}"
        old = {"row": f"w{(i * 7) % 9973:05d}", "cf": "doc", "cq": doc, "value": "1"}
        new = {"row": f"w{(i * 7 + 1) % 9973:05d}", "cf": "doc", "cq": doc, "value": "1"}
        out.append(SequencedExport(doc, {"old": [old], "new": [new]}, 1000 + i))
    return out


def export_batches(exports: list[SequencedExport], batch: int) -> list[pa.RecordBatch]:
    return [pa.record_batch({
        "key": pa.array([json.dumps(e.key).encode() for e in exports[i:i + batch]], pa.binary()),
        "value": pa.array([json.dumps(e.value).encode() for e in exports[i:i + batch]], pa.binary()),
        "seq": pa.array([e.seq for e in exports[i:i + batch]], pa.int64()),
    }) for i in range(0, len(exports), batch)]


def raw_batches(exports: list[SequencedExport], batch: int) -> list[pa.RecordBatch]:
    """The same cells as updates: per export the delete of the old cell, then the put of the new one."""
    out = []
    for i in range(0, len(exports), batch):
        rows = []
        for e in exports[i:i + batch]:
            old, new = e.value["old"][0], e.value["new"][0]
            rows.append((old["row"].encode(), old["cf"].encode(), old["cq"].encode(), b"", e.seq, None, True))
            rows.append((new["row"].encode(), new["cf"].encode(), new["cq"].encode(), b"", e.seq,
                         new["value"].encode(), False))
        cols = list(zip(*rows, strict=True))
        out.append(pa.record_batch([pa.array(c, f.type) for c, f in zip(cols, UPDATE_SCHEMA, strict=True)],
                                   schema=UPDATE_SCHEMA))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exports", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=5_000)
    opts = parser.parse_args()
    exports = workload(opts.exports)
    exports_in, raw_in = export_batches(exports, opts.batch), raw_batches(exports, opts.batch)
    with clusters(["b"]) as running:
        conn = running["b"].connect()
        # raw: the same cells, as ready-made cell batches through one BatchWriter flushed per batch
        conn.create_table("bench_raw")
        started = time.perf_counter()
        with conn.batch_writer("bench_raw") as w:
            for cells in raw_in:
                w.add_cells(cells)
                w.flush()
        raw_s = time.perf_counter() - started

        exporter = AccumuloExporter(conn, "bench_export", "difference").ensure_table()
        started = time.perf_counter()
        for batch in exports_in:
            failures = exporter.export_batch(batch)
            assert not failures, failures[:3]
        exp_s = time.perf_counter() - started
        exporter.close()
        raw_rate, exp_rate = len(exports) / raw_s, len(exports) / exp_s
        print(f"exports={len(exports)} batch={opts.batch} (each = 1 delete + 1 put)")
        print(f"raw_client:        {raw_s:.2f}s {raw_rate:,.0f} exports/s")
        print(f"accumulo_exporter: {exp_s:.2f}s {exp_rate:,.0f} exports/s")
        print(f"exports/s={exp_rate:,.0f}")
        print(f"ratio={exp_rate / raw_rate:.3f}")
        conn.close()


if __name__ == "__main__":
    main()
