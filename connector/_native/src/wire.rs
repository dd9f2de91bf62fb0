//! The oneway `update(1:string writer, 2:map<binary, list<ColumnUpdate>> cells)` call of the Accumulo
//! Proxy 2.x interface (Thrift compact protocol; the framed transport adds the 4-byte length). Same
//! bytes as thriftpy2 (and as the Python oracle `tests/wire_oracle.py`). The client's only encoder of
//! this call: [`encode_frames`] encodes a whole Arrow batch of cells into message bodies; the
//! per-Mutation path (`crate::column_updates`) writes map entries with [`put_cell`] and
//! [`put_list_header`] and wraps them with [`put_message`].
//!
//! Cells of one row go into one map entry (a Thrift map keeps one entry per key) and one frame:
//! a row's mutation is never split, so a row too large for `max_frame_bytes` is an error.

use arrow_array::Array;
use rustc_hash::FxHashMap;

use crate::arrow_ffi::{boolean, int64, Bytes, Columns};
use crate::error::Error;
use crate::pyrepr::bytes_repr;

// Compact protocol bytes (field ids and types of proxy.thrift's ColumnUpdate and update_args).
const PROTOCOL_ID: u8 = 0x82;
const VERSION_ONEWAY: u8 = 0x01 | (4 << 5);
const FIELD1_BINARY: u8 = 0x18; // field delta 1, binary
const FIELD_I64_DELTA1: u8 = 0x16; // timestamp(4) after colVisibility(3)
const FIELD_MAP_DELTA1: u8 = 0x1B; // cells(2) after writer(1)
const MAP_BINARY_LIST: u8 = (8 << 4) | 9; // key binary, value list
const LIST_OF_STRUCTS: u8 = 12;
const VALUE_AFTER_TS: u8 = 0x18; // value(5), delta 1
const VALUE_NO_TS: u8 = 0x28; // value(5), delta 2
const DELETE_AFTER_TS: u8 = 0x21; // deleteCell(6) = true, delta 2
const DELETE_NO_TS: u8 = 0x31; // deleteCell(6) = true, delta 3
const STOP: u8 = 0;

/// One cell change, borrowed from the Arrow columns.
#[derive(Clone, Copy, Debug)]
pub struct Cell<'a> {
    pub row: &'a [u8],
    pub cf: &'a [u8],
    pub cq: &'a [u8],
    pub cv: &'a [u8],
    pub ts: Option<i64>,
    /// None for a delete
    pub value: Option<&'a [u8]>,
}

/// The cells of an Arrow batch with columns row, cf, cq, cv, ts, value and optional delete, checked
/// (an empty row, a null family or qualifier, a negative timestamp, a put without a value are refused).
pub fn cells_of(cols: &Columns) -> Result<Vec<Cell<'_>>, Error> {
    let bytes = |name: &str| -> Result<Bytes<'_>, Error> { Bytes::new(cols.require(name)?, name) };
    let (row, cf, cq, cv, value) = (
        bytes("row")?,
        bytes("cf")?,
        bytes("cq")?,
        bytes("cv")?,
        bytes("value")?,
    );
    let ts = int64(cols.require("ts")?, "ts")?;
    let delete = cols
        .get("delete")
        .map(|d| boolean(d, "delete"))
        .transpose()?;
    let len = cols.len;
    let mut cells = Vec::with_capacity(len);
    for i in 0..len {
        let r = row.get(i).unwrap_or_default();
        if r.is_empty() {
            return Err(Error::InvalidCell(format!(
                "cell {i}: row must not be empty"
            )));
        }
        let (Some(f), Some(q)) = (cf.get(i), cq.get(i)) else {
            return Err(Error::InvalidCell(format!(
                "cell {i} (row {}): cf and cq must not be null",
                bytes_repr(r)
            )));
        };
        let t = (!ts.is_null(i)).then(|| ts.value(i));
        if let Some(t) = t.filter(|t| *t < 0) {
            return Err(Error::InvalidCell(format!(
                "cell {i} (row {}): timestamp must be in [0, 2**63-1], got {t}",
                bytes_repr(r)
            )));
        }
        let v = value.get(i);
        let is_delete = match delete {
            Some(d) => !d.is_null(i) && d.value(i),
            None => v.is_none(),
        };
        if !is_delete && v.is_none() {
            return Err(Error::InvalidCell(format!(
                "cell {i} (row {}): a put needs a value (null value, delete false)",
                bytes_repr(r)
            )));
        }
        cells.push(Cell {
            row: r,
            cf: f,
            cq: q,
            cv: cv.get(i).unwrap_or_default(),
            ts: t,
            value: if is_delete { None } else { v },
        });
    }
    Ok(cells)
}

#[inline]
pub fn varint_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7F) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[inline]
fn binary_len(b: &[u8]) -> usize {
    varint_len(b.len() as u64) + b.len()
}

#[inline]
pub fn put_binary(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[inline]
fn zigzag(ts: i64) -> u64 {
    ((ts << 1) ^ (ts >> 63)) as u64
}

/// Bytes of one encoded ColumnUpdate struct.
pub fn cell_len(c: &Cell) -> usize {
    let mut n = 3 + binary_len(c.cf) + binary_len(c.cq) + binary_len(c.cv);
    if let Some(ts) = c.ts {
        n += 1 + varint_len(zigzag(ts));
    }
    n + match c.value {
        None => 2,
        Some(v) => 2 + binary_len(v),
    }
}

pub fn put_cell(out: &mut Vec<u8>, c: &Cell) {
    out.push(FIELD1_BINARY);
    put_binary(out, c.cf);
    out.push(FIELD1_BINARY);
    put_binary(out, c.cq);
    out.push(FIELD1_BINARY);
    put_binary(out, c.cv);
    if let Some(ts) = c.ts {
        out.push(FIELD_I64_DELTA1);
        put_varint(out, zigzag(ts));
    }
    match c.value {
        None => out.push(if c.ts.is_some() {
            DELETE_AFTER_TS
        } else {
            DELETE_NO_TS
        }),
        Some(v) => {
            out.push(if c.ts.is_some() {
                VALUE_AFTER_TS
            } else {
                VALUE_NO_TS
            });
            put_binary(out, v);
        }
    }
    out.push(STOP);
}

fn list_header_len(n: usize) -> usize {
    if n < 15 {
        1
    } else {
        1 + varint_len(n as u64)
    }
}

/// The header of a list of `n` ColumnUpdate structs.
pub fn put_list_header(out: &mut Vec<u8>, n: usize) {
    if n < 15 {
        out.push(((n as u8) << 4) | LIST_OF_STRUCTS);
    } else {
        out.push(0xF0 | LIST_OF_STRUCTS);
        put_varint(out, n as u64);
    }
}

/// Bytes of one map entry: the row, the list header and `cells_bytes` of encoded ColumnUpdates
/// (`n_cells` of them).
pub fn entry_len(row: &[u8], n_cells: usize, cells_bytes: usize) -> usize {
    binary_len(row) + list_header_len(n_cells) + cells_bytes
}

/// The start of a map entry: the row, then the header of its list of `n_cells` ColumnUpdates.
pub fn put_entry_head(out: &mut Vec<u8>, row: &[u8], n_cells: usize) {
    put_binary(out, row);
    put_list_header(out, n_cells);
}

/// A whole `update` message around `entries`, `n_rows` map entries already encoded.
pub fn put_message(out: &mut Vec<u8>, writer_id: &[u8], n_rows: usize, entries: &[u8]) {
    out.extend_from_slice(&message_head(writer_id));
    out.push(FIELD_MAP_DELTA1);
    put_varint(out, n_rows as u64);
    if n_rows > 0 {
        // an empty map is its size byte alone, as thriftpy2 writes it
        out.push(MAP_BINARY_LIST);
        out.extend_from_slice(entries);
    }
    out.push(STOP);
}

fn message_head(writer_id: &[u8]) -> Vec<u8> {
    let mut head = vec![PROTOCOL_ID, VERSION_ONEWAY, 0]; // seqid 0, as thriftpy2 sends oneway calls
    put_binary(&mut head, b"update");
    head.push(FIELD1_BINARY);
    put_binary(&mut head, writer_id);
    head
}

/// A row and the indices of its cells, in batch order.
struct RowEntry<'a> {
    row: &'a [u8],
    cells: Vec<u32>,
    bytes: usize,
}

/// Which row entries go in which frame.
pub struct FramePlan<'a> {
    head: Vec<u8>,
    rows: Vec<RowEntry<'a>>,
    /// (first row entry, end row entry, message bytes) per frame
    frames: Vec<(usize, usize, usize)>,
}

#[derive(Debug, PartialEq)]
pub struct TooLarge(pub String);

/// Group cells by row (first-seen row order; cells keep batch order within a row) and pack the rows
/// into frames of at most `max_frame_bytes` message bytes.
pub fn plan_frames<'a>(
    writer_id: &[u8],
    cells: &[Cell<'a>],
    max_frame_bytes: usize,
) -> Result<FramePlan<'a>, TooLarge> {
    let head = message_head(writer_id);
    let mut index: FxHashMap<&[u8], usize> = FxHashMap::default();
    let mut rows: Vec<RowEntry<'a>> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let k = *index.entry(c.row).or_insert_with(|| {
            rows.push(RowEntry {
                row: c.row,
                cells: Vec::new(),
                bytes: binary_len(c.row),
            });
            rows.len() - 1
        });
        rows[k].cells.push(i as u32);
        rows[k].bytes += cell_len(c);
    }
    for r in &mut rows {
        r.bytes += list_header_len(r.cells.len());
    }
    // head + map field header + varint(n rows) + key/value types + final stop
    let fixed = head.len() + 1 + 1 + 1;
    let size = |n_rows: usize, entries: usize| fixed + varint_len(n_rows as u64) + entries;
    let mut frames = Vec::new();
    let (mut start, mut entries) = (0usize, 0usize);
    for (k, r) in rows.iter().enumerate() {
        if size(1, r.bytes) > max_frame_bytes {
            return Err(TooLarge(format!(
                "mutation for row {} ({} cells) encodes to {} bytes, over max_frame_bytes={}",
                bytes_repr(r.row),
                r.cells.len(),
                size(1, r.bytes),
                max_frame_bytes
            )));
        }
        if k > start && size(k + 1 - start, entries + r.bytes) > max_frame_bytes {
            frames.push((start, k, size(k - start, entries)));
            start = k;
            entries = 0;
        }
        entries += r.bytes;
    }
    if start < rows.len() {
        frames.push((start, rows.len(), size(rows.len() - start, entries)));
    }
    Ok(FramePlan { head, rows, frames })
}

impl FramePlan<'_> {
    pub fn frame_sizes(&self) -> impl Iterator<Item = usize> + '_ {
        self.frames.iter().map(|f| f.2)
    }

    /// Write frame `k` (exactly `frame_sizes()[k]` bytes) into `out`.
    pub fn write_frame(&self, k: usize, cells: &[Cell], out: &mut Vec<u8>) {
        let (start, end, _) = self.frames[k];
        out.extend_from_slice(&self.head);
        out.push(FIELD_MAP_DELTA1);
        put_varint(out, (end - start) as u64);
        out.push(MAP_BINARY_LIST);
        for r in &self.rows[start..end] {
            put_entry_head(out, r.row, r.cells.len());
            for &i in &r.cells {
                put_cell(out, &cells[i as usize]);
            }
        }
        out.push(STOP);
    }
}

/// All frames of a batch (what `encode_update_frames` hands to Python).
pub fn encode_frames(
    writer_id: &[u8],
    cells: &[Cell],
    max_frame_bytes: usize,
) -> Result<Vec<Vec<u8>>, TooLarge> {
    let plan = plan_frames(writer_id, cells, max_frame_bytes)?;
    Ok(plan
        .frame_sizes()
        .enumerate()
        .map(|(k, n)| {
            let mut out = Vec::with_capacity(n);
            plan.write_frame(k, cells, &mut out);
            debug_assert_eq!(out.len(), n);
            out
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell<'a>(row: &'a [u8], ts: Option<i64>, value: Option<&'a [u8]>) -> Cell<'a> {
        Cell {
            row,
            cf: b"f",
            cq: b"q",
            cv: b"",
            ts,
            value,
        }
    }

    #[test]
    fn one_put_matches_the_python_oracle() {
        // bytes from tests/wire_oracle.py: encode_update_message("w", 1, encode_row_entry(b"r", [put f:q=v @5]))
        let frames = encode_frames(b"w", &[cell(b"r", Some(5), Some(b"v"))], 1 << 20).unwrap();
        let want: &[u8] = b"\x82\x81\x00\x06update\x18\x01w\x1b\x01\x89\x01r\x1c\x18\x01f\x18\x01q\x18\x00\x16\x0a\x18\x01v\x00\x00";
        assert_eq!(frames, vec![want.to_vec()]);
    }

    #[test]
    fn rows_are_grouped_and_frames_stay_under_the_limit() {
        let cells: Vec<Cell> = (0..100)
            .map(|i| cell(if i % 2 == 0 { b"a" } else { b"b" }, Some(i), None))
            .collect();
        let frames = encode_frames(b"w", &cells, 1 << 20).unwrap();
        assert_eq!(frames.len(), 1);
        let rows: Vec<Vec<u8>> = (0..50).map(|i| format!("row{i}").into_bytes()).collect();
        let cells: Vec<Cell> = rows
            .iter()
            .map(|r| cell(r, Some(1), Some(b"0123456789")))
            .collect();
        let frames = encode_frames(b"w", &cells, 200).unwrap();
        assert!(frames.len() > 1);
        assert!(frames.iter().all(|f| f.len() <= 200));
    }

    #[test]
    fn entries_wrapped_in_a_message_equal_the_batch_frame() {
        let cells = [cell(b"r", Some(5), Some(b"v")), cell(b"r", None, None)];
        let mut entries = Vec::new();
        put_entry_head(&mut entries, b"r", 2);
        cells.iter().for_each(|c| put_cell(&mut entries, c));
        let body: usize = cells.iter().map(cell_len).sum();
        assert_eq!(entries.len(), entry_len(b"r", 2, body));
        let mut message = Vec::new();
        put_message(&mut message, b"w", 1, &entries);
        assert_eq!(vec![message], encode_frames(b"w", &cells, 1 << 20).unwrap());
        let mut empty = Vec::new();
        put_message(&mut empty, b"w", 0, b"");
        assert_eq!(empty, b"\x82\x81\x00\x06update\x18\x01w\x1b\x00\x00");
    }

    #[test]
    fn a_row_too_large_names_the_row() {
        let big = vec![0u8; 1000];
        let err = encode_frames(b"w", &[cell(b"r1", None, Some(&big))], 500).unwrap_err();
        assert!(err
            .0
            .starts_with("mutation for row b'r1' (1 cells) encodes to "));
    }
}
