// The crate's front page is README.md (its Rust examples compile as doctests), followed by the
// map of the modules below. The README's examples need the default features `mock` and `cuda`.
#![cfg_attr(all(feature = "mock", feature = "cuda"), doc = include_str!("../README.md"))]
#![cfg_attr(
    not(all(feature = "mock", feature = "cuda")),
    doc = "Safe, zero-copy NvSciBuf / NvSciSync interop for Rust (the front page and its examples \
           need the default features `mock` and `cuda`)."
)]
//!
//! ## The modules
//!
//! * [`NvSci`] is a loaded implementation: NVIDIA's libraries (Jetson, DRIVE OS), opened at run
//!   time, or the in-process mock (feature `mock`, on by default) for machines without NvSci.
//! * [`buf`]: modules, typed attribute lists, reconciliation with explained conflicts, buffer
//!   objects, reduced-permission duplicates and CPU access.
//! * [`sync`]: sync attribute lists, sync objects, fences and CPU waits.
//! * Handles that other libraries in the process made (an NvMedia-filled list, a camera's
//!   buffer, sync object or fence) are adopted with the `unsafe` `from_foreign` constructors (a
//!   copy or reference of the crate's own; the maker keeps and frees its handle) or taken over
//!   with `from_raw_owned`: [`buf::BufAttrList::from_foreign`], [`buf::BufObj::from_foreign`],
//!   [`sync::SyncAttrList::from_foreign`], [`sync::SyncObj::from_foreign`],
//!   [`sync::Fence::from_foreign`].
//! * `cuda` (feature `cuda`, on by default): import into CUDA through cudarc, typed read-only /
//!   read-write mappings, NvSciSync and fd semaphores, the automatic NvSciBuf memory-sync policy.
//!   The application's own `Arc<CudaContext>` is adopted (`cuda::CudaGpu::from_context`) and
//!   its own streams take the work.
//! * `vulkan` (feature `vulkan`): the desktop fallback feeding the same CUDA path, on a device
//!   the process shares (`vulkan::VulkanContext::new`) or on the renderer's
//!   (`vulkan::VulkanContext::adopt`).
//! * [`pipeline`]: the frame ring (NvSci or mock; Vulkan with the `vulkan` feature), backend
//!   selection and NV12 -> RGBA conversion (CPU reference and CUDA kernel).
//!
//! An NvSci buffer by hand, on NVIDIA's libraries or, where they are absent, the mock:
//!
//! ```
//! # fn main() -> nvsci::Result<()> {
//! # #[cfg(feature = "mock")] {
//! use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, BufType, Perm};
//! let lib = nvsci::NvSci::load().or_else(|_| Ok::<_, nvsci::Error>(nvsci::NvSci::mock()))?;
//! let module = BufModule::open(&lib)?;
//! let mut list = module.attr_list()?;
//! list.set(&[
//!     BufAttr::Types(&[BufType::RAW_BUFFER]),
//!     BufAttr::RawSize(4096),
//!     BufAttr::NeedCpuAccess(true),
//!     BufAttr::RequiredPerm(Perm::ReadWrite),
//! ])?;
//! let reconciled = BufAttrList::reconcile(&[&list])?;
//! let buf = BufObj::alloc(&reconciled)?;
//! buf.cpu_write()?[..4].copy_from_slice(b"nvsc");
//! assert_eq!(&buf.cpu_read()?[..4], b"nvsc");
//! # }
//! # Ok(()) }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod attr;
mod attr_list;
pub mod buf;
pub mod convert;
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub mod cuda;
mod error;
mod gpu_id;
pub mod ipc;
mod library;
mod list_state;
pub mod pipeline;
mod result;
pub mod sync;
/// What the unit tests need from the machine (a GPU, a Vulkan device), shared with the
/// integration tests.
#[cfg(test)]
#[path = "../tests/common/require.rs"]
pub(crate) mod test_require;
#[cfg(feature = "vulkan")]
#[cfg_attr(docsrs, doc(cfg(feature = "vulkan")))]
pub mod vulkan;

pub use attr::{AttrElem, Key};
pub use attr_list::{AttrList, AttrListRef, Family};
pub use error::{
    AttachField, CudaError, Culprit, Error, IpcError, NvSciError, Result, RingError, UnsupportedReason,
    VulkanError, Wait, MAX_CONFLICT_KEYS,
};
pub use gpu_id::GpuId;
pub use library::{GpuInterop, Implementation, NvSci};
pub use list_state::ListState;
pub use nvsci_sys as sys;

/// The heapless crate (same version) whose fixed-capacity vectors this API returns (attribute
/// values from `get`, [`buf::BufObj::planes`], [`sync::FenceList`]), so that they can be named
/// and built without a dependency of one's own.
pub use heapless;

// The guides in docs/ as doctests, so that their Rust snippets compile (today's are `no_run`:
// they need a GPU or NVIDIA's libraries). Pages without Rust snippets are attached too, so that a
// snippet added later is compiled. A page whose snippets need a feature is only attached with it.
#[cfg(doctest)]
#[doc = include_str!("../docs/bad-inputs.md")]
struct BadInputsGuide;
#[cfg(all(doctest, feature = "cuda", feature = "mock"))]
#[doc = include_str!("../docs/crates.md")]
struct CratesGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/README.md")]
struct DocsIndex;
#[cfg(all(doctest, feature = "cuda"))]
#[doc = include_str!("../docs/foreign-handles.md")]
struct ForeignHandlesGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/ipc.md")]
struct IpcGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/mock.md")]
struct MockGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/pipeline.md")]
struct PipelineGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/verification.md")]
struct VerificationGuide;
#[cfg(all(doctest, feature = "vulkan"))]
#[doc = include_str!("../docs/vulkan.md")]
struct VulkanGuide;

/// Live-handle accounting of the mock implementation.
#[cfg(feature = "mock")]
#[cfg_attr(docsrs, doc(cfg(feature = "mock")))]
pub use nvsci_mock::{HandleCounts, Ledger};
