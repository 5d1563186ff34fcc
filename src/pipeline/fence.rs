//! The fences a ring hands between engines, and the sync objects they come from.
//!
//! A ring has one present sync object (signalled by the producer's engine, waited on by every
//! consumer's) and one release sync object per consumer (signalled by that consumer's engine,
//! waited on by the producer's). On the NvSci backends those are NvSciSync objects and a fence is
//! an NvSciSync [`Fence`]; on the Vulkan backend they are exportable timeline semaphores and a
//! fence is a value on one of them. Every sync object also has the CPU as a waiter, so the ring
//! can always wait for outstanding work before it frees memory.

#[cfg(feature = "vulkan")]
use crate::error::invalid;
use crate::error::{Error, Result};
use crate::sync::{CpuWaitContext, Fence, SyncModule, SyncObj};
use std::time::Duration;

#[cfg(feature = "vulkan")]
use crate::vulkan::TimelineSemaphore;
#[cfg(feature = "vulkan")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "vulkan")]
use std::sync::Arc;

/// A point on a ring sync object's timeline: when it expires, the engine that produced it is
/// done with the frame.
#[derive(Debug, Default)]
pub enum RingFence {
    /// Already expired (nothing to wait for).
    #[default]
    Expired,
    /// An NvSciSync fence (NvSci and mock backends).
    NvSci(Fence),
    /// A value of a timeline semaphore (Vulkan backend): expired once the counter reaches it.
    #[cfg(feature = "vulkan")]
    Timeline {
        /// The semaphore.
        semaphore: Arc<TimelineSemaphore>,
        /// The value that expires the fence.
        value: u64,
    },
}

impl From<Fence> for RingFence {
    fn from(f: Fence) -> Self {
        if f.is_cleared() {
            Self::Expired
        } else {
            Self::NvSci(f)
        }
    }
}

impl RingFence {
    /// The NvSciSync fence, if this is one.
    pub fn as_nvsci(&self) -> Option<&Fence> {
        match self {
            Self::NvSci(f) => Some(f),
            _ => None,
        }
    }

    /// Whether nothing remains to wait for (a cleared or expired fence).
    pub fn is_expired_marker(&self) -> bool {
        matches!(self, Self::Expired)
    }
}

/// A ring sync object: NvSciSync or a timeline semaphore.
pub(crate) enum SyncPoint {
    NvSci(SyncObj),
    #[cfg(feature = "vulkan")]
    Timeline {
        semaphore: Arc<TimelineSemaphore>,
        /// Last value handed out for a signal.
        next: AtomicU64,
    },
}

impl SyncPoint {
    #[cfg(feature = "vulkan")]
    pub(crate) fn timeline(semaphore: Arc<TimelineSemaphore>) -> Result<Self> {
        let current = semaphore.value()?;
        Ok(Self::Timeline { semaphore, next: AtomicU64::new(current) })
    }

    /// Whether `fence` belongs to this sync object (an expired fence belongs to any).
    pub(crate) fn owns(&self, fence: &RingFence) -> bool {
        match (self, fence) {
            (_, RingFence::Expired) => true,
            (Self::NvSci(obj), RingFence::NvSci(f)) => {
                f.object().is_some_and(|o| std::sync::Arc::ptr_eq(&o.0, &obj.0))
            }
            #[cfg(feature = "vulkan")]
            (Self::Timeline { semaphore, .. }, RingFence::Timeline { semaphore: s, .. }) => {
                Arc::ptr_eq(semaphore, s)
            }
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// Signals from the CPU now and returns the (expired) fence of that signal, or
    /// [`RingFence::Expired`] where the backend needs no record of it.
    pub(crate) fn cpu_signal(&self) -> Result<RingFence> {
        match self {
            Self::NvSci(obj) => {
                let fence = obj.generate_fence()?;
                obj.signal()?;
                Ok(RingFence::from(fence))
            }
            #[cfg(feature = "vulkan")]
            Self::Timeline { semaphore, next } => {
                let value = self.reserve_value(next)?;
                semaphore.signal(value)?;
                Ok(RingFence::Timeline { semaphore: semaphore.clone(), value })
            }
        }
    }

    /// The next timeline value for a signal (engine or CPU).
    #[cfg(feature = "vulkan")]
    fn reserve_value(&self, next: &AtomicU64) -> Result<u64> {
        let prev = next.fetch_add(1, Ordering::AcqRel);
        prev.checked_add(1).ok_or_else(|| invalid("timeline", "the semaphore's 64-bit counter is exhausted"))
    }

    /// Reserves the value of the next engine signal of a timeline sync point.
    #[cfg(feature = "vulkan")]
    pub(crate) fn next_timeline_value(&self) -> Result<(Arc<TimelineSemaphore>, u64)> {
        match self {
            Self::Timeline { semaphore, next } => Ok((semaphore.clone(), self.reserve_value(next)?)),
            Self::NvSci(_) => Err(invalid("sync", "not a timeline semaphore")),
        }
    }

    /// The NvSciSync object, on the NvSci backends.
    pub(crate) fn nvsci(&self) -> Option<&SyncObj> {
        match self {
            Self::NvSci(o) => Some(o),
            #[cfg(feature = "vulkan")]
            _ => None,
        }
    }
}

/// Waits for fences on the CPU. One per waiting party (NvSci wait contexts are not shared
/// between threads).
pub(crate) enum CpuWaiter {
    NvSci(CpuWaitContext),
    /// Timeline semaphores need no context.
    #[cfg_attr(not(feature = "vulkan"), allow(dead_code))]
    Plain,
}

impl CpuWaiter {
    pub(crate) fn new(module: Option<&SyncModule>) -> Result<Self> {
        Ok(match module {
            Some(m) => Self::NvSci(m.cpu_wait_context()?),
            None => Self::Plain,
        })
    }

    /// Waits until `fence` expired or `timeout` passed ([`Error::Timeout`]).
    pub(crate) fn wait(&mut self, fence: &RingFence, timeout: Duration) -> Result<()> {
        match (fence, self) {
            (RingFence::Expired, _) => Ok(()),
            (RingFence::NvSci(f), Self::NvSci(ctx)) => f.wait(ctx, Some(timeout)),
            #[cfg(feature = "vulkan")]
            (RingFence::Timeline { semaphore, value }, _) => semaphore.wait(*value, timeout),
            #[allow(unreachable_patterns)]
            _ => Err(Error::Unsupported {
                what: "waiting on this fence from the CPU",
                reason: "the fence does not come from this ring's backend",
            }),
        }
    }
}
