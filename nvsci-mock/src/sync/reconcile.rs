//! NvSciSync reconciliation.
//!
//! * Roles: a slot whose `RequiredPerm` includes SignalOnly is a signaler, one whose
//!   `RequiredPerm` includes WaitOnly is a waiter (WaitSignal is both). Exactly one signaler and
//!   at least one waiter are required, else `ReconciliationFailed` with `RequiredPerm` in the
//!   conflict list.
//! * The object is a CPU signaler when the signaler slot sets `NeedCpuAccess`, and a CPU waiter
//!   when any waiter slot does.
//! * Primitive: the mock offers `SysmemSemaphorePayload64b` (preferred) and `SysmemSemaphore`;
//!   every slot that sets `PrimitiveInfo` must list one of them, else `ReconciliationFailed` with
//!   `PrimitiveInfo` in the conflict list. `MaxPrimitiveValue` is `u64::MAX` for the 64-bit
//!   semaphore and `u32::MAX` for the 32-bit one.
//! * Outputs: `NeedCpuAccess`, `WaiterContextInsensitiveFenceExports`,
//!   `RequireDeterministicFences` = any slot true; `ActualPerm` = `RequiredPerm` = OR of every
//!   slot's `RequiredPerm` (WaitSignal); `WaiterRequireTimestamps` = true when a waiter slot with
//!   `NeedCpuAccess` asks for timestamps (DRIVE OS 6.0.5 to 6.0.8), or, with the thread's
//!   [`TimestampRule::AnyCpuWaiter`] (DRIVE OS 6.0.10), when any waiter slot sets
//!   `NeedCpuAccess`; and then `NumTimestampSlots` = [`TIMESTAMP_SLOTS`], else 0; `NumTaskStatusSlots` = 0; `GpuId`, `PeerLocationInfo`, `PeerHwEngineArray` = union
//!   (each element once, in order of first appearance; absent when no slot sets them).

use super::keys::SYNC_KEYS;
use crate::attrs::{Conflicts, Slot, Value};
use crate::rules::TimestampRule;
use nvsci_sys::*;

/// Number of timestamp slots reported when timestamps are enabled.
pub(crate) const TIMESTAMP_SLOTS: u32 = 1024;

/// Facts about a reconciled list that are not visible as attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SyncMeta {
    /// The signaler slot requested CPU access: the CPU may generate fences and signal.
    pub cpu_signaler: bool,
    /// Some waiter slot requested CPU access: a CPU may wait (this process's or a peer's).
    pub cpu_waiter: bool,
    /// This process's CPU may signal: the signaler slot is of this process's own lists and
    /// requested CPU access (a peer's CPU signaler list gives the reconciler no CPU signal, as
    /// the reconciled `NeedCpuAccess` comes from the reconciler's own lists). Not exported.
    pub cpu_signal_here: bool,
    /// This process's CPU may wait: a waiter slot of this process's own lists requested CPU
    /// access. NvSciSync reconciles CPU access per peer (the lists "owned by the reconciler"
    /// when reconciling, those "relayed by the peer" when importing,
    /// `NvSciSyncAttrKey_NeedCpuAccess`, nvscisync.h). Not exported: each process has its own.
    pub cpu_wait_here: bool,
    /// Reconciled NeedCpuAccess.
    pub need_cpu_access: bool,
    /// Timestamps are recorded when the object is signaled.
    pub timestamps: bool,
    /// Largest value of the primitive.
    pub max_value: u64,
}

/// Why a reconciliation did not produce a list.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Conflicting attributes: the conflict list body and its report.
    Conflicts { slot: Slot, report: String },
}

fn union(c: &Conflicts<'_>, key: u32, elem: usize) -> Option<Value> {
    let mut all: Vec<u8> = Vec::new();
    for (_, v) in c.setters(key) {
        for e in v.bytes().chunks_exact(elem) {
            if !all.chunks_exact(elem).any(|u| u == e) {
                all.extend_from_slice(e);
            }
        }
    }
    (!all.is_empty()).then(|| Value::new(&all))
}

/// Reconciles `slots`.
pub(crate) fn reconcile(slots: &[Slot]) -> Result<(Slot, SyncMeta), Failure> {
    let mut c = Conflicts::new(SYNC_KEYS, slots);
    let perm_of = |s: &Slot| s.get(NvSciSyncAttrKey_RequiredPerm).map_or(0, Value::u64);
    let cpu_of = |s: &Slot| s.get(NvSciSyncAttrKey_NeedCpuAccess).is_some_and(Value::bool);

    let signalers: Vec<&Slot> =
        slots.iter().filter(|s| perm_of(s) & NvSciSyncAccessPerm_SignalOnly != 0).collect();
    let waiters: Vec<&Slot> =
        slots.iter().filter(|s| perm_of(s) & NvSciSyncAccessPerm_WaitOnly != 0).collect();
    if signalers.len() != 1 || waiters.is_empty() {
        let mut detail = format!(
            "{} signaler(s) and {} waiter(s); exactly one signaler and at least one waiter are required",
            signalers.len(),
            waiters.len()
        );
        let values = c.values_text(NvSciSyncAttrKey_RequiredPerm);
        if !values.is_empty() {
            detail = format!("{detail} ({values})");
        }
        c.add(NvSciSyncAttrKey_RequiredPerm, detail);
    }

    const OFFERED: [u32; 2] = [
        NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b,
        NvSciSyncAttrValPrimitiveType_SysmemSemaphore,
    ];
    let setters = c.setters(NvSciSyncAttrKey_PrimitiveInfo);
    let primitive = OFFERED.into_iter().find(|p| setters.iter().all(|(_, v)| v.u32s().contains(p)));
    if primitive.is_none() {
        let detail = format!(
            "no slot-common primitive among those the mock offers (SysmemSemaphorePayload64b, SysmemSemaphore): {}",
            c.values_text(NvSciSyncAttrKey_PrimitiveInfo)
        );
        c.add(NvSciSyncAttrKey_PrimitiveInfo, detail);
    }

    if !c.list.is_empty() {
        return Err(Failure::Conflicts { slot: c.slot(), report: c.report() });
    }
    let primitive = primitive.unwrap_or(NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b);
    let max_value = if primitive == NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b {
        u64::MAX
    } else {
        u64::from(u32::MAX)
    };
    // "reconciler sets value of this key to true in the reconciled NvSciSyncAttrList if any of
    // the unreconciled NvSciSyncAttrList(s) involved in reconciliation that is owned by the
    // reconciler has this key set to true" (NvSciSyncAttrKey_NeedCpuAccess, nvscisync.h,
    // DRIVE OS 6.0.10): lists relayed by peers do not count.
    let need_cpu_access = slots.iter().any(|s| !s.is_from_peer() && cpu_of(s));
    let timestamps = match crate::rules::timestamp_rule() {
        // "Only valid for CPU waiters" (nvscisync.h, DRIVE OS 6.0.5 to 6.0.8).
        TimestampRule::CpuWaiterRequest => waiters
            .iter()
            .any(|s| cpu_of(s) && s.get(NvSciSyncAttrKey_WaiterRequireTimestamps).is_some_and(Value::bool)),
        // "reconciler sets value of this key to true in the reconciled NvSciSyncAttrList if any of
        // the unreconciled NvSciSyncAttrList(s) involved in reconciliation has
        // NvSciSyncAttrKey_RequiredPerm set to NvSciSyncAccessPerm_WaitOnly/
        // NvSciSyncAccessPerm_WaitSignal and NvSciSyncAttrKey_NeedCpuAccess is set to true"
        // (NvSciSyncAttrKey_WaiterRequireTimestamps, nvscisync.h, DRIVE OS 6.0.10).
        TimestampRule::AnyCpuWaiter => waiters.iter().any(|s| cpu_of(s)),
    };
    let meta = SyncMeta {
        cpu_signaler: signalers.first().is_some_and(|s| cpu_of(s)),
        cpu_signal_here: signalers.first().is_some_and(|s| !s.is_from_peer() && cpu_of(s)),
        cpu_waiter: waiters.iter().any(|s| cpu_of(s)),
        cpu_wait_here: waiters.iter().any(|s| !s.is_from_peer() && cpu_of(s)),
        need_cpu_access,
        timestamps,
        max_value,
    };
    let perm = slots.iter().fold(0, |acc, s| acc | perm_of(s));

    let mut out = Slot::default();
    out.insert(NvSciSyncAttrKey_NeedCpuAccess, Value::from_bool(need_cpu_access));
    out.insert(NvSciSyncAttrKey_RequiredPerm, Value::from_u64s(&[perm]));
    out.insert(NvSciSyncAttrKey_ActualPerm, Value::from_u64s(&[perm]));
    out.insert(
        NvSciSyncAttrKey_WaiterContextInsensitiveFenceExports,
        Value::from_bool(c.any_true(NvSciSyncAttrKey_WaiterContextInsensitiveFenceExports)),
    );
    out.insert(NvSciSyncAttrKey_WaiterRequireTimestamps, Value::from_bool(timestamps));
    out.insert(
        NvSciSyncAttrKey_RequireDeterministicFences,
        Value::from_bool(c.any_true(NvSciSyncAttrKey_RequireDeterministicFences)),
    );
    let stamp_slots = if timestamps { TIMESTAMP_SLOTS } else { 0 };
    out.insert(NvSciSyncAttrKey_NumTimestampSlots, Value::from_u32s(&[stamp_slots]));
    out.insert(NvSciSyncAttrKey_NumTaskStatusSlots, Value::from_u32s(&[0]));
    out.insert(NvSciSyncAttrKey_MaxPrimitiveValue, Value::from_u64s(&[max_value]));
    out.insert(NvSciSyncAttrKey_PrimitiveInfo, Value::from_u32s(&[primitive]));
    for (key, elem) in [
        (NvSciSyncAttrKey_GpuId, 16),
        (NvSciSyncAttrKey_PeerLocationInfo, 16),
        (NvSciSyncAttrKey_PeerHwEngineArray, 8),
    ] {
        if let Some(v) = union(&c, key, elem) {
            out.insert(key, v);
        }
    }
    Ok((out, meta))
}
