//! The NvSci backend of the ring, on any NvSci library (NVIDIA's, or the mock): buffers
//! reconciled from one attribute list per party with a read-only duplicate per consumer, and
//! NvSciSync objects whose lists name each party's engine. CUDA imports the NvSciBuf and
//! NvSciSync objects themselves ([`ExternalMemory::from_buf_obj`](crate::cuda::ExternalMemory::from_buf_obj),
//! [`CudaSyncObj::import`](crate::cuda::CudaSyncObj::import)): on Tegra the NvSci handles, on
//! the mock on a desktop GPU its host memory page-locked and its sync counters waited and
//! written by stream memory operations; the NvSciBuf memory-sync flags follow the party's
//! [`MemSync`](crate::cuda::MemSync) policy.

use super::{CpuWaiter, FrameRead, FrameWrite, NvSciObjects, Point, Provider, RingBackend};
use crate::buf::{BufAttrList, BufModule, BufObj, Perm};
use crate::error::{invalid, Error, Result};
use crate::ipc::{FenceDescriptor, IpcEndpoint};
use crate::pipeline::config::{RingConfig, MAX_CONSUMERS};
use crate::pipeline::engine::Engine;
use crate::pipeline::format::{FrameFormat, FrameLayout};
use crate::sync::{CpuWaitContext, Fence, SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use crate::NvSci;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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

/// A sync object signalled by `signaler` and waited on by `waiters` and by the parties of the
/// `remote` waiter lists (imported from other processes), with the CPU always among the waiters
/// (the ring waits on the CPU before it frees anything).
fn sync_object(
    m: &SyncModule,
    signaler: &Engine,
    waiters: &[&Engine],
    remote: &[&SyncAttrList],
) -> Result<SyncObj> {
    let mut lists = vec![party_list(m, signaler, true, false)?];
    for w in waiters {
        lists.push(party_list(m, w, false, true)?);
    }
    if !waiters.iter().any(|w| matches!(w, Engine::Cpu)) {
        lists.push(party_list(m, &Engine::Cpu, false, true)?);
    }
    let mut refs: Vec<&SyncAttrList> = lists.iter().collect();
    refs.extend_from_slice(remote);
    SyncObj::alloc(&SyncAttrList::reconcile(&refs)?)
}

/// What a consumer in another process brings to a ring's reconciliation: its buffer list and
/// the waiter lists for the present object (imported through its endpoint).
pub(crate) struct RemoteLists {
    pub(crate) buf: BufAttrList,
    pub(crate) waiters: SyncAttrList,
}

/// A consumer of a ring being built: one in this process on its engine, one in another
/// process by its lists (its release object comes later, [`NvSciRing::set_remote_release`]),
/// or a seat reserved for a consumer in another process that attaches later, on this engine
/// (its lists are made here on its behalf; its release object comes when it attaches,
/// [`NvSciRing::attach_release`]).
pub(crate) enum Member<'a> {
    Local(&'a Engine),
    Remote(&'a RemoteLists),
    Reserved(&'a Engine),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An NvSci library as a ring backend.
pub(crate) struct NvSciProvider {
    pub(crate) lib: NvSci,
}

impl Provider for NvSciProvider {
    fn build(
        &self,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Engine],
    ) -> Result<Arc<dyn RingBackend>> {
        let members: Vec<Member<'_>> = consumers.iter().map(Member::Local).collect();
        let (bufm, syncm) = (BufModule::open(&self.lib)?, SyncModule::open(&self.lib)?);
        Ok(Arc::new(NvSciRing::new(&bufm, &syncm, format, config, producer, &members)?.0))
    }

    fn nvsci(&self) -> Option<&NvSci> {
        Some(&self.lib)
    }

    fn describe(&self) -> String {
        match self.lib.library_paths() {
            Some((buf, _)) => format!("NvSci library {buf}"),
            None => format!("{:?} NvSci library", self.lib.implementation()),
        }
    }
}

/// One slot: the buffer, a read-only duplicate per consumer of this process, and the slot's
/// fences.
struct Slot {
    /// The read-write buffer (`None` in a consumer process, which holds only its view).
    buffer: Option<BufObj>,
    /// Per consumer, its read-only view (`None` for a consumer in another process).
    views: heapless::Vec<Option<BufObj>, MAX_CONSUMERS>,
    present: Mutex<Fence>,
    releases: heapless::Vec<Mutex<Fence>, MAX_CONSUMERS>,
}

/// One ring's NvSciBuf objects and NvSciSync objects, in the producer's process, or the
/// imported view of them in a consumer's process.
pub(crate) struct NvSciRing {
    layout: FrameLayout,
    slots: Vec<Slot>,
    present: SyncObj,
    /// Per consumer, its release object (`None` for a consumer in another process until its
    /// object is imported).
    releases: heapless::Vec<Option<SyncObj>, MAX_CONSUMERS>,
    /// Per consumer in another process, the release object of the consumer attached to its seat
    /// while the stream runs ([`attach_release`](Self::attach_release)); it takes the place of
    /// the one in `releases`.
    attached: heapless::Vec<Mutex<Option<SyncObj>>, MAX_CONSUMERS>,
    module: SyncModule,
}

impl NvSciRing {
    /// Reconciles one buffer list per party, allocates the frames, the present object and the
    /// release object of each consumer of this process; returns the ring and the reconciled
    /// buffer list (for consumers in other processes). The lists of remote members must come
    /// from these modules.
    pub(crate) fn new(
        bufm: &BufModule,
        module: &SyncModule,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Member<'_>],
    ) -> Result<(Self, BufAttrList)> {
        let mut lists = vec![format.attr_list(
            bufm,
            Perm::ReadWrite,
            producer.is_cpu(),
            producer.gpu_id(),
            config.gpu_cache,
        )?];
        for c in consumers {
            if let Member::Local(c) | Member::Reserved(c) = c {
                lists.push(format.attr_list(
                    bufm,
                    Perm::ReadOnly,
                    c.is_cpu(),
                    c.gpu_id(),
                    config.gpu_cache,
                )?);
            }
        }
        let mut refs: Vec<&BufAttrList> = lists.iter().collect();
        let local: Vec<&Engine> = consumers
            .iter()
            .filter_map(|c| match c {
                Member::Local(e) | Member::Reserved(e) => Some(*e),
                Member::Remote(_) => None,
            })
            .collect();
        let mut remote_waiters = Vec::new();
        for c in consumers {
            if let Member::Remote(r) = c {
                refs.push(&r.buf);
                remote_waiters.push(&r.waiters);
            }
        }
        let reconciled = BufAttrList::reconcile(&refs)?;

        let present = sync_object(module, producer, &local, &remote_waiters)?;
        let mut releases = heapless::Vec::<Option<SyncObj>, MAX_CONSUMERS>::new();
        for c in consumers {
            let _ = releases.push(match c {
                Member::Local(c) => Some(sync_object(module, c, &[producer], &[])?),
                Member::Remote(_) | Member::Reserved(_) => None,
            });
        }

        let mut slots = Vec::with_capacity(config.frames);
        let mut layout = None;
        for _ in 0..config.frames {
            let buffer = BufObj::alloc(&reconciled)?;
            if layout.is_none() {
                layout = Some(FrameLayout { format, size: buffer.size(), planes: buffer.planes()? });
            }
            let mut views = heapless::Vec::new();
            let mut fences = heapless::Vec::new();
            for c in consumers {
                let _ = views.push(match c {
                    Member::Local(_) => Some(buffer.dup_with_reduced_perm(Perm::ReadOnly)?),
                    Member::Remote(_) | Member::Reserved(_) => None,
                });
                let _ = fences.push(Mutex::new(Fence::cleared()));
            }
            slots.push(Slot {
                buffer: Some(buffer),
                views,
                present: Mutex::new(Fence::cleared()),
                releases: fences,
            });
        }
        let layout = layout.ok_or_else(|| invalid("config.frames", "a ring needs frames"))?;
        let attached = consumers.iter().map(|_| Mutex::new(None)).collect();
        Ok((Self { layout, slots, present, releases, attached, module: module.clone() }, reconciled))
    }

    /// A consumer process's view of a ring: the imported read-only frames and present object,
    /// and its own release object (consumer 0 of this process).
    pub(crate) fn imported(
        module: SyncModule,
        layout: FrameLayout,
        frames: Vec<BufObj>,
        present: SyncObj,
        release: SyncObj,
    ) -> Self {
        let slots = frames
            .into_iter()
            .map(|view| {
                let mut views = heapless::Vec::new();
                let _ = views.push(Some(view));
                let mut releases = heapless::Vec::new();
                let _ = releases.push(Mutex::new(Fence::cleared()));
                Slot { buffer: None, views, present: Mutex::new(Fence::cleared()), releases }
            })
            .collect();
        let mut releases = heapless::Vec::new();
        let _ = releases.push(Some(release));
        let mut attached = heapless::Vec::new();
        let _ = attached.push(Mutex::new(None));
        Self { layout, slots, present, releases, attached, module }
    }

    /// The read-write buffer of slot `slot` (producer side).
    pub(crate) fn buffer(&self, slot: usize) -> Option<&BufObj> {
        self.slots.get(slot).and_then(|s| s.buffer.as_ref())
    }

    /// The present object.
    pub(crate) fn present_object(&self) -> &SyncObj {
        &self.present
    }

    /// Records the release object consumer `consumer` (in another process) allocated.
    pub(crate) fn set_remote_release(&mut self, consumer: usize, obj: SyncObj) -> Result<()> {
        let r = self.releases.get_mut(consumer).ok_or_else(no_consumer)?;
        *r = Some(obj);
        Ok(())
    }

    /// Records (`Some`) or forgets (`None`) the release object of the consumer in another
    /// process attached to seat `consumer` while the stream runs. Fences of an earlier object
    /// hold that object and stay valid; the ring clears them when it drops their consumer.
    pub(crate) fn attach_release(&self, consumer: usize, obj: Option<SyncObj>) -> Result<()> {
        *lock(self.attached.get(consumer).ok_or_else(no_consumer)?) = obj;
        Ok(())
    }

    /// The producer's waiter lists need this ring's sync module.
    pub(crate) fn sync_module(&self) -> &SyncModule {
        &self.module
    }

    fn fence(&self, slot: usize, point: Point) -> Result<&Mutex<Fence>> {
        let s =
            self.slots.get(slot).ok_or_else(|| invalid("slot", format!("no slot {slot} in this ring")))?;
        match point {
            Point::Present => Ok(&s.present),
            Point::Release(c) => s.releases.get(c).ok_or_else(no_consumer),
        }
    }

    fn object(&self, point: Point) -> Result<&SyncObj> {
        match point {
            Point::Present => Ok(&self.present),
            Point::Release(c) => self.releases.get(c).and_then(Option::as_ref).ok_or_else(no_consumer),
        }
    }
}

fn no_consumer() -> Error {
    Error::Unsupported { what: "a consumer view", reason: crate::error::UnsupportedReason::NoSuchConsumer }
}

fn no_slot(slot: usize) -> Error {
    invalid("slot", format!("no slot {slot} in this ring"))
}

impl RingBackend for NvSciRing {
    fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    fn cpu_waiter(self: Arc<Self>) -> Result<Box<dyn CpuWaiter>> {
        let ctx = self.module.cpu_wait_context()?;
        Ok(Box::new(NvSciCpuWaiter { ring: self, ctx }))
    }

    fn cpu_signal(&self, slot: usize, point: Point) -> Result<()> {
        let obj = self.object(point)?;
        let fence = obj.generate_fence()?;
        obj.signal()?;
        *lock(self.fence(slot, point)?) = fence;
        Ok(())
    }

    fn clear(&self, slot: usize, point: Point) {
        if let Ok(f) = self.fence(slot, point) {
            lock(f).clear();
        }
    }

    fn nvsci(&self) -> Option<&dyn NvSciObjects> {
        Some(self)
    }

    fn cpu_write(&self, slot: usize) -> Result<FrameWrite<'_>> {
        let b = self.buffer(slot).ok_or_else(|| no_slot(slot))?;
        Ok(b.cpu_write()?.into())
    }

    fn cpu_read(&self, slot: usize, consumer: usize) -> Result<FrameRead<'_>> {
        let view = NvSciObjects::view(self, slot, consumer).ok_or_else(no_consumer)?;
        Ok(view.cpu_read()?.into())
    }

    #[cfg(feature = "cuda")]
    fn cuda_import_rw(
        &self,
        dev: &crate::cuda::CudaGpu,
        slot: usize,
    ) -> Result<crate::cuda::ExternalMemory<crate::cuda::ReadWrite>> {
        let buffer = self.buffer(slot).ok_or_else(|| no_slot(slot))?;
        crate::cuda::ExternalMemory::from_buf_obj(dev, buffer)
    }

    #[cfg(feature = "cuda")]
    fn cuda_import_ro(
        &self,
        dev: &crate::cuda::CudaGpu,
        slot: usize,
        consumer: usize,
    ) -> Result<crate::cuda::ExternalMemory<crate::cuda::ReadOnly>> {
        let view = NvSciObjects::view(self, slot, consumer).ok_or_else(no_consumer)?;
        crate::cuda::ExternalMemory::from_buf_obj(dev, view)
    }

    #[cfg(feature = "cuda")]
    fn cuda_import_sync(
        self: Arc<Self>,
        dev: &crate::cuda::CudaGpu,
        point: Point,
    ) -> Result<Box<dyn super::CudaSync>> {
        let obj = crate::cuda::CudaSyncObj::import(dev, self.object(point)?)?;
        Ok(Box::new(NvSciCudaSync { ring: self, point, obj }))
    }
}

impl NvSciObjects for NvSciRing {
    fn set_fence(&self, slot: usize, point: Point, fence: Fence) -> Result<()> {
        let obj = self.object(point)?;
        let owned = fence.is_cleared() || fence.object().is_some_and(|o| Arc::ptr_eq(&o.0, &obj.0));
        if !owned {
            return Err(invalid(
                "fence",
                match point {
                    Point::Present => "the fence does not come from this ring's present sync object",
                    Point::Release(_) => "the fence does not come from this consumer's release sync object",
                },
            ));
        }
        *lock(self.fence(slot, point)?) = fence;
        Ok(())
    }

    fn export_fence(&self, slot: usize, point: Point, ep: &IpcEndpoint) -> Result<FenceDescriptor> {
        lock(self.fence(slot, point)?).export(ep)
    }

    fn import_fence(&self, slot: usize, point: Point, desc: &FenceDescriptor) -> Result<()> {
        if let Point::Release(c) = point {
            let attached = lock(self.attached.get(c).ok_or_else(no_consumer)?);
            if let Some(obj) = attached.as_ref() {
                let fence = obj.import_fence(desc)?;
                drop(attached);
                *lock(self.fence(slot, point)?) = fence;
                return Ok(());
            }
        }
        let fence = self.object(point)?.import_fence(desc)?;
        *lock(self.fence(slot, point)?) = fence;
        Ok(())
    }

    fn buffer(&self, slot: usize) -> Option<&BufObj> {
        self.slots.get(slot).and_then(|s| s.buffer.as_ref())
    }

    fn view(&self, slot: usize, consumer: usize) -> Option<&BufObj> {
        self.slots.get(slot).and_then(|s| s.views.get(consumer)).and_then(Option::as_ref)
    }

    fn sync(&self, point: Point) -> Option<&SyncObj> {
        self.object(point).ok()
    }
}

/// One party's CPU waits on an NvSci ring's fences: its own NvSciSync CPU wait context.
struct NvSciCpuWaiter {
    ring: Arc<NvSciRing>,
    ctx: CpuWaitContext,
}

impl CpuWaiter for NvSciCpuWaiter {
    fn wait(&mut self, slot: usize, point: Point, timeout: Duration) -> Result<()> {
        // A duplicate taken under the lock, waited on without it: a wait that lasts until the
        // timeout must not hold up `export_fence`, `cpu_signal` or `clear` of the same fence.
        let fence = {
            let held = lock(self.ring.fence(slot, point)?);
            if held.is_cleared() {
                return Ok(());
            }
            held.try_clone()?
        };
        fence.wait(&mut self.ctx, Some(timeout))
    }
}

/// One point's NvSciSync object of an NvSci ring, imported into a CUDA context.
#[cfg(feature = "cuda")]
struct NvSciCudaSync {
    ring: Arc<NvSciRing>,
    point: Point,
    obj: crate::cuda::CudaSyncObj,
}

#[cfg(feature = "cuda")]
impl super::CudaSync for NvSciCudaSync {
    fn wait(
        &self,
        stream: &crate::cuda::cudarc::driver::CudaStream,
        slot: usize,
        policy: crate::cuda::MemSync,
        reads: bool,
    ) -> Result<()> {
        let fence = lock(self.ring.fence(slot, self.point)?);
        if fence.is_cleared() && !reads {
            // Nothing to synchronise with an expired release before overwriting the slot.
            return Ok(());
        }
        // A consumer's wait on an expired fence still carries the memory synchronisation
        // (`CudaSyncObj::wait` refuses it where that is needed).
        self.obj.wait(stream, &fence, policy)
    }

    fn signal(
        &self,
        stream: &crate::cuda::cudarc::driver::CudaStream,
        slot: usize,
        policy: crate::cuda::MemSync,
    ) -> Result<()> {
        let fence = self.obj.signal(stream, policy)?;
        *lock(self.ring.fence(slot, self.point)?) = fence;
        Ok(())
    }
}

#[cfg(all(test, feature = "mock"))]
mod tests {
    use super::*;
    use crate::pipeline::format::FrameFormat;

    /// A CPU wait on a slot's fence does not hold the fence while it waits: clearing (or
    /// exporting, or replacing) the fence from another thread goes through at once, so the
    /// signal that follows it ends the wait well before the waiter's timeout.
    #[test]
    fn a_cpu_wait_does_not_hold_the_fence_while_it_waits() {
        let lib = NvSci::mock();
        let (bufm, syncm) = (BufModule::open(&lib).unwrap(), SyncModule::open(&lib).unwrap());
        let config = RingConfig { frames: 2, ..RingConfig::default() };
        let members = [Member::Local(&Engine::Cpu)];
        let ring = Arc::new(
            NvSciRing::new(&bufm, &syncm, FrameFormat::Raw { size: 4096 }, config, &Engine::Cpu, &members)
                .unwrap()
                .0,
        );
        let fence = ring.present_object().generate_fence().unwrap();
        ring.set_fence(0, Point::Present, fence).unwrap();
        let sleeps = nvsci_mock::cpu_wait_stats().sleeps;
        let waited = std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let mut w = ring.clone().cpu_waiter().unwrap();
                w.wait(0, Point::Present, Duration::from_secs(5))
            });
            // Until the waiter sleeps on the fence (then it is past taking it).
            while nvsci_mock::cpu_wait_stats().sleeps == sleeps && !waiter.is_finished() {
                std::thread::yield_now();
            }
            // With the fence held for the whole wait, this blocks until the wait timed out, and
            // the signal below comes too late for it.
            ring.clear(0, Point::Present);
            ring.present_object().signal().unwrap();
            waiter.join().unwrap()
        });
        assert!(waited.is_ok(), "the wait ended with the signal: {waited:?}");
    }
}
