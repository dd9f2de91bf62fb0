//! Order-independent digests of cells, per tablet range: how `verify` tells a destination range that
//! matches what A implies without comparing it cell by cell.
//!
//! A cell's hash is xxh3-64 of its row, family, qualifier, visibility and value, each preceded by its
//! length (so field boundaries cannot shift); the timestamp is left out, since a cell written by the
//! stream and the same cell written by a snapshot carry different timestamps but are the same content.
//! A range's digest is the count of its cells and the wrapping sum of their hashes: the same whatever
//! order the cells are read in.

use xxhash_rust::xxh3::Xxh3;

/// The hash of one cell's content (see the module's description).
pub fn cell_hash(parts: [&[u8]; 5]) -> u64 {
    let mut h = Xxh3::new();
    for p in parts {
        h.update(&(p.len() as u32).to_le_bytes());
        h.update(p);
    }
    h.digest()
}

/// The index of the tablet range holding `row`: tablet `i` ends at `splits[i]` inclusive, the last one
/// is unbounded (`splits` sorted).
pub fn range_of(splits: &[Vec<u8>], row: &[u8]) -> usize {
    splits.partition_point(|s| s.as_slice() < row)
}

/// Counts and wrapping hash sums of cells per tablet range (`splits.len() + 1` of each).
pub fn digests<'a>(
    cells: impl Iterator<Item = [&'a [u8]; 5]>,
    splits: &[Vec<u8>],
) -> (Vec<u64>, Vec<u64>) {
    let mut counts = vec![0u64; splits.len() + 1];
    let mut sums = vec![0u64; splits.len() + 1];
    for parts in cells {
        let i = range_of(splits, parts[0]);
        counts[i] += 1;
        sums[i] = sums[i].wrapping_add(cell_hash(parts));
    }
    (counts, sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_does_not_matter_and_fields_do_not_shift() {
        let a: [&[u8]; 5] = [b"r1", b"f", b"q", b"", b"v"];
        let b: [&[u8]; 5] = [b"r2", b"f", b"q", b"", b"w"];
        let splits = vec![b"r1".to_vec()];
        assert_eq!(
            digests([a, b].into_iter(), &splits),
            digests([b, a].into_iter(), &splits)
        );
        assert_ne!(
            cell_hash([b"ab", b"c", b"", b"", b""]),
            cell_hash([b"a", b"bc", b"", b"", b""])
        );
    }

    #[test]
    fn a_tablet_ends_at_its_split_row() {
        let splits = vec![b"m".to_vec(), b"t".to_vec()];
        assert_eq!(range_of(&splits, b"a"), 0);
        assert_eq!(range_of(&splits, b"m"), 0);
        assert_eq!(range_of(&splits, b"m\0"), 1);
        assert_eq!(range_of(&splits, b"t"), 1);
        assert_eq!(range_of(&splits, b"z"), 2);
    }
}
