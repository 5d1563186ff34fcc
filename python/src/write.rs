//! What a producer writes into a frame: numpy arrays (a CPU producer copies them with numpy; a
//! CUDA producer from host memory) and CUDA arrays (`__dlpack__` or `__cuda_array_interface__`,
//! a CUDA producer only), each checked against the plane it fills before a frame is taken.

use crate::cuda::{self, ImportStream, Rows};
use crate::errors;
use crate::plane::Geometry;
use dlpark::ffi::{DLDataType, DLDeviceType};
use dlpark::python::consumer::{ImportRequest, ImportedDlpack};
use nvsci::cuda::cudarc::driver::CudaStream;
use nvsci::cuda::CudaGpu;
use nvsci::pipeline::FrameFormat;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySlice, PyTuple};
use std::sync::Arc;

/// What keeps a source's memory alive until the copy from it has run (held, never read:
/// dropping it releases the memory).
#[allow(dead_code)]
pub(crate) enum Keep {
    /// A Python object (a numpy array, or an object whose `__cuda_array_interface__` was read).
    Object(Py<PyAny>),
    /// A tensor imported through DLPack: its deleter runs when this is dropped.
    Dlpack(ImportedDlpack),
}

/// One plane's source, checked.
pub(crate) enum Source<'py> {
    /// A numpy array of the plane's shape (a CPU producer copies it with `numpy.copyto`).
    Numpy(Bound<'py, PyAny>),
    /// Rows in host or device memory (a CUDA producer copies them on its stream).
    Rows(Rows),
}

/// The producer's CUDA device and stream, for CUDA sources.
pub(crate) struct Target<'a> {
    pub(crate) gpu: Option<(&'a CudaGpu, &'a Arc<CudaStream>)>,
}

impl Target<'_> {
    fn ordinal(&self) -> Option<usize> {
        self.gpu.map(|(g, _)| g.context().ordinal())
    }
}

fn type_name(a: &Bound<'_, PyAny>) -> String {
    a.get_type().name().map(|n| n.to_string()).unwrap_or_default()
}

/// Shape and byte strides of an array, and whether the rows of `shape` are contiguous.
fn rows_of(
    py: Python<'_>,
    name: &str,
    ptr: u64,
    got_shape: &[usize],
    strides: &[isize],
    shape: &[usize],
    host: bool,
) -> PyResult<Rows> {
    if got_shape != shape {
        return Err(errors::invalid(py, name, format!("shape {got_shape:?}; the frame needs {shape:?}")));
    }
    // Every dimension but the first contiguous (uint8: stride = the bytes of what follows).
    let mut inner = 1usize;
    for k in (1..shape.len()).rev() {
        if shape[k] > 1 && strides[k] != inner as isize {
            return Err(errors::invalid(
                py,
                name,
                format!("strides {strides:?} (bytes): each row of the plane must be contiguous"),
            ));
        }
        inner *= shape[k];
    }
    let row_bytes = inner;
    let pitch = if shape[0] <= 1 { row_bytes as isize } else { strides[0] };
    if pitch < row_bytes as isize {
        return Err(errors::invalid(
            py,
            name,
            format!(
                "a row stride of {pitch} bytes: rows of {row_bytes} bytes may not overlap or run backwards"
            ),
        ));
    }
    Ok(Rows { ptr, pitch: pitch as usize, rows: shape[0], row_bytes, host })
}

/// `a` as rows of a CUDA array through DLPack, imported on the producer's stream (which then
/// waits for the work that made the array, the array API's stream semantics).
fn dlpack_rows(
    py: Python<'_>,
    name: &str,
    a: &Bound<'_, PyAny>,
    shape: &[usize],
    target: &Target<'_>,
) -> PyResult<Option<(Rows, Keep)>> {
    let req = ImportRequest::new(a.as_borrowed())?;
    let Ok(dev) = req.device() else { return Ok(None) };
    if dev.device_type != DLDeviceType::CUDA {
        return Ok(None);
    }
    let Some((gpu, stream)) = target.gpu else {
        return Err(errors::invalid(
            py,
            name,
            "a CUDA array; this stream's producer is on the CPU (Backend.stream(producer=\"cuda\") writes from CUDA arrays)",
        ));
    };
    if Some(dev.device_id as usize) != target.ordinal() {
        return Err(errors::invalid(
            py,
            name,
            format!(
                "an array on CUDA device {}; the frame is on device {}",
                dev.device_id,
                gpu.context().ordinal()
            ),
        ));
    }
    let imported = req.import(Some(&ImportStream { gpu, stream: stream.cu_stream() }), Some(false))?;
    let t = imported.validate().map_err(|e| errors::invalid(py, name, e.to_string()))?;
    if t.dtype() != DLDataType::U8 {
        return Err(errors::invalid(py, name, format!("dtype {:?}; uint8 is needed", t.dtype())));
    }
    let got: Vec<usize> = t.shape().iter().map(|&n| n.max(0) as usize).collect();
    let strides: Vec<isize> = t
        .strides_or_compact()
        .map_err(|e| errors::invalid(py, name, e.to_string()))?
        .iter()
        .map(|&s| s as isize)
        .collect();
    let ptr = t.data_ptr() as u64 + t.byte_offset();
    let rows = rows_of(py, name, ptr, &got, &strides, shape, false)?;
    Ok(Some((rows, Keep::Dlpack(imported))))
}

/// `a` as rows of a CUDA array through `__cuda_array_interface__` (version 2 or 3); the
/// producer's stream waits for the interface's `stream` where it names one.
fn cai_rows(
    py: Python<'_>,
    name: &str,
    a: &Bound<'_, PyAny>,
    shape: &[usize],
    target: &Target<'_>,
) -> PyResult<Option<(Rows, Keep)>> {
    let Ok(iface) = a.getattr("__cuda_array_interface__") else { return Ok(None) };
    let iface = iface
        .cast_into::<PyDict>()
        .map_err(|_| errors::invalid(py, name, "its __cuda_array_interface__ is not a dict"))?;
    let Some((gpu, stream)) = target.gpu else {
        return Err(errors::invalid(
            py,
            name,
            "a CUDA array; this stream's producer is on the CPU (Backend.stream(producer=\"cuda\") writes from CUDA arrays)",
        ));
    };
    let item = |k: &str| iface.get_item(k).ok().flatten();
    let typestr: String = item("typestr").map(|t| t.extract()).transpose()?.unwrap_or_default();
    if !matches!(typestr.as_str(), "|u1" | "<u1" | ">u1") {
        return Err(errors::invalid(py, name, format!("typestr {typestr:?}; uint8 (|u1) is needed")));
    }
    let got: Vec<usize> = item("shape").map(|s| s.extract()).transpose()?.unwrap_or_default();
    let (ptr, _ro): (u64, bool) = item("data")
        .map(|d| d.extract())
        .transpose()?
        .ok_or_else(|| errors::invalid(py, name, "its __cuda_array_interface__ has no data"))?;
    let strides: Vec<isize> = match item("strides").filter(|s| !s.is_none()) {
        Some(s) => s.extract()?,
        None => {
            let mut st = vec![0isize; got.len()];
            let mut acc = 1isize;
            for k in (0..got.len()).rev() {
                st[k] = acc;
                acc *= got[k] as isize;
            }
            st
        }
    };
    if ptr != 0 {
        let dev = cuda::device_of_pointer(gpu, ptr).map_err(|(f, e)| errors::driver(py, f, e))?;
        if dev != gpu.context().ordinal() {
            return Err(errors::invalid(
                py,
                name,
                format!("an array on CUDA device {dev}; the frame is on device {}", gpu.context().ordinal()),
            ));
        }
    }
    let rows = rows_of(py, name, ptr, &got, &strides, shape, false)?;
    // Version 3: the array is ready on `stream`; the copy waits for it.
    if let Some(s) = item("stream").filter(|s| !s.is_none()) {
        let s: usize = s.extract()?;
        if s == 0 {
            return Err(errors::invalid(py, name, "a __cuda_array_interface__ stream of 0 (not allowed)"));
        }
        cuda::consumer_waits(gpu, stream, cuda::Foreign(s)).map_err(|(f, e)| errors::driver(py, f, e))?;
    }
    Ok(Some((rows, Keep::Object(a.clone().unbind()))))
}

/// `a` (a numpy array) as rows of host memory, made row-contiguous where it is not.
fn host_rows<'py>(
    py: Python<'py>,
    name: &str,
    a: &Bound<'py, PyAny>,
    shape: &[usize],
) -> PyResult<(Rows, Keep)> {
    let np = py.import("numpy")?;
    let mut a = a.clone();
    for attempt in 0..2 {
        let got: Vec<usize> = a.getattr("shape")?.extract()?;
        let strides: Vec<isize> = a.getattr("strides")?.extract()?;
        let ptr: u64 = a.getattr("ctypes")?.getattr("data")?.extract()?;
        match rows_of(py, name, ptr, &got, &strides, shape, true) {
            Ok(r) => return Ok((r, Keep::Object(a.unbind()))),
            Err(e) if attempt == 1 || got != shape => return Err(e),
            Err(_) => a = np.getattr("ascontiguousarray")?.call1((a,))?,
        }
    }
    unreachable!("the second attempt returns")
}

/// Checks `a` for a plane (or, `split`, the packed NV12 image of two planes) and returns what
/// to copy.
fn check<'py>(
    py: Python<'py>,
    name: &str,
    a: &Bound<'py, PyAny>,
    shape: &[usize],
    target: &Target<'_>,
    out: &mut Writes<'py>,
) -> PyResult<()> {
    let np = py.import("numpy")?;
    let is_numpy = a.is_instance(&np.getattr("ndarray")?)?;
    if !is_numpy {
        if let Some((rows, keep)) = dlpack_rows(py, name, a, shape, target)? {
            out.sources.push(Source::Rows(rows));
            out.keep.push(keep);
            return Ok(());
        }
        if let Some((rows, keep)) = cai_rows(py, name, a, shape, target)? {
            out.sources.push(Source::Rows(rows));
            out.keep.push(keep);
            return Ok(());
        }
        return Err(errors::invalid(
            py,
            name,
            format!(
                "a {}; a numpy.ndarray of uint8, or a CUDA array (__dlpack__ or __cuda_array_interface__), is needed",
                type_name(a)
            ),
        ));
    }
    let dtype: String = a.getattr("dtype")?.getattr("name")?.extract()?;
    if dtype != "uint8" {
        return Err(errors::invalid(py, name, format!("dtype {dtype}; uint8 is needed")));
    }
    let got: Vec<usize> = a.getattr("shape")?.extract()?;
    if got != shape {
        return Err(errors::invalid(py, name, format!("shape {got:?}; the frame needs {shape:?}")));
    }
    if target.gpu.is_some() {
        let (rows, keep) = host_rows(py, name, a, shape)?;
        out.sources.push(Source::Rows(rows));
        out.keep.push(keep);
    } else {
        out.sources.push(Source::Numpy(a.clone()));
    }
    Ok(())
}

/// Splits the source of a packed NV12 image (luma rows, then chroma rows) into its planes.
fn split_nv12<'py>(py: Python<'py>, s: Source<'py>, planes: &[Geometry]) -> PyResult<Vec<Source<'py>>> {
    let h = planes[0].shape[0];
    Ok(match s {
        Source::Numpy(a) => {
            let y = a.get_item(PySlice::new(py, 0, h as isize, 1))?;
            let uv = a.get_item(PySlice::new(py, h as isize, (h + h / 2) as isize, 1))?;
            let uv = uv.call_method1("reshape", (PyTuple::new(py, &planes[1].shape)?,))?;
            vec![Source::Numpy(y), Source::Numpy(uv)]
        }
        Source::Rows(r) => {
            let y = Rows { rows: h, ..r };
            let uv = Rows { ptr: r.ptr + (h * r.pitch) as u64, rows: h / 2, ..r };
            vec![Source::Rows(y), Source::Rows(uv)]
        }
    })
}

/// The checked sources of a write, one per plane, and what keeps their memory alive.
pub(crate) struct Writes<'py> {
    pub(crate) sources: Vec<Source<'py>>,
    pub(crate) keep: Vec<Keep>,
}

/// Checks the arguments of a write (`array`, or NV12's `luma` and `chroma`) against the frame's
/// planes: `InvalidArgument` naming the argument that does not fit.
pub(crate) fn sources<'py>(
    py: Python<'py>,
    format: &FrameFormat,
    planes: &[Geometry],
    array: Option<Bound<'py, PyAny>>,
    luma: Option<Bound<'py, PyAny>>,
    chroma: Option<Bound<'py, PyAny>>,
    target: &Target<'_>,
) -> PyResult<Writes<'py>> {
    let nv12 = matches!(format, FrameFormat::Nv12 { .. });
    let mut out = Writes { sources: Vec::new(), keep: Vec::new() };
    match (array, luma, chroma) {
        (Some(a), None, None) => {
            if nv12 {
                // The usual packed NV12 image: the luma rows, then the chroma rows.
                let (h, w) = (planes[0].shape[0], planes[0].shape[1]);
                check(py, "array", &a, &[h + h / 2, w], target, &mut out)?;
                let s = out.sources.pop().expect("one source checked");
                out.sources = split_nv12(py, s, planes)?;
            } else {
                check(py, "array", &a, &planes[0].shape, target, &mut out)?;
            }
        }
        (None, Some(y), Some(uv)) if nv12 => {
            check(py, "luma", &y, &planes[0].shape, target, &mut out)?;
            check(py, "chroma", &uv, &planes[1].shape, target, &mut out)?;
        }
        (None, Some(_), _) | (None, _, Some(_)) if !nv12 => {
            return Err(errors::invalid(
                py,
                "luma",
                "luma and chroma are the planes of NV12 frames; give array",
            ))
        }
        (None, None, Some(_)) => return Err(errors::invalid(py, "luma", "chroma without luma")),
        (None, Some(_), None) => return Err(errors::invalid(py, "chroma", "luma without chroma")),
        (Some(_), _, _) => return Err(errors::invalid(py, "array", "array together with luma or chroma")),
        _ => return Err(errors::invalid(py, "array", "nothing to write")),
    }
    Ok(out)
}
