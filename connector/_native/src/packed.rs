//! The `packed` value layout: its constants and its one decoder (the layout is documented in
//! `connector/packed.py`; test vectors shared with the Python and Java sides are in
//! `tests/vectors/packed.json`). The drain translates decoded values ([`crate::translate::from_packed`]),
//! `connector.packed.unpack` gives them to Python ([`crate::pack::unpack`]), and the encoder
//! ([`crate::pack`]) writes what this reads. A value is refused with a message naming the first thing
//! wrong with it, and whatever the encoder refuses to write (an empty row, say) is refused here too.

use crate::pyrepr::bytes_repr;

pub const MAGIC: [u8; 2] = [0xFF, 0x01];
pub const DIFFERENCE: u8 = 1;
pub const CELLS: u8 = 2;
pub const OPERATIONS: u8 = 3;
pub const HAS_CV: u8 = 1;
pub const HAS_VALUE: u8 = 2;
pub const TEXT: u8 = 4;
const FLAGS: u8 = HAS_CV | HAS_VALUE | TEXT;

/// One cell of a packed value; `value` None is a delete, `cv` None no visibility field.
#[derive(Debug, PartialEq)]
pub struct Cell<'a> {
    pub row: &'a [u8],
    pub cf: &'a [u8],
    pub cq: &'a [u8],
    pub cv: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// every field was written as text (UTF-8, checked)
    pub text: bool,
}

/// A decoded packed value: its shape and its one list (two for a difference: old, new).
#[derive(Debug, PartialEq)]
pub struct Packed<'a> {
    pub shape: u8,
    pub lists: Vec<Vec<Cell<'a>>>,
}

type Result<T> = std::result::Result<T, String>;

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or_else(|| format!("packed value ends early at byte {}", self.pos))?;
        self.pos += 1;
        Ok(b)
    }

    /// Unsigned LEB128 of at most 64 bits: a tenth byte may carry only the top bit.
    fn varint(&mut self) -> Result<u64> {
        let start = self.pos;
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                break;
            }
            n |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                return Ok(n);
            }
        }
        Err(format!(
            "packed value has an overlong varint at byte {start}"
        ))
    }

    fn field(&mut self) -> Result<&'a [u8]> {
        let n = self.varint()?;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| {
                format!(
                    "packed value ends early: a field of {n} bytes at byte {}",
                    self.pos
                )
            })?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn cell(&mut self, shape: u8) -> Result<Cell<'a>> {
        let at = self.pos;
        let flags = self.byte()?;
        if flags & !FLAGS != 0 {
            return Err(format!(
                "packed value has unknown cell flags {flags:#04x} at byte {at}"
            ));
        }
        let (row, cf, cq) = (self.field()?, self.field()?, self.field()?);
        let cv = if flags & HAS_CV != 0 {
            Some(self.field()?)
        } else {
            None
        };
        let value = if flags & HAS_VALUE != 0 {
            Some(self.field()?)
        } else {
            None
        };
        if row.is_empty() {
            return Err(format!(
                "packed value has a cell with an empty row at byte {at}"
            ));
        }
        if value.is_none() && shape == DIFFERENCE {
            return Err("packed difference update has a cell without a value".into());
        }
        let text = flags & TEXT != 0;
        let fields = [
            row,
            cf,
            cq,
            cv.unwrap_or_default(),
            value.unwrap_or_default(),
        ];
        if text && !fields.iter().all(|f| std::str::from_utf8(f).is_ok()) {
            return Err(format!(
                "packed value has a text field that is not UTF-8 at byte {at}"
            ));
        }
        Ok(Cell {
            row,
            cf,
            cq,
            cv,
            value,
            text,
        })
    }

    fn list(&mut self, shape: u8) -> Result<Vec<Cell<'a>>> {
        let count = self.varint()?;
        // each cell takes at least 4 bytes: never reserve more than the data could hold
        let room = (self.data.len() - self.pos) / 4;
        let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(room).min(room));
        for _ in 0..count {
            out.push(self.cell(shape)?);
        }
        Ok(out)
    }
}

/// The packed value of `data`, or why it is not a well-formed one.
pub fn decode(data: &[u8]) -> Result<Packed<'_>> {
    if data.get(..2) != Some(&MAGIC[..]) {
        return Err(format!(
            "not a packed value (starts {}, expected {})",
            bytes_repr(&data[..data.len().min(2)]),
            bytes_repr(&MAGIC)
        ));
    }
    let mut r = Reader { data, pos: 2 };
    let shape = r.byte()?;
    let lists = match shape {
        DIFFERENCE => vec![r.list(shape)?, r.list(shape)?],
        CELLS | OPERATIONS => vec![r.list(shape)?],
        _ => return Err(format!("packed value has an unknown shape {shape}")),
    };
    if r.pos != data.len() {
        return Err(format!(
            "packed value has {} bytes after its end",
            data.len() - r.pos
        ));
    }
    Ok(Packed { shape, lists })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The shared test vectors (Python and Java check the same file).
    const VECTORS: &str = include_str!("../../../tests/vectors/packed.json");

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A field of a vector's canonical form: text, or `{"hex": ...}` for bytes.
    fn field(v: &Value) -> (Vec<u8>, bool) {
        match v {
            Value::String(s) => (s.as_bytes().to_vec(), true),
            other => (hex(other["hex"].as_str().unwrap()), false),
        }
    }

    fn expected_cell(v: &Value) -> (Vec<Option<Vec<u8>>>, bool) {
        let mut text = true;
        let mut out = Vec::new();
        for name in ["row", "cf", "cq", "cv", "value"] {
            out.push(v.get(name).map(|f| {
                let (bytes, is_text) = field(f);
                text &= is_text;
                bytes
            }));
        }
        (out, text)
    }

    fn got_cell(c: &Cell<'_>) -> (Vec<Option<Vec<u8>>>, bool) {
        let fields = [Some(c.row), Some(c.cf), Some(c.cq), c.cv, c.value];
        (
            fields.iter().map(|f| f.map(<[u8]>::to_vec)).collect(),
            c.text,
        )
    }

    #[test]
    fn the_shared_vectors_decode_to_their_canonical_form() {
        let vectors: Value = serde_json::from_str(VECTORS).unwrap();
        let vectors = vectors["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 4);
        for v in vectors {
            let data = hex(v["packed"].as_str().unwrap());
            let packed = decode(&data).unwrap_or_else(|e| panic!("{}: {e}", v["name"]));
            let canonical = &v["canonical"];
            let lists: Vec<&Value> = match packed.shape {
                DIFFERENCE => vec![&canonical["old"], &canonical["new"]],
                _ => vec![canonical],
            };
            assert_eq!(packed.lists.len(), lists.len(), "{}", v["name"]);
            for (got, want) in packed.lists.iter().zip(lists) {
                let want: Vec<_> = want.as_array().unwrap().iter().map(expected_cell).collect();
                let got: Vec<_> = got.iter().map(got_cell).collect();
                assert_eq!(got, want, "{}", v["name"]);
            }
        }
    }

    /// A value of cells whose count is the varint `count`.
    fn cells_counted(count: &[&[u8]]) -> Vec<u8> {
        [&[0xFF, 0x01, CELLS][..], &count.concat()].concat()
    }

    #[test]
    fn a_varint_of_more_than_64_bits_is_refused_not_truncated() {
        // nine continuation bytes, then 2: bit 64, which a u64 cannot hold (it read as a count of 0)
        let overflow = cells_counted(&[&[0x80; 9], &[0x02]]);
        let want = Err("packed value has an overlong varint at byte 3".into());
        assert_eq!(decode(&overflow), want);
        // the largest 64-bit count still reads (and then ends early)
        let max = cells_counted(&[&[0xFF; 9], &[0x01]]);
        assert_eq!(
            decode(&max),
            Err("packed value ends early at byte 13".into())
        );
    }

    #[test]
    fn an_empty_row_is_refused() {
        let data = [
            0xFF, 0x01, CELLS, 1, HAS_VALUE, 0, 1, b'f', 1, b'q', 1, b'v',
        ];
        assert_eq!(
            decode(&data),
            Err("packed value has a cell with an empty row at byte 4".into())
        );
    }
}
