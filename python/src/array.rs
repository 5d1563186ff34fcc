//! A caller's array, read through the protocol it offers (a numpy array, DLPack, or the CUDA
//! array interface) into one description: where its memory is, its element type, shape and
//! byte strides, whether it may be written, and what keeps it alive. A CUDA array is imported
//! on the caller's stream: that stream then waits for the work that made the array (DLPack's
//! `stream` handshake, or the interface's `stream` key).

use crate::cuda::{self, Foreign, ImportStream};
use crate::errors;
use crate::write::Keep;
use dlpark::ffi::{DLDataType, DLDeviceType};
use dlpark::python::consumer::ImportRequest;
use dlpark::DlpackFlags;
use nvsci::cuda::CudaGpu;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Where an array's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Host memory.
    Host,
    /// Memory of the CUDA device of this ordinal (`None`: not known before its pointer is
    /// asked, an array read through `__cuda_array_interface__`).
    Cuda(Option<usize>),
}

/// An element type this package reads or writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dtype {
    U8,
    U64,
    I64,
    /// Any other, by its name.
    Other(String),
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dtype::U8 => "uint8",
            Dtype::U64 => "uint64",
            Dtype::I64 => "int64",
            Dtype::Other(name) => name,
        })
    }
}

impl Dtype {
    fn from_dlpack(t: DLDataType) -> Self {
        match t {
            DLDataType::U8 => Dtype::U8,
            DLDataType::U64 => Dtype::U64,
            DLDataType::I64 => Dtype::I64,
            t => Dtype::Other(format!("DLPack code {} bits {} lanes {}", t.code.0, t.bits, t.lanes)),
        }
    }

    /// From a numpy dtype name or an array-interface type string.
    fn from_name(name: &str) -> Self {
        match name {
            "uint8" | "|u1" | "<u1" | ">u1" => Dtype::U8,
            "uint64" | "<u8" => Dtype::U64,
            "int64" | "<i8" => Dtype::I64,
            other => Dtype::Other(other.to_owned()),
        }
    }

    /// Bytes per element (0 for an unknown type).
    fn size(&self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::U64 | Dtype::I64 => 8,
            Dtype::Other(_) => 0,
        }
    }
}

/// A caller's array, described.
pub(crate) struct Array {
    /// Its first element (after any byte offset): a host pointer or a device address.
    pub(crate) ptr: u64,
    pub(crate) dtype: Dtype,
    pub(crate) shape: Vec<usize>,
    /// In bytes.
    pub(crate) strides: Vec<isize>,
    pub(crate) readonly: bool,
    /// Keeps the memory alive (held, never read).
    pub(crate) keep: Keep,
}

impl Array {
    /// Whether every dimension but the first is contiguous, and the first `pitch` bytes
    /// apart: rows of `shape[1..]` elements. Dimensions of extent 1 may have any stride.
    pub(crate) fn rows_contiguous(&self) -> bool {
        let mut inner = self.dtype.size();
        for k in (1..self.shape.len()).rev() {
            if self.shape[k] > 1 && self.strides[k] != inner as isize {
                return false;
            }
            inner *= self.shape[k];
        }
        true
    }

    /// The byte distance between rows (the first dimension), `None` if negative or smaller
    /// than a row.
    pub(crate) fn pitch(&self) -> Option<usize> {
        let row: usize = self.dtype.size() * self.shape[1..].iter().product::<usize>();
        if self.shape.first().is_none_or(|&n| n <= 1) {
            return Some(row);
        }
        usize::try_from(self.strides[0]).ok().filter(|&p| p >= row)
    }
}

fn type_name(a: &Bound<'_, PyAny>) -> String {
    a.get_type().name().map(|n| n.to_string()).unwrap_or_default()
}

/// How `a` is read.
pub(crate) enum Protocol<'py> {
    /// A numpy array (host memory).
    Numpy,
    /// A DLPack producer, its device asked (not yet imported).
    Dlpack(ImportRequest<'py>, Place),
    /// `__cuda_array_interface__`.
    Interface,
}

impl Protocol<'_> {
    /// Where the array is.
    pub(crate) fn place(&self) -> Place {
        match self {
            Protocol::Numpy => Place::Host,
            Protocol::Dlpack(_, p) => *p,
            Protocol::Interface => Place::Cuda(None),
        }
    }
}

/// How `a` is read, without importing it; `None` if it is no array this package reads
/// (neither a numpy array, nor a DLPack producer that names its device, nor a CUDA array
/// interface).
pub(crate) fn protocol<'py>(py: Python<'py>, a: &Bound<'py, PyAny>) -> PyResult<Option<Protocol<'py>>> {
    if a.is_instance(&py.import("numpy")?.getattr("ndarray")?)? {
        return Ok(Some(Protocol::Numpy));
    }
    if a.hasattr("__dlpack_device__")? {
        if let Ok(req) = ImportRequest::new(a.as_borrowed()) {
            if let Ok(d) = req.device() {
                let place = match d.device_type {
                    DLDeviceType::CPU => Place::Host,
                    DLDeviceType::CUDA => Place::Cuda(usize::try_from(d.device_id).ok()),
                    _ => return Ok(None),
                };
                return Ok(Some(Protocol::Dlpack(req, place)));
            }
        }
    }
    if a.hasattr("__cuda_array_interface__")? {
        return Ok(Some(Protocol::Interface));
    }
    Ok(None)
}

/// Why `a` is not an array (`InvalidArgument` naming `name`).
pub(crate) fn not_an_array(py: Python<'_>, name: &str, a: &Bound<'_, PyAny>) -> PyErr {
    errors::invalid(
        py,
        name,
        format!(
            "a {}: a numpy array, or an array with __dlpack__ or __cuda_array_interface__ (torch, CuPy), is needed",
            type_name(a)
        ),
    )
}

/// Describes `a` (named `name` in errors), read as `how`. A CUDA array needs `cuda`, the
/// device and the caller's stream it is used on: imported through DLPack with that stream, or
/// read through `__cuda_array_interface__` with that stream waiting for the interface's
/// `stream`; its device is checked to be `cuda`'s (`InvalidArgument` naming `name`).
/// `host_only` says why a CUDA array is refused where `cuda` is `None`; `cuda_only` why host
/// memory is refused where it is given.
pub(crate) fn describe<'py>(
    py: Python<'py>,
    name: &str,
    a: &Bound<'py, PyAny>,
    how: Protocol<'py>,
    cuda: Option<(&CudaGpu, Foreign)>,
    host_only: &str,
    cuda_only: &str,
) -> PyResult<Array> {
    match (how.place(), cuda) {
        (Place::Host, Some(_)) => return Err(errors::invalid(py, name, format!("host memory; {cuda_only}"))),
        (Place::Cuda(_), None) => {
            return Err(errors::invalid(py, name, format!("a CUDA array; {host_only}")))
        }
        (Place::Cuda(Some(o)), Some((gpu, _))) if o != gpu.context().ordinal() => {
            return Err(errors::invalid(
                py,
                name,
                format!(
                    "an array on CUDA device {o}; the conversion runs on device {}",
                    gpu.context().ordinal()
                ),
            ))
        }
        _ => {}
    }
    match (how, cuda) {
        (Protocol::Numpy, _) => numpy(a),
        (Protocol::Dlpack(req, _), cuda) => dlpack(py, name, req, cuda),
        (Protocol::Interface, Some((gpu, stream))) => interface(py, name, a, gpu, stream),
        (Protocol::Interface, None) => Err(errors::invalid(py, name, format!("a CUDA array; {host_only}"))),
    }
}

fn numpy(a: &Bound<'_, PyAny>) -> PyResult<Array> {
    let iface = a.getattr("__array_interface__")?;
    let (ptr, readonly): (u64, bool) = iface.get_item("data")?.extract()?;
    let writeable: bool = a.getattr("flags")?.getattr("writeable")?.extract()?;
    Ok(Array {
        ptr,
        dtype: Dtype::from_name(&a.getattr("dtype")?.getattr("name")?.extract::<String>()?),
        shape: a.getattr("shape")?.extract()?,
        strides: a.getattr("strides")?.extract()?,
        readonly: readonly || !writeable,
        keep: Keep::Object(a.clone().unbind()),
    })
}

fn dlpack(
    py: Python<'_>,
    name: &str,
    req: ImportRequest<'_>,
    cuda: Option<(&CudaGpu, Foreign)>,
) -> PyResult<Array> {
    let imported = match cuda {
        Some((gpu, stream)) => req.import(Some(&ImportStream { gpu, stream: stream.raw() }), Some(false))?,
        None => req.import(None, Some(false))?,
    };
    let readonly = imported.flags().contains(DlpackFlags::READ_ONLY);
    let t = imported.validate().map_err(|e| errors::invalid(py, name, e.to_string()))?;
    let dtype = Dtype::from_dlpack(t.dtype());
    let size = dtype.size().max(1) as isize;
    let shape: Vec<usize> = t.shape().iter().map(|&n| n.max(0) as usize).collect();
    let strides: Vec<isize> = t
        .strides_or_compact()
        .map_err(|e| errors::invalid(py, name, e.to_string()))?
        .iter()
        .map(|&s| s as isize * size)
        .collect();
    let ptr = t.data_ptr() as u64 + t.byte_offset();
    Ok(Array { ptr, dtype, shape, strides, readonly, keep: Keep::Dlpack(imported) })
}

/// `a` through `__cuda_array_interface__` (version 2 or 3); `stream` waits for the
/// interface's `stream` where it names another.
fn interface(
    py: Python<'_>,
    name: &str,
    a: &Bound<'_, PyAny>,
    gpu: &CudaGpu,
    stream: Foreign,
) -> PyResult<Array> {
    let iface = a
        .getattr("__cuda_array_interface__")?
        .cast_into::<PyDict>()
        .map_err(|_| errors::invalid(py, name, "its __cuda_array_interface__ is not a dict"))?;
    let item = |k: &str| iface.get_item(k).ok().flatten().filter(|v| !v.is_none());
    let typestr: String = item("typestr").map(|t| t.extract()).transpose()?.unwrap_or_default();
    let dtype = Dtype::from_name(&typestr);
    let shape: Vec<usize> = item("shape").map(|s| s.extract()).transpose()?.unwrap_or_default();
    let (ptr, readonly): (u64, bool) = item("data")
        .map(|d| d.extract())
        .transpose()?
        .ok_or_else(|| errors::invalid(py, name, "its __cuda_array_interface__ has no data"))?;
    let strides: Vec<isize> = match item("strides") {
        Some(s) => s.extract()?,
        None => {
            let mut st = vec![0isize; shape.len()];
            let mut acc = dtype.size().max(1) as isize;
            for k in (0..shape.len()).rev() {
                st[k] = acc;
                acc *= shape[k] as isize;
            }
            st
        }
    };
    if strides.len() != shape.len() {
        return Err(errors::invalid(py, name, format!("strides {strides:?} for shape {shape:?}")));
    }
    let ours = gpu.context().ordinal();
    if ptr != 0 {
        let dev = cuda::device_of_pointer(gpu, ptr).map_err(|(f, e)| errors::driver(py, f, e))?;
        if dev != ours {
            return Err(errors::invalid(
                py,
                name,
                format!("an array on CUDA device {dev}; the conversion runs on device {ours}"),
            ));
        }
    }
    // Version 3: the array is ready on its `stream`, which the caller's stream waits for.
    if let Some(s) = item("stream") {
        let s: usize = s.extract()?;
        if s == 0 {
            return Err(errors::invalid(py, name, "a __cuda_array_interface__ stream of 0 (not allowed)"));
        }
        let theirs = Foreign(s);
        if theirs != stream {
            cuda::after(gpu, theirs, stream).map_err(|(f, e)| errors::driver(py, f, e))?;
        }
    }
    Ok(Array { ptr, dtype, shape, strides, readonly, keep: Keep::Object(a.clone().unbind()) })
}
