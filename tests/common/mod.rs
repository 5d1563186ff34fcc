//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// Whether GPU tests must fail instead of skipping when no GPU is found (set on GPU hosts).
pub fn gpu_required() -> bool {
    std::env::var("NVSCI_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// The CUDA device for GPU tests: `None` (test returns early) without a GPU, unless
/// `NVSCI_REQUIRE_GPU=1`, in which case the test fails.
#[cfg(feature = "cuda")]
pub fn gpu() -> Option<nvsci::cuda::CudaDevice> {
    match nvsci::cuda::CudaDevice::open(0) {
        Ok(d) => Some(d),
        Err(e) if gpu_required() => panic!("NVSCI_REQUIRE_GPU=1 but no GPU: {e}"),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// `fill_pattern(u8* p, u64 n, u32 seed)`: p[i] = (i * 7 + seed) & 0xff.
pub const FILL_PATTERN_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry fill_pattern(
    .param .u64 p_ptr,
    .param .u64 p_n,
    .param .u32 p_seed
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [p_ptr];
    ld.param.u64 %rd2, [p_n];
    ld.param.u32 %r1, [p_seed];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    cvt.u64.u32 %rd3, %r5;
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    add.s64 %rd5, %rd4, %rd3;
    mul.lo.s32 %r6, %r5, 7;
    add.s32 %r7, %r6, %r1;
    st.global.u8 [%rd5], %r7;
DONE:
    ret;
}
"#;

/// The host-side expectation of `fill_pattern`.
pub fn expected_pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n).map(|i| ((i as u32).wrapping_mul(7).wrapping_add(seed) & 0xff) as u8).collect()
}
