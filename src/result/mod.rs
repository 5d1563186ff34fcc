//! The result layer: one thin `unsafe fn` per NvSci C entry point the crate calls, taking the
//! loaded function table and typed raw arguments and returning [`Result`](crate::Result), with a
//! `# Safety` section stating the C contract from NVIDIA's headers (nvscibuf.h, nvscisync.h,
//! nvsciipc.h). cudarc's `driver/result.rs` is the model.
//!
//! This is the only place that calls the tables: the safe types above it build their handles,
//! ownership and error explanations on these functions. A status other than `NvSciError_Success`
//! is [`Error::NvSci`](crate::Error::NvSci) naming the entry point; an entry point the loaded
//! library does not export is [`Error::Unsupported`](crate::Error::Unsupported) with
//! [`UnsupportedReason::MissingFunction`](crate::UnsupportedReason::MissingFunction), so an
//! optional symbol fails only when called.
//!
//! One room per library: [`buf`] (`libnvscibuf.so.1`), [`sync`] (`libnvscisync.so.1`), [`ipc`]
//! (`libnvsciipc.so`), [`list`] (the attribute-list entry points both libraries share, through
//! a family's table) and [`host_gpu`] (the GPU entry points of an emulated implementation).

pub(crate) mod buf;
pub(crate) mod host_gpu;
pub(crate) mod ipc;
pub(crate) mod list;
pub(crate) mod sync;

use crate::error::{Error, UnsupportedReason};

/// Fetches a function from a table, or returns [`Error::Unsupported`] naming it.
macro_rules! nvfn {
    ($table:expr, $name:ident) => {
        match $table.$name {
            Some(f) => f,
            None => return Err($crate::result::missing(stringify!($name))),
        }
    };
}
use nvfn;

/// The error of an entry point the loaded library does not export.
pub(crate) fn missing(what: &'static str) -> Error {
    Error::Unsupported { what, reason: UnsupportedReason::MissingFunction }
}

/// Whether `e` says the loaded library lacks the entry point (so an older one may stand in).
pub(crate) fn is_missing(e: &Error) -> bool {
    matches!(e, Error::Unsupported { reason: UnsupportedReason::MissingFunction, .. })
}
