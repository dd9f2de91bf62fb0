//! Queue entry rows `<qid>:<bucketHex>:<key><seq, 8 bytes big-endian>` taken apart for a whole
//! batch, with `QueueLayout.parse_row`'s checks and reasons (connector/queue/layout.py). A malformed
//! row gets its reason and the batch goes on.

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
