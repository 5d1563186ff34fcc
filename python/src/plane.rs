//! One plane of a held frame as a Python object: numpy reads it through
//! `__array_interface__` (CPU frames), CuPy and Numba through `__cuda_array_interface__` (CUDA
//! frames), and every DLPack consumer through `__dlpack__` / `__dlpack_device__`.

use crate::errors;
use dlpark::ffi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::python::{CudaStreamRequest, ExportAbi, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use nvsci::pipeline::{FrameFormat, FrameLayout};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::Arc;

/// Where a plane's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Device {
    /// Host memory the CPU reads (and, for a producer, writes) in place.
    Cpu,
    /// Memory mapped into the CUDA device of this ordinal.
    Cuda(usize),
}

/// A plane's shape and strides (in bytes; every element is one `uint8`) and its offset in the
/// frame.
#[derive(Clone, Debug)]
pub(crate) struct Geometry {
    pub(crate) name: &'static str,
    pub(crate) offset: u64,
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<usize>,
}

impl Geometry {
    /// Bytes from the plane's first byte to one past its last.
    fn span(&self) -> usize {
        self.shape.iter().zip(&self.strides).map(|(n, s)| (n.saturating_sub(1)) * s).sum::<usize>() + 1
    }
}

/// The planes of a frame of `layout`, or why its bytes are not rows of pixels.
pub(crate) fn planes(layout: &FrameLayout) -> Result<Vec<Geometry>, String> {
    if let FrameFormat::Raw { size } = layout.format {
        return Ok(vec![Geometry { name: "data", offset: 0, shape: vec![size as usize], strides: vec![1] }]);
    }
    if layout.format.image_layout() == Some(nvsci::buf::ImageLayout::BlockLinear) {
        return Err(format!(
            "{:?} is block-linear: its bytes are tiled, not rows, and cannot be viewed as an array",
            layout.format
        ));
    }
    let names: &[&'static str] = match layout.format {
        FrameFormat::Nv12 { .. } => &["luma", "chroma"],
        _ => &["rgba"],
    };
    let mut out = Vec::new();
    for (p, name) in layout.planes.iter().zip(names) {
        let channels = usize::from(p.channel_count.max(1));
        if p.bits_per_pixel as usize != 8 * channels {
            return Err(format!(
                "plane {name} has {} bits per pixel over {channels} channels",
                p.bits_per_pixel
            ));
        }
        let (h, w, pitch) = (p.height as usize, p.width as usize, p.pitch as usize);
        let (shape, strides) = if channels == 1 {
            (vec![h, w], vec![pitch, 1])
        } else {
            (vec![h, w, channels], vec![pitch, channels, 1])
        };
        out.push(Geometry { name, offset: p.offset, shape, strides });
    }
    Ok(out)
}

/// What a plane needs from the frame that owns it.
pub(crate) trait PlaneSource: Send + Sync + 'static {
    /// The frame's first byte (a CPU pointer or a device address) and its device, while the
    /// frame is held; `FrameReleased` once it is not.
    fn base(&self, py: Python<'_>, what: &str) -> PyResult<(u64, Device)>;
    /// Whether the holder may write (a producer's frame).
    fn writable(&self) -> bool;
    /// Records a DLPack export of plane `plane`; refuses a second one.
    fn mark_dlpack(&self, py: Python<'_>, plane: usize) -> PyResult<()>;
    /// Makes the frame ready on the caller's CUDA stream (a CUDA frame): the frame's present
    /// fence, waited on the holder's stream, is ordered before work on `stream`, and the
    /// frame's release is ordered after it.
    fn prepare_cuda(&self, py: Python<'_>, stream: CudaStreamRequest) -> PyResult<()>;
    /// The holder's CUDA stream, as `__cuda_array_interface__` names it (a CUDA frame); the
    /// release then waits for all the device's work unless told the caller's stream.
    fn cai_stream(&self, py: Python<'_>) -> PyResult<Option<usize>>;
    /// A reference that keeps the frame's memory mapped (the DLPack capsule's context).
    fn keep(self: Arc<Self>) -> Box<dyn Send + Sync>;
}

/// One plane of a held frame. Its memory stays mapped for as long as this object, or an array
/// made from it, lives; its contents are the frame's only until the frame is released.
#[pyclass(module = "nvsci", name = "Plane", frozen)]
pub(crate) struct PyPlane {
    pub(crate) source: Arc<dyn PlaneSource>,
    pub(crate) index: usize,
    pub(crate) geom: Geometry,
    /// A consumer's count of what may still read its mappings (held, never read).
    #[allow(dead_code)]
    pub(crate) pin: Option<Arc<()>>,
}

impl PyPlane {
    fn interface<'py>(&self, py: Python<'py>, addr: u64) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", PyTuple::new(py, &self.geom.shape)?)?;
        d.set_item("strides", PyTuple::new(py, &self.geom.strides)?)?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (addr + self.geom.offset, !self.source.writable()))?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    fn tensor<M: ManagedTensorBase>(
        &self,
        addr: u64,
        device: DLDevice,
        flags: DlpackFlags,
    ) -> PyResult<Managed<M>> {
        let shape: Vec<i64> = self.geom.shape.iter().map(|&n| n as i64).collect();
        let strides: Vec<i64> = self.geom.strides.iter().map(|&n| n as i64).collect();
        let keep = Box::new(self.source.clone().keep());
        let mut t = dlpark::metadata::Dynamic::new(shape, strides)
            .initialize_as::<M>(keep)
            .map_err(|e| pyo3::exceptions::PyBufferError::new_err(e.to_string()))?;
        t.set_data((addr + self.geom.offset) as *mut std::ffi::c_void)
            .set_device(device)
            .set_dtype(DLDataType::U8)
            .set_byte_offset(0);
        // SAFETY: the flags say what is true of the memory: READ_ONLY where the holder may not
        // write, never IS_COPIED (zero copy) nor IS_SUBBYTE_TYPE_PADDED (whole bytes).
        unsafe { t.set_flags_unchecked(flags) };
        // SAFETY: the data pointer lies in the frame's mapped memory (`base` checked the frame
        // is held) and the plane's shape and strides stay inside the frame's layout; the
        // context (`keep`) keeps that memory mapped until the capsule's deleter runs; shape
        // and strides are copied into the tensor's own allocation.
        Ok(unsafe { t.finish() })
    }
}

#[pymethods]
impl PyPlane {
    /// The plane's name: `luma`, `chroma`, `rgba` or `data`.
    #[getter]
    fn name(&self) -> &'static str {
        self.geom.name
    }

    /// The shape, in elements (rows, columns[, channels]).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.geom.shape)
    }

    /// The strides, in bytes.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.geom.strides)
    }

    /// The element type (always `uint8`).
    #[getter]
    fn dtype(&self) -> &'static str {
        "uint8"
    }

    /// Whether the holder may write the plane (a producer's frame).
    #[getter]
    fn writable(&self) -> bool {
        self.source.writable()
    }

    /// `cpu` or `cuda`.
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(match self.source.base(py, "plane.device")?.1 {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
        })
    }

    /// numpy's array interface (CPU frames): the frame's bytes in place, read-only for a
    /// consumer.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (addr, dev) = self.source.base(py, "__array_interface__")?;
        if dev != Device::Cpu {
            return Err(pyo3::exceptions::PyAttributeError::new_err(
                "a CUDA frame's plane has no __array_interface__ (use __cuda_array_interface__ or __dlpack__)",
            ));
        }
        self.interface(py, addr)
    }

    /// The CUDA array interface, version 3 (CUDA frames), with the stream the frame's present
    /// fence is waited on. Without a DLPack stream to order the release after, the frame's
    /// release waits for all work on the device unless `release(stream=...)` names the
    /// stream that read it.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (addr, dev) = self.source.base(py, "__cuda_array_interface__")?;
        if dev == Device::Cpu {
            return Err(pyo3::exceptions::PyAttributeError::new_err(
                "a CPU frame's plane has no __cuda_array_interface__ (use numpy or __dlpack__)",
            ));
        }
        let d = self.interface(py, addr)?;
        d.set_item("stream", self.source.cai_stream(py)?)?;
        Ok(d)
    }

    /// `(device_type, device_id)`: `(1, 0)` for the CPU, `(2, ordinal)` for CUDA.
    fn __dlpack_device__(&self, py: Python<'_>) -> PyResult<(u32, i32)> {
        Ok(match self.source.base(py, "__dlpack_device__")?.1 {
            Device::Cpu => (1, 0),
            Device::Cuda(o) => (2, o as i32),
        })
    }

    /// A DLPack capsule of the plane, in place (the array API's `__dlpack__`). On a CUDA frame
    /// the frame's present fence is ordered before work on `stream` (the consumer's stream:
    /// `None` or 1 the legacy default stream, 2 the per-thread default stream, -1 none, else a
    /// `CUstream`), which must belong to the frame's device; the frame's release is ordered
    /// after work on it. A CPU frame takes no stream. One export per plane and frame;
    /// `copy=True` and another `dl_device` are refused.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let (addr, dev) = self.source.base(py, "__dlpack__")?;
        let request = ExportRequest::parse(stream.as_ref(), max_version, dl_device, copy)
            .map_err(|e| errors::export(py, "stream", e.value(py).to_string()))?;
        let device = match dev {
            Device::Cpu => DLDevice::CPU,
            Device::Cuda(o) => DLDevice::cuda(o as i32),
        };
        if copy == Some(true) {
            return Err(errors::export(py, "copy", "frames are exported in place only (copy=True refused)"));
        }
        if let Some(d) = request.device() {
            if d != device {
                return Err(errors::export(
                    py,
                    "dl_device",
                    format!("the plane is on {:?}, dl_device asks for {:?}", device, d),
                ));
            }
        }
        let cuda_stream = match dev {
            Device::Cpu => {
                if stream.as_ref().is_some_and(|s| !s.is_none()) {
                    return Err(errors::export(py, "stream", "a CPU frame takes no stream (None)"));
                }
                None
            }
            Device::Cuda(_) => Some(
                request.cuda_stream().map_err(|e| errors::export(py, "stream", e.value(py).to_string()))?,
            ),
        };
        // A read-only holder exports read-only; the legacy ABI cannot say so: a CPU frame is
        // then refused (its pages may be mapped read-only), a CUDA frame goes without the flag.
        let abi = request.abi();
        let mut flags = DlpackFlags::empty();
        if !self.source.writable() {
            match (abi, dev) {
                (ExportAbi::Versioned, _) => flags = DlpackFlags::READ_ONLY,
                (ExportAbi::Legacy, Device::Cpu) => {
                    return Err(errors::export(
                        py,
                        "max_version",
                        "a read-only CPU frame needs the versioned DLPack ABI (max_version >= (1, 0)), \
                         which can mark it read-only; or read it with numpy.asarray",
                    ))
                }
                (ExportAbi::Legacy, Device::Cuda(_)) => {}
            }
        }
        self.source.mark_dlpack(py, self.index)?;
        if let Some(s) = cuda_stream {
            self.source.prepare_cuda(py, s)?;
        }
        request.export_zero_copy(
            py,
            device,
            flags,
            || self.tensor::<DLManagedTensor>(addr, device, DlpackFlags::empty()),
            || self.tensor::<DLManagedTensorVersioned>(addr, device, flags),
        )
    }

    /// The plane as a numpy array, in place (CPU frames): read-only for a consumer, writable
    /// for a producer.
    fn numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("numpy")?.getattr("asarray")?.call1((slf,))
    }

    fn __repr__(&self) -> String {
        format!("<nvsci.Plane {} shape={:?} uint8>", self.geom.name, self.geom.shape)
    }
}

/// Checks that `geom` fits in a frame of `size` bytes (the layout comes from the library).
pub(crate) fn fits(geom: &Geometry, size: u64) -> bool {
    geom.offset.checked_add(geom.span() as u64).is_some_and(|end| end <= size)
}
