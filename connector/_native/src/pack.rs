//! The `packed` layout's Python face: the encoder (`connector.packed.pack`: a difference update, cells
//! or an operation log, read straight from the Python objects a producer queues) and the canonical
//! objects of decoded values (`connector.packed.unpack`, [`unpack`]). The layout and its decoder are
//! [`crate::packed`]; what is refused, and the messages, are `connector/packed.py`'s documented contract.

use pyo3::prelude::*;
use pyo3::types::{
    PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple,
};

use crate::error::Error;
use crate::packed::{self, CELLS, DIFFERENCE, HAS_CV, HAS_VALUE, MAGIC, OPERATIONS, TEXT};

type R<T> = PyResult<T>;

fn type_error<T>(msg: String) -> R<T> {
    Err(Error::PackType(msg).into())
}

fn value_error<T>(msg: String) -> R<T> {
    Err(Error::PackValue(msg).into())
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// A dict, or any other `collections.abc.Mapping`.
enum Map<'a, 'py> {
    Dict(&'a Bound<'py, PyDict>),
    Other(&'a Bound<'py, PyMapping>),
}

impl<'py> Map<'_, 'py> {
    fn get(&self, key: &str) -> R<Option<Bound<'py, PyAny>>> {
        match self {
            Map::Dict(d) => d.get_item(key),
            Map::Other(m) => {
                if m.contains(key)? {
                    m.get_item(key).map(Some)
                } else {
                    Ok(None)
                }
            }
        }
    }

    fn contains(&self, key: &str) -> R<bool> {
        match self {
            Map::Dict(d) => d.contains(key),
            Map::Other(m) => m.contains(key),
        }
    }

    fn len(&self) -> R<usize> {
        match self {
            Map::Dict(d) => Ok(d.len()),
            Map::Other(m) => m.len(),
        }
    }

    fn keys(&self) -> R<Bound<'py, PyList>> {
        match self {
            Map::Dict(d) => Ok(d.keys()),
            Map::Other(m) => m.keys(),
        }
    }
}

fn as_map<'a, 'py>(obj: &'a Bound<'py, PyAny>) -> Option<Map<'a, 'py>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        return Some(Map::Dict(d));
    }
    obj.cast::<PyMapping>().ok().map(Map::Other)
}

fn is_sequence(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()
}

fn items<'py>(obj: &Bound<'py, PyAny>) -> R<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(l.iter().collect());
    }
    Ok(obj.cast::<PyTuple>()?.iter().collect())
}

fn varint(out: &mut Vec<u8>, mut n: usize) {
    while n > 0x7F {
        out.push((n as u8 & 0x7F) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A field's bytes and whether it was text: str as UTF-8, bytes-like as they are, numbers as their
/// decimal text (`str(n)`).
fn field(value: &Bound<'_, PyAny>, what: &str) -> R<(Vec<u8>, bool)> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok((s.to_str()?.as_bytes().to_vec(), true));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok((b.as_bytes().to_vec(), false));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok((b.to_vec(), false));
    }
    if value.is_none() || value.is_instance_of::<pyo3::types::PyBool>() {
        return type_error(format!(
            "{what} must be text, bytes or a number, not {}",
            value.repr()?
        ));
    }
    if value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>() {
        return Ok((value.str()?.to_str()?.as_bytes().to_vec(), true));
    }
    if type_name(value) == "memoryview" {
        let bytes = value.py().get_type::<PyBytes>().call1((value,))?;
        return Ok((bytes.cast::<PyBytes>()?.as_bytes().to_vec(), false));
    }
    type_error(format!(
        "{what} must be text, bytes or a number, not {}",
        type_name(value)
    ))
}

fn cell(
    out: &mut Vec<u8>,
    obj: &Bound<'_, PyAny>,
    place: &str,
    value_needed: bool,
    delete: bool,
) -> R<()> {
    let Some(map) = as_map(obj) else {
        return type_error(format!(
            "{place}: a cell must be a mapping with row, cf, cq, value; got {}",
            type_name(obj)
        ));
    };
    let mut present = Vec::with_capacity(3);
    let mut missing = Vec::new();
    for name in ["row", "cf", "cq"] {
        match map.get(name)? {
            Some(v) => present.push(v),
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        return value_error(format!("{place}: the cell lacks {}", missing.join(", ")));
    }
    let mut parts = Vec::with_capacity(5);
    for (v, name) in present.iter().zip(["row", "cf", "cq"]) {
        parts.push(field(v, &format!("{place}: {name}"))?);
    }
    if parts[0].0.is_empty() {
        return value_error(format!("{place}: the cell has an empty row"));
    }
    let mut flags = 0u8;
    if let Some(cv) = map.get("cv")? {
        if cv.is_truthy()? {
            parts.push(field(&cv, &format!("{place}: cv"))?);
            flags |= HAS_CV;
        }
    }
    if !delete {
        match map.get("value")? {
            Some(v) if !v.is_none() => {
                parts.push(field(&v, &format!("{place}: value"))?);
                flags |= HAS_VALUE;
            }
            _ if value_needed => {
                return value_error(format!("{place}: the cell lacks a value"));
            }
            _ => {}
        }
    }
    if parts.iter().all(|(_, text)| *text) {
        flags |= TEXT;
    }
    out.push(flags);
    for (bytes, _) in parts {
        varint(out, bytes.len());
        out.extend_from_slice(&bytes);
    }
    Ok(())
}

fn list(out: &mut Vec<u8>, cells: Option<Bound<'_, PyAny>>, place: &str) -> R<()> {
    let cells = match cells {
        None => Vec::new(),
        Some(c) if c.is_none() => Vec::new(),
        Some(c) if is_sequence(&c) => items(&c)?,
        Some(c) => {
            return type_error(format!(
                "{place} must be a list of cells, not {}",
                type_name(&c)
            ))
        }
    };
    varint(out, cells.len());
    for (i, c) in cells.iter().enumerate() {
        cell(out, c, &format!("{place}[{i}]"), true, false)?;
    }
    Ok(())
}

fn difference(
    out: &mut Vec<u8>,
    old: Option<Bound<'_, PyAny>>,
    new: Option<Bound<'_, PyAny>>,
) -> R<()> {
    out.push(DIFFERENCE);
    list(out, old, "old")?;
    list(out, new, "new")
}

/// The packed bytes of `obj` (see `connector/packed.py`).
pub fn pack(obj: &Bound<'_, PyAny>) -> R<Vec<u8>> {
    let mut out = MAGIC.to_vec();
    let mut obj = obj.clone();
    if let Some(map) = as_map(&obj) {
        let is_update = map.contains("old")? || map.contains("new")? || map.len()? == 0;
        if is_update && !map.contains("row")? {
            let unknown = PyList::empty(obj.py());
            for k in map.keys()?.iter() {
                let known = k.extract::<&str>().is_ok_and(|s| s == "old" || s == "new");
                if !known {
                    unknown.append(k)?;
                }
            }
            if !unknown.is_empty() {
                unknown.sort()?;
                return value_error(format!(
                    "difference update has unknown fields {}; expected old, new",
                    unknown.repr()?
                ));
            }
            difference(&mut out, map.get("old")?, map.get("new")?)?;
            return Ok(out);
        }
        if map.contains("ops")? && !map.contains("row")? {
            let ops = map.get("ops")?.expect("contains ops");
            if !is_sequence(&ops) {
                return type_error(format!(
                    "ops must be a list of operations, not {}",
                    type_name(&ops)
                ));
            }
            obj = ops;
        } else {
            obj = PyList::new(obj.py(), [&obj])?.into_any();
        }
    } else if !is_sequence(&obj) && obj.hasattr("old")? && obj.hasattr("new")? {
        difference(
            &mut out,
            Some(obj.getattr("old")?),
            Some(obj.getattr("new")?),
        )?;
        return Ok(out);
    }
    if !is_sequence(&obj) {
        return type_error(format!(
            "packed takes a difference update, cells or operations, not {}",
            type_name(&obj)
        ));
    }
    let all = items(&obj)?;
    if all.len() == 2 && all.iter().all(|x| x.is_none() || is_sequence(x)) {
        difference(&mut out, Some(all[0].clone()), Some(all[1].clone()))?;
        return Ok(out);
    }
    let operations = match all.first().and_then(|first| as_map(first)) {
        Some(first) => first.contains("op")?,
        None => false,
    };
    out.push(if operations { OPERATIONS } else { CELLS });
    varint(&mut out, all.len());
    for (i, c) in all.iter().enumerate() {
        let place = if operations {
            format!("operation {i}")
        } else {
            format!("cell {i}")
        };
        let Some(map) = as_map(c) else {
            return type_error(format!("{place} must be a mapping, not {}", type_name(c)));
        };
        if operations {
            let op = map.get("op")?;
            let kind = op.as_ref().and_then(|o| o.extract::<String>().ok());
            let delete = match kind.as_deref() {
                Some("set") => false,
                Some("delete") => true,
                _ => {
                    let shown = match &op {
                        Some(o) => o.repr()?.to_string(),
                        None => "None".to_string(),
                    };
                    return value_error(format!(
                        "{place}: op must be 'set' or 'delete', got {shown}"
                    ));
                }
            };
            cell(&mut out, c, &place, true, delete)?;
        } else {
            if map.contains("op")? {
                return value_error(format!("{place}: a list mixes operations and cells"));
            }
            let delete = match map.get("delete")? {
                Some(d) => d.is_truthy()?,
                None => false,
            };
            cell(&mut out, c, &place, false, delete)?;
        }
    }
    Ok(out)
}

/// The canonical Python object of packed bytes (`connector/packed.py`): `{"old": [...], "new": [...]}`
/// for a difference, else the list; text fields as str, others as bytes; a cell without a value is
/// `"delete": True` among cells and `"op": "delete"` among operations.
pub fn unpack<'py>(py: Python<'py>, data: &[u8]) -> R<Bound<'py, PyAny>> {
    let decoded = packed::decode(data).map_err(Error::PackValue)?;
    let mut lists = Vec::with_capacity(decoded.lists.len());
    for cells in &decoded.lists {
        let list = PyList::empty(py);
        for c in cells {
            list.append(cell_object(py, c, decoded.shape)?)?;
        }
        lists.push(list);
    }
    if decoded.shape == DIFFERENCE {
        let out = PyDict::new(py);
        out.set_item("old", &lists[0])?;
        out.set_item("new", &lists[1])?;
        return Ok(out.into_any());
    }
    Ok(lists.swap_remove(0).into_any())
}

fn cell_object<'py>(py: Python<'py>, c: &packed::Cell<'_>, shape: u8) -> R<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let field = |f: &[u8]| -> R<Bound<'py, PyAny>> {
        Ok(if c.text {
            // checked UTF-8 by the decoder
            PyString::new(py, std::str::from_utf8(f).unwrap_or_default()).into_any()
        } else {
            PyBytes::new(py, f).into_any()
        })
    };
    if shape == OPERATIONS {
        out.set_item("op", if c.value.is_some() { "set" } else { "delete" })?;
    }
    out.set_item("row", field(c.row)?)?;
    out.set_item("cf", field(c.cf)?)?;
    out.set_item("cq", field(c.cq)?)?;
    if let Some(cv) = c.cv {
        out.set_item("cv", field(cv)?)?;
    }
    match c.value {
        Some(v) => out.set_item("value", field(v)?)?,
        None if shape == CELLS => out.set_item("delete", true)?,
        None => {}
    }
    Ok(out)
}
