"""The differential test: the simulated Accumulo (integration/sim) against the real one.

The same seeded random sequences of operations run, through the same ``Connection`` API, on a fresh table of the
embedded cluster A and on a :class:`~integration.sim.accumulo.SimAccumulo` behind its simulated gateway, and every
answer must agree: every scan's full result (row, cf, cq, cv, ts, value), conditional statuses, properties,
splits, errors. The sequences mix writes with explicit timestamps (BatchWriter, ``write``, ``add_cells``),
deletes, writes at the server's time (compared as "a server time": the two clocks differ, and explicit
timestamps are kept far below any clock so the order of the two kinds is the same on both), minor compactions
(``flush_table``), full major compactions (whole table or a range of tablets, with compaction iterators or not),
tables with and without the versioning iterator, maxVersions 1 and 3, RegExFilter and TimestampFilter attached
to the table (scan scope or every scope) and given at scan time, a scan iterator named like a table iterator,
keys-only scans (SortedKeyIterator), ranges down to a key's timestamp, fetched columns, visibilities, isolated
scans, batch scans, conditional mutations (met and not, on values, absence, timestamps, invisible
visibilities, through ``write_all`` and the hand-encoded ``write_conditional``), bulk imports (files keep their
timestamps) and custom table properties.

Not covered, because a real cluster cannot be made to do it on demand: partial major compactions (Accumulo
chooses them itself; ``tests/test_sim_accumulo.py`` checks the simulation's own rules for them), two puts of one
key and timestamp (Accumulo keeps either: the generator never writes them), and server times themselves. Nor what
depends on the compactions Accumulo runs on its own, which the simulation runs only when told: the generator never
puts a cell at or below a delete of it (a compaction of all a tablet's files may have dropped the delete), never
raises maxVersions once cells are written, never reads more versions than the table keeps (no scan-only filter
below the versioning iterator), attaches filters to every scope only below it, and removes only scan-scope
filters.

Accumulo applies a table's property change a little later than the call returns: after each one the sequence
waits until a full scan of both sides agrees (at most a few seconds), then a moment more.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from connector.accumulo import UPDATE_SCHEMA, Connection, IteratorSetting, Key, Mutation, Range
from connector.accumulo.bulk import sort_cells
from connector.accumulo.conditional import Condition, ConditionalMutation, write_conditional
from connector.accumulo.errors import AccumuloError
from connector.accumulo.summaries import ensure_visibility_summary, visibility_summary
from integration.sim.accumulo import SimAccumulo
from integration.sim.gateway import SimGateway
from integration.sim.transport import sim_connection
from tests.conftest import unique_table

#: the sequences run; ``SIM_DIFF_SEEDS=100-140`` (or ``7,8,9``) runs others, for a deeper look
SEEDS = (11, 22, 33, 44, 55)
OPERATIONS = 200
AUTH = b"SIMDIFF"
ROWS = [f"r{i}".encode() for i in range(7)]
FAMILIES = [b"f", b"g"]
QUALIFIERS = [b"q0", b"q1", b"q2"]
VISIBILITIES = [b"", b"", b"", AUTH, b"OTHER", AUTH + b"|OTHER"]
VALUES = [b"v1", b"v2", b"v3", b"x1", b"tomb", b"abc", b"zz9", b""]
#: explicit timestamps stay below this; a server's time is far above it
SERVER_TIME = 10 ** 12
REGEX = "org.apache.accumulo.core.iterators.user.RegExFilter"
TIMESTAMP = "org.apache.accumulo.core.iterators.user.TimestampFilter"
VERSIONING = "org.apache.accumulo.core.iterators.user.VersioningIterator"
SORTED_KEY = "org.apache.accumulo.core.iterators.SortedKeyIterator"
SETTLE_SECONDS = 8.0


def _ts(ts: int) -> int | str:
    return ts if ts < SERVER_TIME else "server"


def normalized(cells: Any) -> list[tuple[Any, ...]]:
    return [(c.row, c.cf, c.cq, c.cv, _ts(c.ts), c.value) for c in cells]


def unordered(cells: Any) -> list[tuple[Any, ...]]:
    return sorted(normalized(cells), key=lambda c: (c[:4], c[4] == "server", c[4] if c[4] != "server" else 0, c[5]))


#: the message of the last error each side raised, for the failure's report
last_errors: dict[int, str] = {}


def outcome(fn: Callable[[Connection, str], Any], conn: Connection, table: str) -> Any:
    """What ``fn`` returns, or the kind of error it raised (both sides must raise the same kind)."""
    try:
        return fn(conn, table)
    except AccumuloError as exc:
        last_errors[id(conn)] = str(exc)
        return ("error", type(exc).__name__)


class Sequence:
    """One seeded sequence: its random choices, the two connections and tables, the log of what it did."""

    def __init__(self, seed: int, real: Connection, sim: Connection) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.real, self.sim = real, sim
        self.table = unique_table("simdiff")
        self.log: list[str] = []
        self.used: set[tuple[bytes, bytes, bytes, bytes, int]] = set()  # (key, ts) of every put
        #: the newest explicit delete of each column: Accumulo may drop a delete marker in a compaction of its own
        #: choosing (one of all a tablet's files), after which an older put shows; so puts stay above it
        self.deleted: dict[tuple[bytes, bytes, bytes, bytes], int] = {}
        self.max_versions = 1
        self.versioning = True
        self.scan_filters: list[str] = []  # names of the filters attached to the scan scope only
        #: keys put at the server's time in the operation being built: two such puts of one key in one operation
        #: get one timestamp, and Accumulo keeps either first
        self.server_time_keys: set[tuple[bytes, bytes, bytes, bytes]] = set()
        self.next_ts = 1
        self.iterator_names = 0

    # --- running one step on both sides -------------------------------------------------------------------

    def both(self, what: str, fn: Callable[[Connection, str], Any], *, retry_until: float = 0.0) -> Any:
        self.log.append(what)
        expected = outcome(fn, self.sim, self.table)
        got = outcome(fn, self.real, self.table)
        while got != expected and time.monotonic() < retry_until:  # a property change not applied everywhere yet
            time.sleep(0.2)
            got = outcome(fn, self.real, self.table)
        if got != expected:
            recent = "\n  ".join(self.log[-25:])
            errors = f"\n real error: {last_errors.get(id(self.real))}\n sim error: {last_errors.get(id(self.sim))}"
            pytest.fail(f"seed {self.seed}, step {len(self.log)}: {what}\n real: {got}\n sim:  {expected}{errors}\n"
                        f"last steps:\n  {recent}")
        return expected

    def settle(self) -> None:
        """Wait until the real cluster applies a property change (a full scan agrees), then a moment more."""
        self.both("settle: full scan", lambda c, t: normalized(c.scan(t)),
                  retry_until=time.monotonic() + SETTLE_SECONDS)
        time.sleep(0.3)

    # --- choices -------------------------------------------------------------------------------------------

    def key(self, row: bytes | None = None) -> tuple[bytes, bytes, bytes, bytes]:
        r = self.rng
        return row or r.choice(ROWS), r.choice(FAMILIES), r.choice(QUALIFIERS), r.choice(VISIBILITIES)

    def explicit_ts(self) -> int:
        r = self.rng
        if r.random() < 0.3:
            return r.randint(1, max(1, self.next_ts))  # an old one: versions below newer ones
        self.next_ts += r.randint(0, 3)
        return self.next_ts

    def put_cell(self, row: bytes | None = None) -> tuple[bytes, bytes, bytes, bytes, int | None, bytes, bool]:
        """A put at an explicit timestamp never used for another value (Accumulo would keep either), or now and
        then at the server's time."""
        r = self.rng
        if r.random() < 0.12:
            row, cf, cq, cv = self.key(row)
            if (row, cf, cq, cv) not in self.server_time_keys:  # one per key and operation: they share a time
                self.server_time_keys.add((row, cf, cq, cv))
                return row, cf, cq, cv, None, r.choice(VALUES), False
        while True:
            row, cf, cq, cv = self.key(row)
            ts = self.explicit_ts()
            if (row, cf, cq, cv, ts) not in self.used and ts > self.deleted.get((row, cf, cq, cv), 0):
                self.used.add((row, cf, cq, cv, ts))
                return row, cf, cq, cv, ts, r.choice(VALUES), False

    def delete_cell(self, row: bytes | None = None) -> tuple[bytes, bytes, bytes, bytes, int | None, bytes, bool]:
        row, cf, cq, cv = self.key(row)
        ts = self.explicit_ts()
        self.deleted[(row, cf, cq, cv)] = max(ts, self.deleted.get((row, cf, cq, cv), 0))
        return row, cf, cq, cv, ts, b"", True

    def changes(self) -> list[tuple[bytes, bytes, bytes, bytes, int | None, bytes, bool]]:
        r = self.rng
        self.server_time_keys.clear()
        return [self.delete_cell() if r.random() < 0.25 else self.put_cell() for _ in range(r.randint(1, 6))]

    def rng_choice(self) -> Range | None:
        r = self.rng
        kind = r.randrange(7)
        if kind == 0:
            return None
        if kind == 1:
            return Range.exact_row(r.choice(ROWS))
        if kind == 2:
            return Range.prefix(b"r" if r.random() < 0.3 else r.choice(ROWS)[:2])
        if kind == 3:
            a, b = sorted(r.sample(ROWS, 2))
            return Range.rows(r.choice([a, None]), r.choice([b, None]), start_inclusive=r.random() < 0.7,
                              end_inclusive=r.random() < 0.7)
        row, cf, cq, cv = self.key()
        start = Key(row, cf, cq, cv, r.choice([r.randint(1, self.next_ts + 1), Key(b"").ts]))
        row2, cf2, cq2, cv2 = self.key()
        stop = Key(max(row, row2), cf2, cq2, cv2, r.randint(1, self.next_ts + 1)) if r.random() < 0.6 else None
        if stop is not None and r.random() < 0.9:  # mostly a start before the stop (Accumulo refuses the others)
            ordered = sorted([start, stop], key=lambda k: (k.row, k.cf, k.cq, k.cv, -k.ts))
            start, stop = ordered[0], ordered[1]
        return Range(start, r.random() < 0.5, stop, r.random() < 0.5)

    def columns(self) -> list[Any] | None:
        r = self.rng
        if r.random() < 0.75:
            return None
        return [r.choice(FAMILIES) if r.random() < 0.5 else (r.choice(FAMILIES), r.choice(QUALIFIERS))
                for _ in range(r.randint(1, 2))]

    def regex_options(self) -> dict[str, str]:
        r = self.rng
        options: dict[str, str] = {}
        for name, patterns in (("rowRegex", ["r[0-3]", "r1", ".*5", "r"]), ("colfRegex", ["f", "g", "[fg]"]),
                               ("colqRegex", ["q0", "q[12]", "1"]), ("valueRegex", ["v.*", "tomb", "x1", "[0-9]", ""])):
            if r.random() < 0.4:
                options[name] = r.choice(patterns)
        if not options:
            options["valueRegex"] = "v.*"
        for flag in ("negate", "matchSubstring", "orFields"):
            if r.random() < 0.3:
                options[flag] = r.choice(["true", "false"])
        return options

    def timestamp_options(self) -> dict[str, str]:
        r = self.rng
        options: dict[str, str] = {}
        if r.random() < 0.7:
            options["start"] = f"LONG{r.randint(0, self.next_ts)}"
            if r.random() < 0.4:
                options["startInclusive"] = r.choice(["true", "false"])
        if "start" not in options or r.random() < 0.5:
            options["end"] = f"LONG{r.randint(1, self.next_ts + 2)}" if r.random() < 0.8 else f"LONG{2 ** 62}"
            if r.random() < 0.4:
                options["endInclusive"] = r.choice(["true", "false"])
        if r.random() < 0.2:
            options["negate"] = "true"
        return options

    def filter_priorities(self, choices: list[int]) -> list[int]:
        """Where a filter that only scans run may sit: above the versioning iterator (20) of a table that has one.
        Below it, the filter would show older versions that a compaction of Accumulo's choosing may have dropped."""
        return choices if not self.versioning else [p for p in choices if p > 20]

    def filter_setting(self, priority: int) -> IteratorSetting:
        self.iterator_names += 1
        if self.rng.random() < 0.6:
            return IteratorSetting(priority, f"re{self.iterator_names}", REGEX, self.regex_options())
        return IteratorSetting(priority, f"ts{self.iterator_names}", TIMESTAMP, self.timestamp_options())

    def scan_iterators(self) -> list[IteratorSetting]:
        r = self.rng
        out: list[IteratorSetting] = []
        if r.random() < 0.3:  # above the versioning iterator (see low_priorities)
            out.append(self.filter_setting(r.choice(self.filter_priorities([10, 25, 40]))))
        if r.random() < 0.1:
            out.append(IteratorSetting(r.choice([5, 30]), "scanvers", VERSIONING,
                                       {"maxVersions": str(r.choice([1, 2]))}))
        if r.random() < 0.05:  # named like the table's: both run, with the options merged
            # (never more versions than the table keeps: which ones Accumulo's own compactions dropped is its choice)
            n = r.choice([1, 2])
            if not self.versioning or n <= self.max_versions:
                out.append(IteratorSetting(20, "vers", VERSIONING, {"maxVersions": str(n)}))
        return out

    # --- the operations --------------------------------------------------------------------------------------

    def create(self) -> None:
        r = self.rng
        versioning = self.versioning = r.random() < 0.8
        self.both(f"create_table versioning={versioning}",
                  lambda c, t: c.create_table(t, versioning=versioning))
        if r.random() < 0.6:
            splits = sorted(r.sample(ROWS[1:-1], r.randint(1, 3)))
            self.both(f"add_splits {splits}", lambda c, t: c.add_splits(t, splits))
            self.both("list_splits", lambda c, t: c.list_splits(t))
        if r.random() < 0.5:
            self.both("ensure_visibility_summary", lambda c, t: ensure_visibility_summary(c, t))
        if versioning and r.random() < 0.4:
            self.set_max_versions(3)
        if r.random() < 0.4:
            self.attach_filter()
        self.both("table_exists", lambda c, t: c.table_exists(t))

    def properties(self) -> None:
        self.both("table_properties (iterators, custom)", lambda c, t: sorted(
            (k, v) for k, v in c.table_properties(t).items()
            if k.startswith(("table.iterator.", "table.custom."))))

    def set_max_versions(self, n: int) -> None:
        """Change maxVersions; after the first write only down: versions a compaction of Accumulo's choosing dropped
        would show again on one side and not the other."""
        if self.used and n > self.max_versions:
            return
        self.max_versions = n

        def change(c: Connection, t: str) -> None:
            for scope in ("scan", "minc", "majc"):
                c.set_table_property(t, f"table.iterator.{scope}.vers.opt.maxVersions", str(n))

        self.both(f"maxVersions={n}", change)
        self.settle()

    def attach_filter(self) -> None:
        """A filter for the scan scope, or for every scope below the versioning iterator (above it, what a
        compaction of some files keeps depends on which files Accumulo chose: not comparable)."""
        scopes: tuple[str, ...]
        if self.rng.random() < 0.6:
            setting, scopes = self.filter_setting(self.rng.choice(self.filter_priorities([15, 25, 30]))), ("scan",)
            self.scan_filters.append(setting.name)
        else:
            setting, scopes = self.filter_setting(15), ("scan", "minc", "majc")
        self.both(f"attach_iterator {setting} {scopes}", lambda c, t: c.attach_iterator(t, setting, scopes))
        self.settle()

    def remove_filter(self) -> None:
        """Remove a scan-scope filter (one of every scope may have dropped cells in a compaction of Accumulo's
        choosing)."""
        if not self.scan_filters:
            return
        name = self.scan_filters.pop(self.rng.randrange(len(self.scan_filters)))

        def remove(c: Connection, t: str) -> None:
            for key in [k for k in c.table_properties(t) if k.startswith("table.iterator.")
                        and k.split(".")[3] == name]:
                c.remove_table_property(t, key)

        self.both(f"remove iterator {name}", remove)
        self.settle()

    def write(self) -> None:
        changes = self.changes()
        how = self.rng.choice(["batch_writer", "write", "add_cells"])

        def mutations() -> list[Mutation]:
            out = []
            for row, cf, cq, cv, ts, value, delete in changes:
                m = Mutation(row)
                if delete:
                    m.delete(cf, cq, visibility=cv, timestamp=ts)
                else:
                    m.put(cf, cq, value, visibility=cv, timestamp=ts)
                out.append(m)
            return out

        def apply(c: Connection, t: str) -> None:
            if how == "write":
                c.write(t, mutations())
            elif how == "batch_writer":
                with c.batch_writer(t) as w:
                    w.add_mutations(mutations())
            else:
                with c.batch_writer(t) as w:
                    w.add_cells(_updates_batch(changes))

        self.both(f"{how} {changes}", apply)

    def bulk_import(self) -> None:
        """A bulk import of one or two files of puts at explicit timestamps (they keep them)."""
        files = []
        for _ in range(self.rng.randint(1, 2)):
            cells = [c for c in (self.put_cell() for _ in range(self.rng.randint(1, 8))) if c[4] is not None]
            if cells:
                files.append(cells)
        if not files:
            return

        def load(c: Connection, t: str) -> int:
            with c.bulk_import(t) as bulk:
                for n, cells in enumerate(files):
                    with bulk.file(f"f{n}") as f:
                        f.add_cells(sort_cells(_updates_batch(cells)))
                bulk.load()
                return bulk.files_left()

        self.both(f"bulk_import {files}", load)

    def custom_property(self) -> None:
        name, value = f"table.custom.simdiff.{self.rng.randrange(3)}", self.rng.choice(["", "a", "b c"])
        if self.rng.random() < 0.7:
            self.both(f"set {name}={value!r}", lambda c, t: c.set_table_property(t, name, value))
        else:
            self.both(f"remove {name}", lambda c, t: c.remove_table_property(t, name))
        self.properties()

    def scan(self) -> None:
        r = self.rng
        rng, columns, iterators = self.rng_choice(), self.columns(), self.scan_iterators()
        batch_size = r.choice([1, 2, 3, 1000])
        isolated = r.random() < 0.2
        auths = None if r.random() < 0.8 else r.choice([[], [AUTH]])
        if r.random() < 0.1:
            iterators = [*iterators, IteratorSetting(50, "keysOnly", SORTED_KEY)]
        self.both(f"scan {rng} columns={columns} iterators={iterators} batch={batch_size} isolated={isolated} "
                  f"auths={auths}",
                  lambda c, t: normalized(c.scan(t, rng, columns=columns, iterators=iterators,
                                                 batch_size=batch_size, isolated=isolated, authorizations=auths)))

    def scan_batches(self) -> None:
        rng = self.rng_choice()
        self.both(f"scan_batches {rng}", lambda c, t: [
            (b.num_rows, normalized(_cells_of(b))) for b in c.scan_batches(t, rng, batch_size=4)])

    def batch_scan(self) -> None:
        ranges = [r for r in (self.rng_choice() for _ in range(self.rng.randint(1, 4))) if r is not None]
        iterators = self.scan_iterators() if self.rng.random() < 0.4 else []
        columns = self.columns()
        self.both(f"batch_scan {ranges} iterators={iterators} columns={columns}",
                  lambda c, t: unordered(c.batch_scan(t, ranges, iterators=iterators, columns=columns)))

    def flush(self) -> None:
        self.both("flush_table", lambda c, t: c.flush_table(t))

    def compact(self) -> None:
        r = self.rng
        start = end = None
        if r.random() < 0.3:
            start, end = sorted(r.sample(ROWS, 2))
        iterators = [self.filter_setting(r.choice([10, 35]))] if r.random() < 0.3 else []
        self.both(f"compact_table {start!r}..{end!r} iterators={iterators}",
                  lambda c, t: c.compact_table(t, start, end, iterators=iterators))

    def conditional(self) -> None:
        r = self.rng
        rows = r.sample(ROWS, r.randint(1, 3))
        auths = [AUTH] if r.random() < 0.7 else []
        mutations: list[tuple[bytes, list[Condition], list[tuple[Any, ...]]]] = []
        self.server_time_keys.clear()
        for row in rows:
            conditions = []
            for _ in range(r.randint(1, 2)):
                cf, cq = r.choice(FAMILIES), r.choice(QUALIFIERS)
                cv = b"" if r.random() < 0.85 else AUTH
                current = [c for c in self.sim.scan(self.table, Range.exact_row(row), columns=[(cf, cq)],
                                                    authorizations=[AUTH]) if c.cv == cv]
                kind = r.random()
                if current and kind < 0.5:
                    cell = current[0]
                    ts = cell.ts if cell.ts < SERVER_TIME and r.random() < 0.3 else None
                    conditions.append(Condition(cf, cq, cell.value, visibility=cv, timestamp=ts))
                elif kind < 0.75:
                    conditions.append(Condition(cf, cq, None, visibility=cv))
                else:
                    conditions.append(Condition(cf, cq, r.choice(VALUES), visibility=cv,
                                                timestamp=r.choice([None, r.randint(1, self.next_ts)])))
            updates = [self.put_cell(row) if r.random() < 0.8 else self.delete_cell(row)
                       for _ in range(r.randint(1, 3))]
            mutations.append((row, conditions, updates))
        hot = r.random() < 0.5

        def apply(c: Connection, t: str) -> dict[bytes, str]:
            built = []
            for row, conditions, updates in mutations:
                m = ConditionalMutation(row, conditions)
                for _, cf, cq, cv, ts, value, delete in updates:
                    if delete:
                        m.delete(cf, cq, visibility=cv, timestamp=ts)
                    else:
                        m.put(cf, cq, value, visibility=cv, timestamp=ts)
                built.append(m)
            with c.conditional_writer(t, authorizations=auths) as w:
                return write_conditional(w, built) if hot else w.write_all(built)

        self.both(f"conditional hot={hot} auths={auths} {mutations}", apply)

    def errors(self) -> None:
        missing = self.table + "_missing"
        self.both("scan a missing table", lambda c, t: list(c.scan(missing)))
        self.both("create an existing table", lambda c, t: c.create_table(t))
        self.both("properties of a missing table", lambda c, t: c.table_properties(missing))

    def run(self) -> None:
        self.create()
        self.properties()
        steps: list[tuple[float, Callable[[], None]]] = [
            (34, self.write), (20, self.scan), (4, self.scan_batches), (6, self.batch_scan), (5, self.flush),
            (2.5, self.compact), (9, self.conditional), (1, self.properties),
            (0.5, lambda: self.set_max_versions(self.rng.choice([1, 3]))), (0.6, self.attach_filter),
            (0.4, self.remove_filter), (0.6, self.bulk_import), (0.5, self.custom_property),
        ]
        weights = [w for w, _ in steps]
        for _ in range(OPERATIONS):
            self.rng.choices(steps, weights)[0][1]()
        self.errors()
        self.both("final full scan", lambda c, t: normalized(c.scan(t)))
        self.both("final compaction", lambda c, t: c.compact_table(t))
        self.both("final full scan after compaction", lambda c, t: normalized(c.scan(t)))
        self.both("visibility summary after the final compaction", lambda c, t: visibility_summary(c, t))


def _updates_batch(changes: list[tuple[bytes, bytes, bytes, bytes, int | None, bytes, bool]]) -> pa.RecordBatch:
    """Cell changes (row, cf, cq, cv, ts, value, delete) as an ``UPDATE_SCHEMA`` batch."""
    columns = list(zip(*changes, strict=True))
    values = [None if d else v for v, d in zip(columns[5], columns[6], strict=True)]
    return pa.record_batch([pa.array(columns[0], pa.binary()), pa.array(columns[1], pa.binary()),
                            pa.array(columns[2], pa.binary()), pa.array(columns[3], pa.binary()),
                            pa.array(columns[4], pa.int64()), pa.array(values, pa.binary()),
                            pa.array(columns[6], pa.bool_())], schema=UPDATE_SCHEMA)


def _cells_of(batch: pa.RecordBatch) -> Iterator[Any]:
    from connector.accumulo.scanner import cells_of
    return iter(cells_of(batch))


@pytest.fixture(scope="module")
def real_user_auths(accumulo) -> Iterator[frozenset[bytes]]:
    """The gateway user of cluster A may read AUTH during these tests (restored afterwards)."""
    conn = accumulo["a"].connect()
    user = accumulo["a"].user
    before = set(conn.call("getUserAuthorizations", user))
    conn.call("changeUserAuthorizations", user, {*before, AUTH})
    yield frozenset({*before, AUTH})
    conn.call("changeUserAuthorizations", user, before)
    conn.close()


def _seeds() -> tuple[int, ...]:
    given = os.environ.get("SIM_DIFF_SEEDS", "")
    if not given:
        return SEEDS
    if "-" in given:
        first, last = given.split("-")
        return tuple(range(int(first), int(last) + 1))
    return tuple(int(s) for s in given.split(","))


@pytest.mark.parametrize("seed", _seeds())
def test_simulation_answers_as_accumulo(seed: int, conn_a: Connection, real_user_auths: frozenset[bytes]) -> None:
    sim = sim_connection(SimGateway(SimAccumulo("a", user_authorizations=real_user_auths)), name="sim")
    sequence = Sequence(seed, conn_a, sim)
    try:
        sequence.run()
    finally:
        conn_a.delete_table(sequence.table, missing_ok=True)
