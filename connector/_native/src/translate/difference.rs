//! `connector/export/difference.py`: `{"old": [cell, ...], "new": [cell, ...]}` (or `[old, new]`)
//! becomes deletes of cells only in old and puts of cells that are new or changed.

use indexmap::IndexMap;
use serde_json::Value;

use super::{cell_key, cell_value, error, repr, CellKey, Change, Result};
use crate::pyrepr::type_name;

pub(super) type Cells = IndexMap<CellKey, Vec<u8>, rustc_hash::FxBuildHasher>;

/// `_cells`: a later cell with the same key replaces the value and keeps the first position.
fn cells(v: Option<&Value>, place: &str) -> Result<Cells> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Cells::default()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return error(format!(
                "{place} must be a list of cells, not {}",
                type_name(other)
            ))
        }
    };
    let mut out = Cells::with_capacity_and_hasher(items.len(), Default::default());
    for (i, cell) in items.iter().enumerate() {
        let p = format!("{place}[{i}]");
        let key = cell_key(cell, &p)?;
        let value = cell_value(cell, &p)?;
        out.insert(key, value);
    }
    Ok(out)
}

pub fn translate(value: &Value) -> Result<Vec<Change>> {
    let (old, new) = match value {
        Value::Object(map) => {
            let mut unknown: Vec<&String> =
                map.keys().filter(|k| *k != "old" && *k != "new").collect();
            if !unknown.is_empty() {
                unknown.sort();
                let names = Value::Array(
                    unknown
                        .into_iter()
                        .map(|k| Value::String(k.clone()))
                        .collect(),
                );
                return error(format!(
                    "difference update has unknown fields {}; expected old, new",
                    repr(&names)?
                ));
            }
            (map.get("old"), map.get("new"))
        }
        Value::Array(pair) if pair.len() == 2 => (Some(&pair[0]), Some(&pair[1])),
        other => {
            return error(format!(
                "difference update must be {{'old': [...], 'new': [...]}}, got {}",
                repr(other)?
            ))
        }
    };
    Ok(diff(cells(old, "old")?, cells(new, "new")?))
}

/// Deletes of the cells only in `old`, then puts of the cells of `new` that are new or changed.
pub(super) fn diff(old: Cells, new: Cells) -> Vec<Change> {
    let mut changes = Vec::with_capacity(old.len() + new.len());
    for key in old.keys() {
        if !new.contains_key(key) {
            changes.push(Change {
                key: key.clone(),
                value: None,
            });
        }
    }
    for (key, v) in new {
        if old.get(&key) != Some(&v) {
            changes.push(Change {
                key,
                value: Some(v),
            });
        }
    }
    changes
}
