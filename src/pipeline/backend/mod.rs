//! The one interface every ring backend implements, and what the ring asks of it.
//!
//! A backend (NvSci, Vulkan; later DMA-BUF or EGLStream) is one file implementing these traits,
//! in the manner of wgpu-hal's `Api`:
//!
//! * [`Provider`]: a usable source of buffers and fences (an NvSci library, a Vulkan device),
//!   found by [`Backend`](super::Backend); it builds the backend of each ring.
//! * [`RingBackend`]: one ring's slots and fences: how they are CPU-accessed and signalled on
//!   the CPU, and imported into CUDA.
//! * [`CpuWaiter`] and [`CudaSync`]: one party's typed state for the ring's fences (an NvSciSync
//!   CPU wait context, a sync object imported into CUDA, a timeline semaphore imported into
//!   CUDA), made by the backend for that party and holding the ring it belongs to, so a wait or
//!   signal needs no cast: each backend's state is its own type.
//! * [`NvSciObjects`]: the extension only a backend built on NvSci objects has (the NvSciBuf and
//!   NvSciSync objects behind the ring, fences another engine signals, fences that cross
//!   processes), reached through [`RingBackend::nvsci`]; other backends have none, and the ring
//!   answers [`UnsupportedReason::NoNvSciObjects`](crate::UnsupportedReason::NoNvSciObjects)
//!   in one place.
//!
//! Why not associated types, as wgpu-hal's `Api` has: the ring is not generic over its backend,
//! so that `FrameRing`, `Producer` and `Consumer` stay one type for every backend, chosen at run
//! time ([`Backend::auto`](super::Backend::auto)). The per-party state is therefore a trait
//! object the backend makes, of the backend's own type, instead of an associated type; nothing
//! is erased to `dyn Any` and cast back.
//!
//! The ring ([`FrameRing`](super::FrameRing)) is written once against these traits and never
//! asks which backend it has. Fences live in the backend, one per slot and [`Point`] (the
//! slot's present fence, or a consumer's release fence), replaced in place: the ring names a
//! fence by slot and point, so no fence value crosses the interface and no frame allocates.

pub(crate) mod ipc;
pub(crate) mod nvsci;
#[cfg(feature = "vulkan")]
pub(crate) mod vulkan;

use super::config::RingConfig;
use super::engine::Engine;
use super::format::{FrameFormat, FrameLayout};
use crate::buf::BufObj;
use crate::error::{Error, Result};
use crate::ipc::{FenceDescriptor, IpcEndpoint};
use crate::sync::{Fence, SyncObj};
use std::sync::Arc;
use std::time::Duration;

/// Which fence of a slot: the present fence (signalled by the producer's engine, waited on by
/// every consumer's) or consumer `c`'s release fence (signalled by that consumer's engine,
/// waited on by the producer's). Each point also names the sync object its fences come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    Present,
    Release(usize),
}

/// One party's CPU waits on one ring's fences (an NvSciSync CPU wait context, or a Vulkan
/// ring's semaphores), made by the ring's backend for that party. One per party: NvSci wait
/// contexts are not shared between threads.
pub(crate) trait CpuWaiter: Send {
    /// Waits on the CPU until the fence at (`slot`, `point`) expired, or `timeout` passed
    /// ([`Error::Timeout`]).
    fn wait(&mut self, slot: usize, point: Point, timeout: Duration) -> Result<()>;
}

/// One point's sync object of one ring imported into a CUDA context, made by the ring's
/// backend for one party.
#[cfg(feature = "cuda")]
pub(crate) trait CudaSync: Send {
    /// Enqueues on `stream` a wait for the fence at (`slot`, this point). `reads`: the waiter
    /// reads what the signaler wrote (a consumer), so an expired fence may still need the
    /// wait's memory synchronisation; a producer about to overwrite a slot has nothing to
    /// synchronise with an expired release.
    fn wait(
        &self,
        stream: &crate::cuda::cudarc::driver::CudaStream,
        slot: usize,
        policy: crate::cuda::MemSync,
        reads: bool,
    ) -> Result<()>;

    /// Enqueues on `stream` a signal of this point's sync object; the fence at (`slot`, this
    /// point) becomes that signal's.
    fn signal(
        &self,
        stream: &crate::cuda::cudarc::driver::CudaStream,
        slot: usize,
        policy: crate::cuda::MemSync,
    ) -> Result<()>;
}

/// The error of a backend without NvSci objects asked for what only they have.
pub(crate) fn no_nvsci_objects(what: &'static str) -> Error {
    Error::Unsupported { what, reason: crate::error::UnsupportedReason::NoNvSciObjects }
}

/// What only a backend built on NvSci objects has ([`RingBackend::nvsci`]).
pub(crate) trait NvSciObjects: Send + Sync {
    /// The read-write NvSciBuf object of a slot (`None` in a consumer process).
    fn buffer(&self, slot: usize) -> Option<&BufObj>;

    /// Consumer `consumer`'s read-only NvSciBuf duplicate of a slot.
    fn view(&self, slot: usize, consumer: usize) -> Option<&BufObj>;

    /// The NvSciSync object of `point`.
    fn sync(&self, point: Point) -> Option<&SyncObj>;

    /// Records an NvSciSync fence that another engine signals later as the fence at (`slot`,
    /// `point`); it must come from `point`'s sync object.
    fn set_fence(&self, slot: usize, point: Point, fence: Fence) -> Result<()>;

    /// Exports the fence at (`slot`, `point`) through `ep`.
    fn export_fence(&self, slot: usize, point: Point, ep: &IpcEndpoint) -> Result<FenceDescriptor>;

    /// Imports a fence of `point`'s sync object from `desc` as the fence at (`slot`, `point`).
    fn import_fence(&self, slot: usize, point: Point, desc: &FenceDescriptor) -> Result<()>;
}

/// A usable source of ring buffers and fences.
pub(crate) trait Provider: Send + Sync {
    /// Builds one ring's slots and sync objects for these parties (format, configuration and
    /// engine count already validated).
    fn build(
        &self,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Engine],
    ) -> Result<Arc<dyn RingBackend>>;

    /// The NvSci implementation, where the backend is built on one.
    fn nvsci(&self) -> Option<&crate::NvSci> {
        None
    }

    /// The Vulkan context, where the backend is built on one.
    #[cfg(feature = "vulkan")]
    fn vulkan(&self) -> Option<&Arc<crate::vulkan::VulkanContext>> {
        None
    }

    /// A few words on where the buffers and fences come from, for [`Backend::explain`](super::Backend::explain).
    fn describe(&self) -> String;
}

/// One ring's slots and fences. Every method names a slot by index (`< frames`) and a fence by
/// [`Point`]; consumers by index (`< consumers`).
pub(crate) trait RingBackend: Send + Sync {
    /// The frames' layout.
    fn layout(&self) -> &FrameLayout;

    /// A new CPU wait state for one party, on this ring's fences.
    fn cpu_waiter(self: Arc<Self>) -> Result<Box<dyn CpuWaiter>>;

    /// Signals `point`'s sync object from the CPU now; the fence at (`slot`, `point`) becomes
    /// that signal's.
    fn cpu_signal(&self, slot: usize, point: Point) -> Result<()>;

    /// Marks the fence at (`slot`, `point`) expired (nothing left to wait for).
    fn clear(&self, slot: usize, point: Point);

    /// The NvSci extension, where the backend is built on NvSci objects.
    fn nvsci(&self) -> Option<&dyn NvSciObjects> {
        None
    }

    /// CPU write access to slot `slot` (the ring's tokens order it against the engines).
    fn cpu_write(&self, slot: usize) -> Result<FrameWrite<'_>>;

    /// CPU read access to slot `slot` for consumer `consumer` (its read-only view where the
    /// backend has one).
    fn cpu_read(&self, slot: usize, consumer: usize) -> Result<FrameRead<'_>>;

    /// Imports slot `slot` read-write into `dev` (the producer's view).
    #[cfg(feature = "cuda")]
    fn cuda_import_rw(
        &self,
        dev: &crate::cuda::CudaGpu,
        slot: usize,
    ) -> Result<crate::cuda::ExternalMemory<crate::cuda::ReadWrite>>;

    /// Imports consumer `consumer`'s view of slot `slot` read-only into `dev`.
    #[cfg(feature = "cuda")]
    fn cuda_import_ro(
        &self,
        dev: &crate::cuda::CudaGpu,
        slot: usize,
        consumer: usize,
    ) -> Result<crate::cuda::ExternalMemory<crate::cuda::ReadOnly>>;

    /// Imports `point`'s sync object of this ring into `dev`, for one party's stream waits
    /// and signals.
    #[cfg(feature = "cuda")]
    fn cuda_import_sync(
        self: Arc<Self>,
        dev: &crate::cuda::CudaGpu,
        point: Point,
    ) -> Result<Box<dyn CudaSync>>;
}

/// The kinds of CPU mapping a backend hands out (a mapped NvSciBuf object, mapped host-visible
/// Vulkan memory), behind one borrow-checked guard.
enum WriteAccess<'a> {
    NvSciBuf(crate::buf::CpuWrite<'a>),
    #[cfg(feature = "vulkan")]
    Host(crate::vulkan::HostWrite<'a>),
}

/// Write access to a held frame's bytes from the CPU (producer side).
pub struct FrameWrite<'a>(WriteAccess<'a>);

impl<'a> From<crate::buf::CpuWrite<'a>> for FrameWrite<'a> {
    fn from(w: crate::buf::CpuWrite<'a>) -> Self {
        Self(WriteAccess::NvSciBuf(w))
    }
}

#[cfg(feature = "vulkan")]
impl<'a> From<crate::vulkan::HostWrite<'a>> for FrameWrite<'a> {
    fn from(w: crate::vulkan::HostWrite<'a>) -> Self {
        Self(WriteAccess::Host(w))
    }
}

impl core::ops::Deref for FrameWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            WriteAccess::NvSciBuf(w) => w,
            #[cfg(feature = "vulkan")]
            WriteAccess::Host(s) => s,
        }
    }
}

impl core::ops::DerefMut for FrameWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            WriteAccess::NvSciBuf(w) => w,
            #[cfg(feature = "vulkan")]
            WriteAccess::Host(s) => s,
        }
    }
}

enum ReadAccess<'a> {
    NvSciBuf(crate::buf::CpuRead<'a>),
    #[cfg(feature = "vulkan")]
    Host(crate::vulkan::HostRead<'a>),
}

/// Read access to a held frame's bytes from the CPU (consumer side).
pub struct FrameRead<'a>(ReadAccess<'a>);

impl<'a> From<crate::buf::CpuRead<'a>> for FrameRead<'a> {
    fn from(r: crate::buf::CpuRead<'a>) -> Self {
        Self(ReadAccess::NvSciBuf(r))
    }
}

#[cfg(feature = "vulkan")]
impl<'a> From<crate::vulkan::HostRead<'a>> for FrameRead<'a> {
    fn from(r: crate::vulkan::HostRead<'a>) -> Self {
        Self(ReadAccess::Host(r))
    }
}

impl core::ops::Deref for FrameRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            ReadAccess::NvSciBuf(r) => r,
            #[cfg(feature = "vulkan")]
            ReadAccess::Host(s) => s,
        }
    }
}
