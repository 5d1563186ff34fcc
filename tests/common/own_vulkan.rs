//! An instance, device and queue made the way an application's renderer makes them, with ash
//! alone, for the tests of `VulkanContext::adopt`.

use nvsci::buf::GpuId;
use nvsci::vulkan::ash::{self, vk};
use nvsci::vulkan::ExistingDevice;

/// The application's own Vulkan objects; [`destroy`](Self::destroy) tears them down.
pub struct OwnVulkan {
    pub entry: ash::Entry,
    pub instance: ash::Instance,
    pub physical: vk::PhysicalDevice,
    pub device: ash::Device,
    pub family: u32,
    pub queue: vk::Queue,
    pub semaphore_fd: bool,
}

/// Skips (`None`, recorded) or, where the environment requires a Vulkan device or a GPU, fails.
fn unavailable<T>(what: String) -> Option<T> {
    use super::require::{self, Capability};
    require::unavailable(&[Capability::Vulkan, Capability::Gpu], what)
}

impl OwnVulkan {
    /// A Vulkan 1.2 instance and a device on the first physical device with
    /// `VK_KHR_external_memory_fd` (the one whose UUID is `uuid`, when given), with timeline
    /// semaphores, `VK_KHR_external_semaphore_fd` where supported, and
    /// `VK_KHR_external_memory_fd` when `memory_fd`.
    pub fn new(memory_fd: bool, uuid: Option<GpuId>) -> Option<Self> {
        // SAFETY: loading the system Vulkan loader runs its initialisers, which have no
        // preconditions.
        let entry = match unsafe { ash::Entry::load() } {
            Ok(e) => e,
            Err(e) => return unavailable(format!("no Vulkan loader: {e}")),
        };
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: a valid create info without layers or extensions.
        let instance = match unsafe { entry.create_instance(&info, None) } {
            Ok(i) => i,
            Err(e) => return unavailable(format!("no Vulkan instance: {e}")),
        };
        // SAFETY: the instance is alive.
        let physicals = unsafe { instance.enumerate_physical_devices() }.unwrap();
        let has = |pd: vk::PhysicalDevice, name: &std::ffi::CStr| {
            // SAFETY: `pd` was enumerated from the instance.
            unsafe { instance.enumerate_device_extension_properties(pd) }
                .unwrap()
                .iter()
                .any(|e| e.extension_name_as_c_str() == Ok(name))
        };
        let usable = |pd: vk::PhysicalDevice| {
            // SAFETY: `pd` was enumerated from the instance.
            let props = unsafe { instance.get_physical_device_properties(pd) };
            if props.api_version < vk::API_VERSION_1_2 || !has(pd, ash::khr::external_memory_fd::NAME) {
                return false;
            }
            let mut id = vk::PhysicalDeviceIDProperties::default();
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
            // SAFETY: Vulkan 1.1 core query on a 1.2 device, one ID structure chained.
            unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
            uuid.is_none_or(|u| u.0 == id.device_uuid)
        };
        let Some(physical) = physicals.iter().copied().find(|&pd| usable(pd)) else {
            // SAFETY: nothing was created from the instance.
            unsafe { instance.destroy_instance(None) };
            return unavailable(format!(
                "no Vulkan 1.2 device with VK_KHR_external_memory_fd (UUID {uuid:?})"
            ));
        };
        let semaphore_fd = has(physical, ash::khr::external_semaphore_fd::NAME);
        // SAFETY: `physical` was enumerated from the instance.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let family = families
            .iter()
            .position(|f| f.queue_flags.intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE))
            .unwrap() as u32;
        let priorities = [1.0f32];
        let queues =
            [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
        let mut exts = Vec::new();
        if memory_fd {
            exts.push(ash::khr::external_memory_fd::NAME.as_ptr());
        }
        if semaphore_fd {
            exts.push(ash::khr::external_semaphore_fd::NAME.as_ptr());
        }
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
        let create = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&exts)
            .push_next(&mut f12);
        // SAFETY: the extensions are supported (checked above), the family exists, and every
        // Vulkan 1.2 implementation supports timeline semaphores.
        let device = unsafe { instance.create_device(physical, &create, None) }.unwrap();
        // SAFETY: one queue of `family` was requested.
        let queue = unsafe { device.get_device_queue(family, 0) };
        Some(Self { entry, instance, physical, device, family, queue, semaphore_fd })
    }

    /// What `VulkanContext::adopt` is given (clones of the handles; the owner keeps its own).
    pub fn existing(&self) -> ExistingDevice {
        ExistingDevice {
            entry: self.entry.clone(),
            instance: self.instance.clone(),
            physical_device: self.physical,
            device: self.device.clone(),
            queue_family: self.family,
            queue: self.queue,
            semaphore_fd: self.semaphore_fd,
        }
    }

    /// Destroys the device and the instance, as the owner does once the context is gone.
    pub fn destroy(self) {
        // SAFETY: every object of the device was destroyed (the adopted context and its
        // objects are dropped), the device is idle (waited here), and the instance's only
        // device is destroyed before it.
        unsafe {
            self.device.device_wait_idle().unwrap();
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
