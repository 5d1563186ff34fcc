//! Building a stream (`Backend`, `FrameFormat`, `ConsumerDesc`) and its producing side:
//! `Producer` and the frames it writes (from numpy, or on a CUDA producer's stream from CUDA
//! arrays) and presents.

use crate::consumer::{lock, ConsumerCore, PyConsumer};
use crate::cuda::{self, Foreign, Recorded};
use crate::errors;
use crate::plane::{self, Device, Geometry, PlaneSource, PyPlane};
use crate::write::{self, Keep, Source, Target};
use dlpark::python::CudaStreamRequest;
use nvsci::cuda::cudarc::driver::CudaStream;
use nvsci::cuda::CudaGpu;
use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{
    Attacher, Backend, ConsumerDesc, Engine, FrameFormat, FrameLayout, Producer, ProducerFrame, QueueMode,
    RemoteSeat, USER_HEADER_SIZE,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
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
/// mode (`"fifo"`: every frame, pacing the producer; `"mailbox"`: the newest only), its limit
/// (most frames held and queued; `None`: the stream's frames) and where it lives: this
/// process, or (`endpoint`, the producer's end of an NvSciIpc channel) the process at the other
/// end, which attaches with `Consumer.connect`.
#[pyclass(module = "nvsci", name = "ConsumerDesc", frozen, get_all)]
#[derive(Clone)]
pub(crate) struct PyConsumerDesc {
    pub(crate) engine: String,
    pub(crate) mode: String,
    pub(crate) limit: Option<usize>,
    pub(crate) endpoint: Option<String>,
}

#[pymethods]
impl PyConsumerDesc {
    #[new]
    #[pyo3(signature = (engine="cpu", mode="fifo", limit=None, endpoint=None))]
    fn new(engine: &str, mode: &str, limit: Option<usize>, endpoint: Option<String>) -> Self {
        Self { engine: engine.to_owned(), mode: mode.to_owned(), limit, endpoint }
    }

    fn __repr__(&self) -> String {
        format!(
            "ConsumerDesc(engine={:?}, mode={:?}, limit={:?}, endpoint={:?})",
            self.engine, self.mode, self.limit, self.endpoint
        )
    }
}

/// The engine `name` (`"cpu"` or `"cuda"`) on `backend`, for the argument `arg`.
pub(crate) fn engine_named(py: Python<'_>, backend: &Backend, arg: &str, name: &str) -> PyResult<Engine> {
    match name {
        "cpu" => Ok(Engine::Cpu),
        "cuda" => match backend.gpu_engine() {
            Engine::Cpu => Err(errors::invalid(
                py,
                arg,
                "\"cuda\": this backend has no CUDA engine (no CUDA GPU the library's objects reach)",
            )),
            gpu => Ok(gpu),
        },
        other => Err(errors::invalid(py, arg, format!("{other:?}; \"cpu\" or \"cuda\""))),
    }
}

/// Opens the NvSciIpc endpoint `name` of `backend`'s library (`ipc`: opened at the first).
pub(crate) fn open_endpoint(
    py: Python<'_>,
    backend: &Backend,
    ipc: &mut Option<Ipc>,
    name: &str,
) -> PyResult<IpcEndpoint> {
    let Some(lib) = backend.nvsci() else {
        return Err(errors::invalid(
            py,
            "endpoint",
            format!(
                "{name:?}: a consumer in another process needs an NvSci backend (this one is {})",
                backend.kind()
            ),
        ));
    };
    if ipc.is_none() {
        *ipc = Some(Ipc::for_library(lib).map_err(|e| errors::to_py(py, e))?);
    }
    let ipc = ipc.as_ref().expect("opened above");
    IpcEndpoint::open(ipc, name).map_err(|e| errors::to_py(py, e))
}

impl PyConsumerDesc {
    /// The crate's description, on `backend`'s engines.
    pub(crate) fn resolve(&self, py: Python<'_>, backend: &Backend) -> PyResult<ConsumerDesc> {
        let engine = engine_named(py, backend, "engine", &self.engine)?;
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

impl PyBackend {
    pub(crate) fn backend(&self) -> &Backend {
        &self.0
    }
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

    /// Waits until the CUDA objects dropped so far (imports, mappings, semaphores: the crate
    /// destroys them on its teardown thread once the work queued before their drop finished)
    /// are destroyed, at most `timeout` seconds; returns how many are still queued (0: none;
    /// always 0 without a CUDA engine). The NvSci objects they hold are freed with them.
    #[pyo3(signature = (timeout=10.0))]
    fn flush_teardown(&self, py: Python<'_>, timeout: f64) -> PyResult<usize> {
        let timeout = seconds(py, "timeout", timeout)?;
        Ok(match self.0.cuda() {
            Some(g) => py.detach(|| g.flush_teardown(timeout)),
            None => 0,
        })
    }

    /// Builds a stream of `format` frames: a producer on `producer`'s engine (`"cpu"`, or
    /// `"cuda"`: it writes from CUDA arrays on its stream), the `consumers` (attached from the
    /// start; default one CPU FIFO consumer) and seats for the `reserve` consumers that attach
    /// later (`Producer.attach`, or `Consumer.connect` in another process for a description
    /// with an `endpoint`). A consumer with an `endpoint` attaches from another process while
    /// the stream is built (this call waits for it, up to `timeout`). Returns the producer and
    /// the consumers attached in this process.
    #[pyo3(signature = (format, *, consumers=None, reserve=None, frames=4, timeout=2.0, gpu_cache=true, producer="cpu"))]
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
        producer: &str,
    ) -> PyResult<(PyProducer, Vec<PyConsumer>)> {
        let timeout = seconds(py, "timeout", timeout)?;
        let engine = engine_named(py, &self.0, "producer", producer)?;
        let mut b =
            self.0.stream(format.0).frames(frames).timeout(timeout).gpu_cache(gpu_cache).producer(engine);
        let mut ipc = None;
        match consumers {
            Some(c) => {
                for d in c.iter() {
                    let desc = d.resolve(py, &self.0)?;
                    b = match &d.endpoint {
                        Some(name) => b.remote_consumer(open_endpoint(py, &self.0, &mut ipc, name)?, desc),
                        None => b.consumer(desc),
                    };
                }
            }
            None => b = b.consumer(ConsumerDesc::cpu()),
        }
        for d in reserve.unwrap_or_default() {
            let desc = d.resolve(py, &self.0)?;
            b = match &d.endpoint {
                Some(name) => b.reserve_remote(open_endpoint(py, &self.0, &mut ipc, name)?, desc),
                None => b.reserve(desc, 1),
            };
        }
        let ring = py.detach(move || b.build()).map_err(|e| errors::to_py(py, e))?;
        let (producer, consumers) = py.detach(move || ring.split()).map_err(|e| errors::to_py(py, e))?;
        let shared = Arc::new(StreamShared::default());
        let attacher = producer.attacher();
        let gpu = self.0.cuda().cloned();
        let producer_gpu = match (&gpu, producer.stream()) {
            (Some(g), Some(s)) => Some((g.clone(), s.clone())),
            _ => None,
        };
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
        let planes = plane::planes(&layout).and_then(|p| {
            if p.iter().all(|g| plane::fits(g, layout.size)) {
                Ok(p)
            } else {
                Err("a plane of the layout reaches past the frame".to_owned())
            }
        });
        let core = Arc::new(ProducerCore {
            planes,
            layout,
            state: Mutex::new(Some(producer)),
            attacher: Mutex::new(Some(attacher)),
            shared,
            held: Mutex::new(Weak::new()),
            backend: self.0.clone(),
            timeout,
            gpu: producer_gpu,
            copies: Mutex::new(Vec::new()),
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
    /// Keeps the stream's buffers while the producer is open (consumers in this process hold
    /// their own); `None` once closed.
    attacher: Mutex<Option<Attacher>>,
    shared: Arc<StreamShared>,
    held: Mutex<Weak<PFrameCore>>,
    layout: FrameLayout,
    planes: Result<Vec<Geometry>, String>,
    backend: Backend,
    timeout: Duration,
    /// A CUDA producer's device and stream.
    gpu: Option<(CudaGpu, Arc<CudaStream>)>,
    /// Copies enqueued on the producer's stream and the sources they read, kept until the
    /// copies ran.
    copies: Mutex<Vec<(Recorded, Vec<Keep>)>>,
}

impl ProducerCore {
    /// Presents `frame` (held by this producer): a CUDA producer's present signal is ordered
    /// after the work on the streams its exports named (after all the device's work where a
    /// writer's stream is unknown).
    fn present(self: &Arc<Self>, py: Python<'_>, frame: &PFrameCore) -> PyResult<()> {
        if !Arc::ptr_eq(&frame.producer, self) {
            return Err(errors::invalid(py, "frame", "a frame of another producer"));
        }
        let mut g = lock(&self.state);
        let Some(p) = g.as_mut() else { return Err(errors::closed(py, "producer")) };
        let Some(token) = lock(&frame.token).take() else { return Err(errors::released(py, "present")) };
        if let Some((gpu, ours)) = &self.gpu {
            let (streams, unknown) = std::mem::take(&mut *lock(&frame.writers));
            let ordered = if unknown {
                cuda::synchronize(gpu)
            } else {
                streams.into_iter().try_for_each(|s| cuda::consumer_waits(gpu, ours, s))
            };
            if let Err((f, e)) = ordered {
                // Not presented: discarded (the token's drop hands the slot back).
                drop(token);
                return Err(errors::driver(py, f, e));
            }
        }
        p.present(token).map_err(|e| errors::to_py(py, e))?;
        self.shared.presented.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Drops the sources of the copies that ran (all of them, waiting, with `wait`).
    fn reap(&self, wait: bool) {
        let Some((gpu, _)) = &self.gpu else { return };
        let mut copies = lock(&self.copies);
        if wait {
            for (ev, _) in copies.iter() {
                ev.wait(gpu);
            }
            copies.clear();
        } else {
            copies.retain(|(ev, _)| !ev.done(gpu));
        }
    }

    /// Copies `writes` into `frame`'s planes: with numpy for a CPU producer, on the stream of a
    /// CUDA producer (its sources kept until the copies ran).
    fn copy_into(
        &self,
        py: Python<'_>,
        frame: &Arc<PFrameCore>,
        planes: &[Geometry],
        writes: write::Writes<'_>,
    ) -> PyResult<()> {
        frame.base(py, "write")?;
        let write::Writes { sources, keep } = writes;
        let np = py.import("numpy")?;
        let mut copied = Ok(());
        for (i, src) in sources.into_iter().enumerate() {
            copied = match src {
                Source::Numpy(src) => (|| {
                    let dst = Bound::new(
                        py,
                        PyPlane { source: frame.clone(), index: i, geom: planes[i].clone(), pin: None },
                    )?;
                    let dst = np.getattr("asarray")?.call1((dst,))?;
                    np.getattr("copyto")?.call1((dst, src))?;
                    Ok(())
                })(),
                Source::Rows(rows) => match &self.gpu {
                    None => Err(errors::invalid(py, "array", "rows to copy on a CPU producer")),
                    Some((gpu, stream)) => {
                        let g = &planes[i];
                        // SAFETY: `rows` was checked against the plane's shape (rows of
                        // `row_bytes` contiguous bytes, `pitch` apart) from the source's own
                        // description, and the source is kept alive (`keep`, below) until an
                        // event recorded after the copy completed (or the stream synchronised);
                        // the destination is the plane of a held frame, mapped read-write in the
                        // producer's context, whose geometry fits the frame (checked when the
                        // stream was built).
                        unsafe { cuda::copy_rows(gpu, stream, rows, frame.base + g.offset, g.strides[0]) }
                            .map_err(|(f, e)| errors::driver(py, f, e))
                    }
                },
            };
            if copied.is_err() {
                break;
            }
        }
        // The sources of the copies enqueued so far (all of them, or those before a failure)
        // live until the copies ran.
        if let Some((gpu, stream)) = &self.gpu {
            match Recorded::after(gpu, stream) {
                Ok(ev) => lock(&self.copies).push((ev, keep)),
                Err((f, e)) => {
                    // No event to tell when the copies ran: wait for them now.
                    let _ = stream.synchronize();
                    drop(keep);
                    copied = copied.and(Err(errors::driver(py, f, e)));
                }
            }
        }
        copied
    }

    fn target(&self) -> Target<'_> {
        Target { gpu: self.gpu.as_ref().map(|(g, s)| (g, s)) }
    }
}

/// A frame the producer holds.
pub(crate) struct PFrameCore {
    token: Mutex<Option<ProducerFrame>>,
    producer: Arc<ProducerCore>,
    base: u64,
    sequence: u64,
    index: usize,
    /// A CUDA producer's frame: the streams its exports named (the present is ordered after
    /// them), and whether a writer's stream is unknown (`__cuda_array_interface__`, DLPack's
    /// -1: the present waits for all the device's work).
    writers: Mutex<(Vec<Foreign>, bool)>,
}

impl PlaneSource for PFrameCore {
    fn base(&self, py: Python<'_>, what: &str) -> PyResult<(u64, Device)> {
        if lock(&self.token).is_none() {
            return Err(errors::released(py, what));
        }
        if let Err(why) = &self.producer.planes {
            return Err(errors::invalid(py, "frame", why.clone()));
        }
        let dev = match &self.producer.gpu {
            Some((g, _)) => Device::Cuda(g.context().ordinal()),
            None => Device::Cpu,
        };
        Ok((self.base, dev))
    }

    fn writable(&self) -> bool {
        true
    }

    fn mark_dlpack(&self, _py: Python<'_>, _plane: usize) -> PyResult<()> {
        Ok(())
    }

    fn prepare_cuda(&self, py: Python<'_>, stream: CudaStreamRequest) -> PyResult<()> {
        let Some((gpu, ours)) = &self.producer.gpu else { return Ok(()) };
        let theirs = match stream {
            CudaStreamRequest::NoSync => {
                lock(&self.writers).1 = true;
                return Ok(());
            }
            CudaStreamRequest::Omitted | CudaStreamRequest::LegacyDefault => cuda::LEGACY,
            CudaStreamRequest::PerThreadDefault => cuda::PER_THREAD,
            CudaStreamRequest::Pointer(p) => Foreign(p),
        };
        let ordinal = gpu.context().ordinal();
        let dev = cuda::device_of(gpu, theirs).map_err(|(f, e)| errors::driver(py, f, e))?;
        if dev != ordinal {
            return Err(errors::export(
                py,
                "stream",
                format!("the stream belongs to CUDA device {dev}, the frame to device {ordinal}"),
            ));
        }
        // The caller's work on the frame after the release waits `acquire` enqueued.
        cuda::caller_waits(gpu, ours, theirs).map_err(|(f, e)| errors::driver(py, f, e))?;
        let mut w = lock(&self.writers);
        if !w.0.contains(&theirs) {
            w.0.push(theirs);
        }
        Ok(())
    }

    fn cai_stream(&self, _py: Python<'_>) -> PyResult<Option<usize>> {
        let Some((_, ours)) = &self.producer.gpu else { return Ok(None) };
        lock(&self.writers).1 = true;
        let raw = ours.cu_stream() as usize;
        Ok(Some(if raw == 0 { 1 } else { raw }))
    }

    fn keep(self: Arc<Self>) -> Box<dyn Send + Sync> {
        Box::new(self)
    }
}

/// The producing side of a stream: acquire a frame, write it (from numpy; a CUDA producer also
/// from CUDA arrays, on its stream), present it; or `send` an array in one call.
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
        // The copies in flight read their sources until they ran.
        self.core.reap(true);
        let attacher = lock(&self.core.attacher).take();
        drop(producer);
        drop(attacher);
    }

    fn acquire_core(&self, py: Python<'_>) -> PyResult<Arc<PFrameCore>> {
        let core = self.core.clone();
        let got = py.detach(move || {
            let mut g = lock(&core.state);
            let Some(p) = g.as_mut() else { return Ok(None) };
            let f = p.acquire()?;
            let base = match &core.planes {
                Ok(_) if core.gpu.is_some() => p.cuda_buffer(&f)?.device_address(),
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
                    writers: Mutex::new((Vec::new(), false)),
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
    /// are `uint8` numpy arrays or, for a CUDA producer, CUDA arrays of the producer's device
    /// (`__dlpack__`, imported on the producer's stream, or `__cuda_array_interface__`),
    /// copied on the producer's stream; they are checked before a frame is taken
    /// (`InvalidArgument` naming the argument).
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
        if let Some(h) = &user_header {
            check_header(py, h)?;
        }
        self.core.reap(false);
        let writes =
            write::sources(py, &self.core.layout.format, planes, array, luma, chroma, &self.core.target())?;
        let frame = self.acquire_core(py)?;
        let done = (|| {
            self.core.copy_into(py, &frame, planes, writes)?;
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
        let Some(attacher) = lock(&self.core.attacher).clone() else {
            return Err(errors::closed(py, "producer"));
        };
        let c = attacher.attach(d).map_err(|e| errors::to_py(py, e))?;
        Ok(PyConsumer {
            core: ConsumerCore::new(c, self.core.shared.clone(), attached_at, Some(attacher), gpu),
            timeout: self.core.timeout,
        })
    }

    /// The seats for consumers in other processes (`ConsumerDesc(endpoint=...)`), in the
    /// stream's order: who is attached and what each seat went through (`StreamClosed` once
    /// the producer was closed).
    #[getter]
    fn remote_seats(&self, py: Python<'_>) -> PyResult<Vec<PyRemoteSeat>> {
        let a = lock(&self.core.attacher).clone().ok_or_else(|| errors::closed(py, "producer"))?;
        Ok(py.detach(|| a.remote_seats()).into_iter().map(PyRemoteSeat::from).collect())
    }

    /// The counters of consumer `consumer` (its index in the stream, in this process or
    /// another): `delivered` (frames it acquired; for a consumer in another process, frames
    /// sent to it), `skipped` and `last_sequence`; `None` for an index the stream does not
    /// have; `StreamClosed` once the producer was closed.
    fn consumer_stats<'py>(&self, py: Python<'py>, consumer: usize) -> PyResult<Option<Bound<'py, PyDict>>> {
        let a = lock(&self.core.attacher).clone().ok_or_else(|| errors::closed(py, "producer"))?;
        let Some(s) = py.detach(|| a.consumer_stats(consumer)) else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("delivered", s.delivered)?;
        d.set_item("skipped", s.skipped)?;
        d.set_item("last_sequence", s.last_sequence)?;
        Ok(Some(d))
    }

    /// `"cpu"` or `"cuda"`.
    #[getter]
    fn engine(&self) -> &'static str {
        if self.core.gpu.is_some() {
            "cuda"
        } else {
            "cpu"
        }
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
        Ok(PyPlane { source: self.core.clone(), index: i, geom: planes[i].clone(), pin: None })
    }
}

#[pymethods]
impl PyProducerFrame {
    /// Writes `array` (or NV12's `luma` and `chroma`) into the frame: `uint8` arrays of the
    /// frame's shape, numpy or (a CUDA producer) CUDA arrays as for `Producer.send`
    /// (`InvalidArgument` naming the argument otherwise).
    #[pyo3(signature = (array=None, *, luma=None, chroma=None))]
    fn write(
        &self,
        py: Python<'_>,
        array: Option<Bound<'_, PyAny>>,
        luma: Option<Bound<'_, PyAny>>,
        chroma: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let planes = self.planes(py)?;
        let p = &self.core.producer;
        p.reap(false);
        let writes = write::sources(py, &p.layout.format, planes, array, luma, chroma, &p.target())?;
        p.copy_into(py, &self.core, planes, writes)
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
            .map(|(i, g)| PyPlane { source: self.core.clone(), index: i, geom: g.clone(), pin: None })
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

/// A seat for a consumer in another process, as the producer sees it (`Producer.remote_seats`).
#[pyclass(module = "nvsci", name = "RemoteSeat", frozen, get_all)]
pub(crate) struct PyRemoteSeat {
    /// The seat's consumer index in the stream.
    consumer: usize,
    /// The producer's endpoint of the seat.
    endpoint: String,
    /// Whether a consumer is attached now.
    attached: bool,
    /// Consumers attached to it so far.
    attaches: u64,
    /// Attaches refused.
    refused: u64,
    /// What did not fit in the last refused attach (as `AttachRefused.field`), or `None`.
    last_refusal: Option<&'static str>,
    /// Consumers that left it.
    left: u64,
    /// Consumers it lost (their process died).
    lost: u64,
}

impl From<RemoteSeat> for PyRemoteSeat {
    fn from(s: RemoteSeat) -> Self {
        Self {
            consumer: s.consumer,
            endpoint: s.endpoint,
            attached: s.attached,
            attaches: s.attaches,
            refused: s.refused,
            last_refusal: s.last_refusal.map(errors::field_name),
            left: s.left,
            lost: s.lost,
        }
    }
}

#[pymethods]
impl PyRemoteSeat {
    fn __repr__(&self) -> String {
        format!(
            "RemoteSeat(consumer={}, endpoint={:?}, attached={}, attaches={}, refused={}, last_refusal={:?}, left={}, lost={})",
            self.consumer, self.endpoint, self.attached, self.attaches, self.refused, self.last_refusal, self.left, self.lost
        )
    }
}
