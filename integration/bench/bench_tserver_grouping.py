"""Benchmark: does grouping a task's writes by B's tablet server help when B has several tablet servers?

One cluster with ``--tservers`` tablet servers (default 3); a table split into ``--tablets`` tablets spread over
them. The same N cells (rows ``r%08d``, 32-byte values) are written through one client BatchWriter three ways,
each into a fresh table of the same shape: ``grouped`` (sorted by row: consecutive mutations go to one tablet,
hence one server, as a client that grouped by server would send them), ``interleaved`` (each mutation to the
next tablet in turn: the worst mix), and ``one_tablet`` (no splits: one server takes everything). The
gateway's Java BatchWriter bins every batch by tablet server itself, so grouping on the client should buy
nothing; this measures it. Final line: ``ratio=<grouped/interleaved>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Mutation  # noqa: E402
from integration.harness import clusters  # noqa: E402


def write(conn, table: str, rows: list[int], splits: list[bytes]) -> float:  # noqa: ANN001
    conn.create_table(table)
    if splits:
        conn.add_splits(table, splits)
        time.sleep(5)  # let the balancer spread the new tablets over the servers
    started = time.perf_counter()
    with conn.batch_writer(table) as w:
        for r in rows:
            w.add_mutation(Mutation(f"r{r:08d}").put("f", "q", f"v{r:031d}".encode()))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=200_000)
    parser.add_argument("--tservers", type=int, default=3)
    parser.add_argument("--tablets", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=2)
    opts = parser.parse_args()
    n, k = opts.cells, opts.tablets
    per = n // k
    grouped = list(range(n))
    interleaved = [(i % k) * per + i // k for i in range(per * k)] + list(range(per * k, n))
    splits = [f"r{t * per:08d}".encode() for t in range(1, k)]
    with clusters(("g",), tservers=opts.tservers) as running:
        conn = running["g"].connect()
        seconds: dict[str, list[float]] = {"grouped": [], "interleaved": [], "one_tablet": []}
        for rep in range(opts.repeat):
            for name, rows, table_splits in (("grouped", grouped, splits), ("interleaved", interleaved, splits),
                                             ("one_tablet", grouped, [])):
                load = os.getloadavg()[0]
                s = write(conn, f"bench_{name}_{rep}", rows, table_splits)
                seconds[name].append(s)
                print(f"{name:12s} run {rep}: {s:.2f}s {n / s:,.0f} cells/s (load average {load:.1f})", flush=True)
        best = {name: min(v) for name, v in seconds.items()}
        print(f"cells={n} tservers={opts.tservers} tablets={k} best of {opts.repeat}: "
              + " ".join(f"{name}={n / s:,.0f}/s" for name, s in best.items()))
        print(f"ratio={best['interleaved'] / best['grouped']:.3f}")


if __name__ == "__main__":
    main()
