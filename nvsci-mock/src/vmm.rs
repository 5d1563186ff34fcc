//! GPU memory for objects a CUDA GPU maps as arrays: CUDA virtual-memory (VMM) allocations on the
//! host NUMA node, mapped for the CPU and exportable as a POSIX fd that CUDA imports with
//! `cuImportExternalMemory` (`OPAQUE_FD`), the import Tegra makes for NvSciBuf objects with
//! another handle type.
//!
//! Such memory crosses processes as the POSIX fd of the allocation (sent over the endpoint like
//! the memfd of host pages); the importing process maps it with `cuMemImportFromShareableHandle`.
//!
//! The mock otherwise never calls CUDA: `libcuda.so.1` is opened (with `dlopen`) only when a
//! block-linear image names a GPU, and the mock keeps working without it (CPU mode, machines
//! without a GPU): every failure here means "use host pages instead", never an error.
//!
//! Measured on an NVIDIA H100 (driver 580.159.04, CUDA 13.0; docs/mock.md, "Block-linear planes
//! on a desktop GPU"): `CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID` is 0, the allocation granularity of
//! such memory is 2 MiB, and the CPU reads and writes the mapping at the address `cuMemMap`
//! gives once `cuMemSetAccess` grants the host NUMA location access.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

type CuResult = i32;
type CuDevice = i32;
type CuContext = *mut c_void;
type CuDevicePtr = u64;
type CuMemHandle = u64;

const CUDA_SUCCESS: CuResult = 0;
const CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: i32 = 134;
const CU_MEM_ALLOCATION_TYPE_PINNED: u32 = 1;
const CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: u32 = 1;
const CU_MEM_LOCATION_TYPE_DEVICE: u32 = 1;
const CU_MEM_LOCATION_TYPE_HOST_NUMA: u32 = 3;
const CU_MEM_ACCESS_FLAGS_PROT_READWRITE: u32 = 3;
const CU_MEM_ALLOC_GRANULARITY_MINIMUM: u32 = 0;

/// `CUmemLocation` (cuda.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct MemLocation {
    kind: u32,
    id: i32,
}

/// `CUmemAllocationProp` (cuda.h): type, requested handle types, location, Win32 metadata,
/// allocation flags (compression type, RDMA capable, usage, 4 reserved bytes).
#[repr(C)]
struct AllocationProp {
    kind: u32,
    handle_types: u32,
    location: MemLocation,
    win32: *mut c_void,
    compression: u8,
    rdma: u8,
    usage: u16,
    reserved: [u8; 4],
}

/// `CUmemAccessDesc` (cuda.h).
#[repr(C)]
struct AccessDesc {
    location: MemLocation,
    flags: u32,
}

/// Process-wide counts of the CUDA VMM allocations the mock holds (see [`gpu_memory_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuMemoryStats {
    /// Live allocations: handles from `cuMemCreate` (block-linear images of GPU mode) and from
    /// `cuMemImportFromShareableHandle` (such images imported from another process) not yet
    /// released with `cuMemRelease`.
    pub allocations: u64,
    /// Bytes of those allocations (each rounded up to the allocation granularity).
    pub bytes: u64,
}

static LIVE_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);

/// How many CUDA VMM allocations (host-NUMA memory backing block-linear images in GPU mode, see
/// the crate documentation) this process holds now, and their bytes. Each is counted from the
/// moment the driver hands out its handle until the handle is released, failed setups included;
/// a leak check compares two snapshots taken with nothing in flight. Always zero where the mock
/// never reaches a GPU (CPU mode, no driver).
pub fn gpu_memory_stats() -> GpuMemoryStats {
    GpuMemoryStats {
        allocations: LIVE_ALLOCATIONS.load(Ordering::Relaxed),
        bytes: LIVE_BYTES.load(Ordering::Relaxed),
    }
}

/// The driver entry points this module calls, resolved once per process.
struct Driver {
    device_get_count: unsafe extern "C" fn(*mut i32) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, i32) -> CuResult,
    device_get_uuid: unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult,
    /// `cuDeviceGetUuid_v2` (CUDA 11.4 and newer drivers), which names a MIG instance by its own
    /// UUID where `cuDeviceGetUuid` gives the whole GPU's: a caller's GPU ID may come from either.
    device_get_uuid_v2: Option<unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult>,
    device_get_attribute: unsafe extern "C" fn(*mut i32, i32, CuDevice) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    ctx_push: unsafe extern "C" fn(CuContext) -> CuResult,
    ctx_pop: unsafe extern "C" fn(*mut CuContext) -> CuResult,
    granularity: unsafe extern "C" fn(*mut usize, *const AllocationProp, u32) -> CuResult,
    create: unsafe extern "C" fn(*mut CuMemHandle, usize, *const AllocationProp, u64) -> CuResult,
    release: unsafe extern "C" fn(CuMemHandle) -> CuResult,
    reserve: unsafe extern "C" fn(*mut CuDevicePtr, usize, usize, CuDevicePtr, u64) -> CuResult,
    address_free: unsafe extern "C" fn(CuDevicePtr, usize) -> CuResult,
    map: unsafe extern "C" fn(CuDevicePtr, usize, usize, CuMemHandle, u64) -> CuResult,
    unmap: unsafe extern "C" fn(CuDevicePtr, usize) -> CuResult,
    set_access: unsafe extern "C" fn(CuDevicePtr, usize, *const AccessDesc, usize) -> CuResult,
    export: unsafe extern "C" fn(*mut c_void, CuMemHandle, u32, u64) -> CuResult,
    import: unsafe extern "C" fn(*mut CuMemHandle, *mut c_void, u32) -> CuResult,
    /// Primary contexts retained so far (device, context): kept for the life of the process.
    contexts: Mutex<Vec<(CuDevice, usize)>>,
}

// SAFETY: function pointers and plain data; the context list is behind a mutex.
unsafe impl Send for Driver {}
// SAFETY: as above.
unsafe impl Sync for Driver {}

/// Resolves `name` from `lib` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the function-pointer type of the symbol's C prototype.
#[cfg(all(target_os = "linux", not(miri)))]
unsafe fn sym<F: Copy>(lib: *mut c_void, name: &std::ffi::CStr) -> Option<F> {
    // SAFETY: `lib` is a live dlopen handle; `name` is NUL-terminated.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `p` is the address of the C function whose prototype `F` is (contract).
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

impl Driver {
    #[cfg(all(target_os = "linux", not(miri)))]
    fn load() -> Option<Driver> {
        // SAFETY: opening a shared library by name; it is never closed (its functions stay in use).
        let lib = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return None;
        }
        // SAFETY: each type below is the C prototype of the named entry point in cuda.h (the
        // `_v2` names are those cuda.h maps cuCtxPushCurrent / cuCtxPopCurrent to).
        let d = unsafe {
            let init: unsafe extern "C" fn(u32) -> CuResult = sym(lib, c"cuInit")?;
            if init(0) != CUDA_SUCCESS {
                return None;
            }
            Driver {
                device_get_count: sym(lib, c"cuDeviceGetCount")?,
                device_get: sym(lib, c"cuDeviceGet")?,
                device_get_uuid: sym(lib, c"cuDeviceGetUuid")?,
                device_get_uuid_v2: sym(lib, c"cuDeviceGetUuid_v2"),
                device_get_attribute: sym(lib, c"cuDeviceGetAttribute")?,
                primary_ctx_retain: sym(lib, c"cuDevicePrimaryCtxRetain")?,
                ctx_push: sym(lib, c"cuCtxPushCurrent_v2")?,
                ctx_pop: sym(lib, c"cuCtxPopCurrent_v2")?,
                granularity: sym(lib, c"cuMemGetAllocationGranularity")?,
                create: sym(lib, c"cuMemCreate")?,
                release: sym(lib, c"cuMemRelease")?,
                reserve: sym(lib, c"cuMemAddressReserve")?,
                address_free: sym(lib, c"cuMemAddressFree")?,
                map: sym(lib, c"cuMemMap")?,
                unmap: sym(lib, c"cuMemUnmap")?,
                set_access: sym(lib, c"cuMemSetAccess")?,
                export: sym(lib, c"cuMemExportToShareableHandle")?,
                import: sym(lib, c"cuMemImportFromShareableHandle")?,
                contexts: Mutex::new(Vec::new()),
            }
        };
        Some(d)
    }

    #[cfg(not(all(target_os = "linux", not(miri))))]
    fn load() -> Option<Driver> {
        None
    }

    /// The driver, loaded on first use; `None` without `libcuda.so.1` or when `cuInit` fails.
    fn get() -> Option<&'static Driver> {
        static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();
        DRIVER.get_or_init(Driver::load).as_ref()
    }

    /// The device whose UUID is `uuid`, as either `cuDeviceGetUuid` or `cuDeviceGetUuid_v2`
    /// reports it (they differ for a MIG instance; which one a caller used depends on the CUDA
    /// version its bindings target).
    fn device(&self, uuid: &[u8; 16]) -> Option<CuDevice> {
        let mut n = 0;
        // SAFETY: valid out-pointer.
        if unsafe { (self.device_get_count)(&mut n) } != CUDA_SUCCESS {
            return None;
        }
        let is = |get: unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult, dev: CuDevice| {
            let mut id = [0u8; 16];
            // SAFETY: a valid out-pointer and a device handle from cuDeviceGet.
            unsafe { get(&mut id, dev) == CUDA_SUCCESS && id == *uuid }
        };
        (0..n).find_map(|i| {
            let mut dev = 0;
            // SAFETY: valid out-pointer; `i` is a valid ordinal.
            if unsafe { (self.device_get)(&mut dev, i) } != CUDA_SUCCESS {
                return None;
            }
            (is(self.device_get_uuid, dev) || self.device_get_uuid_v2.is_some_and(|v2| is(v2, dev)))
                .then_some(dev)
        })
    }

    /// Runs `f` with `dev`'s primary context current (retained once, for the process's life).
    fn with_context<T>(&self, dev: CuDevice, f: impl FnOnce() -> Option<T>) -> Option<T> {
        let ctx = {
            let mut list = self.contexts.lock().unwrap_or_else(|e| e.into_inner());
            match list.iter().find(|(d, _)| *d == dev) {
                Some((_, c)) => *c as CuContext,
                None => {
                    let mut c = std::ptr::null_mut();
                    // SAFETY: valid out-pointer and device.
                    if unsafe { (self.primary_ctx_retain)(&mut c, dev) } != CUDA_SUCCESS {
                        return None;
                    }
                    list.push((dev, c as usize));
                    c
                }
            }
        };
        // SAFETY: `ctx` is a retained primary context.
        if unsafe { (self.ctx_push)(ctx) } != CUDA_SUCCESS {
            return None;
        }
        let r = f();
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context pushed above.
        unsafe { (self.ctx_pop)(&mut popped) };
        r
    }
}

/// Host-NUMA VMM memory mapped read-write for one device and for the CPU; released on drop.
pub(crate) struct VmmMemory {
    driver: &'static Driver,
    dev: CuDevice,
    handle: CuMemHandle,
    va: CuDevicePtr,
    len: usize,
    /// For memory imported from another process: the fd it came in (a POSIX fd of the
    /// allocation), whose duplicates [`export_fd`](Self::export_fd) hands out.
    shared: Option<std::os::fd::OwnedFd>,
    /// Bytes this allocation adds to [`gpu_memory_stats`] until its handle is released.
    counted: u64,
}

// SAFETY: the allocation is plain memory addressed by `va`; users coordinate their accesses as
// with host pages; the handle is usable from any thread.
unsafe impl Send for VmmMemory {}
// SAFETY: as above; nothing here is mutated after creation.
unsafe impl Sync for VmmMemory {}

impl VmmMemory {
    /// Allocates at least `size` bytes on the host NUMA node nearest the GPU `uuid`, zeroed,
    /// mapped for that GPU and the CPU. `None` where the GPU, its driver or host-NUMA VMM memory
    /// is missing, or any step fails (what was created is undone).
    pub(crate) fn alloc(uuid: &[u8; 16], size: u64) -> Option<VmmMemory> {
        let driver = Driver::get()?;
        let dev = driver.device(uuid)?;
        let mut numa = -1;
        // SAFETY: valid out-pointer, device and attribute.
        let r = unsafe { (driver.device_get_attribute)(&mut numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) };
        if r != CUDA_SUCCESS || numa < 0 {
            return None;
        }
        let host = MemLocation { kind: CU_MEM_LOCATION_TYPE_HOST_NUMA, id: numa };
        let prop = AllocationProp {
            kind: CU_MEM_ALLOCATION_TYPE_PINNED,
            handle_types: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            location: host,
            win32: std::ptr::null_mut(),
            compression: 0,
            rdma: 0,
            usage: 0,
            reserved: [0; 4],
        };
        driver.with_context(dev, || {
            let mut gran = 0usize;
            // SAFETY: complete property block, valid out-pointer.
            if unsafe { (driver.granularity)(&mut gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) }
                != CUDA_SUCCESS
            {
                return None;
            }
            let len = usize::try_from(size).ok()?.max(1).checked_next_multiple_of(gran.max(1))?;
            let mut handle = 0;
            // SAFETY: complete property block; `len` is a multiple of the granularity.
            if unsafe { (driver.create)(&mut handle, len, &prop, 0) } != CUDA_SUCCESS {
                return None;
            }
            let me = VmmMemory::owning(driver, dev, handle, len, None).mapped(host, len)?;
            // SAFETY: the CPU may access the range now (host NUMA access granted); it is ours.
            unsafe { std::ptr::write_bytes(me.as_ptr(), 0, len) };
            Some(me)
        })
    }

    /// Imports an allocation another process exported (`fd`, from [`export_fd`](Self::export_fd)
    /// there, `len` bytes) for the GPU `uuid` and the CPU (`cuMemImportFromShareableHandle`, then
    /// mapped as [`alloc`](Self::alloc) maps). `None` where the GPU, its driver or any step fails.
    pub(crate) fn import(uuid: &[u8; 16], fd: std::os::fd::OwnedFd, len: usize) -> Option<VmmMemory> {
        use std::os::fd::AsRawFd;
        let driver = Driver::get()?;
        let dev = driver.device(uuid)?;
        let mut numa = -1;
        // SAFETY: valid out-pointer, device and attribute.
        let r = unsafe { (driver.device_get_attribute)(&mut numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) };
        if r != CUDA_SUCCESS || numa < 0 || len == 0 {
            return None;
        }
        let host = MemLocation { kind: CU_MEM_LOCATION_TYPE_HOST_NUMA, id: numa };
        driver.with_context(dev, || {
            let mut handle = 0;
            // SAFETY: for POSIX_FILE_DESCRIPTOR the handle argument is the fd itself, cast to a
            // pointer (cuda.h); the driver does not take the fd, which stays ours.
            let r = unsafe {
                (driver.import)(
                    &mut handle,
                    fd.as_raw_fd() as isize as *mut c_void,
                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                )
            };
            if r != CUDA_SUCCESS {
                return None;
            }
            VmmMemory::owning(driver, dev, handle, len, Some(fd)).mapped(host, len)
        })
    }

    /// Takes ownership of the allocation `handle` (`len` bytes) the driver has just handed out,
    /// not yet mapped, and counts it in [`gpu_memory_stats`] (until drop releases it).
    fn owning(
        driver: &'static Driver,
        dev: CuDevice,
        handle: CuMemHandle,
        len: usize,
        shared: Option<std::os::fd::OwnedFd>,
    ) -> VmmMemory {
        let counted = len as u64;
        LIVE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(counted, Ordering::Relaxed);
        VmmMemory { driver, dev, handle, va: 0, len: 0, shared, counted }
    }

    /// Reserves `len` bytes of address space, maps the allocation there and grants the device
    /// and the `host` location read-write access; on failure what was done is undone (by drop).
    /// Runs with the device's context current.
    fn mapped(mut self, host: MemLocation, len: usize) -> Option<VmmMemory> {
        let d = self.driver;
        let mut va = 0;
        // SAFETY: reserves a fresh range of `len` bytes.
        if unsafe { (d.reserve)(&mut va, len, 0, 0, 0) } != CUDA_SUCCESS {
            return None; // drop releases the handle
        }
        // SAFETY: maps the whole allocation at the start of the reserved range.
        if unsafe { (d.map)(va, len, 0, self.handle, 0) } != CUDA_SUCCESS {
            // SAFETY: frees the range reserved just above.
            unsafe { (d.address_free)(va, len) };
            return None;
        }
        self.va = va;
        self.len = len;
        let access = [
            AccessDesc {
                location: MemLocation { kind: CU_MEM_LOCATION_TYPE_DEVICE, id: self.dev },
                flags: CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            },
            AccessDesc { location: host, flags: CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
        ];
        // SAFETY: the range is mapped; two access descriptors are passed.
        if unsafe { (d.set_access)(va, len, access.as_ptr(), access.len()) } != CUDA_SUCCESS {
            return None;
        }
        Some(self)
    }

    /// The CPU (and device) address of the first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.va as usize as *mut u8
    }

    /// Mapped size in bytes (a multiple of the allocation granularity).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// A new POSIX fd of the allocation (`cuMemExportToShareableHandle`; for imported memory a
    /// duplicate of the fd it came in), which CUDA imports as
    /// `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD` of [`len`](Self::len) bytes, and which another
    /// process maps with [`import`](Self::import).
    pub(crate) fn export_fd(&self) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        if let Some(fd) = &self.shared {
            return fd.try_clone().ok();
        }
        self.driver.with_context(self.dev, || {
            let mut fd: i32 = -1;
            // SAFETY: for POSIX_FILE_DESCRIPTOR the driver writes an int through the pointer.
            let r = unsafe {
                (self.driver.export)(
                    (&mut fd as *mut i32).cast(),
                    self.handle,
                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                    0,
                )
            };
            // SAFETY: the driver just created the descriptor; nobody else owns it.
            (r == CUDA_SUCCESS && fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
        })
    }
}

impl Drop for VmmMemory {
    fn drop(&mut self) {
        let d = self.driver;
        let (va, len, handle) = (self.va, self.len, self.handle);
        let undo = || {
            // SAFETY: each call undoes a step of `alloc` or `import` that succeeded, once, in
            // reverse order (`undo` runs once: inside the context, or, where it cannot be made
            // current, without it, as these calls take no context). Memory imported from an
            // exported fd stays alive on its own (the driver keeps the allocation until every
            // import is destroyed).
            unsafe {
                if len != 0 {
                    (d.unmap)(va, len);
                    (d.address_free)(va, len);
                }
                if handle != 0 {
                    (d.release)(handle);
                }
            }
            Some(())
        };
        if d.with_context(self.dev, undo).is_none() {
            undo();
        }
        // Every value was counted once, by `owning`.
        LIVE_ALLOCATIONS.fetch_sub(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(self.counted, Ordering::Relaxed);
    }
}
