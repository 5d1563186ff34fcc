//! Building a stream (`Backend`, `FrameFormat`, `ConsumerDesc`) and its producing side:
//! `Producer` and the frames it writes from numpy and presents.

use crate::consumer::{lock, ConsumerCore, PyConsumer};
use crate::errors;
use crate::plane::{self, Device, Geometry, PlaneSource, PyPlane};
use dlpark::python::CudaStreamRequest;
use nvsci::pipeline::{
    Attacher, Backend, ConsumerDesc, Engine, FrameFormat, FrameLayout, Producer, ProducerFrame, QueueMode,
    USER_HEADER_SIZE,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySlice, PyTuple};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// What the parties of one stream share on the Python side.
#[derive(Default)]
pub(crate) struct StreamShared {
    /// Frames the producer presented.
    pub(crate) presented: AtomicU64,
    /// Whether the producer was closed (no frame will be presented any more).
    pub(crate) ended: AtomicBool,
}

pub(crate) fn mode_name(m: QueueMode) -> &'static str {
    match m {
        QueueMode::Mailbox => "mailbox",
        _ => "fifo",
    }
}

/// What one frame of a stream holds.
#[pyclass(module = "nvsci", name = "FrameFormat", frozen, eq)]
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct PyFrameFormat(pub(crate) FrameFormat);

#[pymethods]
impl PyFrameFormat {
    /// Pitch-linear NV12 (a luma plane and an interleaved U/V plane); even dimensions.
    #[staticmethod]
    fn nv12(width: u32, height: u32) -> Self {
        Self(FrameFormat::nv12(width, height))
    }

    /// Block-linear NV12 (tiled; its planes cannot be viewed as arrays).
    #[staticmethod]
    fn nv12_block_linear(width: u32, height: u32) -> Self {
        Self(FrameFormat::nv12_block_linear(width, height))
    }

    /// 8-bit RGBA, one plane.
    #[staticmethod]
    fn rgba(width: u32, height: u32) -> Self {
        Self(FrameFormat::Rgba { width, height })
    }

    /// An unstructured buffer of `size` bytes.
    #[staticmethod]
    fn raw(size: u64) -> Self {
        Self(FrameFormat::Raw { size })
    }

    /// `nv12`, `rgba` or `raw`.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.0 {
            FrameFormat::Nv12 { .. } => "nv12",
            FrameFormat::Rgba { .. } => "rgba",
            _ => "raw",
        }
    }

    /// Width in pixels (`None` for raw frames).
    #[getter]
    fn width(&self) -> Option<u32> {
        self.0.dimensions().map(|d| d.0)
    }

    /// Height in pixels (`None` for raw frames).
    #[getter]
    fn height(&self) -> Option<u32> {
        self.0.dimensions().map(|d| d.1)
    }

    fn __repr__(&self) -> String {
        format!("<nvsci.FrameFormat {:?}>", self.0)
    }
}

/// One consumer of a stream: its engine (`"cpu"` or `"cuda"`, the backend's GPU), its queue
/// mode (`"fifo"`: every frame, pacing the producer; `"mailbox"`: the newest only) and its
/// limit (most frames held and queued; `None`: the stream's frames).
#[pyclass(module = "nvsci", name = "ConsumerDesc", frozen, get_all)]
#[derive(Clone)]
pub(crate) struct PyConsumerDesc {
    engine: String,
    mode: String,
    limit: Option<usize>,
}

#[pymethods]
impl PyConsumerDesc {
    #[new]
    #[pyo3(signature = (engine="cpu", mode="fifo", limit=None))]
    fn new(engine: &str, mode: &str, limit: Option<usize>) -> Self {
        Self { engine: engine.to_owned(), mode: mode.to_owned(), limit }
    }

    fn __repr__(&self) -> String {
        format!("ConsumerDesc(engine={:?}, mode={:?}, limit={:?})", self.engine, self.mode, self.limit)
    }
}

impl PyConsumerDesc {
    /// The crate's description, on `backend`'s engines.
    fn resolve(&self, py: Python<'_>, backend: &Backend) -> PyResult<ConsumerDesc> {
        let engine = match self.engine.as_str() {
            "cpu" => Engine::Cpu,
            "cuda" => {
                match backend.gpu_engine() {
                    Engine::Cpu => return Err(errors::invalid(
                        py,
                        "engine",
                        "\"cuda\": this backend has no CUDA engine (no CUDA GPU the library's objects reach)",
                    )),
                    gpu => gpu,
                }
            }
            other => return Err(errors::invalid(py, "engine", format!("{other:?}; \"cpu\" or \"cuda\""))),
        };
        let mode = match self.mode.as_str() {
            "fifo" => QueueMode::Fifo,
            "mailbox" => QueueMode::Mailbox,
            other => return Err(errors::invalid(py, "mode", format!("{other:?}; \"fifo\" or \"mailbox\""))),
        };
        let mut d = ConsumerDesc::new(engine).with_mode(mode);
        if let Some(l) = self.limit {
            d = d.with_limit(l);
        }
        Ok(d)
    }
}

/// Where a stream's frames and fences come from.
#[pyclass(module = "nvsci", name = "Backend", frozen)]
pub(crate) struct PyBackend(Backend);

fn seconds(py: Python<'_>, name: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| errors::invalid(py, name, format!("{s} s: not a duration")))
}

#[pymethods]
impl PyBackend {
    /// The mock NvSci library in this process (CPU engines; a CUDA engine where a CUDA GPU
    /// is present: the mock's GPU mode).
    #[staticmethod]
    fn mock() -> Self {
        Self(Backend::with_library(nvsci::NvSci::mock()))
    }

    /// `auto`, `nvsci`, `vulkan` or `mock`, as the crate's `Backend::by_name`.
    #[staticmethod]
    fn by_name(py: Python<'_>, name: &str) -> PyResult<Self> {
        Backend::by_name(name).map(Self).map_err(|e| errors::to_py(py, e))
    }

    /// `nvsci` or `vulkan`.
    #[getter]
    fn kind(&self) -> String {
        self.0.kind().to_string()
    }

    /// Whether consumers may work on a CUDA engine (`ConsumerDesc(engine="cuda")`).
    #[getter]
    fn has_cuda(&self) -> bool {
        !self.0.gpu_engine().is_cpu()
    }

    /// A paragraph on the choice.
    fn explain(&self) -> String {
        self.0.explain()
    }

    /// Builds a stream of `format` frames with a CPU producer, the `consumers` (attached from
    /// the start; default one CPU FIFO consumer) and seats for the `reserve` consumers that
    /// attach later (`Producer.attach`); returns the producer and the attached consumers.
    #[pyo3(signature = (format, *, consumers=None, reserve=None, frames=4, timeout=2.0, gpu_cache=true))]
    #[allow(clippy::too_many_arguments)]
    fn stream(
        &self,
        py: Python<'_>,
        format: PyRef<'_, PyFrameFormat>,
        consumers: Option<Vec<PyRef<'_, PyConsumerDesc>>>,
        reserve: Option<Vec<PyRef<'_, PyConsumerDesc>>>,
        frames: usize,
        timeout: f64,
        gpu_cache: bool,
    ) -> PyResult<(PyProducer, Vec<PyConsumer>)> {
        let timeout = seconds(py, "timeout", timeout)?;
        let mut b = self.0.stream(format.0).frames(frames).timeout(timeout).gpu_cache(gpu_cache);
        let consumers = match consumers {
            Some(c) => c.iter().map(|d| d.resolve(py, &self.0)).collect::<PyResult<Vec<_>>>()?,
            None => vec![ConsumerDesc::cpu()],
        };
        for d in consumers {
            b = b.consumer(d);
        }
        for d in reserve.unwrap_or_default() {
            b = b.reserve(d.resolve(py, &self.0)?, 1);
        }
        let ring = py.detach(move || b.build()).map_err(|e| errors::to_py(py, e))?;
        let (producer, consumers) = py.detach(move || ring.split()).map_err(|e| errors::to_py(py, e))?;
        let shared = Arc::new(StreamShared::default());
        let attacher = producer.attacher();
        let gpu = self.0.cuda().cloned();
        let consumers = consumers
            .into_iter()
            .map(|c| {
                let gpu = if c.engine().is_cpu() { None } else { gpu.clone() };
                PyConsumer {
                    core: ConsumerCore::new(c, shared.clone(), 0, Some(attacher.clone()), gpu),
                    timeout,
                }
            })
            .collect();
        let layout = producer.layout().clone();
        let core = Arc::new(ProducerCore {
            planes: plane::planes(&layout),
            layout,
            state: Mutex::new(Some(producer)),
            attacher,
            shared,
            held: Mutex::new(Weak::new()),
            backend: self.0.clone(),
            timeout,
        });
        Ok((PyProducer { core }, consumers))
    }

    fn __repr__(&self) -> String {
        format!("<nvsci.Backend {}>", self.0.kind())
    }
}

/// A producer and what its frames share.
pub(crate) struct ProducerCore {
    state: Mutex<Option<Producer>>,
    attacher: Attacher,
    shared: Arc<StreamShared>,
    held: Mutex<Weak<PFrameCore>>,
    layout: FrameLayout,
    planes: Result<Vec<Geometry>, String>,
    backend: Backend,
    timeout: Duration,
}

impl ProducerCore {
    /// Presents `frame` (held by this producer).
    fn present(self: &Arc<Self>, py: Python<'_>, frame: &PFrameCore) -> PyResult<()> {
        if !Arc::ptr_eq(&frame.producer, self) {
            return Err(errors::invalid(py, "frame", "a frame of another producer"));
        }
        let mut g = lock(&self.state);
        let Some(p) = g.as_mut() else { return Err(errors::closed(py, "producer")) };
        let Some(token) = lock(&frame.token).take() else { return Err(errors::released(py, "present")) };
        p.present(token).map_err(|e| errors::to_py(py, e))?;
        self.shared.presented.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A frame the producer holds.
pub(crate) struct PFrameCore {
    token: Mutex<Option<ProducerFrame>>,
    producer: Arc<ProducerCore>,
    base: u64,
    sequence: u64,
    index: usize,
}

impl PlaneSource for PFrameCore {
    fn base(&self, py: Python<'_>, what: &str) -> PyResult<(u64, Device)> {
        if lock(&self.token).is_none() {
            return Err(errors::released(py, what));
        }
        if let Err(why) = &self.producer.planes {
            return Err(errors::invalid(py, "frame", why.clone()));
        }
        Ok((self.base, Device::Cpu))
    }

    fn writable(&self) -> bool {
        true
    }

    fn mark_dlpack(&self, _py: Python<'_>, _plane: usize) -> PyResult<()> {
        Ok(())
    }

    fn prepare_cuda(&self, _py: Python<'_>, _stream: CudaStreamRequest) -> PyResult<()> {
        Ok(())
    }

    fn cai_stream(&self, _py: Python<'_>) -> PyResult<Option<usize>> {
        Ok(None)
    }

    fn keep(self: Arc<Self>) -> Box<dyn Send + Sync> {
        Box::new(self)
    }
}

/// The producing side of a stream (a CPU producer): acquire a frame, write it (from numpy),
/// present it; or `send` an array in one call.
#[pyclass(module = "nvsci", name = "Producer", frozen)]
pub(crate) struct PyProducer {
    core: Arc<ProducerCore>,
}

impl Drop for PyProducer {
    fn drop(&mut self) {
        self.end();
    }
}

impl PyProducer {
    /// Ends the stream: discards a frame still held and drops the producer.
    fn end(&self) {
        let producer = lock(&self.core.state).take();
        if let Some(f) = lock(&self.core.held).upgrade() {
            lock(&f.token).take();
        }
        self.core.shared.ended.store(true, Ordering::SeqCst);
        drop(producer);
    }

    fn acquire_core(&self, py: Python<'_>) -> PyResult<Arc<PFrameCore>> {
        let core = self.core.clone();
        let got = py.detach(move || {
            let mut g = lock(&core.state);
            let Some(p) = g.as_mut() else { return Ok(None) };
            let f = p.acquire()?;
            let base = match &core.planes {
                Ok(_) => {
                    let mut w = p.cpu_write(&f)?;
                    w.as_mut_ptr() as u64
                }
                Err(_) => 0,
            };
            Ok(Some((f, base)))
        });
        match got {
            Ok(Some((f, base))) => {
                let frame = Arc::new(PFrameCore {
                    sequence: f.sequence(),
                    index: f.index(),
                    token: Mutex::new(Some(f)),
                    producer: self.core.clone(),
                    base,
                });
                *lock(&self.core.held) = Arc::downgrade(&frame);
                Ok(frame)
            }
            Ok(None) => Err(errors::closed(py, "producer")),
            Err(e) => Err(errors::to_py(py, e)),
        }
    }
}

#[pymethods]
impl PyProducer {
    /// Waits (up to the stream's timeout) for a free frame and hands it out for writing.
    fn acquire(&self, py: Python<'_>) -> PyResult<PyProducerFrame> {
        Ok(PyProducerFrame { core: self.acquire_core(py)? })
    }

    /// Presents a frame written since `acquire`: the consumers get it.
    fn present(&self, py: Python<'_>, frame: &PyProducerFrame) -> PyResult<()> {
        self.core.present(py, &frame.core)
    }

    /// Acquires a frame, writes `array` (or the planes `luma` and `chroma` of an NV12
    /// frame) into it, sets its metadata and presents it; returns its sequence. The arrays
    /// are checked before a frame is taken (`InvalidArgument` naming the argument).
    #[pyo3(signature = (array=None, *, luma=None, chroma=None, capture_time=None, user_header=None))]
    fn send(
        &self,
        py: Python<'_>,
        array: Option<Bound<'_, PyAny>>,
        luma: Option<Bound<'_, PyAny>>,
        chroma: Option<Bound<'_, PyAny>>,
        capture_time: Option<u64>,
        user_header: Option<Vec<u8>>,
    ) -> PyResult<u64> {
        let planes = self.core.planes.as_ref().map_err(|w| errors::invalid(py, "frame", w.clone()))?;
        let writes = sources(py, &self.core.layout.format, planes, array, luma, chroma)?;
        if let Some(h) = &user_header {
            check_header(py, h)?;
        }
        let frame = self.acquire_core(py)?;
        let done = (|| {
            copy_into(py, &frame, planes, &writes)?;
            let mut t = lock(&frame.token);
            let t = t.as_mut().ok_or_else(|| errors::released(py, "send"))?;
            if let Some(ns) = capture_time {
                t.set_capture_time(ns);
            }
            if let Some(h) = &user_header {
                t.user_header_mut()[..h.len()].copy_from_slice(h);
            }
            Ok(())
        })();
        if let Err(e) = done {
            lock(&frame.token).take();
            return Err(e);
        }
        self.core.present(py, &frame)?;
        Ok(frame.sequence)
    }

    /// Attaches a consumer to a vacant seat reserved for its engine when the stream was
    /// built; it gets frames from the next present on.
    fn attach(&self, py: Python<'_>, desc: PyRef<'_, PyConsumerDesc>) -> PyResult<PyConsumer> {
        if lock(&self.core.state).is_none() {
            return Err(errors::closed(py, "producer"));
        }
        let d = desc.resolve(py, &self.core.backend)?;
        let gpu = if d.engine.is_cpu() { None } else { self.core.backend.cuda().cloned() };
        let attached_at = self.core.shared.presented.load(Ordering::SeqCst);
        let c = self.core.attacher.attach(d).map_err(|e| errors::to_py(py, e))?;
        Ok(PyConsumer {
            core: ConsumerCore::new(
                c,
                self.core.shared.clone(),
                attached_at,
                Some(self.core.attacher.clone()),
                gpu,
            ),
            timeout: self.core.timeout,
        })
    }

    /// Ends the stream: a frame still held is discarded; consumers get the frames already
    /// presented, then their iteration stops.
    fn close(&self) {
        self.end();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.end();
        false
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.core.state).is_none()
    }

    /// Frames presented so far.
    #[getter]
    fn presented(&self) -> u64 {
        self.core.shared.presented.load(Ordering::SeqCst)
    }

    /// The frame format.
    #[getter]
    fn format(&self) -> PyFrameFormat {
        PyFrameFormat(self.core.layout.format)
    }

    /// The stream's timeout in seconds.
    #[getter]
    fn timeout(&self) -> f64 {
        self.core.timeout.as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!(
            "<nvsci.Producer {:?}{}>",
            self.core.layout.format,
            if self.closed() { " closed" } else { "" }
        )
    }
}

fn check_header(py: Python<'_>, h: &[u8]) -> PyResult<()> {
    if h.len() > USER_HEADER_SIZE {
        return Err(errors::invalid(
            py,
            "user_header",
            format!("{} bytes; at most USER_HEADER_SIZE = {USER_HEADER_SIZE}", h.len()),
        ));
    }
    Ok(())
}

/// Checks that `a` is a C-contiguous or strided `numpy.ndarray` of `uint8` of `shape`.
fn check_array(py: Python<'_>, name: &str, a: &Bound<'_, PyAny>, shape: &[usize]) -> PyResult<()> {
    let np = py.import("numpy")?;
    if !a.is_instance(&np.getattr("ndarray")?)? {
        let t = a.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(errors::invalid(py, name, format!("a {t}; a numpy.ndarray of uint8 is needed")));
    }
    let dtype: String = a.getattr("dtype")?.getattr("name")?.extract()?;
    if dtype != "uint8" {
        return Err(errors::invalid(py, name, format!("dtype {dtype}; uint8 is needed")));
    }
    let got: Vec<usize> = a.getattr("shape")?.extract()?;
    if got != shape {
        return Err(errors::invalid(py, name, format!("shape {got:?}; the frame needs {shape:?}")));
    }
    Ok(())
}

/// The arrays to copy into each plane (by plane index), checked.
fn sources<'py>(
    py: Python<'py>,
    format: &FrameFormat,
    planes: &[Geometry],
    array: Option<Bound<'py, PyAny>>,
    luma: Option<Bound<'py, PyAny>>,
    chroma: Option<Bound<'py, PyAny>>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let nv12 = matches!(format, FrameFormat::Nv12 { .. });
    match (array, luma, chroma) {
        (Some(a), None, None) => {
            if nv12 {
                // The usual packed NV12 image: the luma rows, then the chroma rows.
                let (h, w) = (planes[0].shape[0], planes[0].shape[1]);
                check_array(py, "array", &a, &[h + h / 2, w])?;
                let y = a.get_item(PySlice::new(py, 0, h as isize, 1))?;
                let uv = a.get_item(PySlice::new(py, h as isize, (h + h / 2) as isize, 1))?;
                let uv = uv.call_method1("reshape", (PyTuple::new(py, &planes[1].shape)?,))?;
                Ok(vec![y, uv])
            } else {
                check_array(py, "array", &a, &planes[0].shape)?;
                Ok(vec![a])
            }
        }
        (None, Some(y), Some(uv)) if nv12 => {
            check_array(py, "luma", &y, &planes[0].shape)?;
            check_array(py, "chroma", &uv, &planes[1].shape)?;
            Ok(vec![y, uv])
        }
        (None, Some(_), _) | (None, _, Some(_)) if !nv12 => {
            Err(errors::invalid(py, "luma", "luma and chroma are the planes of NV12 frames; give array"))
        }
        (None, None, Some(_)) => Err(errors::invalid(py, "luma", "chroma without luma")),
        (None, Some(_), None) => Err(errors::invalid(py, "chroma", "luma without chroma")),
        (Some(_), _, _) => Err(errors::invalid(py, "array", "array together with luma or chroma")),
        (None, None, None) => Err(errors::invalid(py, "array", "nothing to write")),
        _ => Err(errors::invalid(py, "array", "nothing to write")),
    }
}

fn copy_into(
    py: Python<'_>,
    frame: &Arc<PFrameCore>,
    planes: &[Geometry],
    writes: &[Bound<'_, PyAny>],
) -> PyResult<()> {
    let np = py.import("numpy")?;
    for (i, src) in writes.iter().enumerate() {
        let dst = Bound::new(py, PyPlane { source: frame.clone(), index: i, geom: planes[i].clone() })?;
        frame.base(py, "write")?;
        let dst = np.getattr("asarray")?.call1((dst,))?;
        np.getattr("copyto")?.call1((dst, src))?;
    }
    Ok(())
}

/// A frame the producer holds: write its planes (numpy views, writable) or `write` arrays
/// into it, set its metadata, and present it. A context manager: presented on a clean exit,
/// discarded when the block raises. Dropped unpresented, it is discarded.
#[pyclass(module = "nvsci", name = "ProducerFrame", frozen)]
pub(crate) struct PyProducerFrame {
    core: Arc<PFrameCore>,
}

impl Drop for PyProducerFrame {
    fn drop(&mut self) {
        lock(&self.core.token).take();
    }
}

impl PyProducerFrame {
    fn planes(&self, py: Python<'_>) -> PyResult<&Vec<Geometry>> {
        self.core.base(py, "planes")?;
        self.core.producer.planes.as_ref().map_err(|w| errors::invalid(py, "frame", w.clone()))
    }

    fn named(&self, py: Python<'_>, name: &str) -> PyResult<PyPlane> {
        let planes = self.planes(py)?;
        let i = planes.iter().position(|g| g.name == name).ok_or_else(|| {
            pyo3::exceptions::PyAttributeError::new_err(format!(
                "a {:?} frame has no {name} plane",
                self.core.producer.layout.format
            ))
        })?;
        Ok(PyPlane { source: self.core.clone(), index: i, geom: planes[i].clone() })
    }
}

#[pymethods]
impl PyProducerFrame {
    /// Writes `array` (or NV12's `luma` and `chroma`) into the frame: `uint8` arrays of the
    /// frame's shape (`InvalidArgument` naming the argument otherwise).
    #[pyo3(signature = (array=None, *, luma=None, chroma=None))]
    fn write(
        &self,
        py: Python<'_>,
        array: Option<Bound<'_, PyAny>>,
        luma: Option<Bound<'_, PyAny>>,
        chroma: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let planes = self.planes(py)?;
        let writes = sources(py, &self.core.producer.layout.format, planes, array, luma, chroma)?;
        copy_into(py, &self.core, planes, &writes)
    }

    /// Presents the frame (as `Producer.present`).
    fn present(&self, py: Python<'_>) -> PyResult<()> {
        self.core.producer.present(py, &self.core)
    }

    /// Discards the frame unpresented: the next acquire hands out the same slot and sequence.
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        match lock(&self.core.token).take() {
            Some(_) => Ok(()),
            None => Err(errors::released(py, "discard")),
        }
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            lock(&self.core.token).take();
            return Ok(false);
        }
        if lock(&self.core.token).is_some() {
            self.present(py)?;
        }
        Ok(false)
    }

    /// Whether the frame is still held (not presented or discarded).
    #[getter]
    fn held(&self) -> bool {
        lock(&self.core.token).is_some()
    }

    /// Frame number, counting from 0.
    #[getter]
    fn sequence(&self) -> u64 {
        self.core.sequence
    }

    /// Slot in the stream's ring.
    #[getter]
    fn index(&self) -> usize {
        self.core.index
    }

    /// The capture time set (nanoseconds), or `None`: CLOCK_MONOTONIC at present.
    #[getter]
    fn get_capture_time(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let t = lock(&self.core.token);
        Ok(t.as_ref().ok_or_else(|| errors::released(py, "capture_time"))?.capture_time())
    }

    #[setter]
    fn set_capture_time(&self, py: Python<'_>, ns: u64) -> PyResult<()> {
        let mut t = lock(&self.core.token);
        t.as_mut().ok_or_else(|| errors::released(py, "capture_time"))?.set_capture_time(ns);
        Ok(())
    }

    /// The user header (`USER_HEADER_SIZE` bytes; zeros unless written). Setting it takes at
    /// most that many bytes and zero-fills the rest.
    #[getter]
    fn get_user_header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let t = lock(&self.core.token);
        let h = *t.as_ref().ok_or_else(|| errors::released(py, "user_header"))?.user_header();
        Ok(PyBytes::new(py, &h))
    }

    #[setter]
    fn set_user_header(&self, py: Python<'_>, header: Vec<u8>) -> PyResult<()> {
        check_header(py, &header)?;
        let mut t = lock(&self.core.token);
        let h = t.as_mut().ok_or_else(|| errors::released(py, "user_header"))?.user_header_mut();
        h.fill(0);
        h[..header.len()].copy_from_slice(&header);
        Ok(())
    }

    /// Every plane, in order (writable numpy views through `Plane.numpy()`).
    #[getter(planes)]
    fn all_planes(&self, py: Python<'_>) -> PyResult<Vec<PyPlane>> {
        let planes = self.planes(py)?;
        Ok(planes
            .iter()
            .enumerate()
            .map(|(i, g)| PyPlane { source: self.core.clone(), index: i, geom: g.clone() })
            .collect())
    }

    /// The luma plane of an NV12 frame.
    #[getter]
    fn luma(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "luma")
    }

    /// The chroma plane of an NV12 frame.
    #[getter]
    fn chroma(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "chroma")
    }

    /// The plane of an RGBA frame.
    #[getter]
    fn rgba(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "rgba")
    }

    /// The bytes of a raw frame.
    #[getter]
    fn data(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "data")
    }

    fn __repr__(&self) -> String {
        format!("<nvsci.ProducerFrame {} (slot {})>", self.core.sequence, self.core.index)
    }
}
