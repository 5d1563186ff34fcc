//! External memory imported into CUDA, and its mappings.
//!
//! Ownership encodes teardown order: a [`MappedBuffer`] or [`MappedArray`] holds its
//! [`ExternalMemory`], which holds the NvSciBuf object reference it was imported from, so the
//! driver objects are always destroyed before the memory they describe.

use super::array::{level_extent, region_copy, ArrayDesc, ArrayRegion};
use super::desc;
use super::device::CudaGpu;
use super::host::HostRegistration;
use super::memsync::{self, CoherencyGuard};
use super::result::{cu, memory as mem, CUDA_ERROR_NOT_SUPPORTED};
use super::teardown::succeeded;
use crate::buf::{BufObj, ColorFormat, ImageLayout, Perm, PlaneLayout};
use crate::error::{invalid, CudaError, Error, Result};
use crate::GpuInterop;
use core::marker::PhantomData;
use cudarc::driver::result::{external_memory, memory_free};
use cudarc::driver::{sys, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, HostSlice, SyncOnDrop};
use std::os::fd::OwnedFd;
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// Access level of an import, carried in the type.
pub trait Access: sealed::Sealed + Send + Sync + 'static {
    /// Whether device code may write.
    const WRITABLE: bool;
}

/// Device code may only read (e.g. a read-only NvSciBuf duplicate).
#[derive(Debug)]
pub enum ReadOnly {}
/// Device code may read and write.
#[derive(Debug)]
pub enum ReadWrite {}
impl sealed::Sealed for ReadOnly {}
impl sealed::Sealed for ReadWrite {}
impl Access for ReadOnly {
    const WRITABLE: bool = false;
}
impl Access for ReadWrite {
    const WRITABLE: bool = true;
}

enum Source {
    NvSciBuf {
        _obj: BufObj,
        _coherency: Option<CoherencyGuard>,
        layout: Option<ImageLayout>,
    },
    /// An opaque fd; `dedicated`: the memory belongs to one image or buffer of the exporting API
    /// (a Vulkan dedicated allocation), laid out by the driver for it.
    Fd {
        dedicated: bool,
    },
    /// Host memory of an emulated NvSciBuf object, page-locked and used in place (no
    /// `CUexternalMemory`: `raw` is NULL).
    HostMemory {
        reg: HostRegistration,
        _coherency: Option<CoherencyGuard>,
        layout: Option<ImageLayout>,
    },
}

struct Inner {
    raw: sys::CUexternalMemory,
    size: u64,
    dev: CudaGpu,
    /// `None` only once the drop has handed it to the teardown queue.
    source: Option<Source>,
}

// SAFETY: a CUexternalMemory handle is usable from any thread that binds its context (done
// before every driver call here); the NvSciBuf object held is itself Send + Sync.
unsafe impl Send for Inner {}
// SAFETY: shared access only reads the handle and passes it to thread-safe driver calls.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        let raw = self.raw as usize;
        let source = self.source.take();
        self.dev.destroy_after_work("cuDestroyExternalMemory", move || {
            if raw == 0 {
                // Host memory: the registration unregisters (or leaks) on its own drop, now that
                // the work that used the import has finished.
                drop(source);
                return;
            }
            // SAFETY: every mapping holds this `Inner` through an `Arc`, so none is alive, and
            // the work that used the import has finished; the handle is destroyed once, before
            // the NvSciBuf object it came from is freed.
            let r = unsafe { external_memory::destroy_external_memory(raw as sys::CUexternalMemory) };
            let r = r.map_err(cu("cuDestroyExternalMemory"));
            if succeeded("cuDestroyExternalMemory", r) || !matches!(source, Some(Source::NvSciBuf { .. })) {
                drop(source);
            } else {
                // CUDA still refers to the object: freeing it now would be undefined behaviour
                // (the coherency count stays raised with it, which only makes `MemSync::Auto`
                // safer).
                std::mem::forget(source);
            }
        });
    }
}

/// Memory imported into CUDA: from an NvSciBuf object or an opaque fd.
pub struct ExternalMemory<A: Access = ReadWrite> {
    inner: Arc<Inner>,
    _access: PhantomData<A>,
}

impl<A: Access> Clone for ExternalMemory<A> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), _access: PhantomData }
    }
}

impl<A: Access> std::fmt::Debug for ExternalMemory<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalMemory")
            .field("size", &self.inner.size)
            .field("writable", &A::WRITABLE)
            .finish()
    }
}

fn import(
    dev: &CudaGpu,
    d: &sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
    what: &'static str,
) -> Result<sys::CUexternalMemory> {
    dev.bind()?;
    // SAFETY: the descriptor is fully initialised and its handle is valid for the call (the
    // caller keeps an NvSciBuf object alive with the import, and reclaims an fd the driver did
    // not take).
    match unsafe { mem::import_external_memory(d) } {
        Err(Error::Cuda(CudaError::Call { code: CUDA_ERROR_NOT_SUPPORTED, .. })) if what == "NvSciBuf" => {
            Err(Error::Unsupported {
                what: "importing NvSciBuf memory into CUDA",
                reason: crate::error::UnsupportedReason::CudaWithoutNvSciBuf,
            })
        }
        r => r,
    }
}

impl<A: Access> ExternalMemory<A> {
    /// Imports an NvSciBuf object. The import keeps its own reference to the object (a
    /// duplicate), so the object outlives it. A [`ReadWrite`] import of a read-only reference is
    /// refused; import it as [`ReadOnly`].
    ///
    /// How depends on the implementation ([`NvSci::gpu_interop`](crate::NvSci::gpu_interop)):
    /// NVIDIA's libraries go through `cuImportExternalMemory` with the NvSciBuf handle type
    /// (Tegra only; desktop drivers refuse it: [`Error::Unsupported`]). An emulation (the mock)
    /// whose object is CUDA virtual memory (`BufObjExportGpuMemory` answers: the mock's
    /// block-linear images for a GPU with host-NUMA VMM memory) goes through the same
    /// `cuImportExternalMemory` with the opaque-fd handle type, and its planes map as arrays
    /// ([`map_plane`](Self::map_plane)); one whose object is host memory is page-locked with
    /// `cuMemHostRegister` and used in place, [`map_buffer`](Self::map_buffer) hands out its
    /// device address, and arrays cannot be mapped from it ([`Error::Unsupported`]).
    ///
    /// CPU access and imports coexist: a CPU mapping of the buffer (`BufObj::cpu_read` /
    /// `cpu_write`) may be held while it is imported, also read-write, as on Tegra where both
    /// engines share the memory. The crate cannot see what queued GPU work touches, so ordering
    /// is the caller's, through fences: the CPU's writes before a fence the GPU waits for, the
    /// GPU's writes before a signal the CPU waits for (the frame ring does both). Where the
    /// reconciled list says so, caches must be maintained too: `CpuNeedSwCacheCoherency` ->
    /// `BufObj::flush_cpu_cache` around CPU accesses; `GpuSwNeedCacheCoherency` -> waits and
    /// signals that do not skip NvSciBuf memory synchronisation ([`MemSync`](super::MemSync)).
    pub fn from_buf_obj(dev: &CudaGpu, obj: &BufObj) -> Result<Self> {
        if A::WRITABLE && obj.perm() != Perm::ReadWrite {
            return Err(Error::PermissionDenied(
                "a read-only NvSciBuf reference can only be imported as ReadOnly",
            ));
        }
        let size = obj.size();
        if size == 0 {
            return Err(invalid("obj", "the object's reconciled size is 0"));
        }
        let held = obj.dup()?;
        // NvSciBuf before 2.8 has no coherency key: assume coherency is needed.
        let needs = held.gpu_sw_need_cache_coherency(dev.gpu_id()).ok().flatten().unwrap_or(true);
        log::debug!(
            "NvSciBuf import on GPU {:02x?}: GpuSwNeedCacheCoherency = {needs}",
            &dev.gpu_id().0[..4]
        );
        let layout = held.attr_list()?.get_one(crate::buf::key::IMAGE_LAYOUT)?;
        if obj.module().library().gpu_interop() == GpuInterop::HostMemory {
            if let Some((fd, len)) = held.gpu_memory_fd()? {
                // CUDA virtual memory exported as an fd: the import Tegra makes, with the opaque-fd
                // handle type instead of NvSciBuf's; mapped through the driver, arrays included.
                dev.bind()?; // before duplicating: a duplicate is only made when the driver will see it
                let dup = super::fd::for_driver(&fd)
                    .map_err(|e| invalid("obj", format!("cannot duplicate its fd: {e}")))?;
                let d = desc::opaque_fd_memory(dup, len, false);
                let raw = import(dev, &d, "NvSciBuf object's CUDA memory");
                if raw.is_err() {
                    super::fd::reclaim_if_unconsumed(dup, &fd);
                }
                drop(fd);
                let _coherency = needs.then(memsync::track_import_needing_coherency);
                return Ok(Self::wrap(raw?, size, dev, Source::NvSciBuf { _obj: held, _coherency, layout }));
            }
            let (base, len) = held.host_memory()?.ok_or(Error::Unsupported {
                what: "BufObjGetHostMemory",
                reason: crate::error::UnsupportedReason::MissingHostGpuEntryPoint,
            })?;
            let len = usize::try_from(len)
                .map_err(|_| invalid("obj", "host memory larger than the address space"))?;
            // SAFETY: the memory belongs to the object `held` duplicates and stays allocated while
            // any duplicate lives; the registration owns `held`.
            let reg = unsafe { HostRegistration::new(dev, base, len, Box::new(held)) }?;
            let _coherency = needs.then(memsync::track_import_needing_coherency);
            let source = Source::HostMemory { reg, _coherency, layout };
            return Ok(Self::wrap(core::ptr::null_mut(), size, dev, source));
        }
        let d = desc::nvscibuf_memory(held.as_raw() as *const _, size);
        let raw = import(dev, &d, "NvSciBuf")?;
        let _coherency = needs.then(memsync::track_import_needing_coherency);
        Ok(Self::wrap(raw, size, dev, Source::NvSciBuf { _obj: held, _coherency, layout }))
    }

    /// Imports an opaque POSIX fd (Vulkan `OPAQUE_FD`, CUDA VMM export) of `size` bytes.
    ///
    /// Consumes `fd`: the driver is given a duplicate (its own from then on; after a failed import
    /// the duplicate is closed here if the driver left it open) and `fd` itself is closed here
    /// exactly once.
    /// `dedicated` must match how the memory was allocated (Vulkan dedicated allocations: true).
    /// `size` must be the exported allocation's: the driver does not check it (an import of a
    /// CUDA VMM export with 64 times its size is accepted on an H100, driver 580), and a mapping
    /// past the real allocation makes the GPU fault when it is accessed.
    pub fn from_opaque_fd(dev: &CudaGpu, fd: OwnedFd, size: u64, dedicated: bool) -> Result<Self> {
        if size == 0 {
            return Err(invalid("size", "an import of 0 bytes is not allowed"));
        }
        dev.bind()?; // before duplicating: a duplicate is only made when the driver will see it
        let dup = super::fd::for_driver(&fd).map_err(|e| invalid("fd", format!("cannot duplicate: {e}")))?;
        let d = desc::opaque_fd_memory(dup, size, dedicated);
        let raw = import(dev, &d, "opaque fd");
        if raw.is_err() {
            super::fd::reclaim_if_unconsumed(dup, &fd);
        }
        drop(fd); // ours, closed once; the driver owns the duplicate (or it was reclaimed above)
        Ok(Self::wrap(raw?, size, dev, Source::Fd { dedicated }))
    }

    fn wrap(raw: sys::CUexternalMemory, size: u64, dev: &CudaGpu, source: Source) -> Self {
        Self {
            inner: Arc::new(Inner { raw, size, dev: dev.clone(), source: Some(source) }),
            _access: PhantomData,
        }
    }

    /// Imported size in bytes.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// Maps `len` bytes at `offset` as a linear device buffer (checked against the size first).
    pub fn map_buffer(&self, offset: u64, len: u64) -> Result<MappedBuffer<A>> {
        if len == 0 || offset.checked_add(len).is_none_or(|end| end > self.inner.size) {
            return Err(invalid(
                "range",
                format!("{offset}+{len} is outside the {} imported bytes", self.inner.size),
            ));
        }
        self.inner.dev.bind()?;
        if let Some(Source::HostMemory { reg, .. }) = &self.inner.source {
            return Ok(MappedBuffer {
                ptr: reg.device_ptr() + offset,
                len: len as usize,
                stream: self.inner.dev.default_stream(),
                owned: false,
                mem: self.clone(),
            });
        }
        // SAFETY: the external memory is alive and the range lies inside it (checked above); the
        // mapping is freed once, with `memory_free`, by the `MappedBuffer`'s drop.
        let ptr = unsafe { external_memory::get_mapped_buffer(self.inner.raw, offset, len) }
            .map_err(cu("cuExternalMemoryGetMappedBuffer"))?;
        Ok(MappedBuffer {
            ptr,
            len: len as usize,
            stream: self.inner.dev.default_stream(),
            owned: true,
            mem: self.clone(),
        })
    }

    /// Maps the whole import as a linear device buffer.
    pub fn map_all(&self) -> Result<MappedBuffer<A>> {
        self.map_buffer(0, self.inner.size)
    }

    /// Maps one plane of an image as a CUDA mipmapped array of one level, as NVIDIA's samples do
    /// (cudaNvSciBufMultiplanar, cudaNvSciNvMedia's cuda_consumer): the extent is the plane's
    /// `width` x `height`, the format and channel count follow its colour format, the array
    /// starts at the plane's offset, and `flags` are the `CUDA_ARRAY3D_*` flags CUDA accepts
    /// for external-memory arrays (e.g. `CUDA_ARRAY3D_SURFACE_LDST` for surface objects).
    ///
    /// NvSciBuf imports: only block-linear images. NVIDIA documents no CUDA array mapping of a
    /// pitch-linear NvSciBuf plane (the samples map only block-linear planes and waive the
    /// rest), so one is refused with [`Error::Unsupported`]; map the plane's bytes with
    /// [`map_buffer`](Self::map_buffer)`(plane.offset, plane.pitch * plane.height)` instead.
    ///
    /// The luma plane of a block-linear NV12 frame as an array for surface loads and stores
    /// (NvSciBuf imports need a Tegra driver):
    ///
    /// ```no_run
    /// # fn main() -> nvsci::Result<()> {
    /// use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ImageLayout};
    /// use nvsci::buf::{Perm, ScanType};
    /// use nvsci::cuda::cudarc::driver::sys::CUDA_ARRAY3D_SURFACE_LDST;
    /// use nvsci::cuda::{CudaGpu, ExternalMemory, ReadWrite};
    ///
    /// let gpu = CudaGpu::open(0)?;
    /// let module = BufModule::open(&nvsci::NvSci::load()?)?;
    /// let mut list = module.attr_list()?;
    /// list.set(&[
    ///     BufAttr::Types(&[BufType::IMAGE]),
    ///     BufAttr::Layout(ImageLayout::BlockLinear),
    ///     BufAttr::ScanType(ScanType::Progressive),
    ///     BufAttr::PlaneCount(2),
    ///     BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8U8]),
    ///     BufAttr::PlaneWidth(&[1920, 960]),
    ///     BufAttr::PlaneHeight(&[1080, 540]),
    ///     BufAttr::RequiredPerm(Perm::ReadWrite),
    ///     BufAttr::GpuId(&[gpu.gpu_id()]),
    /// ])?;
    /// let frame = BufObj::alloc(&BufAttrList::reconcile(&[&list])?)?;
    /// let planes = frame.planes()?;
    /// let mem = ExternalMemory::<ReadWrite>::from_buf_obj(&gpu, &frame)?;
    /// let luma = mem.map_plane(&planes[0], CUDA_ARRAY3D_SURFACE_LDST)?;
    /// assert_eq!((luma.desc().width, luma.desc().height, luma.desc().channels), (1920, 1080, 1));
    /// // luma.level0(): the CUarray to build a surface object on.
    /// # Ok(()) }
    /// ```
    pub fn map_plane(&self, plane: &PlaneLayout, flags: u32) -> Result<MappedArray<A>> {
        if let Some(Source::NvSciBuf { layout, .. } | Source::HostMemory { layout, .. }) = &self.inner.source
        {
            if *layout != Some(ImageLayout::BlockLinear) {
                return Err(Error::Unsupported {
                    what: "mapping a plane of a pitch-linear (or non-image) NvSciBuf object as a CUDA array",
                    reason: crate::error::UnsupportedReason::ArrayOfPitchLinearPlane,
                });
            }
        }
        let (format, channels) = array_format(plane.format)
            .ok_or_else(|| invalid("plane.format", format!("{:?} has no CUDA array format", plane.format)))?;
        if plane.bits_per_pixel == 0 || !plane.bits_per_pixel.is_multiple_of(8) {
            return Err(invalid("plane.bits_per_pixel", format!("{}", plane.bits_per_pixel)));
        }
        self.map_array(ArrayDesc {
            offset: plane.offset,
            width: plane.width as usize,
            height: plane.height as usize,
            format,
            channels,
            bytes_per_texel: plane.bits_per_pixel / 8,
            flags,
            levels: 1,
        })
    }

    /// Maps a 2D array with an explicit description (e.g. a Vulkan image), with
    /// [`a.levels`](ArrayDesc::levels) mip levels.
    ///
    /// Checked first, before any CUDA call: level 0 packed (`width * height * bytes_per_texel`
    /// bytes at `offset`) lies inside the import, and `levels` is between 1 and the full chain
    /// for the extent (`floor(log2(max(width, height))) + 1`). Memory imported from NvSciBuf
    /// takes exactly one level (a CUDA rule for NvSciBuf imports).
    ///
    /// Then the array's real footprint: CUDA lays arrays out in its own tiled format, which
    /// covers more than the packed texels, and `cuExternalMemoryGetMappedMipmappedArray` does
    /// not check it against the import (on an H100 an array reaching past the import is mapped
    /// and overlaps whatever follows). Where the driver reports the footprint of an array of
    /// this description, all levels included ([`CudaGpu::array_footprint`]), a mapping whose
    /// `offset + footprint` exceeds the import is refused with [`CudaError::ArrayFootprint`]: for
    /// arrays carved out of linear memory (a non-dedicated opaque-fd import). Memory that belongs
    /// to one image (a dedicated Vulkan allocation, an NvSciBuf image) was sized for its layout by
    /// the driver, and CUDA's footprint, rounded to its allocation granularity, would refuse it
    /// (a 64 KiB footprint for a 12.5 KiB Vulkan image on an H100). Where
    /// it cannot (CUDA before 11.6, devices without deferred-mapping arrays) only the packed
    /// check above applies, and the levels after 0 are as the driver that laid the memory out
    /// placed them.
    ///
    /// A 256 x 256 RGBA8 array carved out of linear memory (here a CUDA VMM export, which any
    /// CUDA GPU makes), filled and read back through the array:
    ///
    /// ```no_run
    /// # fn main() -> nvsci::Result<()> {
    /// use nvsci::cuda::cudarc::driver::sys::CUarray_format;
    /// use nvsci::cuda::{ArrayDesc, CudaGpu, ExportableAllocation, ExternalMemory, ReadWrite};
    ///
    /// let gpu = CudaGpu::open(0)?;
    /// let alloc = ExportableAllocation::new(&gpu, 2 << 20)?;
    /// let size = alloc.size() as u64;
    /// let mem = ExternalMemory::<ReadWrite>::from_opaque_fd(&gpu, alloc.export_fd()?, size, false)?;
    /// let array = mem.map_array(ArrayDesc {
    ///     offset: 0,
    ///     width: 256,
    ///     height: 256,
    ///     format: CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8,
    ///     channels: 4,
    ///     bytes_per_texel: 4,
    ///     flags: 0,
    ///     levels: 1,
    /// })?;
    /// let texels: Vec<u8> = (0..256 * 256 * 4).map(|i| (i % 251) as u8).collect();
    /// array.copy_from_host(&texels)?;
    /// let mut back = vec![0u8; texels.len()];
    /// array.copy_to_host(&mut back)?;
    /// assert_eq!(back, texels);
    /// # Ok(()) }
    /// ```
    pub fn map_array(&self, a: ArrayDesc) -> Result<MappedArray<A>> {
        let texel = element_bytes(a.format)
            .filter(|_| matches!(a.channels, 1 | 2 | 4))
            .map(|b| b * a.channels)
            .ok_or_else(|| {
                invalid("array.format", format!("{:?} x {} channels is not supported", a.format, a.channels))
            })?;
        if a.bytes_per_texel != texel {
            return Err(invalid(
                "array.bytes_per_texel",
                format!(
                    "{} given; {:?} x {} channels is {texel} bytes",
                    a.bytes_per_texel, a.format, a.channels
                ),
            ));
        }
        let bytes = (a.width as u64)
            .checked_mul(a.height as u64)
            .and_then(|v| v.checked_mul(a.bytes_per_texel as u64))
            .and_then(|v| v.checked_add(a.offset));
        if a.width == 0 || a.height == 0 || bytes.is_none_or(|end| end > self.inner.size) {
            return Err(invalid(
                "array",
                format!("{a:?} does not fit in the {} imported bytes", self.inner.size),
            ));
        }
        let full_chain = full_mip_chain(a.width, a.height);
        if a.levels == 0 || a.levels > full_chain {
            return Err(invalid(
                "array.levels",
                format!("{} levels; a {}x{} array has 1 to {full_chain}", a.levels, a.width, a.height),
            ));
        }
        if matches!(self.inner.source, Some(Source::HostMemory { .. })) {
            return Err(Error::Unsupported {
                what: "mapping host-memory NvSciBuf objects as CUDA arrays",
                reason: crate::error::UnsupportedReason::ArrayOfHostMemory,
            });
        }
        if matches!(self.inner.source, Some(Source::NvSciBuf { .. })) && a.levels != 1 {
            return Err(invalid(
                "array.levels",
                format!(
                    "{} levels; CUDA maps memory imported from NvSciBuf as a mipmapped array of \
                     exactly one level (numLevels must be 1)",
                    a.levels
                ),
            ));
        }
        // The footprint is that of a fresh CUDA array, rounded up to the driver's allocation
        // granularity (a 64 KiB footprint for a Vulkan image whose dedicated allocation is 12.5 KiB
        // and reads back correctly, H100). It bounds arrays carved out of linear memory; memory
        // that belongs to one image (a dedicated allocation, an NvSciBuf image laid out for this
        // GPU) already has the size its layout needs.
        let carved = matches!(self.inner.source, Some(Source::Fd { dedicated: false }));
        let footprint = if carved { self.inner.dev.array_footprint(&a)? } else { None };
        if let Some(f) = footprint {
            if a.offset.checked_add(f.size).is_none_or(|end| end > self.inner.size) {
                return Err(Error::Cuda(CudaError::ArrayFootprint {
                    offset: a.offset,
                    footprint: f.size,
                    size: self.inner.size,
                }));
            }
            if f.alignment > 0 && !a.offset.is_multiple_of(f.alignment) {
                log::debug!(
                    "CUDA array at offset {} is not at the driver's alignment {}",
                    a.offset,
                    f.alignment
                );
            }
        }
        self.inner.dev.bind()?;
        let d = desc::mipmapped_array(a.offset, a.width, a.height, a.format, a.channels, a.flags, a.levels);
        // SAFETY: the memory is alive, the descriptor is complete, the array lies inside the
        // import (its footprint where the driver reports it, else level 0 packed) and numLevels
        // is within the extent's chain (1 for NvSciBuf imports).
        let raw = unsafe { mem::external_memory_get_mapped_mipmapped_array(self.inner.raw, &d) }?;
        // SAFETY: `raw` is a valid mipmapped array with at least one level.
        let level0 = unsafe { mem::mipmapped_array_get_level(raw, 0) };
        // Built before the level's check, so that a failure destroys the array.
        let arr = MappedArray {
            raw,
            level0: *level0.as_ref().unwrap_or(&core::ptr::null_mut()),
            desc: a,
            mem: self.clone(),
        };
        level0?;
        Ok(arr)
    }
}

/// Levels of a full mip chain for a `width` x `height` extent:
/// `floor(log2(max(width, height))) + 1` (0 for an empty extent). The Vulkan images use it too.
pub(crate) fn full_mip_chain(width: usize, height: usize) -> u32 {
    usize::BITS - width.max(height).leading_zeros()
}

/// Bytes of one channel of a plain (non-block, non-YUV) CUDA array format.
fn element_bytes(f: sys::CUarray_format) -> Option<u32> {
    use sys::CUarray_format::*;
    Some(match f {
        CU_AD_FORMAT_UNSIGNED_INT8 | CU_AD_FORMAT_SIGNED_INT8 => 1,
        CU_AD_FORMAT_UNSIGNED_INT16 | CU_AD_FORMAT_SIGNED_INT16 | CU_AD_FORMAT_HALF => 2,
        CU_AD_FORMAT_UNSIGNED_INT32 | CU_AD_FORMAT_SIGNED_INT32 | CU_AD_FORMAT_FLOAT => 4,
        _ => return None,
    })
}

/// CUDA array format and channel count of an NvSciBuf plane format.
pub fn array_format(f: ColorFormat) -> Option<(sys::CUarray_format, u32)> {
    use sys::CUarray_format::*;
    Some(match f {
        ColorFormat::Y8 | ColorFormat::U8 | ColorFormat::V8 | ColorFormat::A8 => {
            (CU_AD_FORMAT_UNSIGNED_INT8, 1)
        }
        ColorFormat::V8U8 | ColorFormat::U8V8 => (CU_AD_FORMAT_UNSIGNED_INT8, 2),
        ColorFormat::A8B8G8R8 | ColorFormat::A8R8G8B8 | ColorFormat::B8G8R8A8 => {
            (CU_AD_FORMAT_UNSIGNED_INT8, 4)
        }
        ColorFormat::Y16 => (CU_AD_FORMAT_UNSIGNED_INT16, 1),
        ColorFormat::A16B16G16R16 => (CU_AD_FORMAT_UNSIGNED_INT16, 4),
        ColorFormat::FLOAT_A16B16G16R16 => (CU_AD_FORMAT_HALF, 4),
        _ => return None,
    })
}

/// A linear device mapping of imported memory. `MappedBuffer<ReadOnly>` implements only
/// cudarc's [`DevicePtr`]; `MappedBuffer<ReadWrite>` also implements [`DevicePtrMut`]. Asked
/// for its address on a stream of another CUDA context, it answers 0 (and logs the mistake): a
/// copy or memset through cudarc then fails with a CUDA error instead of touching an address that
/// means nothing in that context.
///
/// A writable mapping hands out mutable device pointers:
///
/// ```no_run
/// use nvsci::cuda::{MappedBuffer, ReadWrite};
/// use nvsci::cuda::cudarc::driver::{CudaStream, DevicePtrMut};
/// fn write(m: &mut MappedBuffer<ReadWrite>, s: &CudaStream) -> u64 {
///     m.device_ptr_mut(s).0
/// }
/// ```
///
/// A read-only one (e.g. from a read-only NvSciBuf duplicate) does not compile in that role:
///
/// ```compile_fail
/// use nvsci::cuda::{MappedBuffer, ReadOnly};
/// use nvsci::cuda::cudarc::driver::{CudaStream, DevicePtrMut};
/// fn write(m: &mut MappedBuffer<ReadOnly>, s: &CudaStream) -> u64 {
///     m.device_ptr_mut(s).0
/// }
/// ```
pub struct MappedBuffer<A: Access = ReadWrite> {
    ptr: sys::CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    /// Whether `ptr` came from cuExternalMemoryGetMappedBuffer (freed with cuMemFree).
    owned: bool,
    mem: ExternalMemory<A>,
}

impl<A: Access> Drop for MappedBuffer<A> {
    fn drop(&mut self) {
        let mem = self.mem.clone(); // the import outlives the mapping's release
        let dev = self.mem.inner.dev.clone();
        if !self.owned {
            // Host memory: nothing to free, but the import is released through the teardown
            // queue like every holder that work reaches the memory through, so that it is
            // destroyed only after a synchronisation started after this drop.
            dev.destroy_after_work("release of a host-memory mapping", move || drop(mem));
            return;
        }
        let ptr = self.ptr;
        dev.destroy_after_work("cuMemFree of a mapped buffer", move || {
            // SAFETY: the pointer came from cuExternalMemoryGetMappedBuffer and is freed once with
            // cuMemFree, as the driver documents, after the work that used it finished.
            let r = unsafe { memory_free(ptr) }.map_err(cu("cuMemFree"));
            succeeded("cuMemFree of a mapped buffer", r);
            drop(mem);
        });
    }
}

impl<A: Access> std::fmt::Debug for MappedBuffer<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedBuffer").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

impl<A: Access> MappedBuffer<A> {
    /// The device address (valid while `self` lives). Work the application enqueues with it on
    /// any stream of the context is covered by the teardown: the mapping is freed, off the
    /// dropping thread, only once the work queued on the context before the drop has finished.
    pub fn device_address(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// The memory this mapping belongs to.
    pub fn memory(&self) -> &ExternalMemory<A> {
        &self.mem
    }
}

impl<A: Access> DeviceSlice<u8> for MappedBuffer<A> {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<A: Access> MappedBuffer<A> {
    /// The address for work on `stream`: the mapping's address when the stream belongs to the
    /// mapping's context, else 0. An address of this context means nothing in another one (a
    /// kernel there would fault and poison that context); the null address makes cudarc's copies
    /// and memsets fail with a CUDA error instead, and the mistake is logged.
    fn address_for(&self, stream: &CudaStream) -> sys::CUdeviceptr {
        if stream.context().cu_ctx() == self.stream.context().cu_ctx() {
            self.ptr
        } else {
            log::error!(
                "a mapped buffer of CUDA context {:?} was used on a stream of context {:?}: handing out address 0",
                self.stream.context().cu_ctx(),
                stream.context().cu_ctx()
            );
            0
        }
    }
}

impl<A: Access> DevicePtr<u8> for MappedBuffer<A> {
    /// The mapping's address, or 0 for a stream of another CUDA context (see the type's docs).
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.address_for(stream), SyncOnDrop::Sync(None))
    }
}

impl DevicePtrMut<u8> for MappedBuffer<ReadWrite> {
    /// As [`DevicePtr::device_ptr`].
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.address_for(stream), SyncOnDrop::Sync(None))
    }
}

/// A CUDA mipmapped array mapped from imported memory, with the level count it was mapped with
/// ([`levels`](Self::levels)).
pub struct MappedArray<A: Access = ReadWrite> {
    raw: sys::CUmipmappedArray,
    level0: sys::CUarray,
    desc: ArrayDesc,
    mem: ExternalMemory<A>,
}

impl<A: Access> Drop for MappedArray<A> {
    fn drop(&mut self) {
        let raw = self.raw as usize;
        let mem = self.mem.clone(); // the import outlives the array's destroy
        let dev = self.mem.inner.dev.clone();
        dev.destroy_after_work("cuMipmappedArrayDestroy", move || {
            // SAFETY: destroyed once, as documented for arrays from
            // cuExternalMemoryGetMappedMipmappedArray, after the work that used it finished.
            succeeded("cuMipmappedArrayDestroy", unsafe {
                mem::mipmapped_array_destroy(raw as sys::CUmipmappedArray)
            });
            drop(mem);
        });
    }
}

impl<A: Access> std::fmt::Debug for MappedArray<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedArray").field("desc", &self.desc).finish()
    }
}

impl<A: Access> MappedArray<A> {
    /// The context the array's import belongs to.
    pub(crate) fn gpu(&self) -> &CudaGpu {
        &self.mem.inner.dev
    }

    /// Level 0 of the array (valid while `self` lives), for surface/texture objects and copies.
    pub fn level0(&self) -> sys::CUarray {
        self.level0
    }

    /// Number of mip levels ([`ArrayDesc::levels`] as mapped).
    pub fn levels(&self) -> u32 {
        self.desc.levels
    }

    /// Level `i` of the array (`cuMipmappedArrayGetLevel`; valid while `self` lives, owned by
    /// the mipmapped array), for surface/texture objects and copies. `i` must be below
    /// [`levels`](Self::levels), else [`Error::InvalidArgument`].
    pub fn level(&self, i: u32) -> Result<sys::CUarray> {
        if i >= self.desc.levels {
            return Err(invalid(
                "level",
                format!("level {i} requested, the array has {} levels", self.desc.levels),
            ));
        }
        if i == 0 {
            return Ok(self.level0);
        }
        self.mem.inner.dev.bind()?;
        // SAFETY: `raw` is a live mipmapped array of `levels` levels and `i` is below that.
        unsafe { mem::mipmapped_array_get_level(self.raw, i) }
    }

    /// The description the array was mapped with.
    pub fn desc(&self) -> &ArrayDesc {
        &self.desc
    }
}

// SAFETY: the mappings are plain device addresses/handles usable from any thread that binds the
// context (done before every driver call here).
unsafe impl<A: Access> Send for MappedBuffer<A> {}
// SAFETY: shared access only reads the address.
unsafe impl<A: Access> Sync for MappedBuffer<A> {}
// SAFETY: as for MappedBuffer.
unsafe impl<A: Access> Send for MappedArray<A> {}
// SAFETY: as for MappedBuffer.
unsafe impl<A: Access> Sync for MappedArray<A> {}

/// Whether this CUDA driver accepts NvSciBuf imports from `lib`: allocates a 4 KiB raw buffer
/// for this GPU and imports it. A driver without NvSciBuf support (every desktop driver) gives
/// [`Error::Unsupported`]; the mock is refused the same way.
pub fn probe_nvscibuf_import(dev: &CudaGpu, lib: &crate::NvSci) -> Result<()> {
    use crate::buf::{BufAttr, BufAttrList, BufModule, BufType};
    let m = BufModule::open(lib)?;
    let mut l = m.attr_list()?;
    l.set(&[
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::RawSize(4096),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::GpuId(&[dev.gpu_id()]),
    ])?;
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&l])?)?;
    ExternalMemory::<ReadWrite>::from_buf_obj(dev, &obj).map(drop)
}

/// A `cuMemcpy2D` descriptor between `host` (rows packed, `row` bytes each) and the texels
/// `x_bytes..x_bytes + row` of rows `y..y + height` of `array`.
fn memcpy2d(
    array: sys::CUarray,
    host: *mut core::ffi::c_void,
    to_host: bool,
    (x_bytes, y, row, height): (usize, usize, usize, usize),
) -> sys::CUDA_MEMCPY2D {
    let (host_t, array_t) = (sys::CUmemorytype::CU_MEMORYTYPE_HOST, sys::CUmemorytype::CU_MEMORYTYPE_ARRAY);
    let (array_x, array_y, host_x, host_y) = (x_bytes, y, 0, 0);
    sys::CUDA_MEMCPY2D {
        srcXInBytes: if to_host { array_x } else { host_x },
        srcY: if to_host { array_y } else { host_y },
        srcMemoryType: if to_host { array_t } else { host_t },
        srcHost: host,
        srcDevice: 0,
        srcArray: array,
        srcPitch: row,
        dstXInBytes: if to_host { host_x } else { array_x },
        dstY: if to_host { host_y } else { array_y },
        dstMemoryType: if to_host { host_t } else { array_t },
        dstHost: host,
        dstDevice: 0,
        dstArray: array,
        dstPitch: row,
        WidthInBytes: row,
        Height: height,
    }
}

impl<A: Access> MappedArray<A> {
    fn copy2d(&self, host: *mut core::ffi::c_void, len: usize, to_host: bool) -> Result<()> {
        let whole = ArrayRegion::new(0, 0, self.desc.width, self.desc.height);
        let region = region_copy(&self.desc, 0, &whole, len, "host")?;
        let c = memcpy2d(self.level0, host, to_host, region);
        self.mem.inner.dev.bind()?;
        // SAFETY: the array is alive; `host` points to exactly the region's packed size
        // (checked); the copy is synchronous.
        unsafe { mem::memcpy_2d(&c) }
    }

    /// Copies the whole of level 0 to `dst` (rows packed, `width * bytes_per_texel` bytes each).
    /// Synchronous; [`copy_to_host_async`](Self::copy_to_host_async) copies any level or
    /// rectangle on a stream.
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<()> {
        self.copy2d(dst.as_mut_ptr().cast(), dst.len(), true)
    }

    /// Width and height of level `level` (`max(1, width >> level)` x `max(1, height >> level)`);
    /// [`Error::InvalidArgument`] naming `level` past [`levels`](Self::levels).
    pub fn level_extent(&self, level: u32) -> Result<(usize, usize)> {
        if level >= self.desc.levels {
            return Err(invalid(
                "level",
                format!("level {level} requested, the array has {} levels", self.desc.levels),
            ));
        }
        Ok(level_extent(self.desc.width, self.desc.height, level))
    }

    /// The whole of level `level` as a region.
    pub fn level_region(&self, level: u32) -> Result<ArrayRegion> {
        let (w, h) = self.level_extent(level)?;
        Ok(ArrayRegion::new(0, 0, w, h))
    }

    /// Enqueues on `stream` a copy of `region` of level `level` into `dst`, rows packed
    /// (`region.width * bytes_per_texel` bytes each; `dst` holds exactly `region.height` rows).
    ///
    /// `stream` must belong to the import's context (else [`Error::InvalidArgument`] naming
    /// `stream`); the other arguments are checked before anything is enqueued, each failure an
    /// [`Error::InvalidArgument`] naming `level`, `region.x`, `region.y`, `region.width`,
    /// `region.height` or `dst`.
    ///
    /// When the call returns, what `dst` may be used for is never left to the caller:
    /// * `dst` a cudarc [`PinnedHostSlice`](cudarc::driver::PinnedHostSlice) of a context whose
    ///   streams cudarc synchronises (event tracking on, as by default, and a stream made with
    ///   `new_stream`): the copy is enqueued and the call returns at once. The slice's event
    ///   records the copy, so reading the slice (`as_slice`) or dropping it waits for it, and
    ///   work queued later on `stream` is ordered after it.
    /// * any other host memory (a slice, a `Vec`), whose later use cudarc cannot track: the call
    ///   returns once the copy is done (it waits for `stream`).
    ///
    /// The array stays valid while the copy runs whatever is dropped: dropping the mapping waits
    /// for the context's queued work first.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use nvsci::cuda::{ArrayRegion, CudaGpu, MappedArray};
    /// fn read_corner(gpu: &CudaGpu, array: &MappedArray) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    ///     let stream = gpu.context().new_stream()?; // or the application's own stream
    ///     let region = ArrayRegion::new(0, 0, 16, 8); // 16 x 8 texels of level 1
    ///     let len = 16 * 8 * array.desc().bytes_per_texel as usize;
    ///     // SAFETY: only read after the copy filled it (as_slice waits for the copy).
    ///     let mut pinned = unsafe { gpu.context().alloc_pinned_with_flags::<u8>(len, 0)? };
    ///     array.copy_to_host_async(&stream, 1, region, &mut pinned)?; // returns at once
    ///     // ... more work on `stream` ...
    ///     Ok(pinned.as_slice()?.to_vec()) // waits for the copy
    /// }
    /// # Ok(()) }
    /// ```
    pub fn copy_to_host_async<H: HostSlice<u8> + ?Sized>(
        &self,
        stream: &CudaStream,
        level: u32,
        region: ArrayRegion,
        dst: &mut H,
    ) -> Result<()> {
        let dev = &self.mem.inner.dev;
        dev.check_stream(stream)?;
        let r = region_copy(&self.desc, level, &region, dst.len(), "dst")?;
        let array = self.level(level)?;
        dev.bind()?;
        // SAFETY: the slice is used by a copy on `stream` only (HostSlice's contract); the
        // guard records its completion (pinned memory) or the stream is synchronised below.
        let (slice, guard) = unsafe { dst.stream_synced_mut_slice(stream) };
        let c = memcpy2d(array, slice.as_mut_ptr().cast(), true, r);
        // SAFETY: the level array is alive (owned by the mapping, which outlives queued work:
        // its drop synchronises the context); `slice` is exactly the region's packed size
        // (checked) and stays borrowed until the copy completed (`finish_host_copy`).
        let enqueued = unsafe { mem::memcpy_2d_async(&c, stream.cu_stream()) };
        finish_host_copy(stream, guard, enqueued)
    }
}

/// Ends a copy between host memory and an array enqueued on `stream`: with a cudarc-tracked
/// host buffer (pinned memory, tracked context) the guard records the copy in the buffer's
/// event; otherwise the stream is synchronised, so the host memory is no longer in use when the
/// caller gets it back.
fn finish_host_copy(stream: &CudaStream, guard: SyncOnDrop<'_>, enqueued: Result<()>) -> Result<()> {
    let tracked =
        matches!(guard, SyncOnDrop::Record(Some(_))) && stream.context().is_managing_stream_synchronization();
    drop(guard);
    enqueued?;
    if !tracked {
        stream.synchronize().map_err(|e| super::result::from_driver("cuStreamSynchronize", e))?;
    }
    Ok(())
}

impl MappedArray<ReadWrite> {
    /// Copies `src` (rows packed) into the whole of level 0. Synchronous;
    /// [`copy_from_host_async`](Self::copy_from_host_async) copies into any level or rectangle
    /// on a stream.
    pub fn copy_from_host(&self, src: &[u8]) -> Result<()> {
        self.copy2d(src.as_ptr() as *mut _, src.len(), false)
    }

    /// Enqueues on `stream` a copy of `src` (rows packed, `region.width * bytes_per_texel`
    /// bytes each, exactly `region.height` rows) into `region` of level `level`. Checks and
    /// the life of `src` as for [`copy_to_host_async`](MappedArray::copy_to_host_async) (the
    /// host argument is named `src`): a tracked
    /// [`PinnedHostSlice`](cudarc::driver::PinnedHostSlice) returns at once, its event guarding
    /// later writes to it; other host memory returns once the copy is done.
    pub fn copy_from_host_async<H: HostSlice<u8> + ?Sized>(
        &self,
        stream: &CudaStream,
        level: u32,
        region: ArrayRegion,
        src: &H,
    ) -> Result<()> {
        let dev = &self.mem.inner.dev;
        dev.check_stream(stream)?;
        let r = region_copy(&self.desc, level, &region, src.len(), "src")?;
        let array = self.level(level)?;
        dev.bind()?;
        // SAFETY: the slice is used by a copy on `stream` only (HostSlice's contract); the
        // guard records its completion (pinned memory) or the stream is synchronised below.
        let (slice, guard) = unsafe { src.stream_synced_slice(stream) };
        let c = memcpy2d(array, slice.as_ptr() as *mut _, false, r);
        // SAFETY: as in `copy_to_host_async`; the driver only reads `slice`.
        let enqueued = unsafe { mem::memcpy_2d_async(&c, stream.cu_stream()) };
        finish_host_copy(stream, guard, enqueued)
    }
}
