//! NvSciSync fences.
//!
//! An all-zero fence is cleared. A fence produced by the mock holds
//! `[FENCE_MAGIC, object state id, primitive id, value, 0, 0]` and owns one reference on the
//! object state (counted in the ledger's `fences`) until it is cleared. The state is found by its
//! id in a registry (fences are plain data that callers copy; no pointer is ever rebuilt from
//! their bits, so a forged fence can only name an unknown id: `BadParameter`). The primitive id is
//! always 0 (the object's single primitive instance); the value is the point on the object's
//! timeline.

use super::module;
use super::state::SyncCore;
use crate::ffi::{bad, guard, guard_void, lock, non_null, Res};
use crate::ledger::Kind;
use nvsci_sys::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FENCE_MAGIC: u64 = 0x4e56_5359_4e46_4e43; // "NVSYNFNC"
/// Primitive id reported by `NvSciSyncFenceExtractFence`.
const FENCE_ID: u64 = 0;

fn is_cleared(f: &NvSciSyncFence) -> bool {
    f.payload.iter().all(|w| *w == 0)
}

/// Object states referred to by fences: id -> (state, number of fences referring to it).
static REGISTRY: Mutex<BTreeMap<u64, (Arc<SyncCore>, usize)>> = Mutex::new(BTreeMap::new());

/// The object state a fence refers to: `Ok(None)` for a cleared fence, `BadParameter` for
/// contents this mock did not produce (or whose reference was already released).
pub(crate) fn core_of(f: &NvSciSyncFence) -> Res<Option<Arc<SyncCore>>> {
    if is_cleared(f) {
        return Ok(None);
    }
    if f.payload[0] != FENCE_MAGIC || f.payload[4] != 0 || f.payload[5] != 0 {
        return bad();
    }
    match lock(&REGISTRY).get(&f.payload[1]) {
        Some((core, _)) => Ok(Some(core.clone())),
        None => bad(),
    }
}

/// Fails with `BadParameter` unless `f` is cleared or a fence of this mock.
pub(crate) fn check(f: &NvSciSyncFence) -> Res {
    core_of(f).map(|_| ())
}

/// A new fence for `value` on `core`, holding its own reference.
pub(crate) fn make(core: &Arc<SyncCore>, value: u64) -> NvSciSyncFence {
    core.module.ledger.add(Kind::Fence);
    lock(&REGISTRY).entry(core.id).or_insert_with(|| (core.clone(), 0)).1 += 1;
    NvSciSyncFence { payload: [FENCE_MAGIC, core.id, FENCE_ID, value, 0, 0] }
}

/// Releases the reference held by `f` (contents the mock did not produce are ignored).
pub(crate) fn release(f: NvSciSyncFence) {
    if is_cleared(&f) || f.payload[0] != FENCE_MAGIC {
        return;
    }
    let last = {
        let mut r = lock(&REGISTRY);
        let Some(entry) = r.get_mut(&f.payload[1]) else { return };
        entry.0.module.ledger.sub(Kind::Fence);
        entry.1 -= 1;
        if entry.1 == 0 {
            r.remove(&f.payload[1])
        } else {
            None
        }
    };
    drop(last); // the state may go away here, outside the registry lock
}

pub(crate) unsafe extern "C" fn clear(f: *mut NvSciSyncFence) {
    guard_void(|| {
        if f.is_null() {
            return;
        }
        // SAFETY: `f` is non-NULL and points to a caller fence.
        let old = unsafe { f.read() };
        // SAFETY: as above.
        unsafe { f.write(NVSCI_SYNC_FENCE_INITIALIZER) };
        release(old);
    });
}

pub(crate) unsafe extern "C" fn dup(src: *const NvSciSyncFence, dst: *mut NvSciSyncFence) -> NvSciError {
    guard("NvSciSyncFenceDup", || {
        non_null(src)?;
        non_null(dst)?;
        if std::ptr::eq(src, dst) {
            return bad();
        }
        // SAFETY: both pointers are non-NULL caller fences.
        let (s, old) = unsafe { (src.read(), dst.read()) };
        let core = core_of(&s)?;
        check(&old)?;
        let new = match core {
            Some(core) => {
                let mut f = make(&core, s.payload[3]);
                f.payload[2] = s.payload[2];
                f
            }
            None => NVSCI_SYNC_FENCE_INITIALIZER,
        };
        // SAFETY: `dst` is a caller fence; its previous reference is released below.
        unsafe { dst.write(new) };
        release(old);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn wait(
    f: *const NvSciSyncFence,
    context: NvSciSyncCpuWaitContext,
    timeout_us: i64,
) -> NvSciError {
    guard("NvSciSyncFenceWait", || {
        non_null(f)?;
        // SAFETY: `context` is NULL or a live wait-context handle of this mock.
        let ctx = unsafe { module::get_context(context) }?;
        if !(-1..=NVSCI_SYS_SYNC_FENCE_MAX_TIMEOUT_US).contains(&timeout_us) {
            return bad();
        }
        // SAFETY: `f` is a non-NULL caller fence.
        let fence = unsafe { f.read() };
        let Some(core) = core_of(&fence)? else {
            return Ok(());
        };
        // BadParameter when "syncFence and context are associated with different
        // NvSciSyncModule" or "caller doesn't have CPU wait permissions in NvSciSyncObj
        // associated with syncFence" (NvSciSyncFenceWait, nvscisync.h).
        if !Arc::ptr_eq(&core.module, &ctx.module) || !core.meta.cpu_wait_here {
            return bad();
        }
        let value = fence.payload[3];
        let deadline = match timeout_us {
            -1 | NVSCI_SYS_SYNC_FENCE_MAX_TIMEOUT_US => None,
            t => Instant::now().checked_add(Duration::from_micros(t.unsigned_abs())),
        };
        wait_until(&core, value, deadline)
    })
}

/// How long a wait first spins on the counter before it sleeps: engine -> CPU hand-offs that
/// complete within it are seen at the latency of a spinning reader (a few microseconds on a
/// desktop GPU), and a long wait costs at most this much CPU time before it sleeps.
///
/// Each round of the spin yields the CPU (`sched_yield`) to any other runnable thread: the
/// kernel tends to wake the thread a signal wakes (a peer process answering, say) on the
/// signaller's CPU, and a spin that kept that CPU would hold the answer back until the spin
/// ends (on a busy two-core machine a spin without yields made the cross-process round trip of
/// `fence_bench_ipc` about 10x the raw futex ping-pong). With nothing else runnable the yield
/// returns at once and the spin reads the counter about as often as before.
const SPIN: Duration = Duration::from_micros(30);
/// Longest sleep between two looks at the counter: the latency bound for a store whose writer
/// does not notify (a GPU stream whose binding enqueues no `SyncCounterNotify` after its store).
const SLEEP_MAX: Duration = Duration::from_millis(2);

/// Blocks until `core`'s counter reaches `value` (`Ok`) or `deadline` passes (`Timeout`; `None`
/// waits forever).
///
/// Spins for [`SPIN`], yielding the CPU each round (not under Miri, whose clock makes spinning
/// pointless), then sleeps on the counter's wake sequence
/// ([`Counter::wait_moved`](super::counter::Counter::wait_moved)), which CPU signals and
/// `SyncCounterNotify` advance: a signal wakes the wait at once, in this process or another that
/// shares the object. Sleeps are bounded by [`SLEEP_MAX`] so that a store nobody notifies is
/// still seen.
fn wait_until(core: &SyncCore, value: u64, deadline: Option<Instant>) -> Res {
    if core.counter.load() >= value {
        return Ok(());
    }
    if !cfg!(miri) {
        let start = Instant::now();
        let spin_end = deadline.map_or(start + SPIN, |d| d.min(start + SPIN));
        while Instant::now() < spin_end {
            std::thread::yield_now();
            if core.counter.load() >= value {
                return Ok(());
            }
        }
    }
    loop {
        if core.counter.load() >= value {
            return Ok(());
        }
        let slice = match deadline {
            None => SLEEP_MAX,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Err(NvSciError_Timeout);
                }
                SLEEP_MAX.min(d - now)
            }
        };
        core.counter.wait_moved(value, Some(slice));
    }
}

pub(crate) unsafe extern "C" fn extract(
    f: *const NvSciSyncFence,
    id: *mut u64,
    value: *mut u64,
) -> NvSciError {
    guard("NvSciSyncFenceExtractFence", || {
        non_null(f)?;
        non_null(id)?;
        non_null(value)?;
        // SAFETY: `f` is a non-NULL caller fence.
        let fence = unsafe { f.read() };
        if core_of(&fence)?.is_none() {
            return Err(NvSciError_ClearedFence);
        }
        // SAFETY: both out-pointers are non-NULL caller storage.
        unsafe {
            id.write(fence.payload[2]);
            value.write(fence.payload[3]);
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn get_timestamp(f: *const NvSciSyncFence, out: *mut u64) -> NvSciError {
    guard("NvSciSyncFenceGetTimestamp", || {
        non_null(f)?;
        non_null(out)?;
        // SAFETY: `f` is a non-NULL caller fence.
        let fence = unsafe { f.read() };
        let core = core_of(&fence)?.ok_or(NvSciError_ClearedFence)?;
        if !core.meta.timestamps || !core.meta.need_cpu_access {
            return bad();
        }
        let value = fence.payload[3];
        let st = lock(&core.state);
        let stamp = st.stamps.iter().rev().find(|(v, _)| *v == value).map(|(_, t)| *t);
        let result = match stamp {
            Some(t) => t,
            None if value > core.counter.load() => return Err(NvSciError_NotYetAvailable),
            None => return Err(NvSciError_NoLongerAvailable),
        };
        drop(st);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { out.write(result) };
        Ok(())
    })
}
