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
//!
//! What was decided is observable: [`counts`] counts the NvSciSync waits and signals this crate
//! enqueued by the memory-synchronisation flag of the CUDA parameter block each was given (built
//! in one place, `desc::wait` / `desc::signal`).

use cudarc::driver::sys;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

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

/// NvSciSync waits and signals enqueued by this crate since the process started, by the
/// memory-synchronisation flag of their CUDA parameter block: "skipped" where
/// `CUDA_EXTERNAL_SEMAPHORE_WAIT_SKIP_NVSCIBUF_MEMSYNC` / `..._SIGNAL_SKIP_NVSCIBUF_MEMSYNC` is
/// set, "performed" where it is not. Waits on a cleared fence enqueue nothing and are not
/// counted.
///
/// On an NvSciSync object imported into CUDA (Tegra) the block counted is the one
/// `cuWaitExternalSemaphoresAsync` / `cuSignalExternalSemaphoresAsync` is given. On sync
/// objects CUDA reaches as counters (the mock library's GPU mode) CUDA waits on and writes the
/// counter with stream memory operations, which take no such flag; the block counted there is
/// the one an import would be given, built by the same code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemSyncCounts {
    /// Waits whose block asks CUDA to perform memory synchronisation.
    pub waits_performed: u64,
    /// Waits whose block carries the skip flag.
    pub waits_skipped: u64,
    /// Signals whose block asks CUDA to perform memory synchronisation.
    pub signals_performed: u64,
    /// Signals whose block carries the skip flag.
    pub signals_skipped: u64,
}

static WAITS_PERFORMED: AtomicU64 = AtomicU64::new(0);
static WAITS_SKIPPED: AtomicU64 = AtomicU64::new(0);
static SIGNALS_PERFORMED: AtomicU64 = AtomicU64::new(0);
static SIGNALS_SKIPPED: AtomicU64 = AtomicU64::new(0);

/// The counts so far (process-wide, like the flag itself).
pub fn counts() -> MemSyncCounts {
    MemSyncCounts {
        waits_performed: WAITS_PERFORMED.load(Ordering::SeqCst),
        waits_skipped: WAITS_SKIPPED.load(Ordering::SeqCst),
        signals_performed: SIGNALS_PERFORMED.load(Ordering::SeqCst),
        signals_skipped: SIGNALS_SKIPPED.load(Ordering::SeqCst),
    }
}

/// Counts an enqueued NvSciSync wait by its parameter block's flag.
pub(crate) fn count_wait(params: &sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS) {
    let skipped = params.flags & sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_SKIP_NVSCIBUF_MEMSYNC != 0;
    if skipped { &WAITS_SKIPPED } else { &WAITS_PERFORMED }.fetch_add(1, Ordering::SeqCst);
}

/// Counts an enqueued NvSciSync signal by its parameter block's flag.
pub(crate) fn count_signal(params: &sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS) {
    let skipped = params.flags & sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_SKIP_NVSCIBUF_MEMSYNC != 0;
    if skipped { &SIGNALS_SKIPPED } else { &SIGNALS_PERFORMED }.fetch_add(1, Ordering::SeqCst);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::desc;

    /// The counts follow the flag of the parameter blocks `desc` builds, which follows the
    /// decision (the only other counter of these statics is an enqueue on a GPU).
    #[test]
    fn counts_follow_the_flag_of_the_parameter_blocks() {
        let before = counts();
        for skip in [true, false, false] {
            count_wait(&desc::wait(core::ptr::null(), 0, skip));
            count_signal(&desc::signal(core::ptr::null_mut(), 0, skip));
        }
        let after = counts();
        assert_eq!(
            (
                after.waits_skipped - before.waits_skipped,
                after.waits_performed - before.waits_performed,
                after.signals_skipped - before.signals_skipped,
                after.signals_performed - before.signals_performed,
            ),
            (1, 2, 1, 2)
        );
        assert_eq!(
            desc::wait(core::ptr::null(), 0, true).flags,
            sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_SKIP_NVSCIBUF_MEMSYNC
        );
        assert_eq!(desc::signal(core::ptr::null_mut(), 0, false).flags, 0);
    }

    #[test]
    fn the_decision_table() {
        assert!(decide(MemSync::Skip, false, 3));
        assert!(!decide(MemSync::Perform, true, 0));
        assert!(decide(MemSync::Auto, true, 0));
        assert!(!decide(MemSync::Auto, true, 1), "an import needing coherency");
        assert!(!decide(MemSync::Auto, false, 0), "imports the crate cannot see");
    }
}
