//! The crate's errors, and the one place where they become Python exceptions (the delta-rs
//! `error.rs` pattern). Each Python layer's wrapper (ARCHITECTURE.md, "Where the hot path runs")
//! maps these classes to its own errors by class, never by reading the message.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    _native,
    NativeError,
    PyException,
    "Any error of connector._native."
);
create_exception!(
    _native,
    InvalidCellError,
    NativeError,
    "A cell that cannot be sent: empty row, null family or qualifier, negative timestamp, a put without a value."
);
create_exception!(
    _native,
    RowTooLargeError,
    InvalidCellError,
    "One row's cells do not fit in a single update frame."
);
create_exception!(
    _native,
    SchemaError,
    NativeError,
    "An input that is not the Arrow data the function takes: not Arrow, a missing column, a wrong type, lengths that differ."
);
create_exception!(
    _native,
    InvalidArgumentError,
    NativeError,
    "A plain argument out of its range: a queue id, a number of buckets, a translator name."
);

/// Why a call of the crate failed; the message is for people, the variant for code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    InvalidCell(String),
    RowTooLarge(String),
    Schema(String),
    InvalidArgument(String),
    /// Arrow could not build or exchange an array (a bug, not the caller's input).
    Internal(String),
    /// A value the `packed` encoder cannot hold: Python's `TypeError` (a wrong type) and `ValueError`
    /// (a missing or empty field), as a serializer's `dumps` raises them; `ValueError` also for bytes
    /// the decoder refuses, as `loads` raises it.
    PackType(String),
    PackValue(String),
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        match err {
            Error::InvalidCell(msg) => InvalidCellError::new_err(msg),
            Error::RowTooLarge(msg) => RowTooLargeError::new_err(msg),
            Error::Schema(msg) => SchemaError::new_err(msg),
            Error::InvalidArgument(msg) => InvalidArgumentError::new_err(msg),
            Error::Internal(msg) => NativeError::new_err(format!("internal error: {msg}")),
            Error::PackType(msg) => PyTypeError::new_err(msg),
            Error::PackValue(msg) => PyValueError::new_err(msg),
        }
    }
}

/// Add the exception classes to the module, so Python code can catch them by class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NativeError", py.get_type::<NativeError>())?;
    m.add("InvalidCellError", py.get_type::<InvalidCellError>())?;
    m.add("RowTooLargeError", py.get_type::<RowTooLargeError>())?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    Ok(())
}
