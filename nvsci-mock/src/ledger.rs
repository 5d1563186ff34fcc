//! Live-handle accounting.
//!
//! Every mock module owns a [`Ledger`]; every handle created under that module (attribute lists,
//! objects, wait contexts, fences, debug-dump buffers) is counted in it until it is freed. The
//! process-wide ledger ([`global_ledger`]) sums the counts of every module.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The kinds of handles a ledger counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Module = 0,
    AttrList = 1,
    Object = 2,
    Desc = 3,
    WaitContext = 4,
    Fence = 5,
    Endpoint = 6,
}

const KINDS: usize = 7;

#[derive(Debug, Default)]
struct Counters {
    counts: [AtomicUsize; KINDS],
    /// `NvSciBufObjFlushCpuCacheRange` calls, in order.
    flushes: std::sync::Mutex<Vec<Flush>>,
}

/// One `NvSciBufObjFlushCpuCacheRange` call: the range flushed, in bytes from the start of the
/// object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flush {
    /// First byte flushed.
    pub offset: u64,
    /// Bytes flushed.
    pub len: u64,
}

/// A snapshot of live handle counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HandleCounts {
    /// Modules opened and not yet closed.
    pub modules: usize,
    /// Attribute lists (created, cloned, appended, reconciled and conflict lists). Lists borrowed
    /// from objects (`Nv*ObjGetAttrList`) are not counted.
    pub attr_lists: usize,
    /// Object references (allocations, duplicates).
    pub objects: usize,
    /// Descriptor / debug-dump buffers not yet freed with `Nv*FreeDesc`.
    pub descs: usize,
    /// CPU wait contexts.
    pub wait_contexts: usize,
    /// Non-cleared fences currently holding a reference on an object.
    pub fences: usize,
    /// Open NvSciIpc endpoints (process-wide only: endpoints belong to no module).
    pub endpoints: usize,
}

impl HandleCounts {
    /// Sum of every count.
    pub fn total(&self) -> usize {
        self.modules
            + self.attr_lists
            + self.objects
            + self.descs
            + self.wait_contexts
            + self.fences
            + self.endpoints
    }
}

/// Live-handle counters of one mock module (or of the whole process, see `global_ledger`).
///
/// Cloning is cheap: clones share the same counters.
#[derive(Clone, Debug)]
pub struct Ledger {
    counters: Arc<Counters>,
}

fn global() -> &'static Ledger {
    static GLOBAL: OnceLock<Ledger> = OnceLock::new();
    GLOBAL.get_or_init(|| Ledger { counters: Arc::new(Counters::default()) })
}

/// The process-wide ledger: the sum over every module this mock has opened.
pub fn global_ledger() -> Ledger {
    global().clone()
}

impl Ledger {
    /// A fresh ledger for a new module; its counts also feed the global ledger.
    pub(crate) fn new_module() -> Ledger {
        Ledger { counters: Arc::new(Counters::default()) }
    }

    /// Current counts.
    pub fn counts(&self) -> HandleCounts {
        let c = |k: Kind| self.counters.counts[k as usize].load(Ordering::SeqCst);
        HandleCounts {
            modules: c(Kind::Module),
            attr_lists: c(Kind::AttrList),
            objects: c(Kind::Object),
            descs: c(Kind::Desc),
            wait_contexts: c(Kind::WaitContext),
            fences: c(Kind::Fence),
            endpoints: c(Kind::Endpoint),
        }
    }

    fn is_global(&self) -> bool {
        Arc::ptr_eq(&self.counters, &global().counters)
    }

    /// Counts one more live handle of `kind`.
    pub(crate) fn add(&self, kind: Kind) {
        self.counters.counts[kind as usize].fetch_add(1, Ordering::SeqCst);
        if !self.is_global() {
            global().counters.counts[kind as usize].fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Counts one live handle of `kind` less (never below zero).
    pub(crate) fn sub(&self, kind: Kind) {
        let dec = |c: &AtomicUsize| {
            // The closure never fails for a non-zero count; a zero count stays zero.
            let _ = c.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1));
        };
        dec(&self.counters.counts[kind as usize]);
        if !self.is_global() {
            dec(&global().counters.counts[kind as usize]);
        }
    }

    /// Records a CPU cache flush of objects of this module (and in the process-wide ledger).
    pub(crate) fn record_flush(&self, flush: Flush) {
        crate::ffi::lock(&self.counters.flushes).push(flush);
        if !self.is_global() {
            crate::ffi::lock(&global().counters.flushes).push(flush);
        }
    }

    /// The CPU cache flushes recorded since the last call, oldest first (and forgets them).
    pub fn take_flushes(&self) -> Vec<Flush> {
        std::mem::take(&mut *crate::ffi::lock(&self.counters.flushes))
    }

    /// Counts a new handle and returns a guard that uncounts it when dropped.
    pub(crate) fn track(&self, kind: Kind) -> Counted {
        self.add(kind);
        Counted { ledger: self.clone(), kind }
    }
}

/// Keeps one handle counted in a ledger for as long as it lives.
#[derive(Debug)]
pub(crate) struct Counted {
    ledger: Ledger,
    kind: Kind,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.ledger.sub(self.kind);
    }
}
