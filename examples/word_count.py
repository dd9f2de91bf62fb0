"""Word count through the combine queue, exported to an inverted count index on cluster B.

Documents change on cluster A (table ``documents``: row = document id, ``d:text``). Each change queues the
per-word count deltas (new words +n, dropped words -n) to a combine queue; producers never read a count. A
combine pass folds a bucket's deltas into the counts, and its observer turns each changed count into an
export ``(word, old count -> new count)``; the drain replays those into B as the index count -> words
(row = zero-padded count, qualifier = word), at timestamp = the change's seq.

``make demo-wordcount`` runs it on embedded clusters: concurrent producers with a streaming combine running
meanwhile, a final batch combine, the Spark drain, and a verification against a recount of the documents.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from connector.accumulo import Connection, Mutation  # noqa: E402
from connector.combine import Change, CombineConfig, CombineQueue  # noqa: E402
from examples.inverted_count_index import count_update  # noqa: E402

DOC_FAMILY, DOC_QUALIFIER = b"d", b"text"


def word_deltas(old_text: str | None, new_text: str | None) -> Counter:
    """How each word's count changes when a document goes from ``old_text`` to ``new_text`` (None: absent)."""
    delta = Counter((new_text or "").split())
    delta.subtract(Counter((old_text or "").split()))
    return Counter({w: n for w, n in delta.items() if n})


def index_observer(changes: Sequence[Change]) -> Iterable[tuple[Change, Any, Any]]:
    """Each changed count becomes an export for the ``difference`` translator: delete the index cell of the
    old count, put the one of the new count."""
    return [(c, c.key, count_update(c.key, c.old, c.new)) for c in changes]


class DocumentProducer:
    """Changes its own documents (so each document's history is serial) and queues the word-count deltas."""

    def __init__(self, conn: Connection, docs_table: str, combine: CombineConfig, doc_ids: list[str],
                 vocabulary: list[str], seed: int) -> None:
        self.conn, self.docs_table, self.combine = conn, docs_table, combine
        self.doc_ids, self.vocabulary = doc_ids, vocabulary
        self.rng = random.Random(seed)
        self.weights = [1 / (i + 1) for i in range(len(vocabulary))]  # Zipf: a few words are very popular
        self.texts: dict[str, str | None] = {}
        self.updates = 0
        self._last_ts = 0

    def text(self) -> str:
        return " ".join(self.rng.choices(self.vocabulary, self.weights, k=self.rng.randint(3, 25)))

    def run(self, changes: int) -> None:
        with CombineQueue(self.conn, self.combine) as counts, self.conn.batch_writer(self.docs_table) as docs:
            for i in range(changes):
                if i % 200 == 199:
                    counts.flush()  # visible to the combine passes running meanwhile
                doc = self.rng.choice(self.doc_ids)
                old = self.texts.get(doc)
                new = None if old and self.rng.random() < 0.1 else self.text()  # sometimes a delete
                self.texts[doc] = new
                # rising timestamps: two versions of a document written in one server millisecond would tie
                self._last_ts = ts = max(time.time_ns() // 1000, self._last_ts + 1)
                m = Mutation(doc)
                if new is None:
                    m.delete(DOC_FAMILY, DOC_QUALIFIER, timestamp=ts)
                else:
                    m.put(DOC_FAMILY, DOC_QUALIFIER, new.encode(), timestamp=ts)
                docs.add_mutation(m)
                # on plain Accumulo the document and its deltas are two writes; a transactional producer
                # (Fluo) would commit them together
                self.updates += counts.update_all(word_deltas(old, new).items())


def recount(conn: Connection, docs_table: str) -> Counter:
    """Word counts recomputed from the documents: the truth the combined counts must equal."""
    out: Counter = Counter()
    for cell in conn.scan(docs_table, columns=[(DOC_FAMILY, DOC_QUALIFIER)], batch_size=10_000):
        out.update(cell.value.decode().split())
    return out


def expected_index(counts: Counter) -> set[tuple[bytes, bytes]]:
    return {(f"{n:08d}".encode(), w.encode()) for w, n in counts.items() if n}


def main() -> int:
    from connector.clusters_config import CONFIG_ENV, write_clusters
    from connector.combine import combine_status
    from connector.queue import ExportQueue, QueueConfig, queue_status
    from connector.spark import DrainJob, run_batch, spark_session
    from connector.spark.combine_job import CombineJob, run_combine, run_stream
    from examples.inverted_count_index import actual_index
    from integration.harness import clusters

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--vocabulary", type=int, default=5_000)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--buckets", type=int, default=32)
    opts = parser.parse_args()

    print("starting embedded clusters A and B ...", flush=True)
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        config_file = running.state_dir / "clusters.toml"
        write_clusters(config_file, {"A": a.gateway_options(), "B": b.gateway_options()})
        os.environ[CONFIG_ENV] = str(config_file)
        conn_a, conn_b = a.connect(), b.connect()
        combine = CombineConfig(table="wordcount", cid="wc", num_buckets=opts.buckets)
        export = QueueConfig(table="exports", qid="widx", num_buckets=opts.buckets)
        CombineQueue(conn_a, combine).init()
        ExportQueue(conn_a, export).init()
        conn_a.create_table("documents", exist_ok=True)

        spark = spark_session(app_name="word count demo")
        job = CombineJob(source=a.gateway_options(), combine=combine, observer="examples.word_count:index_observer",
                         export_queue=export)
        # a streaming combine runs while the documents change: passes race with producers
        stop = threading.Event()
        streamed: list[Any] = []
        streamer = threading.Thread(target=lambda: streamed.append(run_stream(spark, job, 1.0, stop)))
        streamer.start()

        vocabulary = [f"word{i:05d}" for i in range(opts.vocabulary)]
        doc_ids = [f"doc{i:06d}" for i in range(opts.documents)]
        producers = [DocumentProducer(a.connect(), "documents", combine, doc_ids[i::opts.producers], vocabulary, i)
                     for i in range(opts.producers)]
        print(f"{opts.producers} producers change {opts.documents} documents {opts.changes} times ...", flush=True)
        t0 = time.monotonic()
        threads = [threading.Thread(target=p.run, args=(opts.changes // opts.producers,)) for p in producers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        produce_s = time.monotonic() - t0
        updates = sum(p.updates for p in producers)
        print(f"{updates} word-count updates queued in {produce_s:.1f}s", flush=True)
        stop.set()
        streamer.join()
        stream_report = streamed[0]
        print(f"streaming combine: {stream_report.rounds} rounds, {stream_report.totals.updates} updates "
              f"combined while producing ({stream_report.totals.conflicts} lost conditions retried)", flush=True)

        t1 = time.monotonic()
        final = run_combine(spark, job)
        combine_s = time.monotonic() - t1
        drain = run_batch(spark, DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=export,
                                          dest_table="word_index", translator="difference"))
        spark.stop()

        truth = recount(conn_a, "documents")
        counts = CombineQueue(conn_a, combine).items()
        actual = actual_index(conn_b, "word_index")
        expected = expected_index(truth)
        left = combine_status(conn_a, combine)
        counts_ok = counts == {w: n for w, n in truth.items() if n}
        index_ok = sorted(actual) == sorted(expected)
        combined = stream_report.totals.updates + final.totals.updates
        verified = (counts_ok and index_ok and left.empty and queue_status(conn_a, export).empty
                    and combined == updates and not final.totals.failed)
        print("\n=== word count demo ===")
        print(f"updates queued / combined   {updates} / {combined} (streaming {stream_report.totals.updates}, "
              f"final batch {final.totals.updates} in {combine_s:.1f}s)")
        print(f"distinct words              {len(counts)} (recount from documents: {len(expected)})")
        print(f"counts equal the recount    {'yes' if counts_ok else 'NO'}")
        print(f"index on B                  {len(actual)} cells, {drain.exported} exports drained, "
              f"stale {len(set(actual) - expected)}, missing {len(expected - set(actual))}")
        print(f"left in combine queue       {left.updates} updates, {left.outbox} outbox cells")
        print(f"verified                    {'yes' if verified else 'NO'}")
        return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
