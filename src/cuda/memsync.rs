//! The NvSciBuf memory-synchronisation policy for NvSciSync signal and wait.
//!
//! By default `cuSignalExternalSemaphoresAsync` / `cuWaitExternalSemaphoresAsync` on an NvSciSync
//! object maintain the GPU caches for **every** NvSciBuf buffer imported in the process. The
//! `SKIP_NVSCIBUF_MEMSYNC` flags turn that off, and the CUDA Driver API reference states the
//! consequence: skipping while any imported buffer needs GPU software cache coherency
//! (`GpuSwNeedCacheCoherency`) is undefined behaviour; the CUDA Programming Guide's NvSci section
//! says to set the flags only when that attribute is false. The flags are process-wide: the
//! driver documents no per-GPU or per-buffer scope, so neither does this module.
//!
//! This crate sees only the imports it makes. [`MemSync::Auto`] therefore performs the memory
//! synchronisation unless the program has declared, with [`vouch_all_imports_are_tracked`], that
//! every NvSciBuf import in the process goes through this crate; then it skips exactly when
//! none of those imports needs coherency. The other way to avoid the cost is to allocate buffers
//! that need none: set `EnableGpuCache` to false for the GPU in the buffer's attribute list (as
//! the CUDA Programming Guide's example does), so the reconciled `GpuSwNeedCacheCoherency` is
//! false.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What to do about NvSciBuf memory synchronisation on an NvSciSync signal or wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemSync {
    /// Perform it, unless every NvSciBuf import in the process is known to this crate
    /// ([`vouch_all_imports_are_tracked`]) and none of them needs GPU cache coherency.
    #[default]
    Auto,
    /// Always skip (the caller guarantees that no NvSciBuf buffer imported anywhere in the process
    /// needs GPU cache coherency; undefined behaviour in the driver otherwise).
    Skip,
    /// Always perform it.
    Perform,
}

/// Imports made by this crate whose buffer needs GPU software cache coherency (any GPU).
static NEEDING: AtomicUsize = AtomicUsize::new(0);
/// Whether the program vouched that every NvSciBuf import in the process goes through this crate.
static ALL_TRACKED: AtomicBool = AtomicBool::new(false);

/// Declares that every NvSciBuf buffer imported into CUDA in this process, by any code, is
/// imported through this crate ([`ExternalMemory::from_buf_obj`](super::ExternalMemory::from_buf_obj)),
/// so that [`MemSync::Auto`] may skip memory synchronisation when none of them needs coherency.
///
/// # Safety
/// The promise must hold for the rest of the process's life: an NvSciBuf import made elsewhere
/// (another library, `cuImportExternalMemory` called directly) that needs coherency while a
/// signal or wait skips memory synchronisation is undefined behaviour in the CUDA driver.
pub unsafe fn vouch_all_imports_are_tracked() {
    ALL_TRACKED.store(true, Ordering::SeqCst);
}

/// Whether [`vouch_all_imports_are_tracked`] was called.
pub fn all_imports_tracked() -> bool {
    ALL_TRACKED.load(Ordering::SeqCst)
}

/// Imports made by this crate, live now, whose buffer needs GPU software cache coherency.
pub fn imports_needing_coherency() -> usize {
    NEEDING.load(Ordering::SeqCst)
}

/// Counts an import whose buffer needs coherency while the returned guard lives.
pub(crate) fn track_import_needing_coherency() -> CoherencyGuard {
    NEEDING.fetch_add(1, Ordering::SeqCst);
    CoherencyGuard(())
}

/// Held by an import whose buffer needs coherency.
pub(crate) struct CoherencyGuard(());

impl Drop for CoherencyGuard {
    fn drop(&mut self) {
        NEEDING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The decision table: whether to set the skip flag, given the policy, whether every import in
/// the process is tracked, and how many tracked imports need coherency.
pub fn decide(policy: MemSync, all_tracked: bool, needing_coherency: usize) -> bool {
    match policy {
        MemSync::Skip => true,
        MemSync::Perform => false,
        MemSync::Auto => all_tracked && needing_coherency == 0,
    }
}

/// Decides now and logs the decision at debug level.
pub(crate) fn skip_for(policy: MemSync, op: &str) -> bool {
    let (tracked, needing) = (all_imports_tracked(), imports_needing_coherency());
    let skip = decide(policy, tracked, needing);
    log::debug!(
        "NvSciSync {op}: {} NvSciBuf memsync (policy {policy:?}; {needing} imports need GPU sw coherency; \
         all imports tracked: {tracked})",
        if skip { "skipping" } else { "performing" }
    );
    skip
}
