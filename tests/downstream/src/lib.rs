//! Builds a frame ring on the mock NvSci, as a downstream crate would, with nvsci's CUDA support
//! compiled against CUDA 12.2.

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};

/// Opens the mock, builds a two-frame NV12 ring with one consumer, and passes one frame from the
/// producer to the consumer. Returns whether a CUDA driver is present (the CUDA module is
/// compiled in either way).
pub fn one_frame() -> nvsci::Result<bool> {
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(64, 32))
        .frames(2)
        .consumer(ConsumerDesc::cpu())
        .build()?;
    let (mut producer, mut consumers) = ring.split()?;
    let frame = producer.acquire()?;
    producer.cpu_write(&frame)?.fill(7);
    producer.present(frame)?;
    let consumer = &mut consumers[0];
    let frame = consumer.acquire()?;
    let all_seven = consumer.cpu_read(&frame)?.iter().all(|&b| b == 7);
    consumer.release(frame)?;
    assert!(all_seven, "the consumer saw other bytes than the producer wrote");
    Ok(nvsci::cuda::driver_present())
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_frame_through_the_mock() {
        super::one_frame().unwrap();
    }
}
