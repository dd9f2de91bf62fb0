//! The built-in translators (`difference`, `replicator`, `cells`) on JSON export values (and on
//! `packed` ones, [`from_packed`]), with the
//! error messages of the Python translators in connector/export (message for message).
//!
//! Each export translates on its own: an error belongs to its entry and the batch goes on. Where
//! the result cannot be decided here exactly as Python would (bytes that serde_json refuses but
//! `json.loads` may accept, such as NaN; an error message that must show non-ASCII text, whose
//! `repr` depends on Python's Unicode tables), the entry is marked [`EntryError::Fallback`] and the
//! Python wrapper translates that entry the Python way.

mod cells;
mod difference;
pub mod from_packed;
mod replicator;

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use serde_json::Value;

use crate::arrow_ffi::{record_batch, Bytes};
use crate::error::Error;
use crate::pyrepr::{json_repr, number_str, truthy};

pub type CellKey = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);

/// A destination cell change: `value` None is a delete. The exporter stamps ts = seq.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub key: CellKey,
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, PartialEq)]
pub enum EntryError {
    /// A `TranslationError` with this message.
    Translation(String),
    /// Decide this entry in Python.
    Fallback,
}

pub type Result<T> = std::result::Result<T, EntryError>;

fn error<T>(msg: String) -> Result<T> {
    Err(EntryError::Translation(msg))
}

/// `repr(value)`, or hand the entry to Python when only Python can print it.
fn repr(v: &Value) -> Result<String> {
    json_repr(v).ok_or(EntryError::Fallback)
}

/// A built-in translator: one export value (parsed JSON) to its cell changes.
pub type Translate = fn(&Value) -> Result<Vec<Change>>;

/// The translators that run natively, by name. Adding one is its module and one line here, plus its line
/// in `connector/export/translators.py` (a test checks that the two lists agree).
pub const TRANSLATORS: &[(&str, Translate)] = &[
    ("difference", difference::translate),
    ("replicator", replicator::translate),
    ("cells", cells::translate),
];

/// The native translator of that name.
pub fn find(name: &str) -> Option<Translate> {
    TRANSLATORS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
}

/// Translate one export value (JSON bytes as the queue's JSON serializer wrote them).
pub fn translate(translator: Translate, value: &[u8]) -> Result<Vec<Change>> {
    if has_long_digit_run(value) {
        return Err(EntryError::Fallback);
    }
    let value: Value = serde_json::from_slice(value).map_err(|_| EntryError::Fallback)?;
    translator(&value)
}

/// Translate a batch of export values (`encoding` "json" or "packed") with the built-in translator
/// `name`: (batch entry int32, row, cf, cq, cv, value (null: delete); errors [(entry, message)];
/// fallback [entry]), where fallback entries must be translated by the Python translator.
#[allow(clippy::type_complexity)]
pub fn translate_batch(
    name: &str,
    values: &Bytes<'_>,
    encoding: &str,
) -> std::result::Result<(RecordBatch, Vec<(usize, String)>, Vec<usize>), Error> {
    let packed = match encoding {
        "json" => false,
        "packed" => true,
        other => {
            return Err(Error::InvalidArgument(format!(
                "no native encoding {other:?}: use json or packed"
            )))
        }
    };
    let kind = find(name).ok_or_else(|| {
        let names: Vec<&str> = TRANSLATORS.iter().map(|(n, _)| *n).collect();
        Error::InvalidArgument(format!(
            "no native translator {name:?}: use one of {}",
            names.join(", ")
        ))
    })?;
    let n = values.len();
    let mut entry = Int32Builder::with_capacity(n);
    let mut parts: [BinaryBuilder; 4] = std::array::from_fn(|_| BinaryBuilder::new());
    let mut value = BinaryBuilder::new();
    let mut errors = Vec::new();
    let mut fallback = Vec::new();
    for i in 0..n {
        let bytes = values.get(i).unwrap_or_default();
        let changes = if packed {
            from_packed::translate(name, bytes)
        } else {
            translate(kind, bytes)
        };
        match changes {
            Ok(changes) => {
                for c in changes {
                    entry.append_value(i as i32);
                    let (r, f, q, v) = &c.key;
                    for (b, part) in parts.iter_mut().zip([r, f, q, v]) {
                        b.append_value(part);
                    }
                    value.append_option(c.value);
                }
            }
            Err(EntryError::Translation(msg)) => errors.push((i, msg)),
            Err(EntryError::Fallback) => fallback.push(i),
        }
    }
    let [row, cf, cq, cv] = parts.map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let (entry, value): (ArrayRef, ArrayRef) = (Arc::new(entry.finish()), Arc::new(value.finish()));
    let batch = record_batch(
        ["entry", "row", "cf", "cq", "cv", "value"],
        [entry, row, cf, cq, cv, value],
        [false, false, false, false, false, true],
    )?;
    Ok((batch, errors, fallback))
}

/// Python's `json.loads` refuses ints of more than 4300 digits wherever they are, even in fields no
/// translator reads; serde_json accepts them. A run of that many digits (even inside a string, a
/// harmless false alarm) sends the entry to Python.
fn has_long_digit_run(b: &[u8]) -> bool {
    if b.len() <= crate::pyrepr::INT_MAX_STR_DIGITS {
        return false;
    }
    let mut run = 0usize;
    for &c in b {
        run = if c.is_ascii_digit() { run + 1 } else { 0 };
        if run > crate::pyrepr::INT_MAX_STR_DIGITS {
            return true;
        }
    }
    false
}

/// `cell_json.as_bytes`: text as UTF-8, numbers as their decimal text; `what` names the field.
fn as_bytes<'v>(v: &'v Value, what: &str) -> Result<Cow<'v, [u8]>> {
    match v {
        Value::String(s) => Ok(Cow::Borrowed(s.as_bytes())),
        Value::Number(n) => match number_str(n.as_str()) {
            Some(text) => Ok(Cow::Owned(text.into_bytes())),
            None => Err(EntryError::Fallback),
        },
        Value::Bool(_) | Value::Null => {
            error(format!("{what} must be text or bytes, not {}", repr(v)?))
        }
        Value::Array(_) => error(format!("{what} must be text or bytes, not list")),
        Value::Object(_) => error(format!("{what} must be text or bytes, not dict")),
    }
}

/// `cell_json.cell_key`: (row, cf, cq, cv) of a cell object.
fn cell_key(cell: &Value, place: &str) -> Result<CellKey> {
    let Value::Object(map) = cell else {
        return error(format!(
            "{place}: a cell must be an object with row, cf, cq, value; got {}",
            repr(cell)?
        ));
    };
    let (Some(row), Some(cf), Some(cq)) = (map.get("row"), map.get("cf"), map.get("cq")) else {
        let missing: Vec<&str> = ["row", "cf", "cq"]
            .into_iter()
            .filter(|k| !map.contains_key(*k))
            .collect();
        return error(format!(
            "{place}: cell {} lacks {}",
            repr(cell)?,
            missing.join(", ")
        ));
    };
    let wrap = |e: EntryError| match e {
        EntryError::Translation(msg) => EntryError::Translation(format!("{place}: {msg}")),
        other => other,
    };
    let row = as_bytes(row, "row").map_err(wrap)?.into_owned();
    let cf = as_bytes(cf, "cf").map_err(wrap)?.into_owned();
    let cq = as_bytes(cq, "cq").map_err(wrap)?.into_owned();
    // Python: `cell.get("cv") or b""`, so any falsy cv (null, "", 0, [], {}) is no visibility
    let cv = match map.get("cv") {
        Some(v) if truthy(v) => as_bytes(v, "cv").map_err(wrap)?.into_owned(),
        _ => Vec::new(),
    };
    if row.is_empty() {
        return error(format!("{place}: cell has an empty row"));
    }
    Ok((row, cf, cq, cv))
}

/// `cell_json.cell_value`.
fn cell_value(cell: &Value, place: &str) -> Result<Vec<u8>> {
    match cell.get("value") {
        None => error(format!("{place}: cell {} lacks value", repr(cell)?)),
        Some(v) => Ok(as_bytes(v, &format!("{place}: value"))?.into_owned()),
    }
}

/// Keep the last change per cell, in the order of those last changes (what the exporter's
/// same-cell collapse does: never a put and a delete on one cell at one ts).
fn last_per_cell(changes: Vec<Change>) -> Vec<Change> {
    let mut last: rustc_hash::FxHashMap<&CellKey, usize> = rustc_hash::FxHashMap::default();
    for (i, c) in changes.iter().enumerate() {
        last.insert(&c.key, i);
    }
    if last.len() == changes.len() {
        return changes;
    }
    let keep: Vec<bool> = {
        let mut keep = vec![false; changes.len()];
        for &i in last.values() {
            keep[i] = true;
        }
        keep
    };
    changes
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, json: &str) -> Result<Vec<Change>> {
        translate(find(name).expect("a native translator"), json.as_bytes())
    }

    fn msg(r: Result<Vec<Change>>) -> String {
        match r {
            Err(EntryError::Translation(m)) => m,
            other => panic!("expected a translation error, got {other:?}"),
        }
    }

    #[test]
    fn difference_messages() {
        assert_eq!(
            msg(t("difference", "5")),
            "difference update must be {'old': [...], 'new': [...]}, got 5"
        );
        assert_eq!(
            msg(t("difference", r#"{"x":1,"old":[],"b":2}"#)),
            "difference update has unknown fields ['b', 'x']; expected old, new"
        );
        assert_eq!(
            msg(t("difference", r#"{"new":[{"row":"r","cf":"f"}]}"#)),
            "new[0]: cell {'row': 'r', 'cf': 'f'} lacks cq"
        );
        assert_eq!(
            msg(t(
                "difference",
                r#"{"new":[{"row":true,"cf":"f","cq":"q"}]}"#
            )),
            "new[0]: row must be text or bytes, not True"
        );
        assert_eq!(
            msg(t("difference", r#"{"old":{"a":1}}"#)),
            "old must be a list of cells, not dict"
        );
        assert_eq!(t("difference", "NaN"), Err(EntryError::Fallback));
    }

    #[test]
    fn difference_puts_changed_and_deletes_vanished() {
        let out = t(
            "difference",
            r#"{"old":[{"row":"a","cf":"f","cq":"q","value":"1"},{"row":"b","cf":"f","cq":"q","value":1}],
                "new":[{"row":"b","cf":"f","cq":"q","value":"1"},{"row":"c","cf":"f","cq":"q","cv":0,"value":2.50}]}"#,
        )
        .unwrap();
        let k = |r: &str| (r.as_bytes().to_vec(), b"f".to_vec(), b"q".to_vec(), vec![]);
        assert_eq!(
            out,
            vec![
                Change {
                    key: k("a"),
                    value: None
                },
                Change {
                    key: k("c"),
                    value: Some(b"2.5".to_vec())
                },
            ]
        );
    }
}
