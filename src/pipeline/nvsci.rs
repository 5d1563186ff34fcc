//! The NvSci backends of the ring (NVIDIA's libraries, or the mock): buffers reconciled from one
//! attribute list per party, and NvSciSync objects whose lists name each party's engine.

use super::config::{RingConfig, MAX_CONSUMERS};
use super::engine::Engine;
use super::fence::SyncPoint;
use super::format::{FrameFormat, FrameLayout};
use super::memory::SlotMemory;
use super::ring::{FrameRing, RingParts, Slot};
use crate::buf::{BufAttrList, BufModule, BufObj, Perm};
use crate::error::Result;
use crate::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use crate::NvSci;

/// A sync attribute list for one party: the CPU asks for CPU access; a CUDA device has the
/// list filled the way CUDA needs it (`cuDeviceGetNvSciSyncAttributes` on Tegra).
pub(crate) fn party_list(m: &SyncModule, engine: &Engine, signal: bool, wait: bool) -> Result<SyncAttrList> {
    let mut l = m.attr_list()?;
    match engine {
        Engine::Cpu => {
            let perm = match (signal, wait) {
                (true, true) => SyncPerm::WaitSignal,
                (true, false) => SyncPerm::SignalOnly,
                _ => SyncPerm::WaitOnly,
            };
            l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(perm)])?;
        }
        #[cfg(feature = "cuda")]
        Engine::Cuda(dev) => crate::cuda::fill_sync_attrs(dev, &mut l, signal, wait)?,
    }
    Ok(l)
}

/// A sync object signalled by `signaler` and waited on by `waiters`, with the CPU always among
/// the waiters (the ring waits on the CPU before it frees anything).
fn sync_object(m: &SyncModule, signaler: &Engine, waiters: &[&Engine]) -> Result<SyncObj> {
    let mut lists = vec![party_list(m, signaler, true, false)?];
    for w in waiters {
        lists.push(party_list(m, w, false, true)?);
    }
    if !waiters.iter().any(|w| matches!(w, Engine::Cpu)) {
        lists.push(party_list(m, &Engine::Cpu, false, true)?);
    }
    let refs: Vec<&SyncAttrList> = lists.iter().collect();
    SyncObj::alloc(&SyncAttrList::reconcile(&refs)?)
}

/// Buffers and sync objects of a ring on `lib` for these parties.
pub(crate) fn parts(
    lib: &NvSci,
    format: FrameFormat,
    config: RingConfig,
    producer: &Engine,
    consumers: &[Engine],
) -> Result<RingParts> {
    let bufm = BufModule::open(lib)?;
    let mut lists = vec![format.attr_list(
        &bufm,
        Perm::ReadWrite,
        producer.is_cpu(),
        producer.gpu_id(),
        config.gpu_cache,
    )?];
    for c in consumers {
        lists.push(format.attr_list(&bufm, Perm::ReadOnly, c.is_cpu(), c.gpu_id(), config.gpu_cache)?);
    }
    let refs: Vec<&BufAttrList> = lists.iter().collect();
    let reconciled = BufAttrList::reconcile(&refs)?;

    let sync = SyncModule::open(lib)?;
    let consumer_refs: Vec<&Engine> = consumers.iter().collect();
    let present = sync_object(&sync, producer, &consumer_refs)?;
    let mut releases = heapless::Vec::<SyncPoint, MAX_CONSUMERS>::new();
    for c in consumers {
        let _ = releases.push(SyncPoint::NvSci(sync_object(&sync, c, &[producer])?));
    }

    let mut slots = Vec::with_capacity(config.frames);
    let mut layout = None;
    for _ in 0..config.frames {
        let buffer = BufObj::alloc(&reconciled)?;
        if layout.is_none() {
            layout = Some(FrameLayout { format, size: buffer.size(), planes: buffer.planes()? });
        }
        let mut views = heapless::Vec::new();
        for _ in 0..config.consumers {
            let _ = views.push(buffer.dup_with_reduced_perm(Perm::ReadOnly)?);
        }
        slots.push(Slot::new(SlotMemory::NvSci { buffer, views }, config.consumers));
    }
    let layout = layout.ok_or_else(|| crate::error::invalid("config.frames", "a ring needs frames"))?;
    Ok(RingParts {
        layout,
        slots,
        present: SyncPoint::NvSci(present),
        releases,
        sync_module: Some(sync),
        keep: None,
    })
}

impl FrameRing {
    /// Allocates `config.frames` buffers of `format` and the sync objects on `lib`, with the
    /// CPU as producer and as every consumer.
    pub fn new(lib: &crate::NvSci, format: FrameFormat, config: RingConfig) -> Result<Self> {
        let consumers = [const { Engine::Cpu }; MAX_CONSUMERS];
        Self::with_engines(
            lib,
            format,
            config,
            &Engine::Cpu,
            consumers.get(..config.consumers).unwrap_or(&[]),
        )
    }

    /// As [`new`](Self::new), with the engine of every party: each attribute list names its
    /// engine (CPU access, or the GPU id and, for sync objects, what CUDA needs to signal or
    /// wait), so CUDA parties can import the frames and fences. `consumers` has one engine per
    /// consumer.
    pub fn with_engines(
        lib: &crate::NvSci,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Engine],
    ) -> Result<Self> {
        super::config::validate_ring(&format, &config, consumers)?;
        Self::from_parts(config, super::nvsci::parts(lib, format, config, producer, consumers)?)
    }
}
