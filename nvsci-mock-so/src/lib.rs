//! `libnvsci_mock.so`: the NvSci emulation of `nvsci-mock`, exporting every entry point it
//! implements under its C name (and `NvSciMockLiveHandles`), so that the shared object can be
//! loaded as `libnvscibuf.so.1` / `libnvscisync.so.1` through the real loader.
//!
//! The library has its own copy of the emulation's state (modules, ledgers), separate from any
//! copy linked into the loading program.
#![deny(unsafe_op_in_unsafe_fn)]

pub use mock::export::*;
