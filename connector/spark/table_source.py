"""The ``accumulo`` Spark data source: reads the cells of an Accumulo table as a DataFrame.

``spark.read.format("accumulo")`` gives one row per cell, columns ``row``, ``cf``, ``cq``, ``cv``
(binary), ``ts`` (long) and ``value`` (binary), in key order within each partition.

Planning (on the driver) checks the options, that the table exists and that a scan with the given columns
and authorizations is allowed, then makes one input partition per tablet of the table (its splits), each
clipped to the requested rows; tablets outside them get no partition. Reading (in the tasks) scans a
partition's rows with ``Connection.scan_batches``: every ``nextK`` page is decoded natively into one Arrow
batch and handed to Spark as it is, with no Python object per cell.

Options: the cluster's gateway as for ``GatewayOptions`` without a prefix (``host``, ``port``,
``secret_file`` or ``secret_env``, ``tls_*``, ``server_wait``, ``name``); ``table``; rows: ``prefix``, or
``start_row`` and/or ``end_row`` (both inclusive; UTF-8 text); ``columns`` (comma-separated families or
``family:qualifier``); ``authorizations`` (comma-separated; default: all of the gateway user's);
``batch_size`` (cells per scan page, 10,000); ``pushdown`` ("true": Spark's filters on ``row``, ``cf`` and
``cq`` narrow the scans, see :mod:`.table_filters`; with ``spark.sql.python.filterPushdown.enabled``, on a Spark
that keeps a pushdown's planning to its scan: :mod:`.compat`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from connector.accumulo import AccumuloSecurityError, Connection, Range
from connector.accumulo.cells import Key, following_prefix

from .compat import require
from .options import ACCUMULO, GatewayOptions, OptionError, TableRead, checked
from .planner_errors import input_errors_in_one_line
from .worker_heap import freeze_worker_heap

if TYPE_CHECKING:
    from pyspark.sql.datasource import Filter

# NOT NULL as the scan batches' fields are: Spark checks that the batches read match this schema exactly
SCHEMA = ("row binary not null, cf binary not null, cq binary not null, cv binary not null, ts long not null, "
          "value binary not null")
SPARK_SCHEMA = StructType([StructField(name, LongType() if name == "ts" else BinaryType(), nullable=False)
                           for name in ("row", "cf", "cq", "cv", "ts", "value")])

Column = bytes | tuple[bytes, bytes]


class RowSpan(InputPartition):
    """One input partition, all that its task reads: the rows from ``start`` (inclusive) to before ``stop``
    (exclusive), as the smallest keys of those rows (None = unbounded), and the ``columns`` fetched (None: all)."""

    def __init__(self, start: bytes | None, stop: bytes | None, columns: tuple[Column, ...] | None = None) -> None:
        super().__init__((start, stop, columns))

    @property
    def start(self) -> bytes | None:
        return self.value[0]  # type: ignore[no-any-return]

    @property
    def stop(self) -> bytes | None:
        return self.value[1]  # type: ignore[no-any-return]

    @property
    def columns(self) -> tuple[Column, ...] | None:
        return self.value[2]  # type: ignore[no-any-return]

    @property
    def range(self) -> Range:
        start, stop = self.start, self.stop
        return Range(None if start is None else Key(start), True, None if stop is None else Key(stop), False)


@dataclass(frozen=True)
class ReadSettings:
    """What to read, parsed from the options (every error names its option)."""

    gateway: GatewayOptions
    table: str
    start: bytes | None  # first row (inclusive)
    stop: bytes | None  # bound (exclusive): the smallest key of the first row not read
    columns: tuple[Column, ...] | None
    authorizations: tuple[bytes, ...] | None
    batch_size: int
    pushdown: bool = False
    empty: bool = False  # filters no cell can pass were pushed

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadSettings:
        where = ACCUMULO.where
        read = TableRead.from_options(options, where=where)
        start, stop = _rows(read)
        auths = _list(read.authorizations, "authorizations")
        return cls(gateway=GatewayOptions.parse(options, "", where), table=read.table, start=start, stop=stop,
                   columns=_columns(read.columns), authorizations=None if auths is None else tuple(auths),
                   batch_size=read.batch_size, pushdown=read.pushdown)

    def plan(self, conn: Connection) -> list[RowSpan]:
        """One span per tablet overlapping the requested rows, clipped to them, in row order, each carrying the
        columns to fetch."""
        if not conn.table_exists(self.table):
            raise OptionError(f"option 'table': no table {self.table!r} on {self.gateway.describe()}")
        self._check_readable(conn)
        if self.empty:
            return []
        return tablet_spans(conn.list_splits(self.table), self.start, self.stop, self.columns)

    def narrowed(self, filters: list[Filter]) -> tuple[ReadSettings, list[Filter]]:
        """Settings narrowed by the filters a scan can take (a new value: these stay as they are), and the
        filters left for Spark."""
        from .table_filters import Scan, push_filters  # Spark 4.1+ only: its filter classes are imported there

        scan, left = push_filters(filters, Scan(self.start, self.stop, self.columns))
        return replace(self, start=scan.start, stop=scan.stop, columns=scan.columns, empty=scan.empty), left

    def _check_readable(self, conn: Connection) -> None:
        """Read at most one cell of the first requested row, so that a permission or authorization problem
        fails the planning, with its reason, instead of every task."""
        probe = Range.exact_row(self.start or b"\x00")
        try:
            next(iter(conn.scan_batches(self.table, probe, self.columns, self.authorizations, batch_size=1)), None)
        except AccumuloSecurityError as exc:
            given = "" if self.authorizations is None else (
                f" with option 'authorizations' = {b','.join(self.authorizations).decode(errors='replace')!r}")
            raise OptionError(f"cannot read table {self.table!r} on {self.gateway.describe()}{given}: {exc}") from None

    def read(self, span: RowSpan) -> Iterator[pa.RecordBatch]:
        """The cells of ``span``: its rows and columns (what the planning decided), with these settings' table,
        authorizations and page size."""
        freeze_worker_heap()
        conn = self.gateway.shared()
        yield from conn.scan_batches(self.table, span.range, span.columns, self.authorizations,
                                     batch_size=self.batch_size)


def tablet_spans(splits: Sequence[bytes], start: bytes | None, stop: bytes | None,
                 columns: tuple[Column, ...] | None = None) -> list[RowSpan]:
    """The tablets of a table with these split rows, as spans clipped to [start, stop), each fetching
    ``columns``. A tablet ends at its split row inclusive, so it spans [previous split + b"\\0", split + b"\\0")."""
    bounds: list[bytes | None] = [None, *(s + b"\x00" for s in sorted(splits)), None]
    spans = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        lo = _later(lo, start)
        hi = hi if stop is None else (stop if hi is None else min(hi, stop))
        if lo is None or hi is None or lo < hi:
            spans.append(RowSpan(lo, hi, columns))
    return spans


def _later(a: bytes | None, b: bytes | None) -> bytes | None:
    return b if a is None else a if b is None else max(a, b)


def _text(value: str | None) -> bytes | None:
    return None if value is None or value == "" else value.encode("utf-8")


def _rows(read: TableRead) -> tuple[bytes | None, bytes | None]:
    """(first row, exclusive bound) from ``prefix`` or ``start_row``/``end_row``."""
    prefix, first, last = _text(read.prefix), _text(read.start_row), _text(read.end_row)
    if prefix is not None:
        if first is not None or last is not None:
            raise OptionError("option 'prefix' cannot be combined with 'start_row' or 'end_row'")
        return prefix, following_prefix(prefix)
    if first is not None and last is not None and last < first:
        raise OptionError(f"option 'end_row' ({last!r}) sorts before option 'start_row' ({first!r}): "
                          f"the range is empty")
    return first, None if last is None else last + b"\x00"


def _list(raw: str | None, name: str) -> list[bytes] | None:
    if raw is None or raw.strip() == "":
        return None
    items = [item.strip() for item in raw.split(",")]
    if any(not item for item in items):
        raise OptionError(f"option {name!r} has an empty item: {raw!r}")
    return [item.encode("utf-8") for item in items]


def _columns(raw: str | None) -> tuple[Column, ...] | None:
    """``family`` or ``family:qualifier`` items (the qualifier is everything after the first colon)."""
    items = _list(raw, "columns")
    if items is None:
        return None
    out: list[Column] = []
    for item in items:
        family, colon, qualifier = item.partition(b":")
        if not family:
            raise OptionError(f"option 'columns': {item.decode()!r} has no column family")
        out.append((family, qualifier) if colon else family)
    return tuple(out)


@input_errors_in_one_line
class AccumuloTableDataSource(DataSource):
    """``spark.read.format("accumulo")``: the cells of a table (see the module's documentation)."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.settings = ReadSettings.parse(checked(ACCUMULO, options))  # refused at load(), before any action
        if self.settings.pushdown:
            require("filter_pushdown", "option 'pushdown' (filter pushdown of Python data sources)")

    @classmethod
    def name(cls) -> str:
        return "accumulo"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in SPARK_SCHEMA.fields]:
            raise OptionError(f"the accumulo source has the fixed schema {SCHEMA!r}, not {schema.simpleString()}")
        # a schema given with .schema() may declare the columns nullable: the batches must say the same
        arrow = pa.schema([pa.field(f.name, pa.int64() if f.name == "ts" else pa.binary(), f.nullable)
                           for f in schema.fields])
        return (FilteringTableReader if self.settings.pushdown else TableReader)(self.settings, arrow)


@input_errors_in_one_line
class TableReader(DataSourceReader):
    def __init__(self, settings: ReadSettings, arrow_schema: pa.Schema) -> None:
        self.settings = settings
        self.arrow_schema = arrow_schema

    def partitions(self) -> Sequence[InputPartition]:
        with self.settings.gateway.connect() as conn:
            return self.settings.plan(conn)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # Spark's stand-in when the planning made no partition: nothing to read
            return
        assert isinstance(partition, RowSpan)
        for batch in self.settings.read(partition):
            yield batch if batch.schema.equals(self.arrow_schema) else pa.RecordBatch.from_arrays(
                batch.columns, schema=self.arrow_schema)


@input_errors_in_one_line
class FilteringTableReader(TableReader):
    """The reader with option ``pushdown``: Spark hands it the query's filters before planning (only then:
    Spark refuses a reader that takes filters while ``spark.sql.python.filterPushdown.enabled`` is off).

    How the reader travels (PySpark's ``data_source_pushdown_filters.py`` and ``plan_data_source_read.py``): each
    planning unpickles the data source afresh, calls ``reader()``, then ``pushFilters`` and ``partitions()`` on
    that new reader, and pickles the reader (inside the read function) and the partitions for the tasks. So the
    filters narrow only this planning's partitions, which carry every row and column their task reads; the
    reader's settings stay the options'. Whether the JVM then keeps that planning to its own scan is Spark's
    doing: up to 4.3 it does not, hence the option is refused there (:mod:`.compat`)."""

    def __init__(self, settings: ReadSettings, arrow_schema: pa.Schema) -> None:
        super().__init__(settings, arrow_schema)
        self.pushed: ReadSettings | None = None  # what this planning's filters narrowed the settings to

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802 - Spark's name
        self.pushed, left = self.settings.narrowed(filters)
        return left

    def partitions(self) -> Sequence[InputPartition]:
        scan = self.settings if self.pushed is None else self.pushed
        with scan.gateway.connect() as conn:
            return scan.plan(conn)
