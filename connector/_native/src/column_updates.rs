//! The per-Mutation path of the `update` call: `ColumnUpdate` tuples (`connector.accumulo.mutation`:
//! `(cf, cq, cv, timestamp, value, delete)`) read straight from the Python objects a `Mutation` holds
//! and written with the encoder of [`crate::wire`], so `BatchWriter.add_mutation` and `add_cells` send
//! bytes from one encoder. The conditional call's updates (`updateRowsConditionally`) use the same
//! structs.
//!
//! A mutation's updates are encoded when it is added ([`put_updates`]); the writer keeps those bytes,
//! not the tuples (bytes are no work for Python's garbage collector, tuples held for a whole chunk
//! are), and [`put_entries`] puts a chunk's rows together. The tuples are read under the GIL and never
//! kept: each is turned into a borrowed [`wire::Cell`] and written at once.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::error::Error;
use crate::pyrepr::bytes_repr;
use crate::wire;

fn field<'a, 'py>(t: &'a Bound<'py, PyTuple>, i: usize, name: &str) -> PyResult<&'a [u8]> {
    // SAFETY: the caller checked that the tuple has 6 items
    let item = unsafe { t.get_borrowed_item_unchecked(i) };
    match item.extract::<&'a [u8]>() {
        Ok(b) => Ok(b),
        Err(_) => Err(Error::Schema(format!(
            "ColumnUpdate.{name} must be bytes, not {}",
            item.get_type().name()?
        ))
        .into()),
    }
}

/// Call `f` with the wire cell of one ColumnUpdate of `row`. Refuses what `Mutation` refuses when it
/// builds one (a negative or non-int timestamp) and anything that is not a 6-tuple of the right types.
fn with_cell<R>(
    row: &[u8],
    update: &Bound<'_, PyAny>,
    f: impl FnOnce(&wire::Cell) -> R,
) -> PyResult<R> {
    let t = update.cast::<PyTuple>().map_err(|_| {
        Error::Schema(format!(
            "expected ColumnUpdate tuples (cf, cq, cv, timestamp, value, delete), got {}",
            update
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    if t.len() != 6 {
        return Err(Error::Schema(format!(
            "a ColumnUpdate has 6 fields (cf, cq, cv, timestamp, value, delete), got {}",
            t.len()
        ))
        .into());
    }
    let (cf, cq, cv) = (field(t, 0, "cf")?, field(t, 1, "cq")?, field(t, 2, "cv")?);
    // SAFETY: 6 items, checked above
    let ts_item = unsafe { t.get_borrowed_item_unchecked(3) };
    let ts = if ts_item.is_none() {
        None
    } else {
        match ts_item.extract::<i64>() {
            Ok(v) if v >= 0 => Some(v),
            _ => {
                return Err(Error::InvalidCell(format!(
                    "row {}: timestamp must be an int in [0, 2**63-1], got {}",
                    bytes_repr(row),
                    ts_item.repr()?
                ))
                .into())
            }
        }
    };
    // SAFETY: 6 items, checked above
    let delete = unsafe { t.get_borrowed_item_unchecked(5) }.is_truthy()?;
    let value = if delete {
        None
    } else {
        Some(field(t, 4, "value")?)
    };
    Ok(f(&wire::Cell {
        row,
        cf,
        cq,
        cv,
        ts,
        value,
    }))
}

fn updates_list<'a, 'py>(updates: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyList>> {
    updates.cast::<PyList>().map_err(|_| {
        Error::Schema(format!(
            "expected a list of ColumnUpdate, got {}",
            updates
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
        .into()
    })
}

fn check_row(row: &[u8]) -> PyResult<()> {
    if row.is_empty() {
        return Err(Error::InvalidCell("row must not be empty".into()).into());
    }
    Ok(())
}

/// The ColumnUpdates of `row` (a list) encoded back to back into `out`; returns how many.
pub fn put_updates(out: &mut Vec<u8>, row: &[u8], updates: &Bound<'_, PyAny>) -> PyResult<usize> {
    check_row(row)?;
    let list = updates_list(updates)?;
    for u in list.iter() {
        with_cell(row, &u, |c| wire::put_cell(out, c))?;
    }
    Ok(list.len())
}

/// The map entries of `rows` appended to `out`; returns how many. `rows` is a dict in the order
/// to send: row -> `[n, structs, structs, ...]`, `n` ColumnUpdates in all, encoded by
/// [`put_updates`] (one bytes object per mutation of the row, in the order they were added).
pub fn put_entries(out: &mut Vec<u8>, rows: &Bound<'_, PyDict>) -> PyResult<usize> {
    let malformed = || Error::Schema("rows must map bytes to [n, bytes, ...]".into());
    for (row, parts) in rows.iter() {
        let row = row.cast::<PyBytes>().map_err(|_| malformed())?;
        let parts = parts.cast::<PyList>().map_err(|_| malformed())?;
        let n: usize = parts
            .get_item(0)
            .and_then(|n| n.extract())
            .map_err(|_| malformed())?;
        wire::put_entry_head(out, row.as_bytes(), n);
        for structs in parts.iter().skip(1) {
            let structs = structs.cast::<PyBytes>().map_err(|_| malformed())?;
            out.extend_from_slice(structs.as_bytes());
        }
    }
    Ok(rows.len())
}
