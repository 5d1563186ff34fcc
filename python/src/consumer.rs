//! The consuming side: `Consumer` (iteration, counters, close) and the frames it hands out,
//! each a context manager that releases the frame on exit.

use crate::cuda::{self, Foreign};
use crate::errors;
use crate::plane::{self, Device, Geometry, PlaneSource, PyPlane};
use crate::stream::StreamShared;
use dlpark::python::CudaStreamRequest;
use nvsci::cuda::cudarc::driver::CudaStream;
use nvsci::cuda::CudaGpu;
use nvsci::pipeline::{Attacher, Consumer, ConsumerFrame, FrameLayout, QueueMode};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A consumer and what its frames share.
pub(crate) struct ConsumerCore {
    /// The consumer; `None` once closed and dropped.
    state: Mutex<Option<Consumer>>,
    closed: AtomicBool,
    /// The frames handed out and maybe still held.
    held: Mutex<Vec<Weak<FrameCore>>>,
    stream: Arc<StreamShared>,
    /// Frames the producer had presented when this consumer attached.
    attached_at: u64,
    /// Keeps the stream's buffers mapped while a plane of a frame lives (a consumer in the
    /// producer's process; `None` for a consumer connected from another process, whose
    /// consumer holds them).
    keep: Mutex<Option<Attacher>>,
    /// Whether the consumer's mappings are its own (a CUDA consumer, or one connected from
    /// another process), not the stream's.
    own_mappings: bool,
    /// One count per plane object and DLPack export of its frames (and one of its own): what
    /// may still read the frames' memory after their release.
    pins: Arc<()>,
    /// A CUDA consumer's device and stream.
    gpu: Option<(CudaGpu, Arc<CudaStream>)>,
    layout: FrameLayout,
    planes: Result<Vec<Geometry>, String>,
    id: usize,
    mode: QueueMode,
}

impl ConsumerCore {
    pub(crate) fn new(
        consumer: Consumer,
        stream: Arc<StreamShared>,
        attached_at: u64,
        keep: Option<Attacher>,
        gpu: Option<CudaGpu>,
    ) -> Arc<Self> {
        let layout = consumer.layout().clone();
        let planes = plane::planes(&layout).and_then(|p| {
            if p.iter().all(|g| plane::fits(g, layout.size)) {
                Ok(p)
            } else {
                Err("a plane of the layout reaches past the frame".to_owned())
            }
        });
        let gpu = match (gpu, consumer.stream()) {
            (Some(g), Some(s)) => Some((g, s.clone())),
            _ => None,
        };
        Arc::new(Self {
            id: consumer.ring_index(),
            mode: consumer.mode(),
            state: Mutex::new(Some(consumer)),
            closed: AtomicBool::new(false),
            held: Mutex::new(Vec::new()),
            stream,
            attached_at,
            own_mappings: gpu.is_some() || keep.is_none(),
            pins: Arc::new(()),
            keep: Mutex::new(keep),
            gpu,
            layout,
            planes,
        })
    }

    /// Frames queued for this consumer that it has not taken, once the producer ended the
    /// stream (exact then: no present can race with it).
    fn pending_after_end(&self, c: &Consumer) -> u64 {
        let presented = self.stream.presented.load(Ordering::SeqCst);
        let s = c.stats();
        presented.saturating_sub(self.attached_at).saturating_sub(s.delivered).saturating_sub(s.skipped)
    }

    /// Acquires the next frame; `Ok(None)` once the producer ended the stream and every frame
    /// queued for this consumer was taken.
    fn next(self: &Arc<Self>) -> Result<Option<Arc<FrameCore>>, Taken> {
        let mut guard = lock(&self.state);
        let c = guard.as_mut().ok_or(Taken::Closed)?;
        loop {
            let ended = self.stream.ended.load(Ordering::SeqCst);
            if ended && self.pending_after_end(c) == 0 {
                return Ok(None);
            }
            match c.acquire() {
                Ok(f) => return self.wrap(c, f).map(Some),
                Err(e) if errors::is_ended(&e) => return Ok(None),
                Err(e) if errors::is_frame_timeout(&e) && self.stream.ended.load(Ordering::SeqCst) => {
                    continue
                }
                Err(e) => return Err(Taken::Failed(e)),
            }
        }
    }

    fn wrap(self: &Arc<Self>, c: &mut Consumer, f: ConsumerFrame) -> Result<Arc<FrameCore>, Taken> {
        let base = match &self.planes {
            Err(_) => Ok(0),
            Ok(_) if self.gpu.is_some() => c.cuda_buffer(&f).map(|b| b.device_address()),
            Ok(_) => c.cpu_read(&f).map(|r| r.as_ptr() as u64),
        };
        let base = match base {
            Ok(b) => b,
            Err(e) => {
                // Not readable: hand it back at once.
                let released = c.release(f);
                drop(released);
                return Err(Taken::Failed(e));
            }
        };
        let core = Arc::new(FrameCore {
            sequence: f.sequence(),
            index: f.index(),
            capture_time: f.capture_time(),
            user_header: *f.user_header(),
            token: Mutex::new(Some(f)),
            consumer: self.clone(),
            base,
            exports: Mutex::new(Exports::default()),
        });
        let mut held = lock(&self.held);
        held.retain(|w| w.strong_count() > 0);
        held.push(Arc::downgrade(&core));
        Ok(core)
    }

    /// Releases `frame` (held by this consumer), its release ordered after the caller's
    /// streams. `Ok(false)`: it was released already.
    fn release(&self, frame: &FrameCore, stream: Option<Foreign>) -> Result<bool, Released> {
        let mut guard = lock(&self.state);
        let Some(c) = guard.as_mut() else {
            return Ok(false);
        };
        self.release_with(c, frame, stream)
    }

    fn release_with(
        &self,
        c: &mut Consumer,
        frame: &FrameCore,
        stream: Option<Foreign>,
    ) -> Result<bool, Released> {
        let Some(token) = lock(&frame.token).take() else {
            return Ok(false);
        };
        let ordered = self.order_release(frame, stream);
        let released = c.release(token);
        ordered.map_err(Released::Cuda)?;
        released.map_err(Released::Nvsci)?;
        Ok(true)
    }

    /// Orders a CUDA frame's release after every stream that read it: those its DLPack
    /// exports named and `stream`; with readers on streams nobody named, after all the
    /// device's work.
    fn order_release(&self, frame: &FrameCore, stream: Option<Foreign>) -> Result<(), cuda::Failed> {
        let Some((gpu, ours)) = &self.gpu else { return Ok(()) };
        let ex = lock(&frame.exports);
        let mut streams = ex.streams.clone();
        if let Some(s) = stream {
            if !streams.contains(&s) {
                streams.push(s);
            }
        }
        if ex.unknown && stream.is_none() {
            return cuda::synchronize(gpu);
        }
        for s in streams {
            cuda::consumer_waits(gpu, ours, s)?;
        }
        Ok(())
    }

    /// Releases every held frame, then drops the consumer (detaching it), unless a plane, an
    /// array or a DLPack export of one of its frames may still read mappings of its own (a
    /// CUDA consumer's, or those of a consumer connected from another process): it then goes
    /// with the last of them.
    fn close(self: &Arc<Self>) -> Vec<Released> {
        self.closed.store(true, Ordering::SeqCst);
        let mut errors = Vec::new();
        let mut guard = lock(&self.state);
        if let Some(c) = guard.as_mut() {
            let held: Vec<_> = lock(&self.held).drain(..).filter_map(|w| w.upgrade()).collect();
            for f in held {
                if let Err(e) = self.release_with(c, &f, None) {
                    errors.push(e);
                }
            }
        }
        // A CPU consumer's frames in the producer's process are the stream's (kept mapped by
        // `_keep`); a CUDA consumer's mappings, and the imports of a consumer connected from
        // another process, are its own: keep them while a plane or an export may read them
        // (the consumer is then dropped, and detached, with the last of them).
        // Nothing of a frame is left to read (no plane, array or export of one): the consumer
        // and the stream's buffers are no longer needed here.
        let unread = Arc::strong_count(&self.pins) > 1;
        if !(self.own_mappings && unread) {
            guard.take();
        }
        if !unread {
            lock(&self.keep).take();
        }
        errors
    }
}

impl Drop for ConsumerCore {
    fn drop(&mut self) {
        // Frames are released before their consumer goes (each frame holds the core).
        self.state.get_mut().map(|s| s.take()).ok();
    }
}

/// Why `next` gave no frame.
enum Taken {
    Closed,
    Failed(nvsci::Error),
}

/// Why a release failed (the frame is handed back all the same).
pub(crate) enum Released {
    Cuda(cuda::Failed),
    Nvsci(nvsci::Error),
}

impl Released {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Released::Cuda((f, e)) => errors::driver(py, f, e),
            Released::Nvsci(e) => errors::to_py(py, e),
        }
    }
}

/// A frame's DLPack exports.
#[derive(Default)]
struct Exports {
    /// Planes exported (one bit each).
    planes: u32,
    /// The caller streams the exports named.
    streams: Vec<Foreign>,
    /// Whether a reader's stream is unknown (`__cuda_array_interface__`, or DLPack's -1).
    unknown: bool,
}

/// A held frame and what its planes need; kept alive by the Python frame and by every plane
/// and export of it.
pub(crate) struct FrameCore {
    token: Mutex<Option<ConsumerFrame>>,
    consumer: Arc<ConsumerCore>,
    base: u64,
    exports: Mutex<Exports>,
    sequence: u64,
    index: usize,
    capture_time: u64,
    user_header: [u8; nvsci::pipeline::USER_HEADER_SIZE],
}

impl FrameCore {
    fn live(&self) -> bool {
        lock(&self.token).is_some()
    }

    /// The layout of the frame.
    pub(crate) fn layout(&self) -> &FrameLayout {
        &self.consumer.layout
    }

    /// A CUDA consumer's device and stream (`None`: a CPU consumer).
    pub(crate) fn gpu(&self) -> Option<(&CudaGpu, &Arc<CudaStream>)> {
        self.consumer.gpu.as_ref().map(|(g, s)| (g, s))
    }

    /// The frame's first byte (a host pointer, or a device address in the consumer's
    /// context), while it is held; `FrameReleased` naming `what` once it is not.
    pub(crate) fn held_base(&self, py: Python<'_>, what: &str) -> PyResult<u64> {
        if !self.live() {
            return Err(errors::released(py, what));
        }
        Ok(self.base)
    }

    /// Orders a CUDA frame's present fence (waited on the consumer's stream) before the work
    /// enqueued on `theirs` from now on, and the frame's release after the work on `theirs`.
    /// A CPU frame needs nothing.
    pub(crate) fn order_for(&self, theirs: Foreign) -> Result<(), cuda::Failed> {
        let Some((gpu, ours)) = &self.consumer.gpu else { return Ok(()) };
        cuda::caller_waits(gpu, ours, theirs)?;
        let mut ex = lock(&self.exports);
        if !ex.streams.contains(&theirs) {
            ex.streams.push(theirs);
        }
        Ok(())
    }
}

impl PlaneSource for FrameCore {
    fn base(&self, py: Python<'_>, what: &str) -> PyResult<(u64, Device)> {
        if !self.live() {
            return Err(errors::released(py, what));
        }
        if let Err(why) = &self.consumer.planes {
            return Err(errors::invalid(py, "frame", why.clone()));
        }
        let dev = match &self.consumer.gpu {
            Some((g, _)) => Device::Cuda(g.context().ordinal()),
            None => Device::Cpu,
        };
        Ok((self.base, dev))
    }

    fn writable(&self) -> bool {
        false
    }

    fn mark_dlpack(&self, py: Python<'_>, plane: usize) -> PyResult<()> {
        let mut ex = lock(&self.exports);
        if ex.planes & (1 << plane) != 0 {
            return Err(errors::export(
                py,
                "plane",
                format!("plane {plane} of frame {} was exported through DLPack already", self.sequence),
            ));
        }
        ex.planes |= 1 << plane;
        Ok(())
    }

    fn prepare_cuda(&self, py: Python<'_>, stream: CudaStreamRequest) -> PyResult<()> {
        let Some((gpu, _)) = &self.consumer.gpu else { return Ok(()) };
        let theirs = match stream {
            CudaStreamRequest::NoSync => {
                lock(&self.exports).unknown = true;
                return Ok(());
            }
            CudaStreamRequest::Omitted | CudaStreamRequest::LegacyDefault => cuda::LEGACY,
            CudaStreamRequest::PerThreadDefault => cuda::PER_THREAD,
            CudaStreamRequest::Pointer(p) => Foreign(p),
        };
        let ours_ordinal = gpu.context().ordinal();
        let dev = cuda::device_of(gpu, theirs).map_err(|(f, e)| errors::driver(py, f, e))?;
        if dev != ours_ordinal {
            lock(&self.exports).planes = 0;
            return Err(errors::export(
                py,
                "stream",
                format!("the stream belongs to CUDA device {dev}, the frame to device {ours_ordinal}"),
            ));
        }
        self.order_for(theirs).map_err(|(f, e)| errors::driver(py, f, e))
    }

    fn cai_stream(&self, _py: Python<'_>) -> PyResult<Option<usize>> {
        let Some((_, ours)) = &self.consumer.gpu else { return Ok(None) };
        lock(&self.exports).unknown = true;
        // The null stream is the legacy default stream, which the interface names 1 (0 is
        // not allowed).
        let raw = ours.cu_stream() as usize;
        Ok(Some(if raw == 0 { 1 } else { raw }))
    }

    fn keep(self: Arc<Self>) -> Box<dyn Send + Sync> {
        let pin = self.consumer.pins.clone();
        Box::new((self, pin))
    }
}

/// A consumer of a stream: iterate it for frames (`for frame in consumer:`), each a context
/// manager that releases the frame on exit.
#[pyclass(module = "nvsci", name = "Consumer", frozen)]
pub(crate) struct PyConsumer {
    pub(crate) core: Arc<ConsumerCore>,
    pub(crate) timeout: Duration,
}

impl PyConsumer {
    fn open(&self, py: Python<'_>) -> PyResult<()> {
        if self.core.closed.load(Ordering::SeqCst) {
            return Err(errors::closed(py, "consumer"));
        }
        Ok(())
    }

    fn take(&self, py: Python<'_>) -> PyResult<Option<PyFrame>> {
        self.open(py)?;
        let core = self.core.clone();
        match py.detach(move || core.next()) {
            Ok(Some(f)) => Ok(Some(PyFrame { core: f })),
            Ok(None) => Ok(None),
            Err(Taken::Closed) => Err(errors::closed(py, "consumer")),
            Err(Taken::Failed(e)) => Err(errors::to_py(py, e)),
        }
    }
}

#[pymethods]
impl PyConsumer {
    /// Attaches to a stream whose producer runs in another process, through `endpoint` (the
    /// consumer's end of an NvSciIpc channel; the mock's are configured in
    /// `$NVSCI_MOCK_IPC_DIR/nvsciipc.cfg`): a seat the producer declared for it
    /// (`ConsumerDesc(endpoint=...)`), vacant. `format` must be the stream's and `desc`'s
    /// engine the seat's; its mode and limit are this consumer's own. Waits up to `timeout`
    /// seconds for the producer, which is also the consumer's timeout afterwards. Frames come
    /// from the producer's next present on; iteration ends when the producer ends the stream.
    /// A refusal is `AttachRefused` (its `field` names what did not fit), a producer that never
    /// answers `IpcTimeout`, an endpoint that cannot be opened `EndpointError`.
    #[staticmethod]
    #[pyo3(signature = (backend, endpoint, format, desc=None, *, timeout=5.0))]
    fn connect(
        py: Python<'_>,
        backend: PyRef<'_, crate::stream::PyBackend>,
        endpoint: &str,
        format: PyRef<'_, crate::stream::PyFrameFormat>,
        desc: Option<PyRef<'_, crate::stream::PyConsumerDesc>>,
        timeout: f64,
    ) -> PyResult<Self> {
        let timeout = Duration::try_from_secs_f64(timeout)
            .map_err(|_| errors::invalid(py, "timeout", format!("{timeout} s: not a duration")))?;
        let b = backend.backend();
        let desc = match desc {
            Some(d) if d.endpoint.is_some() => {
                return Err(errors::invalid(
                    py,
                    "desc",
                    "a description with an endpoint: the endpoint is connect's own argument",
                ))
            }
            Some(d) => d.resolve(py, b)?,
            None => nvsci::pipeline::ConsumerDesc::cpu(),
        };
        let gpu = if desc.engine.is_cpu() { None } else { b.cuda().cloned() };
        let ep = crate::stream::open_endpoint(py, b, &mut None, endpoint)?;
        let lib = b.nvsci().cloned().expect("open_endpoint checked the backend has an NvSci library");
        let format = format.0;
        let c = py
            .detach(move || Consumer::connect_with(&lib, ep, format, desc, timeout))
            .map_err(|e| errors::to_py(py, e))?;
        Ok(Self { core: ConsumerCore::new(c, Arc::new(StreamShared::default()), 0, None, gpu), timeout })
    }

    /// The next frame (waiting up to the stream's timeout); `None` once the producer ended
    /// the stream and every frame queued for this consumer was taken.
    fn acquire(&self, py: Python<'_>) -> PyResult<Option<PyFrame>> {
        self.take(py)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyFrame>> {
        self.take(py)
    }

    /// Releases every frame this consumer holds and detaches it from the stream (a CUDA
    /// consumer, or one connected from another process, once no plane, array or DLPack
    /// export of its frames is left). Frames and planes used afterwards raise
    /// `FrameReleased`, the consumer `StreamClosed`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let errs = self.core.close();
        match errs.into_iter().next() {
            Some(e) => Err(e.into_py(py)),
            None => Ok(()),
        }
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.core.closed.load(Ordering::SeqCst)
    }

    /// This consumer's index in the stream.
    #[getter]
    fn id(&self) -> usize {
        self.core.id
    }

    /// `"fifo"` or `"mailbox"`.
    #[getter]
    fn mode(&self) -> &'static str {
        crate::stream::mode_name(self.core.mode)
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

    /// Frames this consumer acquired.
    #[getter]
    fn delivered(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.stats(py)?.delivered)
    }

    /// Frames presented while it was attached that it never got (replaced in its mailbox, or
    /// refused by its limit).
    #[getter]
    fn skipped(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.stats(py)?.skipped)
    }

    /// The sequence of the last frame it acquired (`None` before the first).
    #[getter]
    fn last_sequence(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        Ok(self.stats(py)?.last_sequence)
    }

    /// The stream's timeout in seconds.
    #[getter]
    fn timeout(&self) -> f64 {
        self.timeout.as_secs_f64()
    }

    /// The frame format, as `FrameFormat`.
    #[getter]
    fn format(&self) -> crate::stream::PyFrameFormat {
        crate::stream::PyFrameFormat(self.core.layout.format)
    }

    fn __repr__(&self) -> String {
        format!(
            "<nvsci.Consumer {} {} {}{}>",
            self.core.id,
            self.engine(),
            self.mode(),
            if self.closed() { " closed" } else { "" }
        )
    }
}

impl PyConsumer {
    fn stats(&self, py: Python<'_>) -> PyResult<nvsci::pipeline::ConsumerStats> {
        let guard = lock(&self.core.state);
        match guard.as_ref() {
            Some(c) if !self.closed() => Ok(c.stats()),
            _ => Err(errors::closed(py, "consumer")),
        }
    }
}

/// A frame a consumer holds: its planes, its metadata, and `release()`; a context manager
/// that releases it on exit. Dropped unreleased, it is released then.
#[pyclass(module = "nvsci", name = "Frame", frozen)]
pub(crate) struct PyFrame {
    core: Arc<FrameCore>,
}

impl Drop for PyFrame {
    fn drop(&mut self) {
        let Some(token) = lock(&self.core.token).take() else { return };
        // Readers on other streams first (exports, conversions): after all the device's work
        // (no stream to order on).
        if let Some((gpu, _)) = &self.core.consumer.gpu {
            let read = {
                let ex = lock(&self.core.exports);
                ex.planes != 0 || ex.unknown || !ex.streams.is_empty()
            };
            if read {
                let _ = cuda::synchronize(gpu);
            }
        }
        // The token's own drop hands the frame back (after its present fence).
        drop(token);
    }
}

impl PyFrame {
    /// The held frame and what its planes need.
    pub(crate) fn core(&self) -> &Arc<FrameCore> {
        &self.core
    }

    fn plane_at(&self, py: Python<'_>, i: usize, what: &str) -> PyResult<PyPlane> {
        self.core.base(py, what)?;
        let planes =
            self.core.consumer.planes.as_ref().map_err(|w| errors::invalid(py, "frame", w.clone()))?;
        let geom = planes
            .get(i)
            .cloned()
            .ok_or_else(|| errors::invalid(py, "index", format!("plane {i} of {}", planes.len())))?;
        Ok(PyPlane { source: self.core.clone(), index: i, geom, pin: Some(self.core.consumer.pins.clone()) })
    }

    fn named(&self, py: Python<'_>, name: &str) -> PyResult<PyPlane> {
        self.core.base(py, name)?;
        let planes =
            self.core.consumer.planes.as_ref().map_err(|w| errors::invalid(py, "frame", w.clone()))?;
        let i = planes.iter().position(|g| g.name == name).ok_or_else(|| {
            pyo3::exceptions::PyAttributeError::new_err(format!(
                "a {:?} frame has no {name} plane",
                self.core.consumer.layout.format
            ))
        })?;
        self.plane_at(py, i, name)
    }
}

#[pymethods]
impl PyFrame {
    /// Releases the frame: a CUDA frame's release is ordered after the streams its DLPack
    /// exports named and after `stream` (a `CUstream`, or an object with `__cuda_stream__`
    /// or `cuda_stream`); after all the device's work where a reader's stream is unknown
    /// (`__cuda_array_interface__`) and no `stream` is given. Raises `FrameReleased` if
    /// already released.
    #[pyo3(signature = (stream=None))]
    fn release(&self, py: Python<'_>, stream: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        let stream = match stream {
            None => None,
            Some(s) => Some(Foreign(stream_value(py, &s)?)),
        };
        if let (Some(s), Some((gpu, _))) = (stream, &self.core.consumer.gpu) {
            let dev = cuda::device_of(gpu, s).map_err(|(f, e)| errors::driver(py, f, e))?;
            if dev != gpu.context().ordinal() {
                return Err(errors::invalid(py, "stream", format!("a stream of CUDA device {dev}")));
            }
        }
        match self.core.consumer.release(&self.core, stream) {
            Ok(true) => Ok(()),
            Ok(false) => Err(errors::released(py, "release")),
            Err(e) => Err(e.into_py(py)),
        }
    }

    /// Whether the frame is still held.
    #[getter]
    fn held(&self) -> bool {
        self.core.live()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        match self.core.consumer.release(&self.core, None) {
            Ok(_) => Ok(false),
            Err(e) => Err(e.into_py(py)),
        }
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

    /// The producer's capture time, nanoseconds (CLOCK_MONOTONIC unless the producer set
    /// another).
    #[getter]
    fn capture_time(&self) -> u64 {
        self.core.capture_time
    }

    /// The user header the producer wrote (`USER_HEADER_SIZE` bytes).
    #[getter]
    fn user_header<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.core.user_header)
    }

    /// The consumer that holds it.
    #[getter]
    fn consumer(&self) -> usize {
        self.core.consumer.id
    }

    /// Every plane, in order.
    #[getter]
    fn planes(&self, py: Python<'_>) -> PyResult<Vec<PyPlane>> {
        self.core.base(py, "planes")?;
        let n = self.core.consumer.planes.as_ref().map(|p| p.len()).unwrap_or(0);
        (0..n).map(|i| self.plane_at(py, i, "planes")).collect()
    }

    /// The luma plane of an NV12 frame, (height, width).
    #[getter]
    fn luma(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "luma")
    }

    /// The chroma plane of an NV12 frame, (height / 2, width / 2, 2): U, V.
    #[getter]
    fn chroma(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "chroma")
    }

    /// The plane of an RGBA frame, (height, width, 4).
    #[getter]
    fn rgba(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "rgba")
    }

    /// The bytes of a raw frame, (size,).
    #[getter]
    fn data(&self, py: Python<'_>) -> PyResult<PyPlane> {
        self.named(py, "data")
    }

    fn __repr__(&self) -> String {
        format!(
            "<nvsci.Frame {} (slot {}, consumer {}){}>",
            self.core.sequence,
            self.core.index,
            self.core.consumer.id,
            if self.core.live() { "" } else { " released" }
        )
    }
}

/// A CUDA stream argument as an integer: an int, or an object with `__cuda_stream__` (CUDA
/// Python's protocol, a `(version, handle)` tuple or a handle) or `cuda_stream` (PyTorch).
pub(crate) fn stream_value(py: Python<'_>, s: &Bound<'_, PyAny>) -> PyResult<usize> {
    if let Ok(v) = s.extract::<usize>() {
        return Ok(v);
    }
    if let Ok(p) = s.getattr("__cuda_stream__") {
        let p = if p.is_callable() { p.call0()? } else { p };
        if let Ok((_, h)) = p.extract::<(usize, usize)>() {
            return Ok(h);
        }
        if let Ok(h) = p.extract::<usize>() {
            return Ok(h);
        }
    }
    if let Ok(h) = s.getattr("cuda_stream").and_then(|h| h.extract::<usize>()) {
        return Ok(h);
    }
    Err(errors::invalid(
        py,
        "stream",
        "a CUstream as an int, or an object with __cuda_stream__ or cuda_stream",
    ))
}
