//! fd hygiene around CUDA imports: 1000 failed imports of each kind and 1000 successful
//! export/import cycles leave the process's open descriptors unchanged. Every failure is a typed
//! error; the count after each kind shows what the driver did with the duplicate it was handed.
#![cfg(feature = "cuda")]

mod common;

use common::{gpu, open_fds, serial};
use nvsci::cuda::{CudaSemaphore, ExportableAllocation, ExternalMemory, ReadWrite, SemaphoreKind};
use nvsci::Error;
use std::os::fd::OwnedFd;

const N: usize = 1000;

fn not_cuda_memory() -> OwnedFd {
    OwnedFd::from(std::fs::File::open("/dev/zero").unwrap())
}

/// Runs `f` N times (each must fail with a typed error) and returns the change in open fds.
fn failures(what: &str, mut f: impl FnMut() -> Result<(), Error>) -> isize {
    // One warm-up call, so that lazily opened driver descriptors are not counted.
    let _ = f();
    let before = open_fds() as isize;
    for i in 0..N {
        match f() {
            Err(Error::Cuda { .. } | Error::InvalidArgument { .. } | Error::Unsupported { .. }) => {}
            other => panic!("{what}, attempt {i}: expected a typed failure, got {other:?}"),
        }
    }
    let delta = open_fds() as isize - before;
    eprintln!("{what}: {N} failed imports, open fds changed by {delta}");
    delta
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn failed_and_successful_imports_leave_no_descriptor_behind() {
    let Some(dev) = gpu() else { return };
    let _s = serial();
    let alloc = ExportableAllocation::new(&dev, 2 << 20).unwrap();
    let size = alloc.size() as u64;
    let deltas = [
        failures("memory import of a file that is not exported GPU memory", || {
            ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, not_cuda_memory(), size, false).map(drop)
        }),
        failures("memory import with a size larger than the allocation", || {
            ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd()?, size * 64, false).map(drop)
        }),
        failures("semaphore import of an fd that is no semaphore", || {
            CudaSemaphore::import(&dev, not_cuda_memory(), SemaphoreKind::Timeline).map(drop)
        }),
        failures("semaphore import of exported memory (wrong handle type)", || {
            CudaSemaphore::import(&dev, alloc.export_fd()?, SemaphoreKind::Binary).map(drop)
        }),
    ];
    let before = open_fds();
    for _ in 0..N {
        let m = ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size, false)
            .unwrap();
        drop(m.map_all().unwrap());
    }
    let cycles = open_fds() as isize - before as isize;
    eprintln!("{N} export/import/map/unmap cycles: open fds changed by {cycles}");
    assert_eq!(deltas, [0; 4], "failed imports leaked descriptors (per kind, in order)");
    assert_eq!(cycles, 0, "successful imports leaked descriptors");
}
