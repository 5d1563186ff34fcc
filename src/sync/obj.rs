//! NvSciSync objects.

use super::{Fence, SyncAttrList, SyncAttrListRef, SyncModule};
use crate::error::{invalid, Culprit, Error, NvSciError, Result};
use crate::library::Implementation;
use crate::result::{host_gpu, sync as nvsync};
use nvsci_sys as sys;
use std::sync::Arc;

pub(crate) struct ObjInner {
    pub(crate) raw: sys::NvSciSyncObj,
    pub(crate) module: SyncModule,
    /// A reference to an object another library allocated (`from_foreign`, `from_raw_owned`):
    /// its module in the library is the maker's, which `module` need not be.
    pub(crate) adopted: bool,
}

// SAFETY: NvSciSync object functions are documented thread-safe and the handle has no thread
// affinity; the Rust side never mutates it.
unsafe impl Send for ObjInner {}
// SAFETY: as above: shared references only reach thread-safe library calls.
unsafe impl Sync for ObjInner {}

impl Drop for ObjInner {
    fn drop(&mut self) {
        // SAFETY: freed once, after every `SyncObj` clone and every `Fence` made from it (each
        // holds this `Arc`) and after every import into another API (those borrow or hold it).
        let _ = unsafe { nvsync::obj_free(self.module.0.lib.sync(), self.raw) };
    }
}

/// An NvSciSync object: the primitive fences are generated from and waited on.
///
/// Cheap to clone (reference counted); fences and imports hold a clone, so the object outlives
/// them.
#[derive(Clone)]
pub struct SyncObj(pub(crate) Arc<ObjInner>);

impl std::fmt::Debug for SyncObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncObj").field("raw", &self.0.raw).finish()
    }
}

impl SyncObj {
    /// Allocates a sync object from a reconciled list.
    pub fn alloc(list: &SyncAttrList) -> Result<Self> {
        if !list.is_reconciled()? {
            return Err(invalid("list", "SyncObj::alloc needs a reconciled attribute list"));
        }
        // SAFETY: the list is alive and reconciled; the new object is freed once, by `ObjInner`.
        let raw = unsafe { nvsync::obj_alloc(list.module.0.lib.sync(), list.raw) }?;
        Ok(Self(Arc::new(ObjInner { raw, module: list.module.clone(), adopted: false })))
    }

    /// Reconciles `lists` and allocates a sync object from the result in one call
    /// (`NvSciSyncAttrListReconcileAndObjAlloc`), for when the reconciled list itself is not
    /// needed (it stays readable through [`attr_list`](Self::attr_list)).
    ///
    /// The lists must be unreconciled and of one implementation (at most
    /// [`MAX_LISTS`](crate::buf::MAX_LISTS)). A conflict is reported exactly as
    /// [`SyncAttrList::reconcile`] reports it: [`Error::ReconcileConflict`] naming the
    /// conflicting keys, with the library's dump of the conflict list (which is freed).
    pub fn reconcile_and_alloc(lists: &[&SyncAttrList]) -> Result<Self> {
        const FUNCTION: &str = "NvSciSyncAttrListReconcileAndObjAlloc";
        let (module, raws) = SyncAttrList::gather(lists)?;
        let mut conflict = core::ptr::null_mut();
        // SAFETY: every input handle is alive (borrowed from `lists`) and `conflict` is NULL. On
        // success the object is ours; the conflict list, if any, is ours to free
        // (`reconcile_status` does).
        let status = unsafe { nvsync::reconcile_and_obj_alloc(module.0.lib.sync(), &raws, &mut conflict) };
        let raw = *status.as_ref().unwrap_or(&core::ptr::null_mut());
        SyncAttrList::reconcile_status(FUNCTION, status.map(drop), conflict, &module, lists.len())
            .map_err(|e| SyncAttrList::explain_reconcile(e, lists))?;
        if raw.is_null() {
            return Err(Error::UnexpectedValue {
                key: "NvSciSyncObj",
                detail: format!("{FUNCTION} reported success without an object"),
            });
        }
        Ok(Self::from_raw(raw, &module))
    }

    /// Takes ownership of `raw`, an object created under `module`.
    pub(crate) fn from_raw(raw: sys::NvSciSyncObj, module: &SyncModule) -> Self {
        Self(Arc::new(ObjInner { raw, module: module.clone(), adopted: false }))
    }

    /// Adopts a sync object that another library in this process allocated (the object a camera
    /// signals its frames with, say) by taking a reference of its own (`NvSciSyncObjDup`): the
    /// same object, with an independent lifetime. The caller keeps `raw` and frees it
    /// (`NvSciSyncObjFree`) whenever it likes, before or after the returned object is dropped.
    /// Fences of the object are adopted with [`Fence::from_foreign`].
    ///
    /// A NULL `raw` is [`Error::NullHandle`](crate::Error::NullHandle); nothing is created.
    ///
    /// `module` is the module the object is used with on the crate's side (it keeps the loaded
    /// library open); preferably the module the object was allocated under, because CPU waits on
    /// the object's fences need a wait context of that module (the mock refuses a context of
    /// another module with `NvSciError_BadParameter`).
    ///
    /// # Safety
    ///
    /// * `raw` is NULL or a live sync object made by the same loaded implementation `module`
    ///   uses (the same `libnvscisync.so.1` instance, or the mock when `module` is the mock's):
    ///   NvSci aborts the process on a handle it did not make.
    /// * Nothing frees `raw` while this call runs.
    /// * Nothing about the module the object was allocated under: its maker may close it while the
    ///   returned object lives, since a module is de-initialised only once it is closed and every
    ///   object bound to it is freed (`NvSciSyncModuleClose` in nvscisync.h).
    ///
    /// After the call the two references are independent: each side frees its own.
    pub unsafe fn from_foreign(module: &SyncModule, raw: sys::NvSciSyncObj) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: "NvSciSyncObj" });
        }
        // SAFETY: `raw` is a live object of this implementation, not freed during the call
        // (caller contract); the new reference is ours.
        let copy = unsafe { nvsync::obj_dup(module.0.lib.sync(), raw) }?;
        Ok(Self(Arc::new(ObjInner { raw: copy, module: module.clone(), adopted: true })))
    }

    /// Takes ownership of a sync object reference given away by its maker (one another library
    /// returned for the caller to free, say), without taking a new one: the returned object
    /// frees it (`NvSciSyncObjFree`) when its last clone is dropped.
    ///
    /// A NULL `raw` is [`Error::NullHandle`](crate::Error::NullHandle). Use
    /// [`from_foreign`](Self::from_foreign) for a reference its maker keeps.
    ///
    /// # Safety
    ///
    /// As for [`from_foreign`](Self::from_foreign), and nobody else frees or uses `raw` after
    /// this call (it is freed exactly once, by the crate).
    pub unsafe fn from_raw_owned(module: &SyncModule, raw: sys::NvSciSyncObj) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: "NvSciSyncObj" });
        }
        Ok(Self(Arc::new(ObjInner { raw, module: module.clone(), adopted: true })))
    }

    /// The object's reconciled attribute list (borrowed from the object).
    pub fn attr_list(&self) -> Result<SyncAttrListRef<'_>> {
        // SAFETY: the object is alive; the list it returns belongs to it and lives as long.
        let raw = unsafe { nvsync::obj_get_attr_list(self.0.module.0.lib.sync(), self.0.raw) }?;
        // SAFETY: as above; the reference never frees it.
        Ok(unsafe { SyncAttrListRef::new(raw, &self.0.module) })
    }

    /// Generates the fence of the next CPU signal (the CPU must be the signaler); [`Fence`] has
    /// an example of a CPU signal and wait.
    pub fn generate_fence(&self) -> Result<Fence> {
        let mut fence = Fence::for_object(self);
        // SAFETY: the object is alive and the fence storage is zeroed (cleared) as required.
        unsafe { nvsync::obj_generate_fence(self.0.module.0.lib.sync(), self.0.raw, fence.storage_mut()) }
            .map_err(not_cpu_signaler)?;
        Ok(fence)
    }

    /// Signals from the CPU, expiring the oldest outstanding generated fence. An object whose
    /// signaler is not this process's CPU is refused with [`Error::Refused`] and
    /// [`Culprit::NotCpuSignaler`].
    pub fn signal(&self) -> Result<()> {
        // SAFETY: the object is alive.
        unsafe { nvsync::obj_signal(self.0.module.0.lib.sync(), self.0.raw) }.map_err(not_cpu_signaler)
    }

    /// The host address of the object's 64-bit counter, on implementations whose sync objects
    /// reach a GPU through host memory ([`GpuInterop::HostMemory`](crate::GpuInterop)); `None`
    /// on NVIDIA's libraries. Valid while any clone of this object lives.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn host_counter(&self) -> Result<Option<*mut u64>> {
        // SAFETY: the object is alive and of the implementation the table belongs to.
        let Some(counter) =
            unsafe { host_gpu::sync_obj_get_counter(self.0.module.0.lib.host_gpu(), self.0.raw) }?
        else {
            return Ok(None);
        };
        if counter.is_null() || !counter.is_aligned() {
            return Err(invalid("counter", format!("the implementation returned {counter:?}")));
        }
        Ok(Some(counter))
    }

    /// Fills `fence` (cleared first) with the fence of the next signal by this object's engine
    /// signaler (a GPU stream writing the counter); host-memory implementations only.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn generate_engine_fence_into(&self, fence: &mut Fence) -> Result<()> {
        let t = self.0.module.0.lib.host_gpu();
        if t.SyncObjGenerateEngineFence.is_none() {
            return Err(crate::result::missing("SyncObjGenerateEngineFence"));
        }
        fence.reset_for(self);
        // SAFETY: the object is alive and the fence storage is cleared (reset above).
        unsafe { host_gpu::sync_obj_generate_engine_fence(t, self.0.raw, fence.storage_mut()) }?
            .ok_or_else(|| crate::result::missing("SyncObjGenerateEngineFence"))
    }

    /// The module this object belongs to.
    pub fn module(&self) -> &SyncModule {
        &self.0.module
    }

    /// The implementation this object belongs to.
    pub fn implementation(&self) -> Implementation {
        self.0.module.implementation()
    }

    /// The raw handle (valid while any clone lives; do not free it).
    pub fn as_raw(&self) -> sys::NvSciSyncObj {
        self.0.raw
    }
}

/// A `BadParameter` refusal of a CPU signal or fence generation, explained. The crate passes a
/// live object (and zeroed fence storage), so the documented reasons left are "syncObj is not a
/// CPU Signaler" and "syncObj does not own the backing primitive" (NvSciSyncObjSignal,
/// NvSciSyncObjGenerateFence, nvscisync.h): both mean this process's CPU is not the signaler.
fn not_cpu_signaler(e: Error) -> Error {
    match e {
        Error::NvSci { function, code } if code == NvSciError::BAD_PARAMETER => {
            Error::Refused { function, code, culprit: Culprit::NotCpuSignaler }
        }
        other => other,
    }
}
