"""Benchmark: exports/s through AccumuloExporter for an inverted-index workload (each export = one delete
of the old index cell + one put of the new one, at ts = seq), next to raw client writes of the same cells,
in one run against one embedded cluster. Prints figures and a final ``ratio=<exporter/raw>`` line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Mutation  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exports", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=5_000)
    opts = parser.parse_args()
    exports = workload(opts.exports)
    with clusters(["b"]) as running:
        conn = running["b"].connect()
        # raw: the same cells, as plain mutations through one BatchWriter flushed per batch
        conn.create_table("bench_raw")
        started = time.perf_counter()
        with conn.batch_writer("bench_raw") as w:
            for i in range(0, len(exports), opts.batch):
                for e in exports[i:i + opts.batch]:
                    old, new = e.value["old"][0], e.value["new"][0]
                    w.add_mutation(Mutation(old["row"]).delete(old["cf"], old["cq"], timestamp=e.seq))
                    w.add_mutation(Mutation(new["row"]).put(new["cf"], new["cq"], new["value"], timestamp=e.seq))
                w.flush()
        raw_s = time.perf_counter() - started

        exporter = AccumuloExporter(conn, "bench_export", "difference")
        started = time.perf_counter()
        for i in range(0, len(exports), opts.batch):
            exporter.export(exports[i:i + opts.batch])
        exp_s = time.perf_counter() - started
        exporter.close()
        raw_rate, exp_rate = len(exports) / raw_s, len(exports) / exp_s
        print(f"exports={len(exports)} batch={opts.batch} (each = 1 delete + 1 put)")
        print(f"raw_client:        {raw_s:.2f}s {raw_rate:,.0f} exports/s")
        print(f"accumulo_exporter: {exp_s:.2f}s {exp_rate:,.0f} exports/s")
        print(f"ratio={exp_rate / raw_rate:.3f}")
        conn.close()


if __name__ == "__main__":
    main()
