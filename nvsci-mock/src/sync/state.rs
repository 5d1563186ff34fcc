//! The state of one sync object, shared by its handles (in `obj`) and by the fences that refer to
//! it (in `fence`, which find it by `id`).

use super::counter::Counter;
use super::module::SyncModuleShared;
use super::reconcile::SyncMeta;
use crate::handle::Record;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Fence bookkeeping of one object (the value reached lives in [`SyncCore::counter`]).
#[derive(Debug, Default)]
pub(crate) struct SyncState {
    /// Value of the last generated fence.
    pub next: u64,
    /// `(value, microseconds since the UNIX epoch)` of the most recent signals.
    pub stamps: VecDeque<(u64, u64)>,
}

/// State shared by object handles and fences (which find it by `id`). `repr(C)` with a magic
/// first, like every record of the mock.
#[repr(C)]
pub(crate) struct SyncCore {
    magic: u64,
    /// Identity fences refer to the state by (never reused in the process).
    pub id: u64,
    /// Identity shared with every process the object is exported to (fence descriptors name it).
    pub uuid: u64,
    pub module: Arc<SyncModuleShared>,
    pub meta: SyncMeta,
    /// The primitive: the value reached.
    pub counter: Counter,
    pub state: Mutex<SyncState>,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for SyncCore {
    const MAGIC: u64 = 0x4e56_5359_4e43_4f52; // "NVSYNCOR"
}

impl SyncCore {
    /// The state of a new object (or of one imported from another process) whose next fence
    /// continues from `next`.
    pub(crate) fn new(
        id: u64,
        uuid: u64,
        module: Arc<SyncModuleShared>,
        meta: SyncMeta,
        counter: Counter,
        next: u64,
    ) -> Self {
        Self {
            magic: Self::MAGIC,
            id,
            uuid,
            module,
            meta,
            counter,
            state: Mutex::new(SyncState { next, ..SyncState::default() }),
        }
    }
}
