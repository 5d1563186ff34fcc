//! fd hygiene around CUDA imports: 1000 failed imports of each kind and 1000 successful
//! export/import cycles leave the process's open descriptors unchanged. Every failure is a typed
//! error; the count after each kind shows what the driver did with the duplicate it was handed.
#![cfg(feature = "cuda")]

mod common;

use common::{gpu, open_fds, serial};
use nvsci::cuda::{CudaSemaphore, ExportableAllocation, ExternalMemory, ReadWrite, SemaphoreKind};
use nvsci::{CudaError, Error};
use std::os::fd::{FromRawFd, OwnedFd};

const N: usize = 1000;

/// Both ends of a new pipe.
fn pipe() -> (OwnedFd, OwnedFd) {
    extern "C" {
        fn pipe(fds: *mut i32) -> i32;
    }
    let mut fds = [-1i32; 2];
    // SAFETY: pipe(2) writes two new descriptors into the array.
    assert_eq!(unsafe { pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors are new and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

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
            Err(
                Error::Cuda(CudaError::Call { .. })
                | Error::InvalidArgument { .. }
                | Error::Unsupported { .. },
            ) => {}
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
        failures("memory import of a pipe", || {
            let (r, _w) = pipe();
            ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, r, size, false).map(drop)
        }),
        failures("semaphore import of an fd that is no semaphore", || {
            CudaSemaphore::import(&dev, not_cuda_memory(), SemaphoreKind::Timeline).map(drop)
        }),
    ];
    // An opaque fd is opaque: a memory export imported as a semaphore is accepted by the driver
    // (seen on an H100, driver 580), so it is no failure case; reported, not asserted.
    let as_semaphore = CudaSemaphore::import(&dev, alloc.export_fd().unwrap(), SemaphoreKind::Binary);
    eprintln!(
        "memory export imported as a semaphore: {}",
        if as_semaphore.is_ok() { "accepted" } else { "refused" }
    );
    drop(as_semaphore);
    // The driver takes the size on trust: an import of this allocation with 64 times its size is
    // accepted (seen on an H100, driver 580); mappings past the real allocation are the caller's
    // error, as `ExternalMemory::from_opaque_fd` documents.
    let oversized =
        ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size * 64, false);
    eprintln!(
        "import with 64 times the allocation's size: {}",
        if oversized.is_ok() { "accepted" } else { "refused" }
    );
    drop(oversized);
    common::settle(&dev);
    let before = open_fds();
    for _ in 0..N {
        let m = ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size, false)
            .unwrap();
        drop(m.map_all().unwrap());
    }
    common::settle(&dev);
    let cycles = open_fds() as isize - before as isize;
    eprintln!("{N} export/import/map/unmap cycles: open fds changed by {cycles}");
    assert_eq!(deltas, [0; 3], "failed imports leaked descriptors (per kind, in order)");
    assert_eq!(cycles, 0, "successful imports leaked descriptors");
}
