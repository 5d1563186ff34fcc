//! Raw FFI bindings to NVIDIA NvSciBuf, NvSciSync and NvSciIpc, loaded at run time.
//!
//! * The C types, keys, enums and error codes come from a clean-room header
//!   (`include/nvsci_*.h`) through bindgen. The generated file is checked in, so a normal build
//!   needs no libclang; the `bindgen` feature regenerates it (see `build.rs`).
//! * Nothing here links against `libnvscibuf.so.1` or `libnvscisync.so.1`. The [`loader`] module
//!   opens them with `libloading` and fills plain function tables ([`NvSciBufFns`],
//!   [`NvSciSyncFns`]); an emulation can fill the same tables instead. NvSciIpc (`libnvsciipc.so`,
//!   [`NvSciIpcFns`]) is loaded separately by [`loader::load_ipc`], only by programs that share
//!   objects across processes.
//!
//! Every item is a raw C binding with no policy: the `nvsci` crate is the safe layer.
#![deny(unsafe_op_in_unsafe_fn)]
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    clippy::missing_safety_doc,
    clippy::useless_transmute,
    clippy::ptr_offset_with_cast
)]

#[cfg(not(feature = "bindgen"))]
include!("bindings.rs");
#[cfg(feature = "bindgen")]
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

pub mod emulation;
pub mod loader;
mod tables;

pub use emulation::NvSciHostGpuFns;
pub use tables::{NvSciBufFns, NvSciIpcFns, NvSciSyncFns};

/// Element size in bytes of `NvSciSyncAccessPerm` (an 8-byte integer, unlike every NvSciBuf enum).
pub const NVSCI_SYNC_ACCESS_PERM_SIZE: usize = core::mem::size_of::<NvSciSyncAccessPerm>();

/// An all-zero (cleared) fence, the value every `NvSciSyncFence` must start from.
pub const NVSCI_SYNC_FENCE_INITIALIZER: NvSciSyncFence = NvSciSyncFence { payload: [0; 6] };
