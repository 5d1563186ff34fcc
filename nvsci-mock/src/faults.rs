//! Fault injection: make the Nth call of a chosen entry point fail with a chosen error, and
//! record which entry points a piece of code calls.
//!
//! Plans and traces are per thread: a test sets them on its own thread and nothing leaks into
//! tests running beside it. Every entry point that returns an `NvSciError` can be made to fail
//! (before it does anything: its arguments are not looked at and nothing is created); entry
//! points returning `void` or a value (`*Free`, `NvSciSyncFenceClear`, `*GetSlotCount`) cannot.
//! `NvSci*AttrListGetAttrs` counts as `NvSci*AttrListSlotGetAttrs`, which it calls.

use nvsci_sys::NvSciError;
use std::cell::RefCell;

#[derive(Default)]
struct State {
    /// The injected failure: (function, calls of it still to let through, code).
    plan: Option<(&'static str, usize, NvSciError)>,
    /// Entry points called since tracing started, in order.
    trace: Option<Vec<&'static str>>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Makes call number `nth` (0 = the next one) of `function` on this thread fail with `code`,
/// once. Replaces any earlier plan of this thread.
pub fn inject(function: &'static str, nth: usize, code: NvSciError) {
    STATE.with(|s| s.borrow_mut().plan = Some((function, nth, code)));
}

/// Removes this thread's plan; `true` if it had not fired yet.
pub fn clear() -> bool {
    STATE.with(|s| s.borrow_mut().plan.take().is_some())
}

/// Starts recording the entry points this thread calls (dropping an earlier record).
pub fn trace_start() {
    STATE.with(|s| s.borrow_mut().trace = Some(Vec::new()));
}

/// Stops recording and returns the entry points called since [`trace_start`], in order.
pub fn trace_take() -> Vec<&'static str> {
    STATE.with(|s| s.borrow_mut().trace.take().unwrap_or_default())
}

/// Called by every failable entry point: records the call and returns the injected error when
/// this is the planned call.
pub(crate) fn take(function: &'static str) -> Option<NvSciError> {
    STATE
        .try_with(|s| {
            let mut s = s.borrow_mut();
            if let Some(t) = s.trace.as_mut() {
                t.push(function);
            }
            match &mut s.plan {
                Some((f, 0, code)) if *f == function => {
                    let code = *code;
                    s.plan = None;
                    Some(code)
                }
                Some((f, n, _)) if *f == function => {
                    *n -= 1;
                    None
                }
                _ => None,
            }
        })
        .ok()
        .flatten()
}
