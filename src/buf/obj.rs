//! NvSciBuf buffer objects and CPU access.

use super::types::{BufType, ColorFormat, GpuId, Perm};
use super::{key, BufAttrList, BufAttrListRef, BufModule};
use crate::error::{invalid, Culprit, Error, NvSciError, Result};
use crate::library::Implementation;
use crate::result::{buf as nvbuf, host_gpu};
use core::sync::atomic::{AtomicIsize, Ordering};
use nvsci_sys as sys;
use std::sync::Arc;

/// Layout of one plane of a plane-based image, read from the reconciled attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaneLayout {
    /// Pixel format.
    pub format: ColorFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Row pitch in bytes.
    pub pitch: u32,
    /// Byte offset from the start of the buffer.
    pub offset: u64,
    /// Rows allocated (>= `height`).
    pub aligned_height: u32,
    /// Bytes allocated for the plane.
    pub aligned_size: u64,
    /// Bits per pixel.
    pub bits_per_pixel: u32,
    /// Channels per pixel.
    pub channel_count: u8,
}

/// CPU borrow state shared by every duplicate of one allocation: >0 readers, -1 one writer.
#[derive(Default)]
pub(crate) struct CpuBorrow(AtomicIsize);

/// One reference to an NvSciBuf allocation.
///
/// Dropping it frees the reference (NvSciBufObjFree); the memory goes away with the last one.
/// Duplicates made with [`dup`](Self::dup) or [`dup_with_reduced_perm`](Self::dup_with_reduced_perm)
/// are separate references to the same memory.
pub struct BufObj {
    raw: sys::NvSciBufObj,
    module: BufModule,
    perm: Perm,
    size: u64,
    cpu: Arc<CpuBorrow>,
    /// The reconciled list's `CpuNeedSwCacheCoherency`, read once: CPU accesses flush when set.
    cpu_flush: bool,
}

// SAFETY: NvSciBufObj functions are documented thread-safe and the handle has no thread affinity.
// CPU access to the memory is serialised across all duplicates by the atomic `CpuBorrow` state.
unsafe impl Send for BufObj {}
// SAFETY: `&BufObj` only allows thread-safe library queries and the `CpuBorrow`-guarded access.
unsafe impl Sync for BufObj {}

impl Drop for BufObj {
    fn drop(&mut self) {
        // SAFETY: `raw` is our own reference, freed exactly once. Imports into other APIs borrow
        // the `BufObj`, so none outlives it.
        let _ = unsafe { nvbuf::obj_free(self.module.0.lib.buf(), self.raw) };
    }
}

impl std::fmt::Debug for BufObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufObj").field("size", &self.size).field("perm", &self.perm).finish()
    }
}

impl BufObj {
    /// Allocates a buffer from a reconciled list.
    pub fn alloc(list: &BufAttrList) -> Result<Self> {
        if !list.is_reconciled()? {
            return Err(invalid("list", "BufObj::alloc needs a reconciled attribute list"));
        }
        // SAFETY: the list is alive and reconciled; the new reference is owned by the object.
        let raw = unsafe { nvbuf::obj_alloc(list.module.0.lib.buf(), list.raw) }?;
        Self::wrap(raw, &list.module, Arc::default())
    }

    /// Reconciles `lists` and allocates a buffer from the result in one call
    /// (`NvSciBufAttrListReconcileAndObjAlloc`), for when the reconciled list itself is not
    /// needed (it stays readable through [`attr_list`](Self::attr_list)).
    ///
    /// The lists must be unreconciled and of one implementation (at most
    /// [`MAX_LISTS`](crate::buf::MAX_LISTS)). A conflict is reported exactly as
    /// [`BufAttrList::reconcile`] reports it: [`Error::ReconcileConflict`] naming the
    /// conflicting keys, with the library's dump of the conflict list (which is freed).
    ///
    /// ```
    /// # fn main() -> nvsci::Result<()> {
    /// # #[cfg(feature = "mock")] {
    /// use nvsci::buf::{BufAttr, BufModule, BufObj, BufType, Perm};
    /// let module = BufModule::open(&nvsci::NvSci::mock())?;
    /// let mut camera = module.attr_list()?;
    /// camera.set(&[BufAttr::Types(&[BufType::RAW_BUFFER]), BufAttr::RawSize(4096)])?;
    /// let mut cpu = module.attr_list()?;
    /// cpu.set(&[BufAttr::Types(&[BufType::RAW_BUFFER]), BufAttr::RequiredPerm(Perm::ReadWrite)])?;
    /// let buf = BufObj::reconcile_and_alloc(&[&camera, &cpu])?;
    /// assert_eq!(buf.size(), 4096);
    /// # }
    /// # Ok(()) }
    /// ```
    pub fn reconcile_and_alloc(lists: &[&BufAttrList]) -> Result<Self> {
        const FUNCTION: &str = "NvSciBufAttrListReconcileAndObjAlloc";
        let (module, raws) = BufAttrList::gather(lists)?;
        let mut conflict = core::ptr::null_mut();
        // SAFETY: every input handle is alive (borrowed from `lists`) and `conflict` is NULL. On
        // success the reference is ours; the conflict list, if any, is ours to free
        // (`reconcile_status` does).
        let status = unsafe { nvbuf::reconcile_and_obj_alloc(module.0.lib.buf(), &raws, &mut conflict) };
        let raw = *status.as_ref().unwrap_or(&core::ptr::null_mut());
        BufAttrList::reconcile_status(FUNCTION, status.map(drop), conflict, &module, lists.len())
            .map_err(|e| BufAttrList::explain_reconcile(e, lists))?;
        if raw.is_null() {
            return Err(Error::UnexpectedValue {
                key: "NvSciBufObj",
                detail: format!("{FUNCTION} reported success without an object"),
            });
        }
        Self::wrap(raw, &module, Arc::default())
    }

    /// Adopts a buffer object that another library in this process allocated (a camera's
    /// capture buffer, say) by taking a reference of its own (`NvSciBufObjDup`): the same memory,
    /// with an independent lifetime. The caller keeps `raw` and frees it (`NvSciBufObjFree`)
    /// whenever it likes, before or after the returned object is dropped.
    ///
    /// The returned reference has the permission of the duplicate (`ActualPerm`), and never more
    /// than `raw`'s own `ActualPerm` (read from its attribute list, `NvSciBufObjGetAttrList`): a
    /// read-only foreign reference gives a read-only object, whose CPU writes and read-write
    /// imports are refused. A NULL `raw` is [`Error::NullHandle`]; nothing is created.
    ///
    /// `module` is the module the object is used with on the crate's side (it keeps the loaded
    /// library open); preferably the module the object was allocated under.
    ///
    /// # Safety
    ///
    /// * `raw` is NULL or a live buffer object made by the same loaded implementation `module`
    ///   uses (the same `libnvscibuf.so.1` instance, or the mock when `module` is the mock's):
    ///   NvSci aborts the process on a handle it did not make.
    /// * Nothing frees `raw` while this call runs.
    /// * Nothing about the module the object was allocated under: its maker may close it while the
    ///   returned object lives, since a module is de-initialised only once it is closed and every
    ///   object bound to it is freed (`NvSciBufModuleClose` in nvscibuf.h).
    /// * CPU accesses stay exclusive. The crate orders CPU reads and writes only among the
    ///   returned object and its duplicates ([`dup`](Self::dup)); nobody else (the foreign owner
    ///   through `raw`, another adoption of the same allocation, any other reference to it) may
    ///   write the memory from the CPU while a [`CpuRead`] or [`CpuWrite`] of them exists, nor
    ///   read it while a [`CpuWrite`] exists. Engine accesses are ordered by fences, as always.
    ///
    /// After the call the two references are independent: each side frees its own.
    pub unsafe fn from_foreign(module: &BufModule, raw: sys::NvSciBufObj) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: "NvSciBufObj" });
        }
        let buf = module.0.lib.buf();
        // SAFETY: `raw` is a live object of this implementation (caller contract); the list it
        // returns belongs to the object and is only read below, while `raw` is still live.
        let list = unsafe { nvbuf::obj_get_attr_list(buf, raw) }?;
        // SAFETY: as above; the borrowed list is never freed (`BufAttrListRef`).
        let source_perm =
            unsafe { BufAttrListRef::new(list, module) }.get_one(key::ACTUAL_PERM)?.unwrap_or(Perm::ReadOnly);
        // SAFETY: `raw` is live and not freed during the call (caller contract); the new
        // reference is ours.
        let copy = unsafe { nvbuf::obj_dup(buf, raw) }?;
        let mut obj = Self::wrap(copy, module, Arc::default())?;
        obj.perm = obj.perm.min(source_perm);
        Ok(obj)
    }

    /// Takes ownership of a buffer object reference given away by its maker (one another
    /// library returned for the caller to free, say), without taking a new one: the returned
    /// object frees it (`NvSciBufObjFree`) when dropped. Its permission is the reference's
    /// `ActualPerm`.
    ///
    /// Ownership passes in every case: if reading the object's attributes fails, the reference
    /// is freed before the error is returned. A NULL `raw` is [`Error::NullHandle`] and frees
    /// nothing. Use [`from_foreign`](Self::from_foreign) for a reference its maker keeps.
    ///
    /// # Safety
    ///
    /// As for [`from_foreign`](Self::from_foreign), and nobody else frees or uses `raw` after
    /// this call (it is freed exactly once, by the crate).
    pub unsafe fn from_raw_owned(module: &BufModule, raw: sys::NvSciBufObj) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: "NvSciBufObj" });
        }
        Self::wrap(raw, module, Arc::default())
    }

    /// Takes ownership of `raw` (freed on error too).
    pub(crate) fn wrap(raw: sys::NvSciBufObj, module: &BufModule, cpu: Arc<CpuBorrow>) -> Result<Self> {
        let mut obj =
            Self { raw, module: module.clone(), perm: Perm::ReadOnly, size: 0, cpu, cpu_flush: false };
        // From here on `obj` owns `raw` and frees it on any error below.
        let list = obj.attr_list()?;
        let perm = list.get_one(key::ACTUAL_PERM)?.unwrap_or(Perm::ReadOnly);
        // The size key of the buffer's type (the first type: an Image+Tensor object's size is
        // the image's); a failed query is an error, never a size of 0.
        let size_key = match list.get(key::TYPES)?.first().copied() {
            Some(BufType::RAW_BUFFER) => Some(key::RAW_SIZE),
            Some(BufType::IMAGE) => Some(key::IMAGE_SIZE),
            Some(BufType::TENSOR) => Some(key::TENSOR_SIZE),
            Some(BufType::ARRAY) => Some(key::ARRAY_SIZE),
            _ => None,
        };
        let size = match size_key {
            Some(k) => list.get_one(k)?.unwrap_or(0),
            None => 0,
        };
        let cpu_flush = list.get_one(key::CPU_NEED_SW_CACHE_COHERENCY)?.unwrap_or(false);
        drop(list);
        obj.perm = perm;
        obj.size = size;
        obj.cpu_flush = cpu_flush;
        Ok(obj)
    }

    /// Lowers this reference's permission to at most `perm` (never raises it).
    pub(crate) fn cap_perm(&mut self, perm: Perm) {
        self.perm = self.perm.min(perm);
    }

    /// A new reference with the same permission (never more than this one holds, whatever the
    /// duplicate's attribute list reports).
    pub fn dup(&self) -> Result<Self> {
        // SAFETY: `self.raw` is alive; the new reference is owned by the duplicate.
        let raw = unsafe { nvbuf::obj_dup(self.module.0.lib.buf(), self.raw) }?;
        let mut dup = Self::wrap(raw, &self.module, self.cpu.clone())?;
        dup.perm = dup.perm.min(self.perm);
        Ok(dup)
    }

    /// A new reference with a lower (or equal) permission; raising it is refused.
    pub fn dup_with_reduced_perm(&self, perm: Perm) -> Result<Self> {
        if perm > self.perm {
            return Err(Error::PermissionDenied("a duplicate cannot have more permission than its source"));
        }
        // SAFETY: `self.raw` is alive; `perm` is a valid NvSciBufAttrValAccessPerm value; the new
        // reference is owned by the duplicate.
        let raw = unsafe { nvbuf::obj_dup_with_reduce_perm(self.module.0.lib.buf(), self.raw, perm as u32) }?;
        let mut dup = Self::wrap(raw, &self.module, self.cpu.clone())?;
        // Whatever the duplicate's attribute list says, this reference has at most `perm`.
        dup.perm = dup.perm.min(perm);
        Ok(dup)
    }

    /// The object's reconciled attribute list (borrowed: it belongs to the object).
    pub fn attr_list(&self) -> Result<BufAttrListRef<'_>> {
        // SAFETY: `self.raw` is alive; the returned list is owned by the object and valid while
        // it lives, which the borrow on `self` guarantees.
        let raw = unsafe { nvbuf::obj_get_attr_list(self.module.0.lib.buf(), self.raw) }?;
        // SAFETY: as above; `BufAttrListRef` never frees it.
        Ok(unsafe { BufAttrListRef::new(raw, &self.module) })
    }

    /// This reference's permission (`ActualPerm`).
    pub fn perm(&self) -> Perm {
        self.perm
    }

    /// Size of the buffer in bytes (raw, image, tensor or array size).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The buffer types of the reconciled list.
    pub fn buf_types(&self) -> Result<heapless::Vec<BufType, 5>> {
        self.attr_list()?.get(key::TYPES)
    }

    /// Plane layouts of a plane-based image (empty for other types).
    pub fn planes(&self) -> Result<heapless::Vec<PlaneLayout, 3>> {
        let l = self.attr_list()?;
        let count = l.get_one(key::PLANE_COUNT)?.unwrap_or(0) as usize;
        let formats = l.get(key::PLANE_COLOR_FORMAT)?;
        let widths = l.get(key::PLANE_WIDTH)?;
        let heights = l.get(key::PLANE_HEIGHT)?;
        let pitches = l.get(key::PLANE_PITCH)?;
        let offsets = l.get(key::PLANE_OFFSET)?;
        let aligned_heights = l.get(key::PLANE_ALIGNED_HEIGHT)?;
        let aligned_sizes = l.get(key::PLANE_ALIGNED_SIZE)?;
        let bpp = l.get(key::PLANE_BITS_PER_PIXEL)?;
        let channels = l.get(key::PLANE_CHANNEL_COUNT)?;
        let mut out = heapless::Vec::new();
        for i in 0..count {
            let at = |n: usize| -> Result<()> {
                if i < n {
                    Ok(())
                } else {
                    Err(Error::UnexpectedValue {
                        key: "plane attributes",
                        detail: format!("plane {i} of {count} missing"),
                    })
                }
            };
            at(formats.len().min(widths.len()).min(heights.len()).min(pitches.len()).min(offsets.len()))?;
            at(aligned_heights.len().min(aligned_sizes.len()).min(bpp.len()).min(channels.len()))?;
            let _ = out.push(PlaneLayout {
                format: formats[i],
                width: widths[i],
                height: heights[i],
                pitch: pitches[i],
                offset: offsets[i],
                aligned_height: aligned_heights[i],
                aligned_size: aligned_sizes[i],
                bits_per_pixel: bpp[i],
                channel_count: channels[i],
            });
        }
        Ok(out)
    }

    /// Whether `gpu` needs software cache-coherency operations on this buffer
    /// (`GpuSwNeedCacheCoherency`); `None` when the GPU is not in the list.
    pub fn gpu_sw_need_cache_coherency(&self, gpu: GpuId) -> Result<Option<bool>> {
        let entries = self.attr_list()?.get(key::GPU_SW_NEED_CACHE_COHERENCY)?;
        Ok(entries.iter().find(|e| e.gpu_id == gpu).map(|e| e.cacheable))
    }

    /// Whether the CPU must flush its caches around accesses (`CpuNeedSwCacheCoherency`).
    pub fn cpu_need_sw_cache_coherency(&self) -> Result<bool> {
        Ok(self.attr_list()?.get_one(key::CPU_NEED_SW_CACHE_COHERENCY)?.unwrap_or(false))
    }

    /// Read access to the memory from the CPU. Fails while a [`CpuWrite`] of any duplicate of
    /// this allocation exists, or when the list did not ask for CPU access ([`Error::Refused`]
    /// with [`Culprit::CpuAccessNotRequested`]).
    ///
    /// Where the reconciled list sets `CpuNeedSwCacheCoherency`, the whole buffer is flushed
    /// before the view is handed out: nvscibuf.h asks the CPU "to flush before reads and after
    /// writes" there ([`cpu_need_sw_cache_coherency`](Self::cpu_need_sw_cache_coherency)).
    pub fn cpu_read(&self) -> Result<CpuRead<'_>> {
        self.borrow(false)?;
        let mut guard = CpuRead { obj: self, ptr: core::ptr::null() };
        // SAFETY: `self.raw` is alive; the mapping lives as long as the object, which the guard
        // borrows, and the borrow state taken above orders CPU accesses.
        let ptr = unsafe { nvbuf::obj_get_const_cpu_ptr(self.module.0.lib.buf(), self.raw) }
            .map_err(|e| self.explain_cpu(e))?;
        if ptr.is_null() {
            return Err(Error::NvSci {
                function: "NvSciBufObjGetConstCpuPtr",
                code: crate::NvSciError::BAD_ADDRESS,
            });
        }
        if self.cpu_flush {
            self.flush_cpu_cache(0, self.size)?;
        }
        guard.ptr = ptr as *const u8;
        Ok(guard)
    }

    /// Write access to the memory from the CPU. Needs a read-write reference; fails while any
    /// other CPU access to this allocation exists.
    ///
    /// Where the reconciled list sets `CpuNeedSwCacheCoherency`, the whole buffer is flushed
    /// before the view is handed out (it may be read through) and again when it is dropped
    /// ("flush before reads and after writes", nvscibuf.h). A flush that fails on drop is
    /// logged; call [`CpuWrite::finish`] to see its error.
    pub fn cpu_write(&self) -> Result<CpuWrite<'_>> {
        if self.perm != Perm::ReadWrite {
            return Err(Error::PermissionDenied("CPU write access needs a read-write buffer reference"));
        }
        self.borrow(true)?;
        let mut guard = CpuWrite { obj: self, ptr: core::ptr::null_mut() };
        // SAFETY: `self.raw` is alive; the mapping lives as long as the object, which the guard
        // borrows, and the exclusive borrow state taken above orders CPU accesses.
        let ptr = unsafe { nvbuf::obj_get_cpu_ptr(self.module.0.lib.buf(), self.raw) }
            .map_err(|e| self.explain_cpu(e))?;
        if ptr.is_null() {
            return Err(Error::NvSci {
                function: "NvSciBufObjGetCpuPtr",
                code: crate::NvSciError::BAD_ADDRESS,
            });
        }
        if self.cpu_flush {
            self.flush_cpu_cache(0, self.size)?;
        }
        guard.ptr = ptr as *mut u8;
        Ok(guard)
    }

    /// A `BadParameter` refusal of a CPU mapping, explained when the reconciled list shows why:
    /// "NvSciBufObj either did not request for CPU access by setting
    /// NvSciBufGeneralAttrKey_NeedCpuAccess to true OR does not have" the permission
    /// (NvSciBufObjGetCpuPtr / NvSciBufObjGetConstCpuPtr, nvscibuf.h). A list that does ask
    /// for CPU access leaves the error unexplained (the permission, or a peer's view of the
    /// list, is the library's to judge).
    fn explain_cpu(&self, e: Error) -> Error {
        match e {
            Error::NvSci { function, code } if code == NvSciError::BAD_PARAMETER => {
                let asked = self.attr_list().and_then(|l| l.get_one(key::NEED_CPU_ACCESS));
                match asked {
                    Ok(None | Some(false)) => {
                        Error::Refused { function, code, culprit: Culprit::CpuAccessNotRequested }
                    }
                    _ => e,
                }
            }
            other => other,
        }
    }

    /// Whether this crate's CPU accesses flush the CPU cache (the reconciled list's
    /// `CpuNeedSwCacheCoherency`, read when the object was made).
    pub(crate) fn needs_cpu_flush(&self) -> bool {
        self.cpu_flush
    }

    /// Flushes the CPU cache for a byte range (needed when `cpu_need_sw_cache_coherency`).
    /// [`cpu_read`](Self::cpu_read), [`cpu_write`](Self::cpu_write),
    /// [`put_pixels`](Self::put_pixels) and [`get_pixels`](Self::get_pixels) do this
    /// themselves; memory the CPU reaches otherwise (a pointer kept from elsewhere) is the
    /// caller's to flush.
    pub fn flush_cpu_cache(&self, offset: u64, len: u64) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(invalid("range", format!("{offset}+{len} exceeds buffer size {}", self.size)));
        }
        // SAFETY: `self.raw` is alive and the range lies inside the buffer.
        unsafe { nvbuf::obj_flush_cpu_cache_range(self.module.0.lib.buf(), self.raw, offset, len) }
    }

    fn borrow(&self, write: bool) -> Result<()> {
        let busy = || Error::InvalidArgument {
            name: "cpu access",
            reason: "the buffer is already borrowed for CPU write (or, for a write, read) access".into(),
        };
        if write {
            self.cpu.0.compare_exchange(0, -1, Ordering::Acquire, Ordering::Relaxed).map_err(|_| busy())?;
        } else {
            let mut cur = self.cpu.0.load(Ordering::Relaxed);
            loop {
                if cur < 0 {
                    return Err(busy());
                }
                match self.cpu.0.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => break,
                    Err(v) => cur = v,
                }
            }
        }
        Ok(())
    }

    /// Runs `f` while holding the CPU borrow state of this allocation (exclusively when `write`),
    /// so that a library call writing or reading the memory cannot race a [`CpuRead`] or
    /// [`CpuWrite`] of any duplicate.
    pub(super) fn with_cpu_borrow<R>(&self, write: bool, f: impl FnOnce() -> Result<R>) -> Result<R> {
        self.borrow(write)?;
        let r = f();
        if write {
            self.cpu.0.store(0, Ordering::Release);
        } else {
            self.cpu.0.fetch_sub(1, Ordering::Release);
        }
        r
    }

    /// The implementation this object belongs to.
    pub fn implementation(&self) -> Implementation {
        self.module.implementation()
    }

    /// The module this object belongs to.
    pub fn module(&self) -> &BufModule {
        &self.module
    }

    /// The host memory backing this buffer, `(base, size)`, on implementations whose buffers
    /// reach a GPU through host memory ([`GpuInterop::HostMemory`](crate::GpuInterop)); `None`
    /// on NVIDIA's libraries. Valid while any duplicate of the object lives.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn host_memory(&self) -> Result<Option<(*mut core::ffi::c_void, u64)>> {
        // SAFETY: the object is alive and of the implementation the table belongs to.
        let Some((base, size)) =
            unsafe { host_gpu::buf_obj_get_host_memory(self.module.0.lib.host_gpu(), self.raw) }?
        else {
            return Ok(None);
        };
        if base.is_null() || size < self.size {
            return Err(Error::UnexpectedValue {
                key: "host memory",
                detail: format!("{size} bytes at {base:?} for a {}-byte object", self.size),
            });
        }
        Ok(Some((base, size)))
    }

    /// A new fd of the CUDA virtual-memory allocation backing this buffer and the size to import
    /// it with, on implementations that back some buffers that way (the mock's block-linear
    /// images for a GPU with host-NUMA VMM memory); `None` when the implementation has no such
    /// entry point or this object is host memory.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn gpu_memory_fd(&self) -> Result<Option<(std::os::fd::OwnedFd, u64)>> {
        use std::os::fd::FromRawFd;
        // SAFETY: the object is alive and of the implementation the table belongs to.
        let (fd, size) =
            match unsafe { host_gpu::buf_obj_export_gpu_memory(self.module.0.lib.host_gpu(), self.raw) } {
                Ok(Some(answer)) => answer,
                // No such entry point, or an object of host memory.
                Ok(None) => return Ok(None),
                Err(Error::NvSci { code, .. }) if code == NvSciError::NOT_SUPPORTED => return Ok(None),
                Err(e) => return Err(e),
            };
        if fd < 0 {
            return Err(Error::UnexpectedValue { key: "GPU memory fd", detail: format!("{fd}") });
        }
        // SAFETY: the entry point hands the caller a new descriptor it owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        if size < self.size {
            return Err(Error::UnexpectedValue {
                key: "GPU memory size",
                detail: format!("{size} bytes for a {}-byte object", self.size),
            });
        }
        Ok(Some((fd, size)))
    }

    /// The raw handle (valid while `self` lives; do not free it).
    pub fn as_raw(&self) -> sys::NvSciBufObj {
        self.raw
    }
}

/// CPU read access to a buffer; derefs to its bytes.
pub struct CpuRead<'a> {
    obj: &'a BufObj,
    ptr: *const u8,
}

impl Drop for CpuRead<'_> {
    fn drop(&mut self) {
        self.obj.cpu.0.fetch_sub(1, Ordering::Release);
    }
}

impl core::ops::Deref for CpuRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the library mapped `size` bytes at `ptr` for as long as the object lives (we
        // borrow it), and the shared borrow state excludes writers through any duplicate.
        unsafe { core::slice::from_raw_parts(self.ptr, self.obj.size as usize) }
    }
}

/// Exclusive CPU write access to a buffer; derefs to its bytes.
pub struct CpuWrite<'a> {
    obj: &'a BufObj,
    ptr: *mut u8,
}

impl CpuWrite<'_> {
    /// Ends the write access, flushing the CPU cache where the buffer needs it (see
    /// [`BufObj::cpu_write`]), and returns the flush's error instead of logging it.
    pub fn finish(mut self) -> Result<()> {
        let r = self.flush();
        self.ptr = core::ptr::null_mut();
        r
    }

    fn flush(&self) -> Result<()> {
        if self.obj.cpu_flush && !self.ptr.is_null() {
            self.obj.flush_cpu_cache(0, self.obj.size)
        } else {
            Ok(())
        }
    }
}

impl Drop for CpuWrite<'_> {
    fn drop(&mut self) {
        // "after writes" (nvscibuf.h, CpuNeedSwCacheCoherency): before the borrow ends, so no
        // other party reads the buffer before the flush.
        if let Err(e) = self.flush() {
            log::error!("CPU cache flush after a CPU write failed: {e}");
        }
        self.obj.cpu.0.store(0, Ordering::Release);
    }
}

impl core::ops::Deref for CpuWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: see `deref_mut`.
        unsafe { core::slice::from_raw_parts(self.ptr, self.obj.size as usize) }
    }
}

impl core::ops::DerefMut for CpuWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        if self.ptr.is_null() {
            return &mut [];
        }
        // SAFETY: the library mapped `size` writable bytes at `ptr` while the object lives; the
        // shared borrow state makes this the only CPU access through any duplicate.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.obj.size as usize) }
    }
}
