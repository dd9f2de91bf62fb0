//! The `nextK` reply decoded straight into Arrow columns (row, cf, cq, cv, ts, value) plus `more`.
//!
//! Structs Key/KeyValue/ScanResult of proxy.thrift, Thrift compact protocol, like
//! `tests/next_k_oracle.py`. Anything unusual (an exception reply, an unknown field, a
//! truncated frame) returns `None` so the caller lets thriftpy2 decode it and raise what it raises.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

const REPLY: u8 = 2;
const TRUE: u8 = 1;
const FALSE: u8 = 2;
const I64: u8 = 6;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const STRUCT: u8 = 12;
const DEFAULT_TS: i64 = i64::MAX; // Key.timestamp's default in proxy.thrift

/// Not a plain ScanResult reply (or a malformed one): decode it the generic way.
#[derive(Debug)]
pub struct Fallback;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn byte(&mut self) -> Result<u8, Fallback> {
        let b = *self.buf.get(self.pos).ok_or(Fallback)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, Fallback> {
        let mut result = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= 64 {
                return Err(Fallback);
            }
            result |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                return Ok(result);
            }
            shift += 7;
        }
    }

    #[inline]
    fn binary(&mut self) -> Result<&'a [u8], Fallback> {
        let n = usize::try_from(self.varint()?).map_err(|_| Fallback)?;
        let end = self.pos.checked_add(n).ok_or(Fallback)?;
        let b = self.buf.get(self.pos..end).ok_or(Fallback)?;
        self.pos = end;
        Ok(b)
    }
}

pub fn cell_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("row", DataType::Binary, false),
        Field::new("cf", DataType::Binary, false),
        Field::new("cq", DataType::Binary, false),
        Field::new("cv", DataType::Binary, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("value", DataType::Binary, false),
    ]))
}

struct Columns {
    key: [BinaryBuilder; 4],
    ts: Int64Builder,
    value: BinaryBuilder,
}

/// Decode a whole `nextK` reply message (the frame without its length prefix).
pub fn decode_next_k_reply(frame: &[u8]) -> Result<(RecordBatch, bool), Fallback> {
    let mut r = Reader { buf: frame, pos: 0 };
    if r.byte()? != 0x82 {
        return Err(Fallback);
    }
    let mtype = r.byte()? >> 5;
    r.varint()?; // seqid
    r.binary()?; // method name
                 // field 0 (success) needs the long form header: the struct type, then the zigzag field id 0
    if mtype != REPLY || r.byte()? != STRUCT || r.byte()? != 0 {
        return Err(Fallback);
    }
    let decoded = decode_scan_result(&mut r)?;
    // the nextK_result struct ends here; a missing stop byte means a truncated frame
    if r.byte()? != 0 {
        return Err(Fallback);
    }
    Ok(decoded)
}

fn decode_scan_result(r: &mut Reader) -> Result<(RecordBatch, bool), Fallback> {
    let mut cols: Option<Columns> = None;
    let mut more = false;
    let mut fid = 0u8;
    loop {
        let header = r.byte()?;
        if header == 0 {
            break;
        }
        let (delta, ftype) = (header >> 4, header & 0x0F);
        if delta == 0 {
            return Err(Fallback);
        }
        fid = fid.wrapping_add(delta);
        match (fid, ftype) {
            (1, LIST) => {
                let size_type = r.byte()?;
                let mut n = usize::from(size_type >> 4);
                if n == 15 {
                    n = usize::try_from(r.varint()?).map_err(|_| Fallback)?;
                }
                if n > 0 && size_type & 0x0F != STRUCT {
                    return Err(Fallback);
                }
                // each KeyValue takes at least 2 bytes: do not trust a huge count before reading
                let cap = n.min(r.buf.len() / 2);
                let c = cols.get_or_insert_with(|| Columns {
                    key: std::array::from_fn(|_| BinaryBuilder::with_capacity(cap, 0)),
                    ts: Int64Builder::with_capacity(cap),
                    value: BinaryBuilder::with_capacity(cap, 0),
                });
                for _ in 0..n {
                    decode_key_value(r, c)?;
                }
            }
            (2, TRUE) => more = true,
            (2, FALSE) => more = false,
            _ => return Err(Fallback),
        }
    }
    let mut c = cols.unwrap_or_else(|| Columns {
        key: std::array::from_fn(|_| BinaryBuilder::new()),
        ts: Int64Builder::new(),
        value: BinaryBuilder::new(),
    });
    let [row, cf, cq, cv] = &mut c.key;
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(row.finish()),
        Arc::new(cf.finish()),
        Arc::new(cq.finish()),
        Arc::new(cv.finish()),
        Arc::new(c.ts.finish()),
        Arc::new(c.value.finish()),
    ];
    let batch = RecordBatch::try_new(cell_schema(), arrays).map_err(|_| Fallback)?;
    Ok((batch, more))
}

fn decode_key_value(r: &mut Reader, c: &mut Columns) -> Result<(), Fallback> {
    let mut key: Option<([&[u8]; 4], i64)> = None;
    let mut value: &[u8] = b"";
    let mut fid = 0u8;
    loop {
        let h = r.byte()?;
        if h == 0 {
            break;
        }
        let (d, t) = (h >> 4, h & 0x0F);
        if d == 0 {
            return Err(Fallback);
        }
        fid = fid.wrapping_add(d);
        match (fid, t) {
            (1, STRUCT) => key = Some(decode_key(r)?),
            (2, BINARY) => value = r.binary()?,
            _ => return Err(Fallback),
        }
    }
    let (parts, ts) = key.ok_or(Fallback)?;
    for (builder, part) in c.key.iter_mut().zip(parts) {
        builder.append_value(part);
    }
    c.ts.append_value(ts);
    c.value.append_value(value);
    Ok(())
}

fn decode_key<'a>(r: &mut Reader<'a>) -> Result<([&'a [u8]; 4], i64), Fallback> {
    let mut parts: [&[u8]; 4] = [b""; 4];
    let mut ts = DEFAULT_TS;
    let mut fid = 0u8;
    loop {
        let h = r.byte()?;
        if h == 0 {
            return Ok((parts, ts));
        }
        let (d, t) = (h >> 4, h & 0x0F);
        if d == 0 {
            return Err(Fallback);
        }
        fid = fid.wrapping_add(d);
        match (fid, t) {
            (1..=4, BINARY) => parts[usize::from(fid) - 1] = r.binary()?,
            (5, I64) => {
                let z = r.varint()?;
                ts = ((z >> 1) as i64) ^ -((z & 1) as i64);
            }
            _ => return Err(Fallback),
        }
    }
}
