//! The built-in translators on `packed` export values (decoded by [`crate::packed`]). A packed value
//! holds bytes, not JSON, so no field can be of the wrong type: what remains to decide is its shape.
//! A value of a shape the translator does not take, or bytes that are not a well-formed packed value,
//! go to Python ([`EntryError::Fallback`]), whose translator gives the error message (or whose
//! `unpack`, this crate's decoder, names what is malformed).

use indexmap::IndexMap;

use super::{last_per_cell, CellKey, Change, EntryError, Result};
use crate::packed::{decode, Cell, CELLS, DIFFERENCE, OPERATIONS};

impl Cell<'_> {
    fn key(&self) -> CellKey {
        (
            self.row.to_vec(),
            self.cf.to_vec(),
            self.cq.to_vec(),
            self.cv.unwrap_or_default().to_vec(),
        )
    }
}

type Cells = IndexMap<CellKey, Vec<u8>, rustc_hash::FxBuildHasher>;

fn by_key(cells: &[Cell<'_>]) -> Cells {
    let mut out = Cells::with_capacity_and_hasher(cells.len(), Default::default());
    for c in cells {
        out.insert(c.key(), c.value.unwrap_or_default().to_vec());
    }
    out
}

fn changes(cells: &[Cell<'_>]) -> Vec<Change> {
    let changes = cells
        .iter()
        .map(|c| Change {
            key: c.key(),
            value: c.value.map(<[u8]>::to_vec),
        })
        .collect();
    last_per_cell(changes)
}

/// Translate one packed export value with the built-in translator `name`.
pub fn translate(name: &str, data: &[u8]) -> Result<Vec<Change>> {
    let packed = decode(data).map_err(|_| EntryError::Fallback)?;
    match (name, packed.shape) {
        ("difference", DIFFERENCE) => Ok(super::difference::diff(
            by_key(&packed.lists[0]),
            by_key(&packed.lists[1]),
        )),
        // a set operation is a cell with a value, a delete one without: `cells` reads both alike
        ("cells", CELLS | OPERATIONS) | ("replicator", OPERATIONS) => Ok(changes(&packed.lists[0])),
        _ => Err(EntryError::Fallback),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(out: &mut Vec<u8>, f: &[u8]) {
        out.push(f.len() as u8);
        out.extend_from_slice(f);
    }

    /// A packed value of one shape with (flags, fields) cells per list.
    fn pack(shape: u8, lists: &[&[(u8, &[&[u8]])]]) -> Vec<u8> {
        let mut out = vec![0xFF, 0x01, shape];
        for cells in lists {
            out.push(cells.len() as u8);
            for (flags, fields) in *cells {
                out.push(*flags);
                for f in *fields {
                    field(&mut out, f);
                }
            }
        }
        out
    }

    fn key(row: &str) -> CellKey {
        (row.into(), b"f".to_vec(), b"q".to_vec(), vec![])
    }

    #[test]
    fn difference_deletes_vanished_and_puts_changed() {
        let v = pack(
            DIFFERENCE,
            &[
                &[
                    (2 | 4, &[b"a", b"f", b"q", b"1"]),
                    (2, &[b"b", b"f", b"q", b"1"]),
                ],
                &[
                    (2, &[b"b", b"f", b"q", b"1"]),
                    (2, &[b"c", b"f", b"q", b"2"]),
                ],
            ],
        );
        let out = translate("difference", &v).unwrap();
        assert_eq!(
            out,
            vec![
                Change {
                    key: key("a"),
                    value: None
                },
                Change {
                    key: key("c"),
                    value: Some(b"2".to_vec())
                },
            ]
        );
    }

    #[test]
    fn operations_keep_the_last_per_cell_and_cells_read_them_too() {
        let v = pack(
            OPERATIONS,
            &[&[
                (2, &[b"a", b"f", b"q", b"1"]),
                (1, &[b"a", b"f", b"q", b"vis"]),
                (0, &[b"a", b"f", b"q"]),
            ]],
        );
        let want = vec![
            Change {
                key: (b"a".to_vec(), b"f".to_vec(), b"q".to_vec(), b"vis".to_vec()),
                value: None,
            },
            Change {
                key: key("a"),
                value: None,
            },
        ];
        assert_eq!(translate("replicator", &v).unwrap(), want);
        assert_eq!(translate("cells", &v).unwrap(), want);
    }

    #[test]
    fn other_shapes_and_malformed_bytes_go_to_python() {
        let cells = pack(CELLS, &[&[(2, &[b"a", b"f", b"q", b"1"])]]);
        assert!(translate("cells", &cells).is_ok());
        assert_eq!(translate("replicator", &cells), Err(EntryError::Fallback));
        assert_eq!(translate("difference", &cells), Err(EntryError::Fallback));
        let mut trailing = cells.clone();
        trailing.push(0);
        assert_eq!(translate("cells", &trailing), Err(EntryError::Fallback));
        assert_eq!(
            translate("cells", &cells[..cells.len() - 1]),
            Err(EntryError::Fallback)
        );
        let empty_row = pack(CELLS, &[&[(2, &[b"", b"f", b"q", b"1"])]]);
        assert_eq!(translate("cells", &empty_row), Err(EntryError::Fallback));
        let no_value = pack(DIFFERENCE, &[&[(0, &[b"a", b"f", b"q"])], &[]]);
        assert_eq!(
            translate("difference", &no_value),
            Err(EntryError::Fallback)
        );
        let bad_text = pack(CELLS, &[&[(2 | 4, &[b"\xff", b"f", b"q", b"1"])]]);
        assert_eq!(translate("cells", &bad_text), Err(EntryError::Fallback));
        assert_eq!(
            translate("cells", br#"[{"row":"a"}]"#),
            Err(EntryError::Fallback)
        );
        // a count far beyond the data is refused, not allocated
        assert!(decode(&[0xFF, 0x01, CELLS, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]).is_err());
    }
}
