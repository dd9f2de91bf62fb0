"""``make demo``: the main job on embedded clusters, end to end.

Starts clusters A and B, runs concurrent producers of the inverted count index on A (100k+ transactions
over 10k words, with repeated adds), drains the export queue into B with Spark, verifies B against a
recomputation from A, and prints a short report.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from connector.clusters_config import CONFIG_ENV, write_clusters  # noqa: E402
from connector.queue import ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.spark import DrainJob, run_batch, spark_session  # noqa: E402
from examples.inverted_count_index import (  # noqa: E402
    Producer,
    SequenceOracle,
    actual_index,
    expected_index,
    split,
    words,
)
from integration.harness import clusters  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=10_000)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--buckets", type=int, default=64)
    opts = parser.parse_args()

    print("starting embedded clusters A and B (first run builds the gateway) ...", flush=True)
    t0 = time.monotonic()
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        print(f"clusters up in {time.monotonic() - t0:.0f}s", flush=True)
        config_file = running.state_dir / "clusters.toml"
        write_clusters(config_file, {"A": a.gateway_options(), "B": b.gateway_options()})
        os.environ[CONFIG_ENV] = str(config_file)

        queue = QueueConfig(table="exports", qid="cidx", num_buckets=opts.buckets)
        conn_a = a.connect()
        ExportQueue(conn_a, queue).init()
        conn_a.create_table("counts", exist_ok=True)

        oracle = SequenceOracle()
        per = opts.transactions // opts.producers
        producers = [Producer(a.connect(), queue, "counts", ws, oracle, seed=i)
                     for i, ws in enumerate(split(words(opts.words), opts.producers))]
        print(f"producing {per * opts.producers} transactions with {opts.producers} concurrent producers ...",
              flush=True)
        t_produce = time.monotonic()
        threads = [threading.Thread(target=p.run, args=(per,)) for p in producers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        produce_s = time.monotonic() - t_produce
        added = sum(p.added for p in producers)
        depth = queue_status(conn_a, queue).entries
        print(f"{added} adds in {produce_s:.1f}s: {depth} distinct entries in the queue (the rest were "
              f"deliberately repeated adds of the same entry)", flush=True)

        spark = spark_session(app_name="accumulo-export demo")
        job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue,
                       dest_table="count_index",
                       translator="difference")
        t_drain = time.monotonic()
        report = run_batch(spark, job, progress=lambda r: print(
            f"  round {r.rounds}: {r.exported} exported, {r.rate:,.0f} entries/s", flush=True))
        drain_s = time.monotonic() - t_drain
        spark.stop()

        conn_b = b.connect()
        expected = expected_index(conn_a, "counts")
        actual = actual_index(conn_b, "count_index")
        left = queue_status(conn_a, queue).entries
        verified = sorted(expected) == sorted(actual) and len(actual) == len(set(actual)) and left == 0
        print("\n=== demo report ===")
        print(f"entries exported      {report.exported} of {depth} queued (dead-lettered {report.dead_lettered})")
        print(f"drain throughput      {report.exported / drain_s:,.0f} entries/s ({drain_s:.1f}s, "
              f"{report.rounds} Spark rounds)")
        print(f"latency               last add -> queue empty and B complete: {drain_s:.1f}s")
        print(f"index cells on B      {len(actual)} (expected {len(expected)}, stale "
              f"{len(set(actual) - expected)}, missing {len(expected - set(actual))})")
        print(f"queue left            {left}")
        print(f"verified              {'yes' if verified else 'NO'}")
        return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
