//! Loader, instance, physical-device selection (by UUID, or any for tests), logical device and
//! queue.
//!
//! The Vulkan loader (`libvulkan.so.1`) is opened at run time: a missing loader, a loader without
//! a driver, or no suitable device is [`VulkanError::Unavailable`] with a message that names what
//! was looked for and what was found, never a panic.

use crate::buf::GpuId;
use crate::error::{Error, Result, VulkanError};
use ash::vk;
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// Default loader file name on Linux.
pub const LOADER_NAME: &str = "libvulkan.so.1";

/// How long internal one-shot submissions (image upload/download) may take before
/// [`Error::Timeout`] is returned.
pub(crate) const ONE_SHOT_TIMEOUT_NS: u64 = 30_000_000_000;

/// Which physical device to open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceSelection {
    /// The first suitable device, GPUs before CPU implementations (tests, software drivers).
    #[default]
    Any,
    /// The device whose `VkPhysicalDeviceIDProperties::deviceUUID` equals this UUID; CUDA's
    /// `cuDeviceGetUuid` reports the same bytes for the same GPU
    /// ([`CudaGpu::gpu_id`](crate::cuda::CudaGpu::gpu_id)).
    Uuid(GpuId),
}

/// Options for [`VulkanContext::with_options`]: start from [`ContextOptions::default`] and change
/// what differs with the `with_*` methods.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ContextOptions {
    /// Which physical device to open.
    pub device: DeviceSelection,
    /// The loader library to open instead of [`LOADER_NAME`] (a file name searched by the
    /// dynamic linker, or a path).
    pub loader: Option<PathBuf>,
    /// Create a context of its own, destroyed when its last reference goes, instead of the
    /// process's shared context for this loader and selection (see
    /// [`VulkanContext::with_options`] for why contexts are shared by default).
    pub private: bool,
}

impl ContextOptions {
    /// Sets [`device`](Self::device).
    pub fn with_device(mut self, device: DeviceSelection) -> Self {
        self.device = device;
        self
    }

    /// Sets [`loader`](Self::loader) to `loader`.
    pub fn with_loader(mut self, loader: impl Into<PathBuf>) -> Self {
        self.loader = Some(loader.into());
        self
    }

    /// Sets [`private`](Self::private).
    pub fn with_private(mut self, private: bool) -> Self {
        self.private = private;
        self
    }
}

/// What the selected physical device reports about itself.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `VkPhysicalDeviceProperties::deviceName`.
    pub name: String,
    /// `VkPhysicalDeviceIDProperties::deviceUUID` (what CUDA reports as the device UUID).
    pub uuid: GpuId,
    /// `VkPhysicalDeviceIDProperties::driverUUID`.
    pub driver_uuid: [u8; 16],
    /// PCI vendor id (0x10de for NVIDIA).
    pub vendor_id: u32,
    /// Vendor-specific device id.
    pub device_id: u32,
    /// Discrete, integrated, virtual, CPU or other.
    pub device_type: vk::PhysicalDeviceType,
    /// Highest Vulkan version the device supports (packed with `vk::make_api_version`).
    pub api_version: u32,
    /// Vendor-specific driver version.
    pub driver_version: u32,
    /// Number of physical devices in the device group this device belongs to.
    pub device_group_size: u32,
}

impl std::fmt::Debug for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceInfo")
            .field("name", &self.name)
            .field("uuid", &self.uuid_string())
            .field("vendor_id", &format_args!("{:#06x}", self.vendor_id))
            .field("device_type", &self.device_type_name())
            .field("api_version", &self.api_version_string())
            .field("device_group_size", &self.device_group_size)
            .finish()
    }
}

impl DeviceInfo {
    /// "discrete GPU", "integrated GPU", "virtual GPU", "CPU" or "other".
    pub fn device_type_name(&self) -> &'static str {
        match self.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => "discrete GPU",
            vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated GPU",
            vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual GPU",
            vk::PhysicalDeviceType::CPU => "CPU",
            _ => "other",
        }
    }

    /// The device UUID in the usual 8-4-4-4-12 hex form.
    pub fn uuid_string(&self) -> String {
        uuid_string(&self.uuid.0)
    }

    /// The API version as `major.minor.patch`.
    pub fn api_version_string(&self) -> String {
        let v = self.api_version;
        format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
    }
}

/// Formats a 16-byte UUID as 8-4-4-4-12 hex digits.
pub fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

pub(crate) fn vk_err(function: &'static str) -> impl FnOnce(vk::Result) -> Error {
    move |r| Error::Vulkan(VulkanError::Call { function, code: r.as_raw() })
}

/// A Vulkan instance and logical device on one physical device, with one queue that supports
/// transfers (and graphics or compute where the device has such a family).
///
/// Every object of this module holds an `Arc<VulkanContext>`. Shared contexts (the default) stay
/// for the life of the process; a private one is destroyed after its last object, and [`Drop`]
/// waits for the device to go idle before destroying it.
pub struct VulkanContext {
    ext_semaphore_fd: Option<ash::khr::external_semaphore_fd::Device>,
    ext_memory_fd: ash::khr::external_memory_fd::Device,
    device: ash::Device,
    queue: Mutex<vk::Queue>,
    queue_family: u32,
    physical: vk::PhysicalDevice,
    memory: vk::PhysicalDeviceMemoryProperties,
    info: DeviceInfo,
    instance: ash::Instance,
    /// Whether the instance and device are the caller's ([`VulkanContext::adopt`]): then they
    /// are never destroyed here, and waits for idle wait on the context's queue only.
    adopted: bool,
    // Declared last: the library must stay loaded until the instance is destroyed.
    _entry: ash::Entry,
}

/// Vulkan objects an application already made (its renderer's instance, device and queue),
/// for [`VulkanContext::adopt`]. What each must satisfy is listed there.
pub struct ExistingDevice {
    /// The loader the instance was created with.
    pub entry: ash::Entry,
    /// The instance (created with `apiVersion` 1.2 or newer).
    pub instance: ash::Instance,
    /// The physical device `device` was created on.
    pub physical_device: vk::PhysicalDevice,
    /// The logical device.
    pub device: ash::Device,
    /// The queue family of `queue`.
    pub queue_family: u32,
    /// The queue the context submits its own work to (uploads, downloads, hand-offs).
    pub queue: vk::Queue,
    /// Whether `VK_KHR_external_semaphore_fd` was enabled when `device` was created (needed to
    /// export semaphores to CUDA; [`VulkanContext::has_semaphore_fd`] reports it).
    pub semaphore_fd: bool,
}

impl std::fmt::Debug for ExistingDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExistingDevice")
            .field("instance", &self.instance.handle())
            .field("physical_device", &self.physical_device)
            .field("device", &self.device.handle())
            .field("queue_family", &self.queue_family)
            .field("queue", &self.queue)
            .field("semaphore_fd", &self.semaphore_fd)
            .finish()
    }
}

impl std::fmt::Debug for VulkanContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanContext")
            .field("device", &self.info.name)
            .field("uuid", &self.info.uuid_string())
            .field("queue_family", &self.queue_family)
            .field("semaphore_fd", &self.ext_semaphore_fd.is_some())
            .field("adopted", &self.adopted)
            .finish()
    }
}

/// Why a physical device was not taken.
struct Candidate {
    physical: vk::PhysicalDevice,
    info: DeviceInfo,
    queue_family: Option<u32>,
    has_semaphore_fd: bool,
    problems: Vec<String>,
}

/// Rank for [`DeviceSelection::Any`]: GPUs first, CPU implementations last.
fn type_rank(t: vk::PhysicalDeviceType) -> u8 {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

/// Size of the device group `physical` belongs to, given each group's members (1 when it is in
/// none, which a conformant implementation never reports).
pub(crate) fn group_size_of<T: PartialEq>(groups: &[&[T]], physical: &T) -> u32 {
    groups.iter().find(|g| g.contains(physical)).map_or(1, |g| g.len() as u32)
}

fn c_name(raw: &[core::ffi::c_char]) -> String {
    // The arrays are NUL-terminated by the spec; a missing NUL yields the whole array.
    let bytes: Vec<u8> = raw.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl VulkanContext {
    /// The process's shared context for the default loader and the selected device, created on
    /// first use (see [`with_options`](Self::with_options)).
    pub fn new(device: DeviceSelection) -> Result<Arc<Self>> {
        Self::with_options(ContextOptions::default().with_device(device))
    }

    /// The shared context of the Vulkan device that is the same GPU as `cuda` (matched by UUID;
    /// see [`with_options`](Self::with_options)).
    #[cfg(feature = "cuda")]
    pub fn for_cuda(cuda: &crate::cuda::CudaGpu) -> Result<Arc<Self>> {
        Self::new(DeviceSelection::Uuid(cuda.gpu_id()))
    }

    /// Opens a loader (default or given) and the selected device.
    ///
    /// Unless `options.private` is set, contexts are shared: one per loader and physical device,
    /// created by the first call that needs it and kept for the life of the process; later calls
    /// from any thread get the same context. [`DeviceSelection::Uuid`] takes the shared context
    /// of that device, and [`DeviceSelection::Any`] the first shared context of the loader when
    /// there is one. Everything made on a shared context uses its one queue, behind
    /// [`lock_queue`](Self::lock_queue).
    ///
    /// Why shared: with the NVIDIA driver 580, a `vkDestroyDevice` that overlaps the exit of
    /// another thread which made Vulkan calls can deadlock inside the driver (both end up in the
    /// driver's thread-exit cleanup; see `docs/vulkan.md`, "Creating contexts from several
    /// threads"), and a program cannot control when its threads exit. A shared context is never
    /// destroyed, so threads may come and go freely. A private context is destroyed with its last
    /// reference: create and drop private contexts only while no other thread that used Vulkan
    /// ends.
    pub fn with_options(options: ContextOptions) -> Result<Arc<Self>> {
        if options.private {
            return Self::create(&options);
        }
        static SHARED: Mutex<Vec<(PathBuf, Arc<VulkanContext>)>> = Mutex::new(Vec::new());
        let loader = options.loader.clone().unwrap_or_else(|| PathBuf::from(LOADER_NAME));
        // Held while creating, so that two threads asking at once share one context.
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        let found = shared.iter().find(|(l, ctx)| {
            *l == loader
                && match options.device {
                    DeviceSelection::Any => true,
                    DeviceSelection::Uuid(u) => ctx.uuid() == u,
                }
        });
        if let Some((_, ctx)) = found {
            return Ok(ctx.clone());
        }
        let ctx = Self::create(&options)?;
        shared.push((loader, ctx.clone()));
        Ok(ctx)
    }

    /// Creates a new instance and device for `options`.
    fn create(options: &ContextOptions) -> Result<Arc<Self>> {
        // Held until the context is complete (or every partial object is destroyed again).
        let _lifecycle = lifecycle_lock();
        let loader = options.loader.clone().unwrap_or_else(|| PathBuf::from(LOADER_NAME));
        let entry = loaded_entry(&loader).map_err(|e| {
            Error::Vulkan(VulkanError::Unavailable {
                reason: format!(
                    "could not open the Vulkan loader {}: {e}; install the loader (Debian: libvulkan1) \
                 and a driver (the NVIDIA driver's Vulkan ICD, or mesa-vulkan-drivers for the \
                 lavapipe CPU driver)",
                    loader.display()
                ),
            })
        })?;
        // SAFETY: vkEnumerateInstanceVersion takes no handles; ash treats its absence (a 1.0
        // loader) as Ok(None).
        let version = unsafe { entry.try_enumerate_instance_version() }
            .map_err(vk_err("vkEnumerateInstanceVersion"))?
            .unwrap_or(vk::API_VERSION_1_0);
        if version < vk::API_VERSION_1_1 {
            return Err(Error::Vulkan(VulkanError::Unavailable {
                reason: format!(
                    "the Vulkan loader {} only supports Vulkan 1.0; 1.2 is needed (timeline \
                     semaphores, external memory)",
                    loader.display()
                ),
            }));
        }
        let app = vk::ApplicationInfo::default()
            .application_name(c"nvsci")
            .engine_name(c"nvsci")
            .api_version(vk::API_VERSION_1_2);
        let create = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: VUID-vkCreateInstance-pCreateInfo-parameter: `create` is a valid
        // VkInstanceCreateInfo (no layers, no extensions, a valid VkApplicationInfo).
        let instance = unsafe { entry.create_instance(&create, None) }.map_err(|e| match e {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER | vk::Result::ERROR_INITIALIZATION_FAILED => {
                Error::Vulkan(VulkanError::Unavailable {
                    reason: format!(
                        "the Vulkan loader found no driver supporting Vulkan 1.1+ ({e}); install \
                         the NVIDIA driver's Vulkan ICD or mesa-vulkan-drivers, or point \
                         VK_DRIVER_FILES at an ICD manifest"
                    ),
                })
            }
            e => vk_err("vkCreateInstance")(e),
        })?;
        // From here on the instance must be destroyed on every error path.
        let guard = InstanceGuard { instance, armed: true };
        let instance = &guard.instance;
        let candidates = enumerate(instance)?;
        let c = &candidates[choose(&candidates, options.device)?];
        let family = c.queue_family.ok_or_else(|| {
            Error::Vulkan(VulkanError::Unavailable {
                reason: format!("{} has no queue family with transfer support", c.info.name),
            })
        })?;
        let (device, ext_memory_fd, ext_semaphore_fd) =
            create_device(instance, c.physical, family, c.has_semaphore_fd)?;
        // SAFETY: the queue family was requested with one queue in vkCreateDevice
        // (VUID-vkGetDeviceQueue-queueFamilyIndex-00384, -queueIndex-00385).
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: `c.physical` was enumerated from this instance.
        let memory = unsafe { instance.get_physical_device_memory_properties(c.physical) };
        log::debug!(
            "Vulkan device {} ({}), API {}, queue family {family}, semaphore fd export: {}",
            c.info.name,
            c.info.uuid_string(),
            c.info.api_version_string(),
            c.has_semaphore_fd
        );
        let info = c.info.clone();
        let physical = c.physical;
        let instance = guard.take();
        Ok(Arc::new(Self {
            ext_semaphore_fd,
            ext_memory_fd,
            device,
            queue: Mutex::new(queue),
            queue_family: family,
            physical,
            memory,
            info,
            instance,
            adopted: false,
            _entry: entry,
        }))
    }

    /// Adopts the instance, device and queue of the application's renderer instead of creating
    /// its own: buffers, images, semaphores and frame producers made with the returned context
    /// live on that device, so the renderer uses them directly. The context never destroys what
    /// it adopted; dropping it only waits for its queue to go idle.
    ///
    /// Checked here, each failure a [`VulkanError::Unavailable`] naming what is missing:
    /// the physical device supports Vulkan 1.2, `VK_KHR_external_memory_fd` (and
    /// `VK_KHR_external_semaphore_fd` when `semaphore_fd` is set) and the `timelineSemaphore`
    /// feature, is not part of a device group of several GPUs, and has `queue_family` with
    /// transfer support; the device resolves the entry points of the extensions (a device
    /// created without them answers NULL on conformant loaders). Whether it is the same GPU as
    /// a CUDA device is checked on import (compare [`uuid`](Self::uuid) with
    /// [`CudaGpu::gpu_id`](crate::cuda::CudaGpu::gpu_id) to know beforehand).
    ///
    /// # Safety
    ///
    /// * `instance` was created from `entry` with `VkApplicationInfo::apiVersion` 1.2 or newer,
    ///   `physical_device` was enumerated from `instance`, and `device` was created on
    ///   `physical_device` with
    ///   * the device extension `VK_KHR_external_memory_fd` enabled, and
    ///     `VK_KHR_external_semaphore_fd` too when `semaphore_fd` is true;
    ///   * the `timelineSemaphore` feature enabled (`VkPhysicalDeviceVulkan12Features` or
    ///     `VkPhysicalDeviceTimelineSemaphoreFeatures` in the `pNext` chain);
    ///   * a queue of `queue_family`, and `queue` is one of its queues (`vkGetDeviceQueue`).
    /// * The instance and device outlive the returned context and everything made with it
    ///   (buffers, images, semaphores, producers, frame rings and their CUDA imports): destroy
    ///   them only after the last of those is dropped. The context never destroys them.
    /// * Host access to `queue` is externally synchronised with the context, as Vulkan
    ///   requires: the application submits to it, waits on it or presents with it only while
    ///   holding [`lock_queue`](Self::lock_queue) (or gives the context a queue nobody else
    ///   uses), and does not call `vkDeviceWaitIdle` while the context may be using the queue.
    /// * Work the application submits itself that uses the context's objects (on any queue)
    ///   has completed before those objects are dropped.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use nvsci::cuda::CudaGpu;
    /// use nvsci::vulkan::ash::{self, vk};
    /// use nvsci::vulkan::{ExistingDevice, ExportableBuffer, VulkanContext};
    ///
    /// // The renderer's objects (here made in a few lines; a real renderer has its own).
    /// let entry = unsafe { ash::Entry::load()? };
    /// let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    /// let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None)? };
    /// let physical = unsafe { instance.enumerate_physical_devices()? }[0];
    /// let exts = [ash::khr::external_memory_fd::NAME.as_ptr(), ash::khr::external_semaphore_fd::NAME.as_ptr()];
    /// let mut f12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
    /// let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(0).queue_priorities(&[1.0])];
    /// let create = vk::DeviceCreateInfo::default()
    ///     .queue_create_infos(&queues)
    ///     .enabled_extension_names(&exts)
    ///     .push_next(&mut f12);
    /// let device = unsafe { instance.create_device(physical, &create, None)? };
    /// let queue = unsafe { device.get_device_queue(0, 0) };
    ///
    /// // SAFETY: created as `adopt` requires; destroyed below, after the context and its
    /// // objects; the renderer submits to `queue` only under `ctx.lock_queue()`.
    /// let ctx = unsafe {
    ///     VulkanContext::adopt(ExistingDevice {
    ///         entry: entry.clone(),
    ///         instance: instance.clone(),
    ///         physical_device: physical,
    ///         device: device.clone(),
    ///         queue_family: 0,
    ///         queue,
    ///         semaphore_fd: true,
    ///     })?
    /// };
    /// let cuda = CudaGpu::open(0)?;
    /// let frame = ExportableBuffer::new(&ctx, 1 << 20, vk::BufferUsageFlags::STORAGE_BUFFER)?;
    /// let in_cuda = frame.import_into_cuda(&cuda)?; // same memory, seen by CUDA
    /// # let _ = in_cuda.device_address();
    /// drop((in_cuda, frame, ctx)); // the context leaves the device and instance alone
    /// unsafe {
    ///     device.destroy_device(None);
    ///     instance.destroy_instance(None);
    /// }
    /// # Ok(()) }
    /// ```
    pub unsafe fn adopt(existing: ExistingDevice) -> Result<Arc<Self>> {
        let ExistingDevice { entry, instance, physical_device, device, queue_family, queue, semaphore_fd } =
            existing;
        let groups = device_groups(&instance)?;
        let group_slices: Vec<&[vk::PhysicalDevice]> = groups.iter().map(|g| g.as_slice()).collect();
        let c = candidate(&instance, physical_device, &group_slices)?;
        let mut problems = c.problems;
        if semaphore_fd && !c.has_semaphore_fd {
            problems.push("lacks VK_KHR_external_semaphore_fd, which `semaphore_fd` says is enabled".into());
        }
        // SAFETY: `physical_device` belongs to `instance` (caller contract).
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
        let transfer = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE | vk::QueueFlags::TRANSFER;
        match families.get(queue_family as usize) {
            None => problems
                .push(format!("has no queue family {queue_family} (it has {} families)", families.len())),
            Some(f) if !f.queue_flags.intersects(transfer) => {
                problems.push(format!("queue family {queue_family} does not support transfers"))
            }
            Some(_) => {}
        }
        let resolves = |name: &CStr| {
            // SAFETY: `device` is a live device of `instance` (caller contract) and `name` is a
            // NUL-terminated command name; the call only looks the command up.
            unsafe { (instance.fp_v1_0().get_device_proc_addr)(device.handle(), name.as_ptr()) }.is_some()
        };
        if !resolves(c"vkGetMemoryFdKHR") {
            problems.push(
                "the device does not resolve vkGetMemoryFdKHR: VK_KHR_external_memory_fd is not enabled"
                    .into(),
            );
        }
        if semaphore_fd && !resolves(c"vkGetSemaphoreFdKHR") {
            problems.push(
                "the device does not resolve vkGetSemaphoreFdKHR: VK_KHR_external_semaphore_fd is not enabled".into(),
            );
        }
        if !problems.is_empty() {
            return Err(Error::Vulkan(VulkanError::Unavailable {
                reason: format!(
                    "the adopted Vulkan device {} cannot be used: {}",
                    c.info.name,
                    problems.join("; ")
                ),
            }));
        }
        let ext_memory_fd = ash::khr::external_memory_fd::Device::new(&instance, &device);
        let ext_semaphore_fd =
            semaphore_fd.then(|| ash::khr::external_semaphore_fd::Device::new(&instance, &device));
        // SAFETY: `physical_device` belongs to `instance` (caller contract).
        let memory = unsafe { instance.get_physical_device_memory_properties(physical_device) };
        log::debug!(
            "adopted Vulkan device {} ({}), API {}, queue family {queue_family}, semaphore fd export: {semaphore_fd}",
            c.info.name,
            c.info.uuid_string(),
            c.info.api_version_string(),
        );
        Ok(Arc::new(Self {
            ext_semaphore_fd,
            ext_memory_fd,
            device,
            queue: Mutex::new(queue),
            queue_family,
            physical: physical_device,
            memory,
            info: c.info,
            instance,
            adopted: true,
            _entry: entry,
        }))
    }

    /// Whether the instance and device are the application's ([`adopt`](Self::adopt)) rather
    /// than the context's own.
    pub fn is_adopted(&self) -> bool {
        self.adopted
    }

    /// What the device reports about itself (name, UUID, API version, group size).
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The device UUID (equal to the CUDA device's UUID for the same GPU).
    pub fn uuid(&self) -> GpuId {
        self.info.uuid
    }

    /// Whether `VK_KHR_external_semaphore_fd` is enabled (needed to export semaphores).
    pub fn has_semaphore_fd(&self) -> bool {
        self.ext_semaphore_fd.is_some()
    }

    /// The queue family of [`queue`](Self::queue_family) submissions.
    pub fn queue_family(&self) -> u32 {
        self.queue_family
    }

    /// The raw `ash` device, for recording one's own commands (all its functions are `unsafe`;
    /// objects created through it belong to the caller and must be destroyed before the
    /// context).
    pub fn ash_device(&self) -> &ash::Device {
        &self.device
    }

    /// The raw `ash` instance.
    pub fn ash_instance(&self) -> &ash::Instance {
        &self.instance
    }

    /// The physical device handle.
    pub fn physical_device(&self) -> vk::PhysicalDevice {
        self.physical
    }

    pub(crate) fn ext_memory_fd(&self) -> &ash::khr::external_memory_fd::Device {
        &self.ext_memory_fd
    }

    pub(crate) fn ext_semaphore_fd(&self) -> Option<&ash::khr::external_semaphore_fd::Device> {
        self.ext_semaphore_fd.as_ref()
    }

    /// Locks the context's queue and returns it. `vkQueueSubmit`, `vkQueueWaitIdle`,
    /// `vkQueuePresentKHR` and `vkDeviceWaitIdle` need host access to the queue to be externally
    /// synchronised; the context holds this lock whenever it uses the queue, so an application
    /// that shares the queue with the context ([`adopt`](Self::adopt)) holds it around its own
    /// use. Hold it briefly: the context's submissions wait for it. A poisoned lock is still
    /// usable: the queue handle has no state a panic could corrupt.
    pub fn lock_queue(&self) -> MutexGuard<'_, vk::Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Submits batches to the context's queue.
    pub(crate) fn submit(&self, submits: &[vk::SubmitInfo<'_>], fence: vk::Fence) -> Result<()> {
        let queue = self.lock_queue();
        // SAFETY: VUID-vkQueueSubmit-queue-parameter and the external synchronisation of
        // `queue` (held lock); callers pass command buffers recorded from this device in the
        // executable state and semaphores/fences of this device
        // (VUID-vkQueueSubmit-commonparent).
        unsafe { self.device.queue_submit(*queue, submits, fence) }.map_err(vk_err("vkQueueSubmit"))
    }

    /// Waits until the device is idle (an adopted device: until the context's queue is idle);
    /// errors are logged (used before destroying objects).
    pub(crate) fn wait_idle(&self) {
        let queue = self.lock_queue();
        if self.adopted {
            // SAFETY: the queue is externally synchronised by the held lock
            // (VUID-vkQueueWaitIdle-queue-parameter; the application shares it under this lock,
            // by `adopt`'s contract). Other queues of an adopted device are the application's,
            // so vkDeviceWaitIdle, which needs all of them, is not called.
            if let Err(e) = unsafe { self.device.queue_wait_idle(*queue) } {
                log::warn!("vkQueueWaitIdle failed: {e}");
            }
            return;
        }
        // SAFETY: host access to every queue of the device is externally synchronised: the only
        // queue is locked above (vkDeviceWaitIdle's external synchronisation requirement).
        if let Err(e) = unsafe { self.device.device_wait_idle() } {
            log::warn!("vkDeviceWaitIdle failed: {e}");
        }
    }

    /// The device's memory types (`VkPhysicalDeviceMemoryProperties::memoryTypes`, the first
    /// `memoryTypeCount` of them).
    pub(crate) fn memory_types(&self) -> &[vk::MemoryType] {
        let n = (self.memory.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES);
        &self.memory.memory_types[..n]
    }

    /// A memory type index allowed by `type_bits` with all of `required`, preferring one that
    /// also has `preferred`.
    pub(crate) fn memory_type(
        &self,
        type_bits: u32,
        required: vk::MemoryPropertyFlags,
        preferred: vk::MemoryPropertyFlags,
    ) -> Result<u32> {
        let n = (self.memory.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES);
        let types = &self.memory.memory_types[..n];
        let ok = |i: usize, f: vk::MemoryPropertyFlags| {
            type_bits & (1 << i) != 0 && types[i].property_flags.contains(f)
        };
        (0..n)
            .find(|&i| ok(i, required | preferred))
            .or_else(|| (0..n).find(|&i| ok(i, required)))
            .map(|i| i as u32)
            .ok_or(Error::Unsupported {
                what: "allocating Vulkan memory",
                reason: crate::error::UnsupportedReason::VulkanMemoryType,
            })
    }

    /// Records commands with `record`, submits them, and waits for completion (setup paths
    /// only: this allocates a command pool each call).
    pub(crate) fn one_shot(&self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<()> {
        let d = &self.device;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .flags(vk::CommandPoolCreateFlags::TRANSIENT)
            .queue_family_index(self.queue_family);
        // SAFETY: VUID-vkCreateCommandPool-queueFamilyIndex-01937: the family exists on this
        // device (it was requested at device creation).
        let pool =
            unsafe { d.create_command_pool(&pool_info, None) }.map_err(vk_err("vkCreateCommandPool"))?;
        let pool = PoolGuard { device: d, pool, fence: vk::Fence::null() };
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool.pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool belongs to this device; one primary buffer is allocated.
        let cmd =
            unsafe { d.allocate_command_buffers(&alloc) }.map_err(vk_err("vkAllocateCommandBuffers"))?[0];
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: VUID-vkBeginCommandBuffer-commandBuffer-00049: the new buffer is in the initial
        // state and is not in use.
        unsafe { d.begin_command_buffer(cmd, &begin) }.map_err(vk_err("vkBeginCommandBuffer"))?;
        record(d, cmd);
        // SAFETY: VUID-vkEndCommandBuffer-commandBuffer-00059: the buffer is recording.
        unsafe { d.end_command_buffer(cmd) }.map_err(vk_err("vkEndCommandBuffer"))?;
        // SAFETY: a plain, unsignalled fence of this device.
        let fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(vk_err("vkCreateFence"))?;
        let mut pool = pool;
        pool.fence = fence;
        let cmds = [cmd];
        let submit = vk::SubmitInfo::default().command_buffers(&cmds);
        self.submit(std::slice::from_ref(&submit), fence)?;
        // SAFETY: the fence belongs to this device and was just submitted.
        match unsafe { d.wait_for_fences(&[fence], true, ONE_SHOT_TIMEOUT_NS) } {
            Ok(()) => Ok(()),
            Err(vk::Result::TIMEOUT) => {
                // The submission is still pending: the guard must not destroy what it uses.
                self.wait_idle();
                Err(Error::Timeout {
                    waited_for: crate::error::Wait::Fence { function: "vkWaitForFences" },
                    timeout: std::time::Duration::from_nanos(ONE_SHOT_TIMEOUT_NS),
                })
            }
            Err(e) => {
                self.wait_idle();
                Err(vk_err("vkWaitForFences")(e))
            }
        }
    }
}

/// Destroys a one-shot command pool and fence on every exit path (the submission has completed
/// or the device was waited idle by then).
struct PoolGuard<'a> {
    device: &'a ash::Device,
    pool: vk::CommandPool,
    fence: vk::Fence,
}

impl Drop for PoolGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: VUID-vkDestroyCommandPool-commandPool-00041 / VUID-vkDestroyFence-fence-01120:
        // `one_shot` only returns after the fence signalled or the device went idle, so no
        // submitted command buffer from the pool is pending and the fence is not in use.
        unsafe {
            if self.fence != vk::Fence::null() {
                self.device.destroy_fence(self.fence, None);
            }
            self.device.destroy_command_pool(self.pool, None);
        }
    }
}

/// Destroys the instance unless the context took it.
struct InstanceGuard {
    instance: ash::Instance,
    armed: bool,
}

impl InstanceGuard {
    fn take(mut self) -> ash::Instance {
        self.armed = false;
        self.instance.clone()
    }
}

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: VUID-vkDestroyInstance-instance-00629: no device was created from the
            // instance on this path (device creation is the last fallible step).
            unsafe { self.instance.destroy_instance(None) };
        }
    }
}

/// Every physical device with what it offers and why it would not do.
fn enumerate(instance: &ash::Instance) -> Result<Vec<Candidate>> {
    // SAFETY: a valid instance; ash handles the two-call idiom.
    let physicals =
        unsafe { instance.enumerate_physical_devices() }.map_err(vk_err("vkEnumeratePhysicalDevices"))?;
    if physicals.is_empty() {
        return Err(Error::Vulkan(VulkanError::Unavailable {
            reason: "the Vulkan driver reports no physical device".into(),
        }));
    }
    let groups = device_groups(instance)?;
    let group_slices: Vec<&[vk::PhysicalDevice]> = groups.iter().map(|g| g.as_slice()).collect();
    physicals.into_iter().map(|pd| candidate(instance, pd, &group_slices)).collect()
}

/// What `pd` offers and why it would not do (`group_slices`: the members of every device group).
fn candidate(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    group_slices: &[&[vk::PhysicalDevice]],
) -> Result<Candidate> {
    // SAFETY: `pd` was enumerated from this instance.
    let props = unsafe { instance.get_physical_device_properties(pd) };
    let mut problems = Vec::new();
    let mut id = vk::PhysicalDeviceIDProperties::default();
    if props.api_version >= vk::API_VERSION_1_1 {
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
        // SAFETY: Vulkan 1.1 core on a 1.1+ device and instance; the pNext chain holds one
        // VkPhysicalDeviceIDProperties (VUID-VkPhysicalDeviceProperties2-pNext-pNext).
        unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
    }
    let info = DeviceInfo {
        name: c_name(&props.device_name),
        uuid: GpuId(id.device_uuid),
        driver_uuid: id.driver_uuid,
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        device_type: props.device_type,
        api_version: props.api_version,
        driver_version: props.driver_version,
        device_group_size: group_size_of(group_slices, &pd),
    };
    if props.api_version < vk::API_VERSION_1_2 {
        problems.push(format!("supports Vulkan {} only (1.2 needed)", info.api_version_string()));
    }
    if info.device_group_size > 1 {
        problems.push(format!(
            "belongs to a device group of {} physical devices (exported memory of a group is \
             not a single-GPU allocation CUDA can import)",
            info.device_group_size
        ));
    }
    // SAFETY: `pd` was enumerated from this instance.
    let exts = unsafe { instance.enumerate_device_extension_properties(pd) }
        .map_err(vk_err("vkEnumerateDeviceExtensionProperties"))?;
    let has = |name: &CStr| exts.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name));
    if !has(ash::khr::external_memory_fd::NAME) {
        problems.push("lacks VK_KHR_external_memory_fd".into());
    }
    let has_semaphore_fd = has(ash::khr::external_semaphore_fd::NAME);
    if props.api_version >= vk::API_VERSION_1_2 {
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f12);
        // SAFETY: Vulkan 1.2 device: VkPhysicalDeviceVulkan12Features is a valid pNext of
        // VkPhysicalDeviceFeatures2 (VUID-VkPhysicalDeviceFeatures2-pNext-pNext).
        unsafe { instance.get_physical_device_features2(pd, &mut f2) };
        if f12.timeline_semaphore == vk::FALSE {
            problems.push("lacks the timelineSemaphore feature".into());
        }
    }
    // SAFETY: `pd` was enumerated from this instance.
    let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
    let pick = |want: vk::QueueFlags| {
        families.iter().position(|f| f.queue_count > 0 && f.queue_flags.contains(want)).map(|i| i as u32)
    };
    let queue_family = pick(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
        .or_else(|| pick(vk::QueueFlags::COMPUTE))
        .or_else(|| pick(vk::QueueFlags::GRAPHICS))
        .or_else(|| pick(vk::QueueFlags::TRANSFER));
    if queue_family.is_none() {
        problems.push("has no queue family with transfer support".into());
    }
    Ok(Candidate { physical: pd, info, queue_family, has_semaphore_fd, problems })
}

/// Members of every device group (raw call: ash's wrapper asserts on a count change).
fn device_groups(instance: &ash::Instance) -> Result<Vec<Vec<vk::PhysicalDevice>>> {
    let f = instance.fp_v1_1().enumerate_physical_device_groups;
    let mut n = 0u32;
    // SAFETY: VUID-vkEnumeratePhysicalDeviceGroups-pPhysicalDeviceGroupCount-parameter: a valid
    // count pointer and a NULL array query the count (Vulkan 1.1 core; the loader is 1.1+).
    unsafe { f(instance.handle(), &mut n, core::ptr::null_mut()) }
        .result()
        .map_err(vk_err("vkEnumeratePhysicalDeviceGroups"))?;
    let mut props = vec![vk::PhysicalDeviceGroupProperties::default(); n as usize];
    // SAFETY: `props` holds `n` initialised structures with sType set and pNext NULL
    // (VUID-vkEnumeratePhysicalDeviceGroups-pPhysicalDeviceGroupProperties-parameter).
    let r = unsafe { f(instance.handle(), &mut n, props.as_mut_ptr()) };
    if r != vk::Result::SUCCESS && r != vk::Result::INCOMPLETE {
        return Err(vk_err("vkEnumeratePhysicalDeviceGroups")(r));
    }
    props.truncate(n as usize);
    Ok(props
        .iter()
        .map(|g| {
            let k = (g.physical_device_count as usize).min(vk::MAX_DEVICE_GROUP_SIZE);
            g.physical_devices[..k].to_vec()
        })
        .collect())
}

fn describe(candidates: &[Candidate]) -> String {
    candidates
        .iter()
        .map(|c| {
            let verdict = if c.problems.is_empty() { "usable".to_string() } else { c.problems.join("; ") };
            format!("{} [{}, {}]: {verdict}", c.info.name, c.info.uuid_string(), c.info.device_type_name())
        })
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Index of the chosen candidate, or an error naming every device seen.
fn choose(candidates: &[Candidate], selection: DeviceSelection) -> Result<usize> {
    match selection {
        DeviceSelection::Any => {
            let best = candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| c.problems.is_empty())
                .min_by_key(|(i, c)| (type_rank(c.info.device_type), *i))
                .map(|(i, _)| i);
            best.ok_or_else(|| {
                Error::Vulkan(VulkanError::Unavailable {
                    reason: format!("no suitable Vulkan device; found:\n  {}", describe(candidates)),
                })
            })
        }
        DeviceSelection::Uuid(uuid) => {
            let Some(i) = candidates.iter().position(|c| c.info.uuid == uuid) else {
                return Err(Error::Vulkan(VulkanError::Unavailable {
                    reason: format!(
                        "no Vulkan device has UUID {} (the CUDA device's); is the NVIDIA Vulkan \
                         ICD installed (VK_DRIVER_FILES)? found:\n  {}",
                        uuid_string(&uuid.0),
                        describe(candidates)
                    ),
                }));
            };
            let c = &candidates[i];
            if !c.problems.is_empty() {
                return Err(Error::Vulkan(VulkanError::Unavailable {
                    reason: format!(
                        "the Vulkan device with UUID {} ({}) cannot be used: {}",
                        c.info.uuid_string(),
                        c.info.name,
                        c.problems.join("; ")
                    ),
                }));
            }
            Ok(i)
        }
    }
}

type DeviceParts =
    (ash::Device, ash::khr::external_memory_fd::Device, Option<ash::khr::external_semaphore_fd::Device>);

fn create_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    family: u32,
    semaphore_fd: bool,
) -> Result<DeviceParts> {
    let priorities = [1.0f32];
    let queues =
        [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
    let mut exts = vec![ash::khr::external_memory_fd::NAME.as_ptr()];
    if semaphore_fd {
        exts.push(ash::khr::external_semaphore_fd::NAME.as_ptr());
    }
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
    let create = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&exts)
        .push_next(&mut f12);
    // SAFETY: VUID-vkCreateDevice-ppEnabledExtensionNames-01387: every extension was reported by
    // vkEnumerateDeviceExtensionProperties; VUID-VkDeviceQueueCreateInfo-queueFamilyIndex-00381:
    // the family exists; VUID-VkDeviceCreateInfo-pNext-02830 does not apply (no
    // VkPhysicalDeviceTimelineSemaphoreFeatures alongside the 1.2 struct) and timelineSemaphore
    // was reported as supported.
    let device =
        unsafe { instance.create_device(physical, &create, None) }.map_err(vk_err("vkCreateDevice"))?;
    let mem = ash::khr::external_memory_fd::Device::new(instance, &device);
    let sem = semaphore_fd.then(|| ash::khr::external_semaphore_fd::Device::new(instance, &device));
    Ok((device, mem, sem))
}

/// The Vulkan loader at `loader`, opened once and kept loaded for the life of the process (a copy
/// of the entry stays here): unloading the loader, and with it the driver, while another thread
/// creates an instance is among what hangs on the NVIDIA driver, and a loaded loader costs
/// nothing.
fn loaded_entry(loader: &std::path::Path) -> std::result::Result<ash::Entry, ash::LoadingError> {
    static LOADED: std::sync::Mutex<Vec<(PathBuf, ash::Entry)>> = std::sync::Mutex::new(Vec::new());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, e)) = loaded.iter().find(|(p, _)| p == loader) {
        return Ok(e.clone());
    }
    // SAFETY: dlopen of the Vulkan loader; ash only resolves vkGetInstanceProcAddr from it, and
    // the copy kept in `LOADED` keeps it loaded for as long as any function it loaded is used
    // (for good), as `Entry::load_from` requires.
    let entry = unsafe { ash::Entry::load_from(loader) }?;
    loaded.push((loader.to_path_buf(), entry.clone()));
    Ok(entry)
}

/// Serialises creating and destroying instances and devices across the process. The Vulkan
/// specification allows concurrent `vkCreateInstance` / `vkCreateDevice` / `vkDestroy*` of
/// different objects, but with the NVIDIA driver 580.159.04 and the Khronos loader several
/// threads doing so at once hang or crash inside those calls, also without this crate (ash calls
/// alone; `examples/vulkan_parallel_contexts.rs` reproduces it). The contexts themselves are used
/// concurrently as before; only their creation and destruction take turns.
fn lifecycle_lock() -> std::sync::MutexGuard<'static, ()> {
    static LIFECYCLE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for VulkanContext {
    fn drop(&mut self) {
        self.wait_idle();
        if self.adopted {
            return; // the application's instance and device: it destroys them
        }
        let _lifecycle = lifecycle_lock();
        // SAFETY: VUID-vkDestroyDevice-device-00378: every child object holds an Arc of this
        // context, so none is left; the device is idle (above). VUID-vkDestroyInstance-instance-00629:
        // the only device of the instance is destroyed first.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_size_counts_members() {
        let groups: [&[u32]; 2] = [&[1, 2], &[3]];
        assert_eq!(group_size_of(&groups, &2), 2);
        assert_eq!(group_size_of(&groups, &3), 1);
        assert_eq!(group_size_of(&groups, &9), 1);
    }

    #[test]
    fn uuid_is_formatted_8_4_4_4_12() {
        let u = [0x6d, 0x65, 0x73, 0x61, 0x32, 0x32, 0x2e, 0x33, 0x2e, 0x36, 0, 0, 0, 0, 0, 0xff];
        assert_eq!(uuid_string(&u), "6d657361-3232-2e33-2e36-0000000000ff");
    }

    fn cand(name: &str, t: vk::PhysicalDeviceType, uuid: u8, problems: &[&str]) -> Candidate {
        Candidate {
            physical: vk::PhysicalDevice::null(),
            info: DeviceInfo {
                name: name.into(),
                uuid: GpuId([uuid; 16]),
                driver_uuid: [0; 16],
                vendor_id: 0,
                device_id: 0,
                device_type: t,
                api_version: vk::API_VERSION_1_3,
                driver_version: 0,
                device_group_size: 1,
            },
            queue_family: Some(0),
            has_semaphore_fd: false,
            problems: problems.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn selection_prefers_gpus_and_explains_refusals() {
        let cs = [
            cand("lavapipe", vk::PhysicalDeviceType::CPU, 1, &[]),
            cand(
                "gpu-in-group",
                vk::PhysicalDeviceType::DISCRETE_GPU,
                2,
                &["belongs to a device group of 2"],
            ),
            cand("gpu", vk::PhysicalDeviceType::DISCRETE_GPU, 3, &[]),
        ];
        assert_eq!(choose(&cs, DeviceSelection::Any).unwrap(), 2);
        assert_eq!(choose(&cs, DeviceSelection::Uuid(GpuId([1; 16]))).unwrap(), 0);
        match choose(&cs, DeviceSelection::Uuid(GpuId([2; 16]))) {
            Err(Error::Vulkan(VulkanError::Unavailable { reason })) => {
                assert!(reason.contains("device group of 2"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        match choose(&cs, DeviceSelection::Uuid(GpuId([9; 16]))) {
            Err(Error::Vulkan(VulkanError::Unavailable { reason })) => {
                assert!(reason.contains("09090909-0909"), "{reason}");
                assert!(reason.contains("lavapipe"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let none = [cand("old", vk::PhysicalDeviceType::CPU, 1, &["supports Vulkan 1.1.0 only"])];
        assert!(matches!(
            choose(&none, DeviceSelection::Any),
            Err(Error::Vulkan(VulkanError::Unavailable { .. }))
        ));
    }
}
