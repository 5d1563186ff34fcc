//! The clocks a stamp is read from: CLOCK_MONOTONIC (the stream's default capture times) and
//! CLOCK_REALTIME (ROS's system time).

/// Nanoseconds on `clock`, 0 if it cannot be read.
fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime(2) writes one `struct timespec` through its second argument, which
    // points to a live, writable timespec; the clock ids used here exist on every Linux.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// CLOCK_REALTIME now, in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    now(libc::CLOCK_REALTIME)
}

/// A CLOCK_MONOTONIC time moved to CLOCK_REALTIME by the clocks' current offset.
pub fn monotonic_to_realtime(ns: u64) -> u64 {
    let (real, mono) = (now(libc::CLOCK_REALTIME), now(libc::CLOCK_MONOTONIC));
    (ns as i128 + real as i128 - mono as i128).clamp(0, u64::MAX as i128) as u64
}

/// A CLOCK_REALTIME time moved to CLOCK_MONOTONIC by the clocks' current offset.
pub fn realtime_to_monotonic(ns: u64) -> u64 {
    let (real, mono) = (now(libc::CLOCK_REALTIME), now(libc::CLOCK_MONOTONIC));
    (ns as i128 - real as i128 + mono as i128).clamp(0, u64::MAX as i128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip() {
        let mono = now(libc::CLOCK_MONOTONIC);
        assert!(mono > 0);
        let real = monotonic_to_realtime(mono);
        // The realtime clock is past 2020 on any machine that runs this.
        assert!(real > 1_577_836_800 * 1_000_000_000, "{real}");
        let back = realtime_to_monotonic(real);
        // Two offsets read a few microseconds apart.
        assert!(back.abs_diff(mono) < 50_000_000, "{back} vs {mono}");
    }
}
