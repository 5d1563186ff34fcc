//! The crate's errors as Python exceptions: each [`nvsci::Error`] variant becomes an instance of
//! the class of `nvsci.errors` that mirrors its layer, with its typed fields as attributes.

use nvsci::{AttachField, CudaError, Error, IpcError, RingError, UnsupportedReason, Wait};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::BoundObject;

/// An exception of class `class` (a name in `nvsci.errors`) with `message` and the attributes
/// in `fields`. Failing to build it (the module missing) yields the import error instead.
pub(crate) fn raise(py: Python<'_>, class: &str, message: String, fields: &[(&str, Py<PyAny>)]) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("nvsci.errors")?.getattr(class)?;
        let kwargs = PyDict::new(py);
        for (k, v) in fields {
            kwargs.set_item(*k, v)?;
        }
        let obj = cls.call((message,), Some(&kwargs))?;
        Ok(PyErr::from_value(obj))
    };
    build().unwrap_or_else(|e| e)
}

fn obj<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> Py<PyAny> {
    match v.into_pyobject(py) {
        Ok(b) => b.into_any().unbind(),
        Err(_) => py.None(),
    }
}

/// `InvalidArgument` naming `name`.
pub(crate) fn invalid(py: Python<'_>, name: &str, reason: impl Into<String>) -> PyErr {
    let reason = reason.into();
    raise(
        py,
        "InvalidArgument",
        format!("invalid argument `{name}`: {reason}"),
        &[("name", obj(py, name)), ("reason", obj(py, reason))],
    )
}

/// `FrameReleased`: a frame (or one of its planes) used after its release, its present, or the
/// end of its stream.
pub(crate) fn released(py: Python<'_>, what: &str) -> PyErr {
    let reason = format!("{what}: the frame was already released (or presented, or its stream closed)");
    raise(
        py,
        "FrameReleased",
        format!("invalid argument `frame`: {reason}"),
        &[("name", obj(py, "frame")), ("reason", obj(py, reason))],
    )
}

/// `StreamClosed`: a producer or consumer used after `close()`.
pub(crate) fn closed(py: Python<'_>, party: &str) -> PyErr {
    let reason = format!("the {party} was closed");
    raise(
        py,
        "StreamClosed",
        format!("invalid argument `{party}`: {reason}"),
        &[("name", obj(py, party)), ("reason", obj(py, reason))],
    )
}

/// `ExportError` (an `InvalidArgument` and a `BufferError`) naming `name`.
pub(crate) fn export(py: Python<'_>, name: &str, reason: impl Into<String>) -> PyErr {
    let reason = reason.into();
    raise(
        py,
        "ExportError",
        format!("invalid argument `{name}`: {reason}"),
        &[("name", obj(py, name)), ("reason", obj(py, reason))],
    )
}

/// The name of an [`UnsupportedReason`] variant, as Python code matches on it.
fn reason_name(r: &UnsupportedReason) -> String {
    let dbg = format!("{r:?}");
    // `FeatureDisabled("mock")` -> `FeatureDisabled`; `CudaDriverTooOld { since: .. }` likewise.
    dbg.split(['(', ' ', '{']).next().unwrap_or(&dbg).to_owned()
}

/// The Python exception for a CUDA driver error of cudarc.
pub(crate) fn driver(
    py: Python<'_>,
    function: &'static str,
    e: nvsci::cuda::cudarc::driver::DriverError,
) -> PyErr {
    let code = e.0 as u32;
    let name = e.error_name().ok().and_then(|n| n.to_str().ok()).unwrap_or("CUDA_ERROR_UNKNOWN").to_owned();
    raise(
        py,
        "CudaError",
        format!("{function} failed: CUDA error {code} ({name})"),
        &[("function", obj(py, function)), ("code", obj(py, code)), ("code_name", obj(py, name))],
    )
}

/// The Python exception for an error of the crate.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::NvSci { function, code } => raise(
            py,
            "NvSciError",
            msg,
            &[
                ("function", obj(py, function)),
                ("code", obj(py, code.0)),
                ("code_name", obj(py, code.name())),
            ],
        ),
        Error::Refused { function, code, culprit } => {
            let variant = format!("{culprit:?}");
            let variant = variant.split(['(', ' ', '{']).next().unwrap_or("").to_owned();
            raise(
                py,
                "RefusedError",
                msg,
                &[
                    ("function", obj(py, function)),
                    ("code", obj(py, code.0)),
                    ("code_name", obj(py, code.name())),
                    ("culprit", obj(py, variant)),
                    ("key", obj(py, culprit.key())),
                    ("argument", obj(py, culprit.argument())),
                ],
            )
        }
        Error::AttrRefused { function, key, value, code } => raise(
            py,
            "AttrRefused",
            msg,
            &[
                ("function", obj(py, function)),
                ("code", obj(py, code.0)),
                ("code_name", obj(py, code.name())),
                ("key", obj(py, key)),
                ("value", obj(py, value)),
            ],
        ),
        Error::ReconcileConflict { function, keys, dump } => {
            let keys = PyList::new(py, keys).map(|l| l.into_any().unbind()).unwrap_or_else(|_| py.None());
            raise(
                py,
                "ReconcileConflict",
                msg,
                &[("function", obj(py, function)), ("keys", keys), ("dump", obj(py, dump))],
            )
        }
        Error::Load(_) => raise(py, "LoadError", msg, &[]),
        Error::Unsupported { what, reason } => raise(
            py,
            "UnsupportedError",
            msg,
            &[("what", obj(py, what)), ("reason", obj(py, reason_name(&reason)))],
        ),
        Error::Timeout { waited_for: Wait::Fence { function }, timeout } => raise(
            py,
            "FenceTimeout",
            msg,
            &[("function", obj(py, function)), ("timeout_us", obj(py, micros(timeout)))],
        ),
        Error::Timeout { waited_for: Wait::Endpoint { endpoint, during }, timeout } => raise(
            py,
            "IpcTimeout",
            msg,
            &[
                ("endpoint", obj(py, endpoint)),
                ("during", obj(py, during)),
                ("timeout_us", obj(py, micros(timeout))),
            ],
        ),
        Error::Timeout { waited_for, timeout } => ring_timeout(py, msg, waited_for, timeout),
        Error::InvalidArgument { name, reason } => {
            raise(py, "InvalidArgument", msg, &[("name", obj(py, name)), ("reason", obj(py, reason))])
        }
        Error::Cuda(CudaError::Call { function, code, name }) => raise(
            py,
            "CudaError",
            msg,
            &[("function", obj(py, function)), ("code", obj(py, code)), ("code_name", obj(py, name))],
        ),
        Error::Cuda(CudaError::Unavailable { reason }) => {
            raise(py, "CudaUnavailable", msg, &[("reason", obj(py, reason))])
        }
        Error::Cuda(_) => raise(py, "CudaError", msg, &[]),
        Error::Vulkan(_) => raise(py, "VulkanError", msg, &[]),
        Error::Ring(RingError::Ended { endpoint }) => {
            raise(py, "StreamEnded", msg, &[("endpoint", obj(py, endpoint))])
        }
        Error::Ring(RingError::NoSeat { fitting }) => {
            raise(py, "NoSeat", msg, &[("fitting", obj(py, fitting))])
        }
        Error::Ring(RingError::AttachRefused { endpoint, field }) => raise(
            py,
            "AttachRefused",
            msg,
            &[("endpoint", obj(py, endpoint)), ("field", obj(py, field_name(field)))],
        ),
        Error::Ring(_) => raise(py, "RingError", msg, &[]),
        Error::Ipc(IpcError::PeerGone { endpoint, during }) => {
            raise(py, "PeerGone", msg, &[("endpoint", obj(py, endpoint)), ("during", obj(py, during))])
        }
        Error::Ipc(IpcError::Endpoint { endpoint, reason, code }) => raise(
            py,
            "EndpointError",
            msg,
            &[
                ("endpoint", obj(py, endpoint)),
                ("reason", obj(py, reason)),
                ("code", obj(py, code.map(|c| c.0))),
            ],
        ),
        Error::Ipc(_) => raise(py, "IpcError", msg, &[]),
        _ => raise(py, "Error", msg, &[]),
    }
}

/// The name of an [`AttachField`], as Python code matches on it (`RemoteSeat.last_refusal`,
/// `AttachRefused.field`).
pub(crate) fn field_name(f: AttachField) -> &'static str {
    match f {
        AttachField::Stream => "stream",
        AttachField::Generation => "generation",
        AttachField::Engine => "engine",
        AttachField::Format => "format",
        AttachField::Limit => "limit",
        AttachField::Mode => "mode",
        AttachField::Message => "message",
        _ => "other",
    }
}

/// A duration in whole microseconds, saturating.
fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn ring_timeout(py: Python<'_>, msg: String, waited_for: Wait, timeout: std::time::Duration) -> PyErr {
    let none = || py.None();
    let (kind, slot, sequence, consumer, holders, endpoint) = match waited_for {
        Wait::FreeSlot { slot, sequence, holders } => {
            let h: Vec<usize> =
                (0..nvsci::pipeline::MAX_CONSUMERS).filter(|&c| holders.contains(c)).collect();
            ("free_slot", obj(py, slot), obj(py, sequence), none(), obj(py, h), none())
        }
        Wait::ReleaseFence { slot, consumer } => {
            ("release_fence", obj(py, slot), none(), obj(py, consumer), none(), none())
        }
        Wait::PresentFence { slot, sequence } => {
            ("present_fence", obj(py, slot), obj(py, sequence), none(), none(), none())
        }
        Wait::Frame => ("frame", none(), none(), none(), none(), none()),
        Wait::RemoteRelease { slot, sequence, consumer, endpoint } => {
            ("remote_release", obj(py, slot), obj(py, sequence), obj(py, consumer), none(), obj(py, endpoint))
        }
        _ => ("other", none(), none(), none(), none(), none()),
    };
    raise(
        py,
        "RingTimeout",
        msg,
        &[
            ("waited_for", obj(py, kind)),
            ("slot", slot),
            ("sequence", sequence),
            ("consumer", consumer),
            ("holders", holders),
            ("endpoint", endpoint),
            ("timeout", obj(py, timeout.as_secs_f64())),
        ],
    )
}

/// Whether `e` is a consumer's wait for a frame that ran out of time.
pub(crate) fn is_frame_timeout(e: &Error) -> bool {
    matches!(e, Error::Timeout { waited_for: Wait::Frame, .. })
}

/// Whether `e` says the producer in another process ended the stream.
pub(crate) fn is_ended(e: &Error) -> bool {
    matches!(e, Error::Ring(RingError::Ended { .. }))
}
