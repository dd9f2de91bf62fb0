//! Arrow arrays in and out of Python through the Arrow PyCapsule interface (the C Data Interface).
//!
//! Import: any object with `__arrow_c_array__` (pyarrow `Array`, `RecordBatch`, ...). Export: an
//! [`ArrowExport`] object that implements `__arrow_c_array__`, which `pyarrow.array(...)` and
//! `pyarrow.record_batch(...)` consume without copying.

use std::ffi::CStr;
use std::sync::Arc;

use arrow_array::ffi::{from_ffi, to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{
    make_array, Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, LargeBinaryArray,
    LargeStringArray, RecordBatch, StringArray, StructArray,
};
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

use crate::error::Error;

const SCHEMA_NAME: &CStr = c"arrow_schema";
const ARRAY_NAME: &CStr = c"arrow_array";

/// Import one Arrow array (a record batch arrives as a struct array) from a PyCapsule producer.
pub fn import_array(obj: &Bound<'_, PyAny>) -> PyResult<ArrayRef> {
    if !obj.hasattr("__arrow_c_array__")? {
        return Err(Error::Schema(format!(
            "expected a pyarrow Array or RecordBatch (an object with __arrow_c_array__), got {}",
            obj.get_type().name()?
        ))
        .into());
    }
    let pair = obj.call_method0("__arrow_c_array__")?;
    let pair = pair.cast::<PyTuple>()?;
    let schema_capsule = pair.get_item(0)?.cast_into::<PyCapsule>()?;
    let array_capsule = pair.get_item(1)?.cast_into::<PyCapsule>()?;
    let schema_ptr = schema_capsule
        .pointer_checked(Some(SCHEMA_NAME))?
        .cast::<FFI_ArrowSchema>();
    let array_ptr = array_capsule
        .pointer_checked(Some(ARRAY_NAME))?
        .cast::<FFI_ArrowArray>();
    // SAFETY: the capsule named "arrow_array" holds a valid FFI_ArrowArray (PyCapsule interface
    // contract). `from_raw` moves it out and leaves a released (empty) struct behind, so the
    // capsule's destructor will not release the buffers we now own.
    let array = unsafe { FFI_ArrowArray::from_raw(array_ptr.as_ptr()) };
    // SAFETY: the capsule named "arrow_schema" holds a valid FFI_ArrowSchema that stays owned by
    // the capsule, which we keep alive (`schema_capsule`) for as long as the borrow is used.
    let schema = unsafe { schema_ptr.as_ref() };
    // SAFETY: `array` and `schema` come from the same producer call and describe the same data.
    let data = unsafe { from_ffi(array, schema) }
        .map_err(|e| Error::Schema(format!("cannot import Arrow array: {e}")))?;
    drop(schema_capsule);
    Ok(make_array(data))
}

/// Import a record batch (or struct array) and return its columns by name.
pub fn import_batch(obj: &Bound<'_, PyAny>) -> PyResult<Columns> {
    let array = import_array(obj)?;
    let DataType::Struct(fields) = array.data_type().clone() else {
        return Err(Error::Schema(format!(
            "expected a RecordBatch (a struct array), got an array of {}",
            array.data_type()
        ))
        .into());
    };
    let structs = StructArray::from(array.to_data());
    let columns = fields
        .iter()
        .map(|f| f.name().clone())
        .zip(structs.columns().iter().cloned())
        .collect();
    Ok(Columns {
        len: structs.len(),
        columns,
    })
}

/// The named columns of an imported batch.
pub struct Columns {
    pub len: usize,
    columns: Vec<(String, ArrayRef)>,
}

impl Columns {
    pub fn get(&self, name: &str) -> Option<&ArrayRef> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    pub fn require(&self, name: &str) -> Result<&ArrayRef, Error> {
        self.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
            Error::Schema(format!("batch has no column {name:?}; it has {names:?}"))
        })
    }
}

/// A record batch of the columns `names` (each nullable or not, as `nullable` says).
pub fn record_batch<const N: usize>(
    names: [&str; N],
    columns: [ArrayRef; N],
    nullable: [bool; N],
) -> Result<RecordBatch, Error> {
    let named = names.into_iter().zip(columns).zip(nullable);
    RecordBatch::try_from_iter_with_nullable(named.map(|((n, c), null)| (n, c, null)))
        .map_err(|e| Error::Internal(format!("building a batch: {e}")))
}

/// Read access to a column of byte strings, whichever Arrow layout pyarrow chose.
pub enum Bytes<'a> {
    Binary(&'a BinaryArray),
    LargeBinary(&'a LargeBinaryArray),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
}

impl<'a> Bytes<'a> {
    pub fn new(array: &'a ArrayRef, what: &str) -> Result<Self, Error> {
        let any = array.as_any();
        let col = match array.data_type() {
            DataType::Binary => any.downcast_ref().map(Bytes::Binary),
            DataType::LargeBinary => any.downcast_ref().map(Bytes::LargeBinary),
            DataType::Utf8 => any.downcast_ref().map(Bytes::Utf8),
            DataType::LargeUtf8 => any.downcast_ref().map(Bytes::LargeUtf8),
            _ => None,
        };
        col.ok_or_else(|| {
            Error::Schema(format!(
                "column {what} must be binary or string, not {}",
                array.data_type()
            ))
        })
    }

    #[inline]
    pub fn value(&self, i: usize) -> &'a [u8] {
        match self {
            Bytes::Binary(a) => a.value(i),
            Bytes::LargeBinary(a) => a.value(i),
            Bytes::Utf8(a) => a.value(i).as_bytes(),
            Bytes::LargeUtf8(a) => a.value(i).as_bytes(),
        }
    }

    /// How many values (nulls included) the column holds.
    pub fn len(&self) -> usize {
        match self {
            Bytes::Binary(a) => a.len(),
            Bytes::LargeBinary(a) => a.len(),
            Bytes::Utf8(a) => a.len(),
            Bytes::LargeUtf8(a) => a.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value, or None where the column is null.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        let null = match self {
            Bytes::Binary(a) => a.is_null(i),
            Bytes::LargeBinary(a) => a.is_null(i),
            Bytes::Utf8(a) => a.is_null(i),
            Bytes::LargeUtf8(a) => a.is_null(i),
        };
        (!null).then(|| self.value(i))
    }
}

pub fn int64<'a>(array: &'a ArrayRef, what: &str) -> Result<&'a Int64Array, Error> {
    array.as_any().downcast_ref().ok_or_else(|| {
        Error::Schema(format!(
            "column {what} must be int64, not {}",
            array.data_type()
        ))
    })
}

pub fn boolean<'a>(array: &'a ArrayRef, what: &str) -> Result<&'a BooleanArray, Error> {
    array.as_any().downcast_ref().ok_or_else(|| {
        Error::Schema(format!(
            "column {what} must be bool, not {}",
            array.data_type()
        ))
    })
}

/// An Arrow array (or record batch) made in Rust, handed to pyarrow through `__arrow_c_array__`.
#[pyclass(frozen, module = "connector._native")]
pub struct ArrowExport {
    array: ArrayRef,
}

impl ArrowExport {
    pub fn array(array: ArrayRef) -> Self {
        ArrowExport { array }
    }

    pub fn batch(batch: RecordBatch) -> Self {
        ArrowExport {
            array: Arc::new(StructArray::from(batch)),
        }
    }
}

#[pymethods]
impl ArrowExport {
    /// The PyCapsule protocol: a fresh (schema, array) capsule pair per call. The requested schema
    /// is ignored, which the protocol allows; our types are fixed.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let (array, schema) = to_ffi(&self.array.to_data())
            .map_err(|e| Error::Internal(format!("cannot export Arrow array: {e}")))?;
        // The capsules own boxed FFI structs; their Drop releases the data unless pyarrow moved it
        // out (which leaves `release` null), as the PyCapsule interface prescribes.
        let schema = PyCapsule::new_with_value(py, schema, SCHEMA_NAME)?;
        let array = PyCapsule::new_with_value(py, array, ARRAY_NAME)?;
        Ok((schema, array))
    }

    fn __len__(&self) -> usize {
        self.array.len()
    }
}
