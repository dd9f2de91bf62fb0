//! Queue entry rows `<qid>:<bucketHex>:<key><seq, 8 bytes big-endian>` taken apart for a whole
//! batch, with `QueueLayout.parse_row`'s checks and reasons (connector/queue/layout.py). A malformed
//! row gets its reason and the batch goes on. Also the deletes of drained entries.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Int32Builder, Int64Builder, StringBuilder,
};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};

use crate::arrow_ffi::{record_batch, Bytes};
use crate::error::Error;
use crate::murmur::bucket_of;
use crate::pyrepr::bytes_repr;

pub const SEQ_BYTES: usize = 8;

/// The layout of one queue: what `QueueLayout(qid, num_buckets)` knows.
pub struct Layout {
    entry_prefix: Vec<u8>,
    pub num_buckets: u32,
    pub hex_width: usize,
}

impl Layout {
    pub fn new(qid: &str, num_buckets: u32) -> Result<Self, String> {
        if qid.is_empty() || qid.contains([':', '#']) {
            return Err(format!(
                "queue id must be non-empty without ':' or '#', got {qid:?}"
            ));
        }
        if num_buckets == 0 || num_buckets > i32::MAX as u32 {
            return Err(format!(
                "num_buckets must be in [1, 2**31-1], got {num_buckets}"
            ));
        }
        let bits = 32 - num_buckets.leading_zeros() as usize;
        let mut entry_prefix = qid.as_bytes().to_vec();
        entry_prefix.push(b':');
        Ok(Layout {
            entry_prefix,
            num_buckets,
            hex_width: bits.div_ceil(4),
        })
    }
}

/// One parsed entry row; `key` is a range of the row's bytes.
#[derive(Debug, PartialEq)]
pub struct Parsed {
    pub bucket: u32,
    pub key: std::ops::Range<usize>,
    pub seq: i64,
}

fn hex_value(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some(u32::from(c - b'0')),
        b'a'..=b'f' => Some(u32::from(c - b'a' + 10)),
        _ => None,
    }
}

/// `QueueLayout.parse_row`: the parts of an entry row, or the reason it is malformed.
pub fn parse_row(layout: &Layout, row: &[u8]) -> Result<Parsed, String> {
    let prefix = &layout.entry_prefix;
    let w = layout.hex_width;
    if !row.starts_with(prefix) {
        return Err(format!("wrong prefix: expected {}", bytes_repr(prefix)));
    }
    let hex_end = prefix.len() + w;
    if row.len() <= hex_end {
        return Err(format!("short row: no bucket id of {w} hex digits and ':'"));
    }
    let mut bucket: u64 = 0;
    let mut hex_ok = row[hex_end] == b':';
    for &c in &row[prefix.len()..hex_end] {
        match hex_value(c) {
            Some(d) => bucket = bucket * 16 + u64::from(d),
            None => hex_ok = false,
        }
    }
    if !hex_ok {
        return Err(format!(
            "bad bucket hex: expected {w} lowercase hex digits and ':' after {}",
            bytes_repr(prefix)
        ));
    }
    if bucket >= u64::from(layout.num_buckets) {
        return Err(format!(
            "bucket {bucket} out of range for {} buckets",
            layout.num_buckets
        ));
    }
    let rest = hex_end + 1;
    if row.len() - rest < SEQ_BYTES {
        return Err(format!(
            "short row: {} bytes after the bucket prefix, need at least {SEQ_BYTES} for the seq",
            row.len() - rest
        ));
    }
    let key = rest..row.len() - SEQ_BYTES;
    let seq_bytes: [u8; SEQ_BYTES] = row[key.end..].try_into().expect("8 bytes");
    let seq = u64::from_be_bytes(seq_bytes);
    if seq > i64::MAX as u64 {
        let hex: String = seq_bytes.iter().map(|b| format!("{b:02x}")).collect();
        return Err(format!(
            "seq {hex} does not fit in a non-negative signed 64-bit int"
        ));
    }
    let actual = bucket_of(&row[key.clone()], layout.num_buckets);
    if u64::from(actual) != bucket {
        return Err(format!(
            "key hashes to bucket {actual}, but the row is in bucket {bucket}"
        ));
    }
    Ok(Parsed {
        bucket: bucket as u32,
        key,
        seq: seq as i64,
    })
}

/// Every row of `rows` taken apart: batch (bucket int32, key binary, seq int64, error utf8); a
/// malformed row has nulls and its reason in `error`.
pub fn parse_rows(layout: &Layout, rows: &Bytes<'_>) -> Result<RecordBatch, Error> {
    let n = rows.len();
    let mut bucket = Int32Builder::with_capacity(n);
    let mut key = BinaryBuilder::with_capacity(n, 0);
    let mut seq = Int64Builder::with_capacity(n);
    let mut error = StringBuilder::new();
    for i in 0..n {
        let row = rows.get(i).unwrap_or_default();
        match parse_row(layout, row) {
            Ok(p) => {
                bucket.append_value(p.bucket as i32);
                key.append_value(&row[p.key]);
                seq.append_value(p.seq);
                error.append_null();
            }
            Err(reason) => {
                bucket.append_null();
                key.append_null();
                seq.append_null();
                error.append_value(reason);
            }
        }
    }
    let [bucket, key, seq, error]: [ArrayRef; 4] = [
        Arc::new(bucket.finish()),
        Arc::new(key.finish()),
        Arc::new(seq.finish()),
        Arc::new(error.finish()),
    ];
    record_batch(
        ["bucket", "key", "seq", "error"],
        [bucket, key, seq, error],
        [true; 4],
    )
}

/// The deletes of queue entries, as cell updates (row, cf, cq, cv, ts, value, delete): each row's
/// `e:v` at the entry's own timestamp.
pub fn entry_deletes(rows: &Bytes<'_>, ts: &Int64Array) -> Result<RecordBatch, Error> {
    let n = rows.len();
    let row_nulls = (0..n).any(|i| rows.get(i).is_none());
    if ts.len() != n || ts.null_count() > 0 || row_nulls {
        return Err(Error::InvalidArgument(format!(
            "need one non-null ts per non-null row: {n} rows, {} ts ({} null)",
            ts.len(),
            ts.null_count()
        )));
    }
    let mut row = BinaryBuilder::with_capacity(n, 0);
    for i in 0..n {
        row.append_value(rows.value(i));
    }
    let constant = |b: &[u8]| -> ArrayRef {
        let mut c = BinaryBuilder::with_capacity(n, n * b.len());
        (0..n).for_each(|_| c.append_value(b));
        Arc::new(c.finish())
    };
    let mut value = BinaryBuilder::with_capacity(n, 0);
    let mut delete = BooleanBuilder::with_capacity(n);
    for _ in 0..n {
        value.append_null();
        delete.append_value(true);
    }
    let (value, delete): (ArrayRef, ArrayRef) =
        (Arc::new(value.finish()), Arc::new(delete.finish()));
    let (row, ts): (ArrayRef, ArrayRef) = (Arc::new(row.finish()), Arc::new(ts.clone()));
    record_batch(
        ["row", "cf", "cq", "cv", "ts", "value", "delete"],
        [
            row,
            constant(b"e"),
            constant(b"v"),
            constant(b""),
            ts,
            value,
            delete,
        ],
        [false, false, false, false, true, true, false],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_explains() {
        let l = Layout::new("q", 13).unwrap();
        let mut row = b"q:2:0001".to_vec();
        row.extend_from_slice(&7u64.to_be_bytes());
        let p = parse_row(&l, &row).unwrap();
        assert_eq!((p.bucket, &row[p.key.clone()], p.seq), (2, &b"0001"[..], 7));
        assert_eq!(
            parse_row(&l, b"x:2:k").unwrap_err(),
            "wrong prefix: expected b'q:'"
        );
        assert_eq!(
            parse_row(&l, b"q:3:k").unwrap_err(),
            "short row: 1 bytes after the bucket prefix, need at least 8 for the seq"
        );
        assert_eq!(l.hex_width, 1);
        assert_eq!(Layout::new("q", 16).unwrap().hex_width, 2);
        assert_eq!(Layout::new("q", 1009).unwrap().hex_width, 3);
    }
}
