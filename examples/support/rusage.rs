//! CPU time from `getrusage` (Linux, 64-bit), for the examples' measurements.
#![allow(dead_code)] // each example uses part of it

use std::time::Duration;

#[repr(C)]
struct Timeval {
    sec: i64,
    usec: i64,
}

#[repr(C)]
struct Rusage {
    utime: Timeval,
    stime: Timeval,
    rest: [i64; 14],
}

extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
}

/// `RUSAGE_SELF`: the whole process.
pub const PROCESS: i32 = 0;
/// `RUSAGE_THREAD`: the calling thread.
pub const THREAD: i32 = 1;

/// User + system CPU time of `who` ([`PROCESS`] or [`THREAD`]); zero if the call fails.
pub fn cpu_time(who: i32) -> Duration {
    let mut u =
        Rusage { utime: Timeval { sec: 0, usec: 0 }, stime: Timeval { sec: 0, usec: 0 }, rest: [0; 14] };
    // SAFETY: getrusage writes one struct rusage (2 timevals + 14 longs on 64-bit Linux) through
    // the valid pointer; `who` is RUSAGE_SELF or RUSAGE_THREAD.
    if unsafe { getrusage(who, &mut u) } != 0 {
        return Duration::ZERO;
    }
    let us = |t: &Timeval| Duration::from_micros((t.sec * 1_000_000 + t.usec).max(0) as u64);
    us(&u.utime) + us(&u.stime)
}
