//! `connector/export/cell_rows.py` (the `cells` translator): one cell or a list of cells
//! `{row, cf, cq, cv?, value, delete?}`; `delete` true or a null/missing value is a delete.

use serde_json::Value;

use super::{as_bytes, cell_key, error, last_per_cell, Change, Result};
use crate::pyrepr::{truthy, type_name};

pub fn translate(value: &Value) -> Result<Vec<Change>> {
    let items = match value {
        Value::Object(_) => std::slice::from_ref(value),
        Value::Array(items) => items.as_slice(),
        other => {
            return error(format!(
                "cells value must be a cell or a list of cells, got {}",
                type_name(other)
            ))
        }
    };
    let mut changes = Vec::with_capacity(items.len());
    for (i, cell) in items.iter().enumerate() {
        let place = format!("cell {i}");
        let key = cell_key(cell, &place)?;
        let delete = cell.get("delete").is_some_and(truthy);
        let value = match cell.get("value") {
            _ if delete => None,
            None | Some(Value::Null) => None,
            Some(v) => Some(as_bytes(v, &format!("{place}: value"))?.into_owned()),
        };
        changes.push(Change { key, value });
    }
    Ok(last_per_cell(changes))
}
