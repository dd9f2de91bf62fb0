"""Benchmark: transactional producers. Four producer processes run transactions on 10k rows with a Zipf skew
(so hot rows collide across processes); each transaction reads its row's counter, writes it back plus one,
and exports the change. Several ways, in the same run against the same embedded cluster:

- ``plain``: what producers did before row transactions: a BatchWriter for the row and ``ExportQueue.add``
  for the export (two writers, no atomicity, no read: a blind write of the cell);
- ``conditional``: one conditional mutation per transaction and nothing else (condition: a cell never
  written is absent), the round trip a commit cannot do without: the floor of ``run``'s latency;
- ``run_inline``: ``RowTransactions(relay_delay=None).run`` per transaction: read, conditional commit, and the
  relay of the outbox before ``run`` returns (the producer before the relayer thread);
- ``run``: ``RowTransactions.run`` per transaction: read and conditional commit; the relayer thread relays
  many transactions' outboxes together (``close()`` waits for it, inside the timed part);
- ``run_all``: ``RowTransactions.run_all`` over chunks of 1,000 transactions (one read, one conditional call per
  round; the relay on the relayer thread);
- ``run_cached``: ``run`` with ``cache_rows`` (each producer keeps the rows it committed and commits the next
  transaction on one without reading it), on the same shared rows: a row another producer committed meanwhile
  costs a lost condition;
- ``run_owned`` and ``run_owned_cached``: ``run`` without and with ``cache_rows``, each producer on rows of its
  own (rows partitioned among producers, the case the cache is for);
- ``java``: the limit: ``RowTransactionExample`` (Java, Accumulo's own client and ``ConditionalWriter``, no
  gateway) committing the same mutations (version condition, the counter cell, one outbox cell) with
  ``--no-relay``, one transaction at a time, its rows drawn uniformly (not Zipf) from as many words; the
  outboxes it leaves are relayed after the timed part.

Prints transactions/s for each (over the slowest producer's own time, without process start-up), the
latency of one call (p50, p99; the transaction modes and ``conditional``), the conflict retry rate (lost
conditions per transaction), ``run/run_inline``, ``run_p50/conditional_p50``, ``run/java``,
``run_all/java``, ``run_cached/run``, ``run_owned_cached/run_owned``, ``run_owned_cached_p50/conditional_p50`` and
a final ``ratio=<run_all/plain>``. Run: ``make bench`` or ``.venv/bin/python integration/bench/bench_transactions.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from connector.clusters_config import CONFIG_ENV, cluster, write_clusters  # noqa: E402
from connector.queue import ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.transactions import RowTransactions, outbox_status, relay_table  # noqa: E402

#: transactions per run_all call
CHUNK = 1000
MODES = ("plain", "conditional", "java", "run_inline", "run", "run_all", "run_cached", "run_owned",
         "run_owned_cached")


def rows_for(n: int, rows: int, skew: float, seed: int) -> list[str]:
    weights = 1.0 / np.arange(1, rows + 1) ** skew
    picks = np.random.default_rng(seed).choice(rows, size=n, p=weights / weights.sum())
    return [f"row{i:05d}" for i in picks.tolist()]


def worker(mode: str, table: str, qtable: str, buckets: int, n: int, rows: int, skew: float, seed: int) -> None:
    conn = cluster("A").connect()
    queue = QueueConfig(table=qtable, qid="q", num_buckets=buckets)
    picks = rows_for(n, rows, skew, seed)
    if "owned" in mode:  # rows partitioned among producers: each draws from rows of its own
        picks = [f"p{seed}-{row}" for row in picks]

    def bump(tx):  # noqa: ANN001, ANN202
        old = int(tx.get(b"c", b"n", default=b"0"))
        tx.put(b"c", b"n", str(old + 1).encode())
        tx.export(queue, tx.row.decode(), {"old": old, "new": old + 1})

    t0 = time.perf_counter()
    conflicts = 0
    latencies: list[float] = []
    if mode == "conditional":
        from connector.accumulo import Condition, ConditionalMutation

        with conn.conditional_writer(table) as cw:
            for i, row in enumerate(picks):
                m = ConditionalMutation(row, [Condition(b"c", b"never")]).put(b"c", b"n", str(i).encode())
                t = time.perf_counter()
                cw.write(m)
                latencies.append(time.perf_counter() - t)
    elif mode == "plain":
        seq = seed * 10**9  # disjoint per producer: two producers' (row, seq) must not collide into one entry
        with ExportQueue(conn, queue) as q, conn.batch_writer(table) as w:
            for i, row in enumerate(picks):
                from connector.accumulo import Mutation

                w.add_mutation(Mutation(row).put(b"c", b"n", b"1", timestamp=seq + i))
                q.add(row, {"old": 0, "new": 1}, seq + i)
    else:
        txs = RowTransactions(conn, table, relay_delay=None if mode == "run_inline" else 0.05,
                              cache_rows=rows if "cached" in mode else 0)
        if mode != "run_all":
            for row in picks:
                t = time.perf_counter()
                txs.run(row, bump)
                latencies.append(time.perf_counter() - t)
        else:
            for i in range(0, n, CHUNK):
                t = time.perf_counter()
                txs.run_all([(row, bump) for row in picks[i:i + CHUNK]])
                latencies.append(time.perf_counter() - t)
        txs.close()
        conflicts = txs.conflicts
    print(json.dumps({"seconds": time.perf_counter() - t0, "transactions": n, "conflicts": conflicts,
                      "latencies": latencies}))


def java_worker(cluster_a, table: str, qtable: str, buckets: int, n: int, rows: int,  # noqa: ANN001
                seed: int) -> list[str]:
    from integration.harness import ROW_TRANSACTION_EXAMPLE, build_gateway, java_command

    return java_command(build_gateway(), ROW_TRANSACTION_EXAMPLE, *cluster_a.java_args(), "--table", table,
                        "--queue-table", qtable, "--qid", "q", "--buckets", str(buckets), "--words", str(rows),
                        "--transactions", str(n), "--seed", str(seed), "--no-relay", heap="256m")


def run_mode(mode: str, env: dict, conn, opts: argparse.Namespace, cluster_a) -> dict:  # noqa: ANN001
    table, qtable = f"bench_tx_{mode}", f"bench_txq_{mode}"
    queue = QueueConfig(table=qtable, qid="q", num_buckets=opts.buckets)
    ExportQueue(conn, queue).init()
    RowTransactions(conn, table).init()
    per = opts.transactions // opts.producers
    t0 = time.perf_counter()
    if mode == "java":
        procs = [subprocess.Popen(java_worker(cluster_a, table, qtable, opts.buckets, per, opts.rows, 1000 + i),
                                  env=cluster_a.java_env(), stdout=subprocess.PIPE, text=True)
                 for i in range(opts.producers)]
    else:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", mode, table, qtable, str(opts.buckets),
                                   str(per), str(opts.rows), str(opts.skew), str(1000 + i)], env=env,
                                  stdout=subprocess.PIPE, text=True) for i in range(opts.producers)]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    wall = time.perf_counter() - t0
    if any(p.returncode for p in procs):
        raise SystemExit(f"a {mode} producer failed")
    total = per * opts.producers
    if mode == "java":
        relay_table(conn, table)  # the outboxes --no-relay left, outside the timed part
        outs = [{"seconds": o["seconds"], "conflicts": o["conflicts_retried"], "latencies": []} for o in outs]
    depth = queue_status(conn, queue).entries if mode != "conditional" else total
    if mode not in ("plain", "conditional"):
        counts = sum(int(c.value) for c in conn.scan(table, columns=[(b"c", b"n")], batch_size=10_000))
        assert counts == total, f"{mode}: counters sum to {counts}, not {total}"
        assert outbox_status(conn, table).empty, f"{mode}: outbox cells left"
    assert depth == total, f"{mode}: {depth} entries queued, not {total}"
    conflicts = sum(o["conflicts"] for o in outs)
    # the producers' own time (the slowest one's), without the processes' start-up
    busy = max(o["seconds"] for o in outs)
    latencies = np.array([x for o in outs for x in o["latencies"]] or [0.0]) * 1000
    return {"rate": total / busy, "busy": busy, "wall": wall, "conflicts": conflicts, "total": total,
            "p50": float(np.percentile(latencies, 50)), "p99": float(np.percentile(latencies, 99))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--skew", type=float, default=1.0)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--worker", nargs=8, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.worker:
        mode, table, qtable, buckets, n, rows, skew, seed = opts.worker
        worker(mode, table, qtable, int(buckets), int(n), int(rows), float(skew), int(seed))
        return

    from integration.harness import clusters

    with clusters(["a"]) as running:
        a = running["a"]
        config = running.state_dir / "clusters.toml"
        write_clusters(config, {"A": a.gateway_options()})
        env = dict(os.environ, **{CONFIG_ENV: str(config), "PYTHONPATH": str(ROOT)})
        conn = a.connect()
        results = {mode: run_mode(mode, env, conn, opts, a) for mode in MODES}
        print(f"transactions={results['plain']['total']} producers={opts.producers} rows={opts.rows} "
              f"zipf_skew={opts.skew}")
        for mode, r in results.items():
            retry = r["conflicts"] / r["total"]
            latency = "" if mode in ("plain", "java") else (
                f", latency per call p50 {r['p50']:.2f} ms p99 {r['p99']:.2f} ms"
                + (f" ({CHUNK} transactions per call)" if mode == "run_all" else ""))
            print(f"{mode}: {r['busy']:.2f}s {r['rate']:,.0f} transactions/s (wall {r['wall']:.2f}s with process "
                  f"start-up), conflict retries per transaction {retry:.3f}{latency}")
        print(f"run/run_inline={results['run']['rate'] / results['run_inline']['rate']:.2f} "
              f"run_p50/conditional_p50={results['run']['p50'] / results['conditional']['p50']:.2f} "
              f"run/plain={results['run']['rate'] / results['plain']['rate']:.3f} "
              f"run/java={results['run']['rate'] / results['java']['rate']:.2f} "
              f"run_all/java={results['run_all']['rate'] / results['java']['rate']:.2f}")
        print(f"run_cached/run={results['run_cached']['rate'] / results['run']['rate']:.2f} "
              f"run_owned_cached/run_owned={results['run_owned_cached']['rate'] / results['run_owned']['rate']:.2f} "
              f"run_owned_cached_p50/conditional_p50="
              f"{results['run_owned_cached']['p50'] / results['conditional']['p50']:.2f}")
        print(f"ratio={results['run_all']['rate'] / results['plain']['rate']:.3f}")


if __name__ == "__main__":
    main()
