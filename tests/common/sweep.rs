//! The fault sweep: a flow run once traced, then once per traced call with that call failing.

use nvsci_mock::faults;
use nvsci_mock::HandleCounts;

/// The error every sweep injects.
pub const INJECTED: nvsci_sys::NvSciError = nvsci_sys::NvSciError_InsufficientMemory;

/// Whether `e` is the injected failure of `function`: the call's status as the library returned
/// it (`NvSci`), or explained by the crate (`AttrRefused`, `Refused`), naming the function and
/// keeping the injected code.
pub fn fails_in(e: &nvsci::Error, function: &str) -> bool {
    let injected = nvsci::NvSciError(INJECTED);
    match e {
        nvsci::Error::NvSci { function: f, code }
        | nvsci::Error::AttrRefused { function: f, code, .. }
        | nvsci::Error::Refused { function: f, code, .. } => *f == function && *code == injected,
        _ => false,
    }
}

/// What one sweep found.
#[derive(Debug, Default)]
pub struct Swept {
    /// The calls of the flow, in order (traced without injection).
    pub calls: Vec<&'static str>,
    /// How many injection points ran.
    pub points: usize,
    /// How many surfaced as the typed error naming the failing function.
    pub surfaced: usize,
    /// The failures the flow absorbed (`function #nth`), each one of `absorbable`.
    pub absorbed: Vec<String>,
}

/// Runs `flow` once, traced (it must succeed and leave the ledger as it found it), then once per `stride`-th traced
/// call with that call failing. A failure must surface as the error naming the function
/// ([`fails_in`]) with the ledger as before; a flow that succeeds anyway must have failed one of
/// `absorbable`, and `absorbed(function, before, after)` checks what it left. `settle` runs before
/// each ledger reading (a GPU's deferred destroys).
pub fn sweep(
    name: &str,
    stride: usize,
    mut flow: impl FnMut() -> nvsci::Result<()>,
    mut settle: impl FnMut(),
    absorbable: &[&str],
    mut absorbed: impl FnMut(&str, HandleCounts, HandleCounts),
) -> Swept {
    let ledger = nvsci_mock::global_ledger();
    settle();
    let start = ledger.counts();
    faults::trace_start();
    flow().unwrap_or_else(|e| panic!("{name} flow fails without injection: {e}"));
    let calls = faults::trace_take();
    settle();
    assert_eq!(ledger.counts(), start, "{name} flow leaks without injection");
    assert!(!calls.is_empty());
    let mut out = Swept::default();
    for (i, &function) in calls.iter().enumerate().step_by(stride) {
        let nth = calls[..i].iter().filter(|&&f| f == function).count();
        settle();
        let before = ledger.counts();
        faults::inject(function, nth, INJECTED);
        let r = flow();
        let fired = !faults::clear();
        settle();
        let after = ledger.counts();
        assert!(fired, "{name}: call {nth} of {function} was not reached again");
        out.points += 1;
        match r {
            Err(e) => {
                assert!(fails_in(&e, function), "{name}: call {nth} of {function} surfaced as {e:?}");
                assert_eq!(after, before, "{name}: failing call {nth} of {function} leaked: {after:?}");
                out.surfaced += 1;
            }
            Ok(()) => {
                assert!(
                    absorbable.contains(&function),
                    "{name}: failing call {nth} of {function} went unnoticed"
                );
                absorbed(function, before, after);
                out.absorbed.push(format!("{function} #{nth}"));
            }
        }
    }
    out.calls = calls;
    out
}
