//! The NvSciBuf memory-synchronisation policy for NvSciSync signal and wait.
//!
//! CUDA's `SKIP_NVSCIBUF_MEMSYNC` flags apply to every NvSciBuf buffer imported in the process,
//! so skipping is only safe when none of them needs GPU software cache coherency
//! (`GpuSwNeedCacheCoherency`) on the GPU that signals or waits. This module keeps that count per
//! GPU, updated when buffers are imported and dropped.

use crate::buf::GpuId;
use std::sync::Mutex;

/// What to do about NvSciBuf memory synchronisation on an NvSciSync signal or wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemSync {
    /// Skip only when no imported buffer needs software coherency on this GPU.
    #[default]
    Auto,
    /// Always skip (the caller guarantees coherency).
    Skip,
    /// Always synchronise.
    Perform,
}

/// Most distinct GPUs tracked.
const MAX_GPUS: usize = 16;

/// Counts, per GPU, the imported NvSciBuf buffers that need software cache coherency.
#[derive(Debug, Default)]
pub struct CoherencyRegistry {
    needing: Mutex<heapless::Vec<(GpuId, usize), MAX_GPUS>>,
}

impl CoherencyRegistry {
    /// An empty registry.
    pub const fn new() -> Self {
        Self { needing: Mutex::new(heapless::Vec::new()) }
    }

    /// Records an import of a buffer that needs software coherency on `gpu`.
    pub fn register(&self, gpu: GpuId) {
        let mut v = self.needing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = v.iter_mut().find(|e| e.0 == gpu) {
            e.1 += 1;
        } else if v.push((gpu, 1)).is_err() {
            log::warn!(
                "more than {MAX_GPUS} GPUs tracked for NvSciBuf coherency; Auto will not skip memsync"
            );
        }
    }

    /// Records that such a buffer was dropped.
    pub fn unregister(&self, gpu: GpuId) {
        let mut v = self.needing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = v.iter().position(|e| e.0 == gpu) {
            v[i].1 = v[i].1.saturating_sub(1);
            if v[i].1 == 0 {
                v.swap_remove(i);
            }
        }
    }

    /// Imported buffers that need software coherency on `gpu` (`usize::MAX` when the table
    /// overflowed, so that `Auto` stays safe).
    pub fn count(&self, gpu: GpuId) -> usize {
        let v = self.needing.lock().unwrap_or_else(|e| e.into_inner());
        if v.is_full() {
            return usize::MAX;
        }
        v.iter().find(|e| e.0 == gpu).map_or(0, |e| e.1)
    }
}

/// The process-wide registry, updated by NvSciBuf imports into CUDA.
pub static REGISTRY: CoherencyRegistry = CoherencyRegistry::new();

/// Buffers imported in this process that need software coherency on `gpu`.
pub fn buffers_needing_coherency(gpu: GpuId) -> usize {
    REGISTRY.count(gpu)
}

/// The decision table: whether to set the skip flag.
pub fn decide(policy: MemSync, buffers_needing_coherency: usize) -> bool {
    match policy {
        MemSync::Skip => true,
        MemSync::Perform => false,
        MemSync::Auto => buffers_needing_coherency == 0,
    }
}

/// Decides for `gpu` now and logs the decision at debug level.
pub(crate) fn skip_for(policy: MemSync, gpu: GpuId, op: &str) -> bool {
    let needing = if policy == MemSync::Auto { REGISTRY.count(gpu) } else { 0 };
    let skip = decide(policy, needing);
    log::debug!(
        "NvSciSync {op}: {} NvSciBuf memsync (policy {policy:?}, {needing} imported buffers need GPU sw coherency)",
        if skip { "skipping" } else { "performing" }
    );
    skip
}
