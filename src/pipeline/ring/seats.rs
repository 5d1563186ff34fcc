//! The seat service of a producer with consumers in other processes: one thread per seat that
//! serves a mailbox consumer (its requests answered at once, its releases and departure taken,
//! its loss noticed when its endpoint reports it), and attaches the next consumer to a vacant
//! seat while the stream runs (a new endpoint session each time:
//! nvsciipc.h allows `NvSciIpcResetEndpointSafe` "exactly once per endpoint handle during Init
//! mode", so a new peer takes a new handle).
//!
//! A FIFO consumer's endpoint is read by the producer when it needs a slot back (a hand-off
//! never waits for another thread), and looked at without waiting by the service every 20 ms
//! while the producer is not reading it, so that a consumer that died holding frames the
//! producer does not need yet is noticed too; the producer also notices a loss when a frame
//! cannot be sent. A mailbox consumer's endpoint is read by the service alone while it runs:
//! the producer's acquire then waits for the state the service updates. One reader at a time
//! (`RemoteConsumer::reader`), which applies what it read before it lets go: a second reader
//! could take the message whose wake-up the first was waiting for. Without the service (before
//! the producer is split, and while the stream ends) the producer reads every endpoint itself.

use super::{Inner, SeatStatus};
use crate::error::{Error, IpcError, Result, RingError, Wait};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one wait of the service lasts before it looks at its stop flag again.
const STEP: Duration = Duration::from_millis(20);

/// The threads serving the seats of consumers in other processes; dropping it stops them (each
/// finishes the step it is in: at most one message wait, or one attach, bounded by the ring's
/// timeout).
pub(crate) struct SeatService {
    inner: Arc<Inner>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl SeatService {
    /// Starts one thread per seat of a consumer in another process (none without such seats).
    pub(crate) fn start(inner: &Arc<Inner>) -> Result<Option<Self>> {
        if inner.remotes.is_empty() {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::with_capacity(inner.remotes.len());
        for k in 0..inner.remotes.len() {
            let (own, flag) = (inner.clone(), stop.clone());
            let name = format!("nvsci-seat-{}", inner.remotes[k].consumer);
            let spawned = std::thread::Builder::new().name(name).spawn(move || serve(&own, k, &flag));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    drop(Self { inner: inner.clone(), stop, threads });
                    return Err(Error::Ipc(IpcError::Endpoint {
                        endpoint: "seat service".into(),
                        reason: format!("no thread for a seat: {e}"),
                        code: None,
                    }));
                }
            }
        }
        inner.serviced.store(true, Ordering::Release);
        Ok(Some(Self { inner: inner.clone(), stop, threads }))
    }
}

impl Drop for SeatService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The producer reads the endpoints itself from here on.
        self.inner.serviced.store(false, Ordering::Release);
    }
}

/// Serves seat `k` of `inner.remotes` until `stop`.
fn serve(inner: &Inner, k: usize, stop: &AtomicBool) {
    let r = &inner.remotes[k];
    let c = r.consumer;
    // Whether the seat's endpoint saw a session (an attach tried, or a consumer attached): the
    // next consumer then needs a new endpoint handle.
    let mut used = inner.shared().st.status(c) != SeatStatus::Vacant;
    while !stop.load(Ordering::Acquire) {
        if inner.shared().st.status(c) != SeatStatus::Vacant {
            used = true;
            if !inner.read_by_service(c) {
                // A FIFO consumer: the producer reads its endpoint when it needs a slot back
                // (and notices its loss when a frame cannot be sent to it). Between those, take
                // what is there without waiting, unless the producer is reading: a consumer
                // that died holding only frames the producer does not need yet is noticed too.
                // Wake up when the seat is freed, to offer it to the next consumer at once.
                loop {
                    match inner.try_take_remote_release(r, Duration::ZERO) {
                        Ok(true) if inner.shared().st.status(c) != SeatStatus::Vacant => {}
                        Ok(_) | Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => break,
                        Err(e) => {
                            log::warn!("frame ring {}: consumer {c} (in another process): {e}", inner.id);
                            break;
                        }
                    }
                }
                let sh = inner.shared();
                if sh.st.status(c) != SeatStatus::Vacant {
                    drop(inner.seat_freed.wait_timeout(sh, STEP).unwrap_or_else(|e| e.into_inner()));
                }
                continue;
            }
            match inner.take_remote_release(r, STEP) {
                Ok(()) | Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => {}
                Err(e) => {
                    log::warn!("frame ring {}: consumer {c} (in another process): {e}", inner.id);
                    std::thread::sleep(STEP);
                }
            }
            continue;
        }
        let Some(hub) = inner.hub.as_ref().filter(|_| inner.producer_engine.is_cpu()) else {
            // No attach while the stream runs (a CUDA producer): the seat stays vacant.
            std::thread::sleep(STEP);
            continue;
        };
        if used {
            r.close();
            used = false;
        }
        let (session, ep) = match r.reopen() {
            Ok(s) => s,
            Err(e) => {
                // Busy while another user of the old session still holds it.
                log::debug!("frame ring {}: seat {c} not reopened yet: {e}", inner.id);
                std::thread::sleep(STEP);
                continue;
            }
        };
        match ep.wait_connected(Some(STEP)) {
            Ok(()) => {}
            Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => continue,
            Err(_) => {
                used = true;
                continue;
            }
        }
        used = true;
        let generation = r.generation.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        match hub.attach(&ep, r, generation) {
            Ok((mode, limit)) => {
                {
                    let mut sh = inner.shared();
                    let attached = sh.st.attach(mode, limit.unwrap_or(usize::MAX), |s| s == c);
                    debug_assert_eq!(attached, Some(c), "the seat was vacant");
                    r.attached_session.store(session, Ordering::Release);
                }
                r.record.lock().unwrap_or_else(|e| e.into_inner()).attaches += 1;
                log::debug!("frame ring {}: consumer {c} attached from another process ({mode:?})", inner.id);
                inner.changed.notify_all();
            }
            Err(e) => {
                let _ = hub.ring.attach_release(c, None);
                if let Error::Ring(RingError::AttachRefused { field, .. }) = &e {
                    let mut rec = r.record.lock().unwrap_or_else(|e| e.into_inner());
                    rec.refused += 1;
                    rec.last_refusal = Some(*field);
                }
                log::warn!("frame ring {}: an attach to seat {c} failed: {e}", inner.id);
            }
        }
        drop(ep);
    }
}
