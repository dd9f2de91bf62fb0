//! `connector._native`: the hot paths of the connector as pure functions on Arrow arrays, bytes and
//! the client's ColumnUpdate tuples. No sockets, retries or configuration here. Each Python layer
//! calls them through its own wrapper (ARCHITECTURE.md, "Where the hot path runs"; checked by
//! `tests/test_layers.py`), and `connector/_native.pyi` types them (checked by `tests/test_docs.py`).
//!
//! One module per concern, each saying what it holds. This file only binds them to Python: it takes
//! the arguments apart (Arrow arrays in, through [`arrow_ffi`]), lets go of the GIL while a module
//! works, and hands the result back.

pub mod arrow_ffi;
pub mod column_updates;
pub mod digest;
pub mod error;
pub mod murmur;
pub mod pack;
pub mod packed;
pub mod pyrepr;
pub mod queue_rows;
pub mod scan;
pub mod translate;
pub mod wire;

use std::sync::Arc;

use arrow_array::builder::Int32Builder;
use arrow_array::UInt64Array;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use arrow_ffi::{import_array, import_batch, int64, ArrowExport, Bytes};
use error::Error;

/// Encode a batch of cell changes (row, cf, cq, cv, ts, value, [delete]) into `update` message
/// bodies of at most `max_frame_bytes` each; cells of one row share one map entry and one frame.
#[pyfunction]
fn encode_update_frames<'py>(
    py: Python<'py>,
    writer_id: &str,
    cells: &Bound<'py, PyAny>,
    max_frame_bytes: usize,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let cols = import_batch(cells)?;
    let cells = wire::cells_of(&cols)?;
    let frames = py
        .detach(|| wire::encode_frames(writer_id.as_bytes(), &cells, max_frame_bytes))
        .map_err(|e| Error::RowTooLarge(e.0))?;
    Ok(frames.iter().map(|f| PyBytes::new(py, f)).collect())
}

/// The ColumnUpdate structs of `row`'s `updates` (a list of ColumnUpdate tuples), back to back, and
/// the exact bytes of the `update` map entry they make on their own (row, list header, structs):
/// what the per-Mutation path weighs against the frame budget, and keeps, when it queues a mutation.
#[pyfunction]
fn encode_column_updates<'py>(
    py: Python<'py>,
    row: &[u8],
    updates: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, usize)> {
    let mut out = Vec::new();
    let n = column_updates::put_updates(&mut out, row, updates)?;
    let entry = wire::entry_len(row, n, out.len());
    Ok((PyBytes::new(py, &out), entry))
}

/// The map entries of an `update` call for `rows` (`dict[bytes, list]`, in its order; each row's
/// list is `[n, structs, ...]`: `n` ColumnUpdates in all, encoded by `encode_column_updates`):
/// (how many, their bytes). `update_message` wraps them for a writer.
#[pyfunction]
#[pyo3(signature = (rows, size_hint=0))]
fn encode_update_entries<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyDict>,
    size_hint: usize,
) -> PyResult<(usize, Bound<'py, PyBytes>)> {
    let mut out = Vec::with_capacity(size_hint);
    let n = column_updates::put_entries(&mut out, rows)?;
    Ok((n, PyBytes::new(py, &out)))
}

/// The whole oneway `update(writer_id, cells)` message around `n_rows` map entries already encoded.
#[pyfunction]
fn update_message<'py>(
    py: Python<'py>,
    writer_id: &str,
    n_rows: usize,
    entries: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    if (n_rows == 0) != entries.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{n_rows} rows in {} bytes of entries",
            entries.len()
        ))
        .into());
    }
    // the message around no entries, then the entries spliced in before its final stop byte
    let mut shell = Vec::with_capacity(32 + writer_id.len());
    wire::put_message(&mut shell, writer_id.as_bytes(), n_rows, b"");
    let (head, stop) = shell.split_at(shell.len() - 1);
    PyBytes::new_with(py, shell.len() + entries.len(), |buf| {
        let (h, rest) = buf.split_at_mut(head.len());
        let (e, s) = rest.split_at_mut(entries.len());
        h.copy_from_slice(head);
        e.copy_from_slice(entries);
        s.copy_from_slice(stop);
        Ok(())
    })
}

/// Decode a `nextK` reply message into (batch row, cf, cq, cv, ts, value; more), or None when the
/// reply is not a plain ScanResult (an exception, an unknown field): decode those with thriftpy2.
#[pyfunction]
fn decode_next_k_reply(py: Python<'_>, frame: &[u8]) -> Option<(ArrowExport, bool)> {
    py.detach(|| scan::decode_next_k_reply(frame))
        .ok()
        .map(|(batch, more)| (ArrowExport::batch(batch), more))
}

/// Take entry rows apart: batch (bucket int32, key binary, seq int64, error utf8); a malformed
/// row has nulls and its reason in `error`.
#[pyfunction]
fn parse_entry_rows(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    qid: &str,
    num_buckets: u32,
) -> PyResult<ArrowExport> {
    let layout = queue_rows::Layout::new(qid, num_buckets).map_err(Error::InvalidArgument)?;
    let array = import_array(rows)?;
    let rows = Bytes::new(&array, "rows")?;
    let parsed = py.detach(|| queue_rows::parse_rows(&layout, &rows))?;
    Ok(ArrowExport::batch(parsed))
}

/// The deletes of queue entries: each row's `e:v` at the entry's own timestamp.
#[pyfunction]
fn entry_deletes(rows: &Bound<'_, PyAny>, ts: &Bound<'_, PyAny>) -> PyResult<ArrowExport> {
    let row_array = import_array(rows)?;
    let ts_array = import_array(ts)?;
    let rows = Bytes::new(&row_array, "rows")?;
    let ts = int64(&ts_array, "ts")?;
    Ok(ArrowExport::batch(queue_rows::entry_deletes(&rows, ts)?))
}

/// Translate export values (`encoding` "json" or "packed") with a built-in translator. Returns
/// (batch entry int32, row, cf, cq, cv, value (null: delete); errors [(entry, message)]; fallback
/// [entry]) where fallback entries must be translated by the Python translator.
#[pyfunction(name = "translate", signature = (translator, values, encoding = "json"))]
#[allow(clippy::type_complexity)]
fn translate_values(
    py: Python<'_>,
    translator: &str,
    values: &Bound<'_, PyAny>,
    encoding: &str,
) -> PyResult<(ArrowExport, Vec<(usize, String)>, Vec<usize>)> {
    let array = import_array(values)?;
    let values = Bytes::new(&array, "values")?;
    let (changes, errors, fallback) =
        py.detach(|| translate::translate_batch(translator, &values, encoding))?;
    Ok((ArrowExport::batch(changes), errors, fallback))
}

/// Per tablet range of `splits` (sorted; a tablet ends at its split row inclusive): the count and the
/// wrapping sum of the content hashes of the cells of `cells` (columns row, cf, cq, cv, value) in it
/// (`digest.rs`).
#[pyfunction]
fn range_digests(
    py: Python<'_>,
    cells: &Bound<'_, PyAny>,
    splits: Vec<Vec<u8>>,
) -> PyResult<(Vec<u64>, Vec<u64>)> {
    let cols = import_batch(cells)?;
    let fields = hashed_fields(&cols)?;
    let len = cols.len;
    Ok(py.detach(|| {
        let parts = (0..len).map(|i| fields.each_ref().map(|f| f.get(i).unwrap_or_default()));
        digest::digests(parts, &splits)
    }))
}

/// The columns a cell's content hash covers (row, cf, cq, cv, value), in that order.
fn hashed_fields(cols: &arrow_ffi::Columns) -> Result<[Bytes<'_>; 5], Error> {
    let bytes = |name: &str| -> Result<Bytes<'_>, Error> { Bytes::new(cols.require(name)?, name) };
    Ok([
        bytes("row")?,
        bytes("cf")?,
        bytes("cq")?,
        bytes("cv")?,
        bytes("value")?,
    ])
}

/// The index of the tablet range of `splits` (sorted; a tablet ends at its split row inclusive) holding
/// each row of `rows`.
#[pyfunction]
fn range_indices(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    splits: Vec<Vec<u8>>,
) -> PyResult<ArrowExport> {
    let array = import_array(rows)?;
    let rows = Bytes::new(&array, "rows")?;
    let n = array.len();
    let indices = py.detach(|| {
        let mut b = Int32Builder::with_capacity(n);
        for i in 0..n {
            b.append_value(digest::range_of(&splits, rows.get(i).unwrap_or_default()) as i32);
        }
        b.finish()
    });
    Ok(ArrowExport::array(Arc::new(indices)))
}

/// The content hash of each cell of `cells` (columns row, cf, cq, cv, value), as `range_digests` adds
/// them up: a uint64 Arrow array (no Python int per cell).
#[pyfunction]
fn cell_hashes(py: Python<'_>, cells: &Bound<'_, PyAny>) -> PyResult<ArrowExport> {
    let cols = import_batch(cells)?;
    let fields = hashed_fields(&cols)?;
    let len = cols.len;
    let hashes =
        py.detach(|| {
            UInt64Array::from_iter_values((0..len).map(|i| {
                digest::cell_hash(fields.each_ref().map(|f| f.get(i).unwrap_or_default()))
            }))
        });
    Ok(ArrowExport::array(Arc::new(hashes)))
}

/// The `packed` bytes of a difference update, cells or an operation log (`connector/packed.py`).
#[pyfunction]
fn pack_value<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &pack::pack(obj)?))
}

/// The canonical Python object of `packed` bytes (`connector/packed.py`); `ValueError` naming what is
/// malformed.
#[pyfunction]
fn unpack_value<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    pack::unpack(py, data)
}

/// The names of the translators that run natively (the crate's `translate::TRANSLATORS`).
#[pyfunction]
fn translator_names() -> Vec<&'static str> {
    translate::TRANSLATORS.iter().map(|(n, _)| *n).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowExport>()?;
    error::register(m)?;
    m.add_function(wrap_pyfunction!(encode_update_frames, m)?)?;
    m.add_function(wrap_pyfunction!(encode_column_updates, m)?)?;
    m.add_function(wrap_pyfunction!(encode_update_entries, m)?)?;
    m.add_function(wrap_pyfunction!(update_message, m)?)?;
    m.add_function(wrap_pyfunction!(decode_next_k_reply, m)?)?;
    m.add_function(wrap_pyfunction!(parse_entry_rows, m)?)?;
    m.add_function(wrap_pyfunction!(entry_deletes, m)?)?;
    m.add_function(wrap_pyfunction!(translate_values, m)?)?;
    m.add_function(wrap_pyfunction!(translator_names, m)?)?;
    m.add_function(wrap_pyfunction!(pack_value, m)?)?;
    m.add_function(wrap_pyfunction!(unpack_value, m)?)?;
    m.add("PACKED_MAGIC", PyBytes::new(m.py(), &packed::MAGIC))?;
    m.add_function(wrap_pyfunction!(range_digests, m)?)?;
    m.add_function(wrap_pyfunction!(cell_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(range_indices, m)?)?;
    Ok(())
}
