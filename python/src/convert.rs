//! `nv12_to_rgba`: the crate's NV12 -> RGBA conversion (`nvsci::convert`, BT.601 studio
//! range, integer arithmetic) on a held frame in place, or on an NV12 image array, into a
//! caller's array. On a CUDA frame or array it is the crate's kernel
//! (`nvsci::convert::Nv12ToRgba`, the one a Rust CUDA consumer launches), enqueued on the
//! caller's stream with the array API's stream semantics; on host memory, its CPU twin.

use crate::array::{self, Array, Dtype, Place};
use crate::consumer::{lock, stream_value, FrameCore, PyFrame};
use crate::cuda::{self, Foreign, Recorded};
use crate::errors;
use crate::write::Keep;
use nvsci::buf::ImageLayout;
use nvsci::convert::Nv12ToRgba;
use nvsci::cuda::cudarc::driver::{CudaSlice, DevicePtr};
use nvsci::cuda::CudaGpu;
use nvsci::pipeline::{FrameFormat, FrameLayout};
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};

/// The kernels loaded into one CUDA context, and the counter the kernel adds a frame's
/// R + G + B to when the caller asks for no sum.
struct Loaded {
    /// The context (`CUcontext`) they were loaded into.
    ctx: usize,
    kernel: Nv12ToRgba,
    /// Never freed (the kernel may add to it at any time); its value is never read.
    #[allow(dead_code)]
    scratch: CudaSlice<u64>,
    scratch_ptr: u64,
}

/// The kernels of each context used so far (a handful: one per device in practice).
static LOADED: Mutex<Vec<Arc<Loaded>>> = Mutex::new(Vec::new());
/// The primary contexts of the devices whose arrays were converted (arrays carry no context).
static PRIMARY: Mutex<Vec<CudaGpu>> = Mutex::new(Vec::new());
/// Conversions enqueued and the arrays they read or write, kept until they ran.
static PENDING: Mutex<Vec<(Recorded, CudaGpu, Vec<Keep>)>> = Mutex::new(Vec::new());

/// The kernels loaded into `gpu`'s context (loaded at the first conversion there).
fn loaded(py: Python<'_>, gpu: &CudaGpu) -> PyResult<Arc<Loaded>> {
    let ctx = gpu.context().cu_ctx() as usize;
    let mut all = lock(&LOADED);
    if let Some(l) = all.iter().find(|l| l.ctx == ctx) {
        return Ok(l.clone());
    }
    let kernel = Nv12ToRgba::load(gpu).map_err(|e| errors::to_py(py, e))?;
    let stream = gpu.default_stream();
    let scratch = stream.alloc_zeros::<u64>(1).map_err(|e| errors::driver(py, "cuMemAllocAsync", e))?;
    let scratch_ptr = {
        let (p, _sync) = scratch.device_ptr(&stream);
        p
    };
    stream.synchronize().map_err(|e| errors::driver(py, "cuStreamSynchronize", e))?;
    let l = Arc::new(Loaded { ctx, kernel, scratch, scratch_ptr });
    all.push(l.clone());
    Ok(l)
}

/// Device `ordinal`'s primary context (the one PyTorch and CuPy use).
fn primary(py: Python<'_>, ordinal: usize) -> PyResult<CudaGpu> {
    let mut all = lock(&PRIMARY);
    if let Some(g) = all.iter().find(|g| g.context().ordinal() == ordinal) {
        return Ok(g.clone());
    }
    let g = CudaGpu::open(ordinal).map_err(|e| errors::to_py(py, e))?;
    all.push(g.clone());
    Ok(g)
}

/// Drops the arrays of the conversions that ran (with `wait`, of all of them, waiting).
pub(crate) fn reap(wait: bool) {
    let mut pending = lock(&PENDING);
    if wait {
        for (ev, gpu, _) in pending.iter() {
            ev.wait(gpu);
        }
        pending.clear();
    } else {
        // Oldest first, up to the first still running: a call costs a query or two, not one
        // per conversion in flight (a later one that finished first waits for the next call).
        let done = pending.iter().take_while(|(ev, gpu, _)| ev.done(gpu)).count();
        pending.drain(..done);
    }
}

/// Keeps `keep` alive until the work enqueued on `stream` so far ran.
fn keep_until_done(gpu: &CudaGpu, stream: Foreign, keep: Vec<Keep>) -> Result<(), cuda::Failed> {
    // SAFETY: `stream` is a live stream of `gpu`'s device (checked by `caller_stream`), used
    // only for this record; the wrapper does not destroy it.
    let s = unsafe { gpu.context().wrap_borrowed_stream(stream.raw()) };
    match Recorded::after(gpu, &s) {
        Ok(ev) => {
            lock(&PENDING).push((ev, gpu.clone(), keep));
            Ok(())
        }
        Err(e) => {
            // No event to tell when the work ran: wait for it now.
            let _ = s.synchronize();
            drop(keep);
            Err(e)
        }
    }
}

/// The caller's stream: `None` is the legacy default stream (DLPack's convention), as is 0
/// (PyTorch's `cuda_stream` of its default stream); it must belong to `gpu`'s device.
fn caller_stream(py: Python<'_>, gpu: &CudaGpu, stream: Option<&Bound<'_, PyAny>>) -> PyResult<Foreign> {
    let s = match stream {
        None => cuda::LEGACY,
        Some(s) => match stream_value(py, s)? {
            0 => cuda::LEGACY,
            v => Foreign(v),
        },
    };
    let dev = cuda::device_of(gpu, s).map_err(|(f, e)| errors::driver(py, f, e))?;
    let ours = gpu.context().ordinal();
    if dev != ours {
        return Err(errors::invalid(
            py,
            "stream",
            format!("a stream of CUDA device {dev}; the conversion runs on device {ours}"),
        ));
    }
    Ok(s)
}

/// Width and height of an NV12 pitch-linear `format` (`InvalidArgument` naming `src`).
fn nv12_size(py: Python<'_>, format: &FrameFormat) -> PyResult<(usize, usize)> {
    match *format {
        FrameFormat::Nv12 { width, height, layout: ImageLayout::PitchLinear } => {
            format.validate().map_err(|e| errors::invalid(py, "src", e.to_string()))?;
            Ok((width as usize, height as usize))
        }
        FrameFormat::Nv12 { .. } => Err(errors::invalid(
            py,
            "src",
            "a block-linear NV12 frame: its bytes are tiled, and the conversion reads rows",
        )),
        other => Err(errors::invalid(py, "src", format!("a {other:?} frame; the conversion reads NV12"))),
    }
}

/// Checks `out`: `(height, width, 4)` `uint8`, rows packed (C-contiguous), writable.
fn check_out(py: Python<'_>, out: &Array, w: usize, h: usize) -> PyResult<()> {
    if out.dtype != Dtype::U8 {
        return Err(errors::invalid(py, "out", format!("dtype {}; uint8 is needed", out.dtype)));
    }
    if out.shape != [h, w, 4] {
        return Err(errors::invalid(py, "out", format!("shape {:?}; ({h}, {w}, 4) is needed", out.shape)));
    }
    if !out.rows_contiguous() || out.pitch() != Some(w * 4) {
        return Err(errors::invalid(
            py,
            "out",
            format!(
                "strides {:?} (bytes); the conversion writes packed rows: ({}, 4, 1)",
                out.strides,
                w * 4
            ),
        ));
    }
    if out.readonly {
        return Err(errors::invalid(py, "out", "read-only"));
    }
    Ok(())
}

/// Checks `sum`: one `uint64` or `int64` element, writable, 8-byte aligned.
fn check_sum(py: Python<'_>, sum: &Array) -> PyResult<()> {
    if !matches!(sum.dtype, Dtype::U64 | Dtype::I64) {
        return Err(errors::invalid(py, "sum", format!("dtype {}; uint64 or int64 is needed", sum.dtype)));
    }
    if sum.shape.iter().product::<usize>() != 1 || sum.shape.len() > 1 {
        return Err(errors::invalid(
            py,
            "sum",
            format!("shape {:?}; one element, () or (1,), is needed", sum.shape),
        ));
    }
    if sum.readonly {
        return Err(errors::invalid(py, "sum", "read-only"));
    }
    if !sum.ptr.is_multiple_of(8) {
        return Err(errors::invalid(py, "sum", format!("address {:#x} is not 8-byte aligned", sum.ptr)));
    }
    Ok(())
}

/// The layout of an NV12 image array: `(height * 3 / 2, width)` `uint8`, luma rows then
/// chroma rows, each row contiguous, rows `pitch` bytes apart.
fn array_layout(py: Python<'_>, a: &Array) -> PyResult<(FrameLayout, usize)> {
    let bad = |why: String| errors::invalid(py, "src", why);
    if a.dtype != Dtype::U8 {
        return Err(bad(format!("dtype {}; uint8 is needed", a.dtype)));
    }
    let [rows, w] = a.shape[..] else {
        return Err(bad(format!(
            "shape {:?}; an NV12 image is (height * 3 / 2, width): luma rows, then chroma rows",
            a.shape
        )));
    };
    if rows == 0 || !rows.is_multiple_of(3) {
        return Err(bad(format!("{rows} rows; an NV12 image has height * 3 / 2 rows (height even)")));
    }
    let h = rows / 3 * 2;
    let pitch = match (a.rows_contiguous(), a.pitch()) {
        (true, Some(p)) => p,
        _ => {
            return Err(bad(format!(
                "strides {:?} (bytes): each row must be contiguous, rows at least a row apart",
                a.strides
            )))
        }
    };
    let too_big = || bad(format!("shape {:?} with a row pitch of {pitch} bytes is too large", a.shape));
    let format =
        FrameFormat::nv12(u32::try_from(w).map_err(|_| too_big())?, u32::try_from(h).map_err(|_| too_big())?);
    format.validate().map_err(|_| bad(format!("{w}x{h}: NV12 needs an even width (4:2:0 chroma)")))?;
    let mut layout = FrameLayout::packed(format, 1, 1).map_err(|e| errors::to_py(py, e))?;
    let pitch32 = u32::try_from(pitch).map_err(|_| too_big())?;
    let span = pitch.checked_mul(rows - 1).and_then(|v| v.checked_add(w)).ok_or_else(too_big)?;
    layout.planes[0].pitch = pitch32;
    layout.planes[1].pitch = pitch32;
    layout.planes[1].offset = (pitch * h) as u64;
    layout.size = span as u64;
    Ok((layout, span))
}

const HOST_ONLY_FRAME: &str = "a CPU frame converts on the CPU into host memory (a numpy array)";
const CUDA_ONLY_FRAME: &str =
    "a CUDA frame converts on its device into a CUDA array of it (__dlpack__ or __cuda_array_interface__: torch, CuPy)";
const HOST_ONLY_ARRAY: &str = "a host image converts on the CPU into host memory (a numpy array)";
const CUDA_ONLY_ARRAY: &str =
    "a CUDA image converts on its device into a CUDA array of it (__dlpack__ or __cuda_array_interface__: torch, CuPy)";

/// Describes `out` and `sum` for a conversion of a `w` x `h` image, checked.
fn outputs<'py>(
    py: Python<'py>,
    out: &Bound<'py, PyAny>,
    sum: Option<&Bound<'py, PyAny>>,
    cuda: Option<(&CudaGpu, Foreign)>,
    (host_only, cuda_only): (&str, &str),
    (w, h): (usize, usize),
) -> PyResult<(Array, Option<Array>)> {
    let how = array::protocol(py, out)?.ok_or_else(|| array::not_an_array(py, "out", out))?;
    let out = array::describe(py, "out", out, how, cuda, host_only, cuda_only)?;
    check_out(py, &out, w, h)?;
    let sum = match sum {
        None => None,
        Some(s) => {
            let how = array::protocol(py, s)?.ok_or_else(|| array::not_an_array(py, "sum", s))?;
            let s = array::describe(py, "sum", s, how, cuda, host_only, cuda_only)?;
            check_sum(py, &s)?;
            Some(s)
        }
    };
    Ok((out, sum))
}

/// Converts on the CPU: `src_len` bytes at `src` laid out as `layout` into `out`, adding
/// R + G + B to `sum`.
///
/// # Safety
/// `src` must point to `src_len` readable bytes and `out` and `sum` must describe host memory
/// (checked by `check_out` / `check_sum`), all alive and not written by anyone else for the
/// call.
unsafe fn on_cpu(
    py: Python<'_>,
    layout: &FrameLayout,
    src: u64,
    src_len: usize,
    out: &Array,
    sum: Option<&Array>,
) -> PyResult<()> {
    let n = out.shape.iter().product::<usize>();
    if src < out.ptr + n as u64 && out.ptr < src + src_len as u64 {
        return Err(errors::invalid(py, "out", "overlaps the image it converts"));
    }
    // SAFETY: the caller vouches for `src_len` readable bytes at `src`, and `out` was checked
    // to be `n` packed, writable bytes of host memory, disjoint from `src` (above); the GIL is
    // held throughout, so no Python code releases the frame or touches the arrays meanwhile.
    let (src, dst) = unsafe {
        (
            std::slice::from_raw_parts(src as *const u8, src_len),
            std::slice::from_raw_parts_mut(out.ptr as *mut u8, n),
        )
    };
    let total = nvsci::convert::nv12_to_rgba(layout, src, dst).map_err(|e| errors::to_py(py, e))?;
    if let Some(s) = sum {
        let p = s.ptr as *mut u64;
        // SAFETY: `sum` was checked to be one writable 8-byte element of host memory, aligned.
        unsafe { p.write(p.read().wrapping_add(total)) };
    }
    Ok(())
}

/// Enqueues the kernel on `stream`: the NV12 image at device address `src` laid out as
/// `layout` into `out`, its R + G + B added to `sum` (or to the context's scratch counter).
///
/// # Safety
/// `src` must hold a whole image of `layout` in `gpu`'s context and `out` and `sum` be checked
/// device memory of it (`check_out`, `check_sum`), all alive until the work enqueued on
/// `stream` ran; `stream` a live stream of `gpu`'s device.
unsafe fn on_gpu(
    py: Python<'_>,
    gpu: &CudaGpu,
    stream: Foreign,
    layout: &FrameLayout,
    src: u64,
    out: &Array,
    sum: Option<&Array>,
) -> PyResult<()> {
    let k = loaded(py, gpu)?;
    let sum = sum.map_or(k.scratch_ptr, |s| s.ptr);
    // SAFETY: the caller vouches for `stream`; the wrapper does not destroy it.
    let s = unsafe { gpu.context().wrap_borrowed_stream(stream.raw()) };
    // SAFETY: the caller vouches for `src`, `out` (width * height * 4 packed bytes) and `sum`
    // (8 aligned bytes, or the scratch counter, never freed) until the work on `stream` ran.
    unsafe { k.kernel.enqueue(&s, layout, src, out.ptr, sum) }.map_err(|e| errors::to_py(py, e))
}

fn from_frame(
    py: Python<'_>,
    frame: &FrameCore,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    sum: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let base = frame.held_base(py, "nv12_to_rgba")?;
    let layout = frame.layout();
    let size = nv12_size(py, &layout.format)?;
    let Some((gpu, _)) = frame.gpu() else {
        if stream.is_some() {
            return Err(errors::invalid(py, "stream", "a CPU frame converts on the CPU: no stream (None)"));
        }
        let (out, sum) = outputs(py, out, sum, None, (HOST_ONLY_FRAME, CUDA_ONLY_FRAME), size)?;
        let len = usize::try_from(layout.size).map_err(|_| errors::invalid(py, "src", "too large"))?;
        // SAFETY: a held CPU frame's `layout.size` bytes are mapped readable at `base` until
        // its release, which needs the GIL this call holds; `out` and `sum` were checked.
        return unsafe { on_cpu(py, layout, base, len, &out, sum.as_ref()) };
    };
    let theirs = caller_stream(py, gpu, stream)?;
    let (out, sum) = outputs(py, out, sum, Some((gpu, theirs)), (HOST_ONLY_FRAME, CUDA_ONLY_FRAME), size)?;
    frame.order_for(theirs).map_err(|(f, e)| errors::driver(py, f, e))?;
    // SAFETY: a held CUDA frame is mapped in the consumer's context (`gpu`'s) for as long as
    // its consumer lives, whose release of the frame is now ordered after the work on
    // `theirs` (and a consumer closed meanwhile is torn down once its stream's work ran);
    // `out` and `sum` were checked and are kept until the kernel ran (below).
    unsafe { on_gpu(py, gpu, theirs, layout, base, &out, sum.as_ref()) }?;
    let keep = std::iter::once(out.keep).chain(sum.map(|s| s.keep)).collect();
    keep_until_done(gpu, theirs, keep).map_err(|(f, e)| errors::driver(py, f, e))
}

fn from_array<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    out: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
    sum: Option<&Bound<'py, PyAny>>,
) -> PyResult<()> {
    let how = array::protocol(py, src)?.ok_or_else(|| {
        errors::invalid(
            py,
            "src",
            format!(
                "a {}: a consumer's Frame, or an NV12 image array ((height * 3 / 2, width) uint8: numpy, \
                 or a CUDA array with __dlpack__ or __cuda_array_interface__) is needed",
                src.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ),
        )
    })?;
    let ordinal = match how.place() {
        Place::Host => {
            if stream.is_some() {
                return Err(errors::invalid(
                    py,
                    "stream",
                    "a host image converts on the CPU: no stream (None)",
                ));
            }
            let a = array::describe(py, "src", src, how, None, HOST_ONLY_ARRAY, CUDA_ONLY_ARRAY)?;
            let (layout, span) = array_layout(py, &a)?;
            let size = nv12_size(py, &layout.format)?;
            let (out, sum) = outputs(py, out, sum, None, (HOST_ONLY_ARRAY, CUDA_ONLY_ARRAY), size)?;
            // SAFETY: `a` is host memory holding `span` bytes from `a.ptr` (its shape and
            // strides, checked by `array_layout`), kept alive by `a.keep` for the call.
            return unsafe { on_cpu(py, &layout, a.ptr, span, &out, sum.as_ref()) };
        }
        Place::Cuda(Some(o)) => o,
        Place::Cuda(None) => interface_ordinal(py, src)?,
    };
    let gpu = primary(py, ordinal)?;
    let theirs = caller_stream(py, &gpu, stream)?;
    let a = array::describe(py, "src", src, how, Some((&gpu, theirs)), HOST_ONLY_ARRAY, CUDA_ONLY_ARRAY)?;
    let (layout, _) = array_layout(py, &a)?;
    let size = nv12_size(py, &layout.format)?;
    let (out, sum) = outputs(py, out, sum, Some((&gpu, theirs)), (HOST_ONLY_ARRAY, CUDA_ONLY_ARRAY), size)?;
    // SAFETY: `a` is device memory of `gpu`'s device holding the image (checked by
    // `array_layout`); it, `out` and `sum` are kept until the kernel ran (below).
    unsafe { on_gpu(py, &gpu, theirs, &layout, a.ptr, &out, sum.as_ref()) }?;
    let keep = [a.keep, out.keep].into_iter().chain(sum.map(|s| s.keep)).collect();
    keep_until_done(&gpu, theirs, keep).map_err(|(f, e)| errors::driver(py, f, e))
}

/// The device of an array read through `__cuda_array_interface__`, from its pointer.
fn interface_ordinal(py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<usize> {
    let ptr: u64 = a
        .getattr("__cuda_array_interface__")
        .and_then(|i| i.get_item("data"))
        .and_then(|d| d.get_item(0))
        .and_then(|p| p.extract())
        .map_err(|_| errors::invalid(py, "src", "its __cuda_array_interface__ has no data pointer"))?;
    let any = primary(py, 0)?;
    cuda::device_of_pointer(&any, ptr).map_err(|(f, e)| errors::driver(py, f, e))
}

/// Converts an NV12 image to RGBA (BT.601 studio range, 8-bit integer arithmetic: the crate's
/// `nvsci::convert`) into `out`, a `(height, width, 4)` `uint8` array with packed rows
/// (C-contiguous), R, G, B, then 255.
///
/// `src` is a frame a consumer holds (NV12, pitch-linear), converted in place, or an NV12
/// image array, `(height * 3 / 2, width)` `uint8`: luma rows, then interleaved U, V rows, each
/// row contiguous. A CUDA frame or array is converted by the crate's CUDA kernel (the one a
/// Rust CUDA consumer launches) into a CUDA array of its device (`__dlpack__` or
/// `__cuda_array_interface__`: torch, CuPy), enqueued on `stream` (a `CUstream` as an int, or
/// an object with `__cuda_stream__` or `cuda_stream`; `None` or 0: the legacy default
/// stream), as `__dlpack__(stream=...)` orders a frame's export: the frame's present fence is
/// waited before the kernel and the frame's release is ordered after it; the arrays are
/// imported on `stream` (it waits for the work that made them) and kept alive until the
/// kernel ran. A CPU frame or a numpy image is converted on the CPU into a numpy array (no
/// stream). `sum`, one `uint64` or `int64` element on the same device, gets the image's
/// R + G + B added (the caller zeroes it).
///
/// Refusals are `InvalidArgument` naming the argument (`src`, `out`, `stream`, `sum`):
/// a frame that is not NV12 or is block-linear, an array of the wrong shape, type or strides,
/// a read-only `out`, an array on another device than the image (a CPU frame with a CUDA
/// `out`, a CUDA frame with a numpy one), a stream of another device; a released frame is
/// `FrameReleased`.
#[pyfunction]
#[pyo3(signature = (src, out, *, stream=None, sum=None))]
pub(crate) fn nv12_to_rgba<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    out: &Bound<'py, PyAny>,
    stream: Option<Bound<'py, PyAny>>,
    sum: Option<Bound<'py, PyAny>>,
) -> PyResult<()> {
    reap(false);
    let stream = stream.as_ref().filter(|s| !s.is_none());
    let sum = sum.as_ref().filter(|s| !s.is_none());
    if let Ok(f) = src.cast::<PyFrame>() {
        let core = f.get().core().clone();
        return from_frame(py, &core, out, stream, sum);
    }
    from_array(py, src, out, stream, sum)
}
