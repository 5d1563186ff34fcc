//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod counting;
#[cfg(feature = "vulkan")]
pub mod own_vulkan;
#[cfg(feature = "mock")]
pub mod processes;
pub mod require;
#[cfg(feature = "mock")]
pub mod sweep;

pub use require::Capability;

/// Whether GPU tests must fail instead of skipping when no GPU is found (set on GPU hosts).
pub fn gpu_required() -> bool {
    Capability::Gpu.required()
}

/// Serialises tests that measure process-wide state (open fds, device memory).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads that held [`serial_alone`]'s lock and may still be ending.
static SERIAL_THREADS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// A hold on [`serial`]'s lock from [`serial_alone`]; its thread is recorded when it lets go.
pub struct AloneGuard(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl Drop for AloneGuard {
    fn drop(&mut self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        SERIAL_THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(tid);
    }
}

/// [`serial`]'s lock, taken once every thread that held it through this function before has
/// ended (at most 10 s): for a test that holds a CUDA stream behind a fence its own thread
/// signals later, whose driver calls meanwhile must not queue behind the exit of another test's
/// thread that made CUDA calls (such a test hung in about one parallel run of 20 on an H200,
/// driver 580, and never when the tests ran one after another on one thread).
#[allow(dead_code)]
pub fn serial_alone() -> AloneGuard {
    let guard = serial();
    let threads = std::mem::take(&mut *SERIAL_THREADS.lock().unwrap_or_else(|e| e.into_inner()));
    wait_for_threads_to_end(threads);
    AloneGuard(guard)
}

/// Waits until none of `threads` (ids of this process's threads, the caller's left out) is
/// alive, at most 10 s.
fn wait_for_threads_to_end(mut threads: Vec<i32>) {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    threads.retain(|&t| t != me);
    while !threads.is_empty() && std::time::Instant::now() < deadline {
        threads.retain(|t| std::path::Path::new(&format!("/proc/self/task/{t}")).exists());
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Lets Vulkan tests run in parallel (read side), or alone where they destroy a device or count
/// the process's descriptors (write side). With the NVIDIA driver 580, `vkDestroyDevice` can
/// deadlock when it overlaps the exit of another thread that made Vulkan calls (docs/vulkan.md),
/// and every test ends its thread: the write side therefore also waits until the threads of the
/// tests that held the lock before have ended.
#[cfg(feature = "vulkan")]
static VULKAN_TESTS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Threads that held [`VULKAN_TESTS`] and may still be ending.
#[cfg(feature = "vulkan")]
static VULKAN_THREADS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// A hold on [`VULKAN_TESTS`]; its thread is recorded when it lets go.
#[cfg(feature = "vulkan")]
pub struct VulkanGuard<G>(G);

#[cfg(feature = "vulkan")]
impl<G> Drop for VulkanGuard<G> {
    fn drop(&mut self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        VULKAN_THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(tid);
    }
}

/// Shared access for a Vulkan test that neither destroys a device nor counts descriptors.
#[cfg(feature = "vulkan")]
pub fn vulkan_shared() -> VulkanGuard<std::sync::RwLockReadGuard<'static, ()>> {
    VulkanGuard(VULKAN_TESTS.read().unwrap_or_else(|e| e.into_inner()))
}

/// Sole access for a Vulkan test that destroys a device or counts descriptors, once every thread
/// that held the lock before has ended (it waits at most 10 s for them).
#[cfg(feature = "vulkan")]
pub fn vulkan_exclusive() -> VulkanGuard<std::sync::RwLockWriteGuard<'static, ()>> {
    let guard = VULKAN_TESTS.write().unwrap_or_else(|e| e.into_inner());
    wait_for_threads_to_end(std::mem::take(&mut *VULKAN_THREADS.lock().unwrap_or_else(|e| e.into_inner())));
    VulkanGuard(guard)
}

/// Open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// The CUDA device for GPU tests: `None` (the test records a skip and returns early) without a
/// GPU, unless a GPU is required (`NVSCI_REQUIRE=gpu`, `NVSCI_REQUIRE_GPU=1`), in which case the
/// test fails.
#[cfg(feature = "cuda")]
pub fn gpu() -> Option<nvsci::cuda::CudaGpu> {
    match nvsci::cuda::CudaGpu::open(0) {
        Ok(d) => Some(d),
        Err(e) => require::unavailable(&[Capability::Gpu], format!("no CUDA GPU: {e}")),
    }
}

/// Waits until every dropped import, mapping and semaphore of `dev`'s context has been destroyed
/// (destroys run on the teardown thread once the work that used them finished), so that leak
/// checks compare settled states.
#[cfg(feature = "cuda")]
#[allow(dead_code)]
pub fn settle(dev: &nvsci::cuda::CudaGpu) {
    let left = dev.flush_teardown(std::time::Duration::from_secs(60));
    assert_eq!(left, 0, "{left} destroys still queued after 60 s");
}

/// The test kernels, shared with the examples.
#[path = "../../examples/support/kernels.rs"]
pub mod kernels;
#[allow(unused_imports)]
pub use kernels::{expected_pattern, FILL_PATTERN_PTX};

/// The mock built as a shared object (`libnvsci_mock.so`, from the `export` feature): next to
/// the test binary, one folder up, in `../lib`, or where `NVSCI_MOCK_SO` points.
pub fn mock_shared_object() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("NVSCI_MOCK_SO") {
        return Some(std::path::PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("libnvsci_mock.so"), dir.join("../libnvsci_mock.so"), dir.join("../lib/libnvsci_mock.so")]
        .into_iter()
        .find(|p| p.exists())
}

/// Loads the mock shared object through the real loader, under the real SONAMEs, so it is a
/// `Native` implementation whose handles are opaque to this process's Rust code.
#[cfg(feature = "mock")]
pub fn mock_as_native(tag: &str) -> (nvsci::NvSci, std::path::PathBuf) {
    let so =
        mock_shared_object().expect("libnvsci_mock.so not found next to the test binary (set NVSCI_MOCK_SO)");
    let dir = std::env::temp_dir().join(format!("nvsci-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["libnvscibuf.so.1", "libnvscisync.so.1"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(so.canonicalize().unwrap(), &link).unwrap();
    }
    // SAFETY: `dir` holds only links to this workspace's mock shared object.
    let lib = unsafe { nvsci::NvSci::load_from_dirs(std::slice::from_ref(&dir)) }.unwrap();
    (lib, dir)
}

/// Whether Vulkan tests must fail instead of skipping when no Vulkan device is found (set in
/// CI's lavapipe step).
pub fn vulkan_required() -> bool {
    Capability::Vulkan.required()
}
