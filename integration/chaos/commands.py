"""The command lines of the chaos run's process kinds: the connector's own ``accumulo-export`` commands
(the way an operator runs them), the chaos producer and the compaction script."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from connector.accumulo.writer import MIN_PURGE_GRACE_SECONDS

from .schedule import ProducerSpec

SNAPSHOT = "examples.inverted_count_index:snapshot"
#: the grace of a purge of tombstones: the shortest the purge accepts (twice the bound writers are held to)
PURGE_GRACE_SECONDS = MIN_PURGE_GRACE_SECONDS


@dataclass(frozen=True)
class Commands:
    """What every command names: the queue on A, the producers' counts table, the vocabulary."""

    queue_table: str
    qid: str
    buckets: int
    counts: str
    words: int
    producer_rate: float
    python: str = sys.executable

    def cli(self, *args: str) -> list[str]:
        return [self.python, "-m", "connector", *args]

    def queue(self) -> list[str]:
        return ["--table", self.queue_table, "--queue", self.qid]

    def queue_init(self) -> list[str]:
        return self.cli("queue", "init", "--cluster", "A", *self.queue(), "--buckets", str(self.buckets),
                        "--translator", "difference")

    def producer(self, spec: ProducerSpec, seed: int) -> list[str]:
        return [self.python, "-m", "integration.chaos.producer", "--cluster", "A", "--table", self.counts,
                "--queue-table", self.queue_table, "--qid", self.qid, "--buckets", str(self.buckets),
                "--words", str(self.words), "--seed", str(seed), "--skew-seconds", f"{spec.skew_seconds:.3f}",
                "--rate", str(self.producer_rate), "--cache-rows", str(spec.cache_rows)]

    def _drain(self, dest_table: str) -> list[str]:
        return ["drain", "--source", "A", *self.queue(), "--dest", "B", "--dest-table", dest_table,
                "--create-dest-table"]

    def stream_local(self, dest_table: str) -> list[str]:
        return self.cli(*self._drain(dest_table), "--stream", "--engine", "local", "--trigger-seconds", "0.5",
                        "--relay-seconds", "5", "--sweep-seconds", "5", "--buffer-bytes", "65536")

    def stream_spark(self, dest_table: str, checkpoint: str) -> list[str]:
        return self.cli(*self._drain(dest_table), "--stream", "--engine", "spark", "--master", "local[2]",
                        "--trigger-seconds", "1", "--relay-seconds", "5", "--sweep-seconds", "5",
                        "--checkpoint", checkpoint)

    def drain(self, dest_table: str, buffer_bytes: int) -> list[str]:
        return self.cli(*self._drain(dest_table), "--engine", "local", "--buffer-bytes", str(buffer_bytes))

    def _b_from_a(self, dest_table: str) -> list[str]:
        return ["--source", "A", *self.queue(), "--producer-table", self.counts, "--dest", "B",
                "--dest-table", dest_table, "--snapshot", SNAPSHOT]

    def bootstrap(self, dest_table: str, method: str) -> list[str]:
        # a new primary's bootstrap starts beside its streams: whichever comes first creates the table
        return self.cli("bootstrap", *self._b_from_a(dest_table), "--engine", "local", "--method",
                        method, "--settle-seconds", "60", "--json", "--create-dest-table")

    def verify(self, dest_table: str) -> list[str]:
        return self.cli("verify", *self._b_from_a(dest_table), "--repair", "--settle-seconds", "30", "--json")

    def purge(self, dest_table: str) -> list[str]:
        return self.cli("purge-tombstones", "--source", "A", *self.queue(), "--dest", "B", "--dest-table", dest_table,
                        "--grace", str(PURGE_GRACE_SECONDS), "--json")

    def relay(self) -> list[str]:
        return self.cli("tx", "relay", "--cluster", "A", "--table", self.counts)

    def register(self, dest_table: str) -> list[str]:
        return self.cli("queue", "destinations", "add", "--cluster", "A", *self.queue(), "--dest", "B",
                        "--dest-table", dest_table, "--translator", "difference", "--create-dest-table")

    def unregister(self, dest_table: str) -> list[str]:
        return self.cli("queue", "destinations", "remove", "--cluster", "A", *self.queue(), "--dest", "B",
                        "--dest-table", dest_table)

    def compact(self, cluster: str, table: str) -> list[str]:
        return [self.python, "-m", "integration.chaos.compact", "--cluster", cluster, "--table", table]
