//! Fences and CPU waits.

use super::{SyncModule, SyncObj};
use crate::error::{invalid, Culprit, Error, NvSciError, Result};
use crate::result::sync as nvsync;
use core::time::Duration;
use nvsci_sys as sys;

/// A fixed-capacity list of fences (no heap allocation).
pub type FenceList<const N: usize> = heapless::Vec<Fence, N>;

/// An NvSciSync fence: a point on a sync object's timeline.
///
/// A fence that is not cleared holds a reference on its object inside the library; dropping the
/// fence clears it (NvSciSyncFenceClear). A fence also keeps its [`SyncObj`] (and so the loaded
/// library) alive. Duplicate with [`try_clone`](Self::try_clone), which can fail.
///
/// With the CPU as signaler, [`SyncObj::generate_fence`] returns the fence of the object's next
/// [`SyncObj::signal`], and [`wait`](Self::wait) blocks until that signal (or the timeout):
///
/// ```
/// # fn main() -> nvsci::Result<()> {
/// # #[cfg(feature = "mock")] {
/// use nvsci::sync::{Fence, SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
/// use nvsci::{Error, NvSci};
/// use std::time::Duration;
///
/// let module = SyncModule::open(&NvSci::mock())?;
/// // The CPU signals and the CPU waits: one list for each side, reconciled into one object.
/// let mut signaler = module.attr_list()?;
/// signaler.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)])?;
/// let mut waiter = module.attr_list()?;
/// waiter.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)])?;
/// let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&signaler, &waiter])?)?;
///
/// let mut ctx = module.cpu_wait_context()?; // one per waiting thread
/// let fence = obj.generate_fence()?; // expires with the next `obj.signal()`
/// let copy = fence.try_clone()?; // the same point on the timeline
/// let early = fence.wait(&mut ctx, Some(Duration::from_millis(10)));
/// assert!(matches!(early, Err(Error::Timeout { .. })), "not signalled yet: {early:?}");
///
/// obj.signal()?;
/// fence.wait(&mut ctx, Some(Duration::from_secs(1)))?;
/// copy.wait(&mut ctx, Some(Duration::ZERO))?; // already expired: returns at once
/// assert!(Fence::cleared().wait(&mut ctx, Some(Duration::ZERO)).is_ok());
/// # }
/// # Ok(()) }
/// ```
pub struct Fence {
    raw: sys::NvSciSyncFence,
    obj: Option<SyncObj>,
}

// SAFETY: fence storage is plain data; the library's fence functions are thread-safe and take the
// fence by pointer, so moving it between threads is fine.
unsafe impl Send for Fence {}
// SAFETY: `&Fence` only reaches NvSciSyncFenceWait/Dup/ExtractFence, which read the fence through
// a const pointer and are documented thread-safe.
unsafe impl Sync for Fence {}

impl Default for Fence {
    fn default() -> Self {
        Self::cleared()
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        self.clear();
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence").field("cleared", &self.is_cleared()).finish()
    }
}

impl Fence {
    /// A cleared fence: waiting on it succeeds at once.
    pub const fn cleared() -> Self {
        Self { raw: sys::NVSCI_SYNC_FENCE_INITIALIZER, obj: None }
    }

    /// Adopts a fence that another library in this process filled (the fence a camera attached
    /// to a frame, say) by duplicating it (`NvSciSyncFenceDup`) into a fence of `obj`. The caller
    /// keeps `*raw` and clears it (`NvSciSyncFenceClear`) whenever it likes, before or after the
    /// returned fence is dropped. A cleared `*raw` gives a cleared fence.
    ///
    /// `obj` is the sync object the fence belongs to, usually adopted first with
    /// [`SyncObj::from_foreign`]: waits and CUDA imports use it. A NULL `raw` is
    /// [`Error::NullHandle`]; nothing is created.
    ///
    /// # Safety
    ///
    /// * `raw` is NULL or points to a readable `NvSciSyncFence` that is cleared (all zero) or was
    ///   filled by the same loaded implementation `obj` uses (the same `libnvscisync.so.1`
    ///   instance, or the mock when `obj` is the mock's): NvSci aborts the process on a fence it
    ///   did not make.
    /// * The fence belongs to the NvSci sync object `obj` refers to (a fence of `obj` itself, of
    ///   a duplicate of it, or of the foreign handle `obj` was adopted from): the crate waits on
    ///   it through `obj`, and a fence of another object would be waited on against the wrong
    ///   primitive.
    /// * Nothing writes or clears `*raw` while this call runs.
    ///
    /// After the call the two fences are independent: each side clears its own.
    pub unsafe fn from_foreign(obj: &SyncObj, raw: *const sys::NvSciSyncFence) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: "NvSciSyncFence" });
        }
        let mut out = Self::for_object(obj);
        // SAFETY: `raw` points to a valid fence of this implementation that nothing writes during
        // the call (caller contract); `out.raw` is zeroed storage for the duplicate, which holds
        // its own object reference and is cleared when `out` drops.
        unsafe { nvsync::fence_dup(obj.0.module.0.lib.sync(), raw, &mut out.raw) }?;
        Ok(out)
    }

    /// Takes over a fence given away by its maker, without duplicating it: the fence is moved
    /// out of `*raw`, which is left cleared (all zero, so clearing it again is harmless), and
    /// the returned fence of `obj` clears it when dropped.
    ///
    /// A NULL `raw` is [`Error::NullHandle`]. Use [`from_foreign`](Self::from_foreign) for a
    /// fence its maker keeps.
    ///
    /// # Safety
    ///
    /// As for [`from_foreign`](Self::from_foreign), and `raw` is writable; no other copy of the
    /// fence's bytes is cleared or used after this call: only the returned fence releases the
    /// fence's object reference.
    pub unsafe fn from_raw_owned(obj: &SyncObj, raw: *mut sys::NvSciSyncFence) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: "NvSciSyncFence" });
        }
        let mut out = Self::for_object(obj);
        // SAFETY: `raw` points to a readable and writable fence (caller contract); reading the
        // bytes and zeroing the source moves the fence, with its object reference, into `out`.
        unsafe {
            out.raw = raw.read();
            raw.write(sys::NVSCI_SYNC_FENCE_INITIALIZER);
        }
        Ok(out)
    }

    /// Empty fence storage bound to `obj`, to be filled by a signaler (CPU or another API).
    pub(crate) fn for_object(obj: &SyncObj) -> Self {
        Self { raw: sys::NVSCI_SYNC_FENCE_INITIALIZER, obj: Some(obj.clone()) }
    }

    /// Clears the fence and rebinds its storage to `obj`, ready to be filled by a signaler.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn reset_for(&mut self, obj: &SyncObj) {
        self.clear();
        let same = self.obj.as_ref().is_some_and(|o| std::sync::Arc::ptr_eq(&o.0, &obj.0));
        if !same {
            self.obj = Some(obj.clone());
        }
    }

    /// Whether the fence is cleared (all-zero storage).
    pub fn is_cleared(&self) -> bool {
        self.raw.payload.iter().all(|&w| w == 0)
    }

    /// Clears the fence, releasing its reference on the object.
    pub fn clear(&mut self) {
        if let Some(obj) = &self.obj {
            if !self.is_cleared() {
                // SAFETY: the storage holds a fence of this library (or zeroes); clearing
                // releases its object reference and zeroes it.
                let _ = unsafe { nvsync::fence_clear(obj.0.module.0.lib.sync(), &mut self.raw) };
            }
        }
        self.raw = sys::NVSCI_SYNC_FENCE_INITIALIZER;
    }

    /// A duplicate of this fence (NvSciSyncFenceDup), with its own object reference.
    pub fn try_clone(&self) -> Result<Self> {
        let Some(obj) = &self.obj else {
            return Ok(Self::cleared());
        };
        let mut out = Self::for_object(obj);
        // SAFETY: `self.raw` is a valid fence; `out.raw` is zeroed storage for the copy.
        unsafe { nvsync::fence_dup(obj.0.module.0.lib.sync(), &self.raw, &mut out.raw) }?;
        Ok(out)
    }

    /// Waits on the CPU until the fence expires. `None` (or a timeout beyond NvSci's maximum of
    /// about 292,000 years) waits forever.
    ///
    /// A cleared fence returns at once. Expiry of the timeout gives [`Error::Timeout`]. An object
    /// without CPU wait permission, or a context of another module, is refused with
    /// [`Error::Refused`] ([`Culprit::NotCpuWaiter`], [`Culprit::WaitContextOfAnotherModule`]).
    pub fn wait(&self, ctx: &mut CpuWaitContext, timeout: Option<Duration>) -> Result<()> {
        let Some(obj) = &self.obj else { return Ok(()) };
        if self.is_cleared() {
            return Ok(());
        }
        if !std::sync::Arc::ptr_eq(&obj.0.module.0.lib.0, &ctx.module.0.lib.0) {
            return Err(invalid("ctx", "wait context comes from a different NvSci implementation"));
        }
        // Timeouts beyond what NvSci accepts (about 292,000 years) mean "forever".
        let timeout_us = timeout
            .and_then(|d| i64::try_from(d.as_micros()).ok())
            .filter(|&us| us <= sys::NVSCI_SYS_SYNC_FENCE_MAX_TIMEOUT_US)
            .unwrap_or(-1);
        // SAFETY: the fence and the context are alive; the context is used by this thread only
        // (`&mut`), as the library requires.
        unsafe { nvsync::fence_wait(obj.0.module.0.lib.sync(), &self.raw, ctx.raw, timeout_us) }.map_err(
            |e| match e {
                Error::NvSci { function, code } if code == NvSciError::TIMEOUT => {
                    Error::Timeout {
                        waited_for: crate::error::Wait::Fence { function },
                        // Only a bounded wait runs out.
                        timeout: timeout.unwrap_or(Duration::MAX),
                    }
                }
                e => explain_wait(e, obj, ctx),
            },
        )
    }

    /// The fence's primitive id and value (NvSciSyncFenceExtractFence; NvSciSync 2.3+).
    pub fn id_value(&self) -> Result<(u64, u64)> {
        let Some(obj) = &self.obj else {
            return Err(Error::NvSci {
                function: "NvSciSyncFenceExtractFence",
                code: crate::NvSciError::CLEARED_FENCE,
            });
        };
        // SAFETY: the fence is a fence of this implementation, alive while borrowed.
        unsafe { nvsync::fence_extract_fence(obj.0.module.0.lib.sync(), &self.raw) }
    }

    /// The sync object this fence belongs to (`None` for a fence created cleared).
    pub fn object(&self) -> Option<&SyncObj> {
        self.obj.as_ref()
    }

    /// Pointer to the C fence (valid while `self` lives).
    pub fn as_raw(&self) -> *const sys::NvSciSyncFence {
        &self.raw
    }

    /// Mutable pointer to the C fence storage, for a signaler to fill (CUDA's signal).
    #[cfg(feature = "cuda")]
    pub(crate) fn as_raw_mut(&mut self) -> *mut sys::NvSciSyncFence {
        &mut self.raw
    }

    /// The C fence.
    pub(crate) fn raw_fence(&self) -> &sys::NvSciSyncFence {
        &self.raw
    }

    /// The C fence storage, for a signaler to fill.
    pub(crate) fn storage_mut(&mut self) -> &mut sys::NvSciSyncFence {
        &mut self.raw
    }
}

/// A `BadParameter` refusal of a CPU wait, explained. The crate passes a live fence, a live
/// context and a timeout in range, so the documented reasons left are "syncFence and context
/// are associated with different NvSciSyncModule" and "caller doesn't have CPU wait permissions
/// in NvSciSyncObj associated with syncFence" (NvSciSyncFenceWait, nvscisync.h). The module is
/// judged only for an object this crate allocated or imported (an adopted object's module is
/// its maker's); a reconciled list without `NeedCpuAccess` proves the missing permission
/// whatever the module.
fn explain_wait(e: Error, obj: &SyncObj, ctx: &CpuWaitContext) -> Error {
    let Error::NvSci { function, code } = e else { return e };
    if code != NvSciError::BAD_PARAMETER {
        return e;
    }
    let same_module = std::sync::Arc::ptr_eq(&obj.0.module.0, &ctx.module.0);
    let cpu = obj.attr_list().and_then(|l| l.get_one(super::key::NEED_CPU_ACCESS));
    let culprit = if !obj.0.adopted && !same_module {
        Culprit::WaitContextOfAnotherModule
    } else if matches!(cpu, Ok(None | Some(false))) || !obj.0.adopted {
        Culprit::NotCpuWaiter
    } else {
        return e;
    };
    Error::Refused { function, code, culprit }
}

/// Waits for every fence of a list (each with the same timeout).
pub fn wait_all(fences: &[Fence], ctx: &mut CpuWaitContext, timeout: Option<Duration>) -> Result<()> {
    fences.iter().try_for_each(|f| f.wait(ctx, timeout))
}

/// A CPU wait context (NvSciSyncCpuWaitContext): needed to wait on fences from the CPU.
///
/// One context must not be used by two threads at once, so waiting takes `&mut`.
pub struct CpuWaitContext {
    raw: sys::NvSciSyncCpuWaitContext,
    module: SyncModule,
}

// SAFETY: the context may move between threads; it is not `Sync` because the library forbids
// concurrent use of one context, and every use needs `&mut`.
unsafe impl Send for CpuWaitContext {}

impl Drop for CpuWaitContext {
    fn drop(&mut self) {
        // SAFETY: freed once; no wait can be running (waits borrow `&mut self`).
        let _ = unsafe { nvsync::cpu_wait_context_free(self.module.0.lib.sync(), self.raw) };
    }
}

impl std::fmt::Debug for CpuWaitContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuWaitContext").finish_non_exhaustive()
    }
}

impl CpuWaitContext {
    pub(crate) fn new(module: &SyncModule) -> Result<Self> {
        // SAFETY: the module is alive; the new context is freed once, by `drop`.
        let raw = unsafe { nvsync::cpu_wait_context_alloc(module.0.lib.sync(), module.0.raw) }?;
        Ok(Self { raw, module: module.clone() })
    }
}
