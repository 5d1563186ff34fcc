//! Rules that NVIDIA's headers state differently from one DRIVE OS release to another, chosen
//! per thread (like [`faults`](crate::faults)): a test picks the release it reproduces on its own
//! thread, and nothing leaks into tests running beside it. Each rule applies to the calls the
//! thread makes (a reconciliation follows the rule of the thread that reconciles).

use std::cell::Cell;

/// How reconciliation sets `NvSciSyncAttrKey_WaiterRequireTimestamps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimestampRule {
    /// DRIVE OS 6.0.5 to 6.0.8 (`nvscisync.h`, `NvSciSyncAttrKey_WaiterRequireTimestamps`: "If
    /// the waiter wishes to read timestamps then the NvSciSyncAttrKey_NeedCpuAccess key should be
    /// set to true. Only valid for CPU waiters."): true when a waiter list with `NeedCpuAccess`
    /// asks for timestamps. The default.
    #[default]
    CpuWaiterRequest,
    /// DRIVE OS 6.0.10 (`nvscisync.h` of that release, `NvSciSyncAttrKey_WaiterRequireTimestamps`:
    /// "During reconciliation, reconciler sets value of this key to true in the reconciled
    /// NvSciSyncAttrList if any of the unreconciled NvSciSyncAttrList(s) involved in
    /// reconciliation has NvSciSyncAttrKey_RequiredPerm set to
    /// NvSciSyncAccessPerm_WaitOnly/NvSciSyncAccessPerm_WaitSignal and
    /// NvSciSyncAttrKey_NeedCpuAccess is set to true, otherwise it is set to false"): true
    /// whenever any list involved (a peer's included) is a CPU waiter, asked or not.
    AnyCpuWaiter,
}

thread_local! {
    static TIMESTAMPS: Cell<TimestampRule> = const { Cell::new(TimestampRule::CpuWaiterRequest) };
}

/// Makes the reconciliations this thread runs from now on follow `rule`.
pub fn set_timestamp_rule(rule: TimestampRule) {
    TIMESTAMPS.with(|r| r.set(rule));
}

/// The rule this thread's reconciliations follow.
pub fn timestamp_rule() -> TimestampRule {
    TIMESTAMPS.try_with(Cell::get).unwrap_or_default()
}
