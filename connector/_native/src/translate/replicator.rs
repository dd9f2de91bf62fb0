//! `connector/export/replicator.py`: a transaction log `[{"op": "set"|"delete", row, cf, cq, cv?,
//! value?}, ...]` (or `{"ops": [...]}`) becomes one put or delete per touched cell, the last wins.

use serde_json::Value;

use super::{cell_key, cell_value, error, last_per_cell, repr, Change, Result};
use crate::pyrepr::type_name;

pub fn translate(value: &Value) -> Result<Vec<Change>> {
    let log = match value {
        Value::Object(map) if map.contains_key("ops") => &map["ops"],
        other => other,
    };
    let Value::Array(ops) = log else {
        return error(format!(
            "replicator value must be a list of operations, got {}",
            type_name(log)
        ));
    };
    let mut changes = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let place = format!("operation {i}");
        let kind = op.get("op").and_then(Value::as_str);
        let set = match (op, kind) {
            (Value::Object(_), Some("set")) => true,
            (Value::Object(_), Some("delete")) => false,
            _ => {
                return error(format!(
                    "{place}: expected {{'op': 'set'|'delete', ...}}, got {}",
                    repr(op)?
                ))
            }
        };
        let key = cell_key(op, &place)?;
        let value = if set {
            Some(cell_value(op, &place)?)
        } else {
            None
        };
        changes.push(Change { key, value });
    }
    Ok(last_per_cell(changes))
}
