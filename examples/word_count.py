"""Word count through the combine queue, exported to an inverted count index on cluster B.

Documents change on cluster A (table ``documents``: row = document id, ``d:text``). Each change is one row
transaction on the document's row (:class:`connector.transactions.RowTransactions`): it reads the old text
from the row, writes the new text (or deletes it) and queues the per-word count deltas (new words +n, dropped
words -n) to a combine queue through the row's outbox, all in one commit; producers never read a count. A
combine pass folds a bucket's deltas into the counts, and its observer turns each changed count into an
export ``(word, old count -> new count)``; the drain replays those into B as the index count -> words
(row = zero-padded count, qualifier = word), at timestamp = the change's seq.

``make demo-wordcount`` runs it on embedded clusters: producer processes on shared documents with a streaming
combine running meanwhile, one producer SIGKILLed mid-run and restarted, a relay of what it left, a final
batch combine, the Spark drain, and a verification against a recount of the documents.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from connector import CombineConfig, Connection, RowTransactions, Transaction  # noqa: E402
from connector.combine import Change  # noqa: E402
from examples.inverted_count_index import count_update  # noqa: E402

DOC_FAMILY, DOC_QUALIFIER = b"d", b"text"
DOCUMENTS = "documents"


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
    """Changes documents (shared by all producers: their transactions collide on a document's row) and queues
    the word-count deltas. Each change is ONE row transaction on the document's row: read the old text from the
    row, write the new text (or delete it) and queue each word's delta to the combine queue, all in one
    commit (the row's outbox carries the deltas; the relay moves them into the combine queue). ``updates``:
    deltas of committed changes. ``close()`` (or ``with``) relays what the relayer still holds."""

    def __init__(self, conn: Connection, docs_table: str, combine: CombineConfig, doc_ids: list[str],
                 vocabulary: list[str], seed: int, batch: int = 50) -> None:
        self.conn, self.docs_table, self.combine = conn, docs_table, combine
        self.doc_ids, self.vocabulary = doc_ids, vocabulary
        self.rng = random.Random(seed)
        self.weights = [1 / (i + 1) for i in range(len(vocabulary))]  # Zipf: a few words are very popular
        self.batch = batch
        self.txs = RowTransactions(conn, docs_table)
        #: committed changes, and the word deltas they queued
        self.changes = self.updates = 0

    @property
    def conflicts(self) -> int:
        return self.txs.conflicts

    def text(self) -> str:
        return " ".join(self.rng.choices(self.vocabulary, self.weights, k=self.rng.randint(3, 25)))

    def change(self, text: str, delete: bool, queued: dict[int, int], index: int) -> Callable[[Transaction], None]:
        """The transaction of one change: the new ``text``, or a delete when ``delete`` and the document
        exists. It may run more than once (the row changed meanwhile): old text and deltas come from the row
        as read; ``queued[index]`` ends as the number of deltas of the run that committed."""

        def fn(tx: Transaction) -> None:
            raw = tx.get(DOC_FAMILY, DOC_QUALIFIER)
            old = None if raw is None else raw.decode()
            new = None if old and delete else text
            if new is None:
                tx.delete(DOC_FAMILY, DOC_QUALIFIER)
            else:
                tx.put(DOC_FAMILY, DOC_QUALIFIER, new.encode())
            deltas = word_deltas(old, new)
            for word, delta in deltas.items():
                tx.update(self.combine, word, delta)
            queued[index] = len(deltas)

        return fn

    def run(self, changes: int, progress: Callable[[DocumentProducer], None] | None = None) -> None:
        """Make ``changes`` changes, ``batch`` row transactions per ``run_all`` call."""
        done = 0
        while done < changes:
            n = min(self.batch, changes - done)
            queued: dict[int, int] = {}
            items = []
            for i in range(n):
                doc = self.rng.choice(self.doc_ids)
                delete = self.rng.random() < 0.1  # sometimes a delete
                items.append((doc, self.change(self.text(), delete, queued, i)))
            seqs = self.txs.run_all(items)
            committed = [i for i, s in enumerate(seqs) if s is not None]
            self.changes += len(committed)
            self.updates += sum(queued[i] for i in committed)
            done += n
            if progress is not None:
                progress(self)

    def close(self) -> None:
        self.txs.close()

    def __enter__(self) -> DocumentProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def recount(conn: Connection, docs_table: str) -> Counter:
    """Word counts recomputed from the documents: the truth the combined counts must equal."""
    out: Counter = Counter()
    for cell in conn.scan(docs_table, columns=[(DOC_FAMILY, DOC_QUALIFIER)], batch_size=10_000):
        out.update(cell.value.decode().split())
    return out


def expected_index(counts: Counter) -> set[tuple[bytes, bytes]]:
    return {(f"{n:08d}".encode(), w.encode()) for w, n in counts.items() if n}


def produce_main(argv: list[str]) -> int:
    """``python -m examples.word_count produce ...``: one producer process (cluster from the clusters.toml
    named by ACCUMULO_EXPORT_CONFIG). Prints ``progress committed=<changes> conflicts=<n> updates=<n>`` now
    and then and a ``done ...`` line with the same fields at the end."""
    from connector import cluster

    parser = argparse.ArgumentParser(prog="python -m examples.word_count produce",
                                     description="A producer process of the word count: document changes as "
                                     "row transactions whose outboxes carry the word deltas.")
    parser.add_argument("--cluster", default="A")
    parser.add_argument("--table", default="documents")
    parser.add_argument("--combine-table", default="wordcount")
    parser.add_argument("--cid", default="wc")
    parser.add_argument("--buckets", type=int, required=True)
    parser.add_argument("--documents", type=int, default=2_000)
    parser.add_argument("--vocabulary", type=int, default=5_000)
    parser.add_argument("--changes", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=50, help="changes per run_all call")
    parser.add_argument("--progress-seconds", type=float, default=5.0)
    opts = parser.parse_args(argv)

    combine = CombineConfig(table=opts.combine_table, cid=opts.cid, num_buckets=opts.buckets)
    conn = cluster(opts.cluster).connect()
    t0 = last = time.monotonic()

    def line(kind: str, p: DocumentProducer) -> str:
        return f"{kind} committed={p.changes} conflicts={p.conflicts} updates={p.updates}"

    def progress(p: DocumentProducer) -> None:
        nonlocal last
        if time.monotonic() - last >= opts.progress_seconds:
            last = time.monotonic()
            print(line("progress", p), flush=True)

    with DocumentProducer(conn, opts.table, combine, documents(opts.documents), vocabulary(opts.vocabulary),
                          opts.seed, batch=opts.batch) as p:
        print(f"started seed={opts.seed} changes={opts.changes}", flush=True)
        p.run(opts.changes, progress)
    conn.close()
    print(f"{line('done', p)} seconds={time.monotonic() - t0:.1f}", flush=True)
    return 0


def vocabulary(n: int) -> list[str]:
    return [f"word{i:05d}" for i in range(n)]


def documents(n: int) -> list[str]:
    return [f"doc{i:06d}" for i in range(n)]


def main() -> int:
    from connector import (
        CombineJob,
        CombineQueue,
        DrainJob,
        DrainSettings,
        ExportQueue,
        QueueConfig,
        outbox_status,
        queue_status,
        relay_table,
        run_batch,
        spark_session,
    )
    from connector.clusters_config import CONFIG_ENV, write_clusters
    from connector.combine import combine_status
    from connector.spark.combine_job import run_combine, run_stream
    from examples.demo import ProducerProcess, kill_one_and_restart
    from examples.inverted_count_index import actual_index
    from integration.harness import clusters

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--vocabulary", type=int, default=5_000)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--buckets", type=int, default=32)
    parser.add_argument("--batch", type=int, default=50, help="changes per run_all call in a producer")
    parser.add_argument("--kill-after", type=float, default=4.0,
                        help="seconds of committing after which one producer is SIGKILLed")
    opts = parser.parse_args()

    print("starting embedded clusters A and B ...", flush=True)
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        config_file = running.state_dir / "clusters.toml"
        write_clusters(config_file, {"A": a.gateway_options(), "B": b.gateway_options()})
        os.environ[CONFIG_ENV] = str(config_file)
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        conn_a, conn_b = a.connect(), b.connect()
        combine = CombineConfig(table="wordcount", cid="wc", num_buckets=opts.buckets)
        export = QueueConfig(table="exports", qid="widx", num_buckets=opts.buckets)
        CombineQueue(conn_a, combine).init()
        ExportQueue(conn_a, export).init()
        RowTransactions(conn_a, DOCUMENTS).init()

        spark = spark_session(app_name="word count demo")
        job = CombineJob(source=a.gateway_options(), combine=combine, observer="examples.word_count:index_observer",
                         export_queue=export)
        # a streaming combine runs while the documents change: passes race with producers
        stop = threading.Event()
        streamed: list[Any] = []
        streamer = threading.Thread(target=lambda: streamed.append(run_stream(spark, job, 1.0, stop)))
        streamer.start()

        per = opts.changes // opts.producers

        def start(name: str, seed: int, changes: int) -> ProducerProcess:
            return ProducerProcess(name, "examples.word_count", [
                "produce", "--cluster", "A", "--table", DOCUMENTS, "--combine-table", combine.table, "--cid",
                combine.cid, "--buckets", str(combine.num_buckets), "--documents", str(opts.documents),
                "--vocabulary", str(opts.vocabulary), "--changes", str(changes), "--seed", str(seed),
                "--batch", str(opts.batch), "--progress-seconds", "0.5"], env)

        print(f"{opts.producers} producer processes change {opts.documents} shared documents {per * opts.producers} "
              "times ...", flush=True)
        t0 = time.monotonic()
        procs = [start(f"p{i}", i, per) for i in range(opts.producers)]
        kill = kill_one_and_restart(procs, 0, opts.kill_after, per,
                                    lambda left: start("p0'", 1000 + opts.producers, left), conn_a, DOCUMENTS)
        if kill is None:
            stop.set()
            streamer.join()
            spark.stop()
            return 1
        print(kill.line(), flush=True)
        failed = [p for p in procs if p.wait() != 0]
        produce_s = time.monotonic() - t0
        for p in failed:
            print(f"producer {p.name} failed:\n{p.stderr[-3000:]}", file=sys.stderr)
        changes = kill.committed + sum(p.committed for p in procs)
        updates = int(kill.fields.get("updates", 0)) + sum(int(p.last.get("updates", 0)) for p in procs)
        conflicts = kill.conflicts + sum(p.conflicts for p in procs)
        before_relay = outbox_status(conn_a, DOCUMENTS)
        relayed = relay_table(conn_a, DOCUMENTS)  # what the killed producer left: its deltas reach the queue
        print(f"{changes}+ changes committed in {produce_s:.1f}s ({conflicts} conflicts retried); the final relay "
              f"moved {relayed.relayed} outbox cells", flush=True)
        stop.set()
        streamer.join()
        stream_report = streamed[0]
        print(f"streaming combine: {stream_report.rounds} rounds, {stream_report.totals.updates} updates "
              f"combined while producing ({stream_report.totals.conflicts} lost conditions retried)", flush=True)

        t1 = time.monotonic()
        final = run_combine(spark, job)
        combine_s = time.monotonic() - t1
        drain = run_batch(spark, DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=export,
                                          dest_table="word_index", settings=DrainSettings(create_dest_table=True)))
        spark.stop()

        truth = recount(conn_a, DOCUMENTS)
        counts = CombineQueue(conn_a, combine).items()
        actual = actual_index(conn_b, "word_index")
        expected = expected_index(truth)
        left = combine_status(conn_a, combine)
        outbox = outbox_status(conn_a, DOCUMENTS)
        counts_ok = counts == {w: n for w, n in truth.items() if n}
        index_ok = sorted(actual) == sorted(expected)
        combined = stream_report.totals.updates + final.totals.updates
        # the killed producer's updates after its last progress line are not in `updates`: at least, not equal
        verified = (not failed and counts_ok and index_ok and left.empty and outbox.empty
                    and queue_status(conn_a, export).empty and combined >= updates and not final.totals.failed)
        print("\n=== word count demo ===")
        print(f"producers                   {opts.producers} processes on {opts.documents} shared documents; "
              f"{kill.name} SIGKILLed after {kill.after_s:.1f}s and restarted"
              + (f"; {len(failed)} FAILED" if failed else ""))
        print(f"changes committed           {changes}+ in {produce_s:.1f}s, {conflicts} conflicts retried (the "
              "killed producer's last second is not counted)")
        print(f"kill left                   {kill.left} outbox cells 2s after the kill; {before_relay.cells} still "
              f"there after the producers (the others were relayed by producers committing on their rows or the "
              f"streaming combine's periodic relay), relay_table relayed {relayed.relayed}")
        print(f"updates queued / combined   {updates}+ / {combined} (streaming {stream_report.totals.updates}, "
              f"final batch {final.totals.updates} in {combine_s:.1f}s)")
        print(f"distinct words              {len(counts)} (recount from documents: {len(expected)})")
        print(f"counts equal the recount    {'yes' if counts_ok else 'NO'}")
        print(f"index on B                  {len(actual)} cells, {drain.exported} exports drained, "
              f"stale {len(set(actual) - expected)}, missing {len(expected - set(actual))}")
        print(f"left in combine queue       {left.updates} updates, {left.outbox} outbox cells")
        print(f"documents outbox left       {outbox.cells} cells ({outbox.malformed} malformed)")
        print(f"verified                    {'yes' if verified else 'NO'}")
        return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(produce_main(sys.argv[2:]) if sys.argv[1:2] == ["produce"] else main())
