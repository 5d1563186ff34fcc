//! The frame ring of the Vulkan backend (desktop NVIDIA GPUs): one exported buffer and one
//! hand-off (timeline semaphore, or binary pair) per slot; Vulkan produces, CUDA consumes in
//! place, Vulkan takes the slot back.
//!
//! One frame: [`VulkanFrameRing::acquire`] (waits until the slot is back from its previous
//! round), write the frame into [`VulkanFrame::staging_mut`], [`VulkanFrameRing::present`]
//! (Vulkan uploads it into the exported buffer and signals; the CUDA stream is made to wait),
//! run kernels on [`PresentedFrame::device_address`], [`VulkanFrameRing::release`] (CUDA
//! signals; Vulkan waits for that before the slot is reused). The frame layout is fixed by the
//! ring ([`FrameLayout::packed`] with 256-byte pitches and 4096-byte planes): there is no NvSci
//! reconciliation on this backend.

use super::format::{FrameFormat, FrameLayout};
use super::ring::MAX_FRAMES;
use crate::cuda::cudarc::driver::CudaStream;
use crate::cuda::CudaDevice;
use crate::error::{invalid, Result};
use crate::vulkan::ash::vk;
use crate::vulkan::{
    CudaHandoff, CudaImportedBuffer, ExportableBuffer, FrameProducer, FrameValues, HandoffMode,
    HandoffSemaphores, ProducerConfig, Readback, VulkanContext,
};
use std::sync::Arc;
use std::time::Duration;

/// Row pitch alignment of the ring's frames.
pub const VULKAN_PITCH_ALIGN: u32 = 256;
/// Plane alignment of the ring's frames.
pub const VULKAN_PLANE_ALIGN: u64 = 4096;

// Field order is teardown order: the CUDA hand-off and import go before the producer, which owns
// the Vulkan objects they came from.
struct Slot {
    handoff: CudaHandoff,
    import: CudaImportedBuffer,
    producer: FrameProducer,
    in_flight: bool,
}

/// A ring of Vulkan-exported frames consumed by CUDA.
pub struct VulkanFrameRing {
    id: usize,
    slots: heapless::Vec<Slot, MAX_FRAMES>,
    layout: FrameLayout,
    next: u64,
    held: bool,
    timeout: Duration,
    mode: HandoffMode,
}

impl std::fmt::Debug for VulkanFrameRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanFrameRing")
            .field("frames", &self.slots.len())
            .field("layout", &self.layout)
            .field("mode", &self.mode)
            .finish()
    }
}

/// A slot the producer holds: fill its staging memory, then present it.
#[derive(Debug)]
#[must_use = "an acquired frame must be presented"]
pub struct VulkanFrame {
    index: usize,
    sequence: u64,
    ring: usize,
}

impl VulkanFrame {
    /// Slot in the ring.
    pub fn index(&self) -> usize {
        self.index
    }
    /// Frame number, counting from 0.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

/// A presented frame: CUDA work enqueued on the stream after `present` sees its contents.
#[derive(Debug)]
#[must_use = "a presented frame must be released"]
pub struct PresentedFrame {
    ring: usize,
    index: usize,
    sequence: u64,
    values: FrameValues,
    address: u64,
}

impl PresentedFrame {
    /// Device address of the frame in CUDA (valid while the ring lives).
    pub fn device_address(&self) -> u64 {
        self.address
    }
    /// Slot in the ring.
    pub fn index(&self) -> usize {
        self.index
    }
    /// Frame number, counting from 0.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

impl VulkanFrameRing {
    /// Allocates `frames` exported buffers of `format` on the Vulkan device that is `cuda`, with
    /// their hand-off semaphores, and imports both into CUDA.
    pub fn new(
        ctx: &Arc<VulkanContext>,
        cuda: &CudaDevice,
        format: FrameFormat,
        frames: usize,
        timeout: Duration,
    ) -> Result<Self> {
        if !(2..=MAX_FRAMES).contains(&frames) {
            return Err(invalid("frames", format!("{frames} frames; 2 to {MAX_FRAMES} allowed")));
        }
        let layout = FrameLayout::packed(format, VULKAN_PITCH_ALIGN, VULKAN_PLANE_ALIGN)?;
        let mut slots = heapless::Vec::new();
        for _ in 0..frames {
            let target = ExportableBuffer::new(ctx, layout.size, vk::BufferUsageFlags::STORAGE_BUFFER)?;
            let sems = HandoffSemaphores::new(ctx)?;
            let config = ProducerConfig { readback: Readback::None, ..Default::default() };
            let producer = FrameProducer::new(ctx, &target, &sems, config)?;
            let handoff = sems.import_into_cuda(cuda)?;
            let import = target.import_into_cuda(cuda)?;
            let _ = slots.push(Slot { handoff, import, producer, in_flight: false });
        }
        let mode = slots[0].handoff.mode();
        static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Self { id, slots, layout, next: 0, held: false, timeout, mode })
    }

    /// The frame layout (fixed by this backend).
    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    /// Timeline semaphore or binary-pair hand-off.
    pub fn mode(&self) -> HandoffMode {
        self.mode
    }

    /// Waits (up to the ring's timeout) until the next slot is back from its previous round.
    pub fn acquire(&mut self) -> Result<VulkanFrame> {
        if self.held {
            return Err(invalid("ring", "present the frame already acquired first"));
        }
        let index = (self.next % self.slots.len() as u64) as usize;
        let slot = &mut self.slots[index];
        if slot.in_flight {
            slot.producer.wait_returned(self.timeout)?;
            slot.in_flight = false;
        }
        self.held = true;
        Ok(VulkanFrame { index, sequence: self.next, ring: self.id })
    }

    fn check(&self, ring: usize, index: usize) -> Result<()> {
        if ring != self.id || index >= self.slots.len() {
            return Err(invalid("frame", "the frame belongs to another ring"));
        }
        Ok(())
    }

    /// The host-visible staging memory of an acquired frame (`layout().size` bytes).
    pub fn staging_mut(&mut self, frame: &VulkanFrame) -> Result<&mut [u8]> {
        self.check(frame.ring, frame.index)?;
        self.slots[frame.index].producer.staging_mut()
    }

    /// Has Vulkan upload the frame and hand it to CUDA: work enqueued on `stream` afterwards
    /// sees the frame.
    /// On an error the frame is not presented and the next `acquire` hands out the same slot.
    pub fn present(&mut self, frame: VulkanFrame, stream: &CudaStream) -> Result<PresentedFrame> {
        self.check(frame.ring, frame.index)?;
        self.held = false;
        let slot = &mut self.slots[frame.index];
        let values = slot.producer.submit_produce()?;
        slot.handoff.wait_produced(stream, &values)?;
        self.next += 1;
        Ok(PresentedFrame {
            ring: self.id,
            index: frame.index,
            sequence: frame.sequence,
            values,
            address: slot.import.device_address(),
        })
    }

    /// Signals, after the work enqueued on `stream`, that CUDA is done with the frame; Vulkan
    /// takes the slot back once that signal fires.
    pub fn release(&mut self, frame: PresentedFrame, stream: &CudaStream) -> Result<()> {
        self.check(frame.ring, frame.index)?;
        let slot = &mut self.slots[frame.index];
        slot.handoff.signal_done(stream, &frame.values)?;
        slot.producer.submit_return()?;
        slot.in_flight = true;
        Ok(())
    }

    /// Waits until every slot is back (before reading results on the host or dropping).
    pub fn drain(&mut self) -> Result<()> {
        for s in self.slots.iter_mut().filter(|s| s.in_flight) {
            s.producer.wait_returned(self.timeout)?;
            s.in_flight = false;
        }
        Ok(())
    }
}
