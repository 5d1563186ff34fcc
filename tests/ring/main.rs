//! The frame ring's scenarios, written once (`scenarios.rs`) and run on every backend, the way
//! wgpu's test harness runs each test on every adapter:
//!
//! * `mock_cpu`: the NvSci backend on the mock library with CPU engines (any machine, CI);
//! * `mock_cuda`: the NvSci backend on the mock library with a CUDA engine (a CUDA GPU);
//! * `vulkan`: the Vulkan backend with a CUDA engine (a CUDA GPU with a Vulkan driver; feature
//!   `vulkan`);
//! * `nvsci`: the NvSci backend on NVIDIA's libraries with a CUDA engine (Jetson, DRIVE OS).
//!
//! What a backend cannot do is declared once, in [`unsupported`]; a scenario states what it
//! needs ([`Needs`]). The GPU runs are `#[ignore = "needs a CUDA GPU"]` (run them with
//! `--include-ignored` on a GPU host); there `NVSCI_REQUIRE_GPU=1` turns a missing GPU or
//! Vulkan driver into a failure, and `NVSCI_REQUIRE_NVSCI=1` (on Tegra) a missing NvSci.
#![cfg(feature = "mock")]

#[path = "../common/mod.rs"]
mod common;
#[path = "../../examples/support/nv12_pattern.rs"]
mod nv12_pattern;
mod scenarios;

use nvsci::pipeline::{Backend, Engine};
use nvsci::NvSci;

/// A backend the scenarios run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    MockCpu,
    MockCuda,
    Vulkan,
    NvSci,
}

/// What a scenario needs of a backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    /// A GPU engine (a CUDA device the backend's frames and fences reach).
    pub gpu: bool,
}

/// Runs with any engine (CPU parties where the backend has no GPU engine).
pub const CPU: Needs = Needs { gpu: false };
/// Needs a GPU engine.
pub const GPU: Needs = Needs { gpu: true };

/// What each backend cannot do here: the one place a scenario is declared unsupported.
fn unsupported(kind: Kind, needs: Needs) -> Option<&'static str> {
    match kind {
        Kind::MockCpu if needs.gpu => Some("the mock library with CPU engines has no GPU engine"),
        _ => None,
    }
}

/// A scenario's backend.
pub struct Env {
    pub kind: Kind,
    pub backend: Backend,
}

impl Env {
    /// The engine of the scenario's "engine" parties: the backend's GPU engine, or the CPU on
    /// the CPU-only backend.
    pub fn engine(&self) -> Engine {
        match self.kind {
            Kind::MockCpu => Engine::Cpu,
            _ => self.backend.gpu_engine(),
        }
    }

    /// The CUDA device of a GPU backend.
    #[cfg(feature = "cuda")]
    pub fn dev(&self) -> Option<nvsci::cuda::CudaGpu> {
        match self.kind {
            Kind::MockCpu => None,
            _ => self.backend.cuda().cloned(),
        }
    }

    /// The same kind of backend, on the application's own CUDA context.
    #[cfg(feature = "cuda")]
    pub fn reopen_on(&self, app: &nvsci::cuda::CudaGpu) -> Option<Env> {
        open(self.kind, Some(app)).map(|backend| Env { kind: self.kind, backend })
    }
}

/// `what` is not usable here: a failure where the environment requires `need`
/// (`NVSCI_REQUIRE`), else a recorded skip (reported by toolchain/run-tests.sh, not a pass).
fn skip_or_fail(need: common::require::Capability, what: &str, e: impl std::fmt::Display) -> Option<Backend> {
    common::require::unavailable(&[need], format!("{what} not usable here: {e}"))
}

#[cfg(feature = "cuda")]
type AppGpu<'a> = Option<&'a nvsci::cuda::CudaGpu>;
#[cfg(not(feature = "cuda"))]
type AppGpu<'a> = Option<&'a ()>;

/// Opens `kind`'s backend (on `app`'s CUDA context where given), or `None` where this machine
/// lacks it (a failure instead where the environment says it must have it).
#[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
fn open(kind: Kind, app: AppGpu<'_>) -> Option<Backend> {
    use common::require::Capability as Need;
    match kind {
        Kind::MockCpu => Some(Backend::with_library(NvSci::mock())),
        #[cfg(feature = "cuda")]
        Kind::MockCuda => {
            let dev = match app {
                Some(a) => a.clone(),
                None => common::gpu()?,
            };
            let b = Backend::with_library_on(NvSci::mock(), &dev);
            if b.cuda().is_none() {
                return skip_or_fail(Need::Gpu, "the mock library's GPU mode", b.explain());
            }
            Some(b)
        }
        #[cfg(feature = "vulkan")]
        Kind::Vulkan => {
            let r = match app {
                Some(a) => Backend::new_on(nvsci::pipeline::BackendKind::Vulkan, a),
                None => {
                    common::gpu()?;
                    Backend::new(nvsci::pipeline::BackendKind::Vulkan)
                }
            };
            match r {
                Ok(b) => Some(b),
                Err(e) => skip_or_fail(Need::Gpu, "the Vulkan backend", e),
            }
        }
        #[cfg(feature = "cuda")]
        Kind::NvSci => {
            let r = match app {
                Some(a) => Backend::new_on(nvsci::pipeline::BackendKind::NvSci, a),
                None => Backend::new(nvsci::pipeline::BackendKind::NvSci),
            };
            match r {
                Ok(b) => Some(b),
                Err(e) => skip_or_fail(Need::NvSci, "NVIDIA's NvSci with CUDA", e),
            }
        }
        #[allow(unreachable_patterns)]
        _ => {
            eprintln!("this backend: built without its feature");
            None
        }
    }
}

/// Runs `scenario` on `kind`'s backend, unless the backend cannot do what it needs.
pub fn run(kind: Kind, needs: Needs, scenario: fn(&Env)) {
    if let Some(why) = unsupported(kind, needs) {
        // The macros below generate no such pair; reaching here is a harness mistake.
        panic!("scenario run on a backend that cannot do it: {why}");
    }
    // Scenarios measure process-wide state (fds, mock handles, device memory): one at a time.
    let _serial = common::serial();
    let Some(backend) = open(kind, None) else { return };
    eprintln!("{}", backend.explain());
    scenario(&Env { kind, backend });
}

/// Each scenario as one test per backend that can run it: `on_every_backend!` for scenarios
/// any engine runs, `on_gpu_backends!` for those needing a GPU engine (no `mock_cpu` test: the
/// mock library with CPU engines has no GPU engine, see [`unsupported`]).
macro_rules! gpu_backend_tests {
    ($name:ident, $needs:expr) => {
        #[cfg(feature = "cuda")]
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn mock_cuda() {
            run(Kind::MockCuda, $needs, scenarios::$name)
        }
        #[cfg(feature = "vulkan")]
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn vulkan() {
            run(Kind::Vulkan, $needs, scenarios::$name)
        }
        #[cfg(feature = "cuda")]
        #[test]
        #[ignore = "needs a CUDA GPU and NvSci (Jetson, DRIVE OS)"]
        fn nvsci() {
            run(Kind::NvSci, $needs, scenarios::$name)
        }
    };
}

macro_rules! on_every_backend {
    ($($name:ident;)*) => {$(
        mod $name {
            use super::*;
            #[test]
            fn mock_cpu() {
                run(Kind::MockCpu, CPU, scenarios::$name)
            }
            gpu_backend_tests!($name, CPU);
        }
    )*};
}

macro_rules! on_gpu_backends {
    ($($name:ident;)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            gpu_backend_tests!($name, GPU);
        }
    )*};
}

on_every_backend! {
    frames_arrive_in_order_with_their_contents;
    timeouts_name_who_holds_the_frame;
    engine_producer_feeds_an_engine_consumer_and_a_cpu_recorder_1000_frames;
    cpu_camera_feeds_an_engine_consumer_and_a_cpu_recorder_1000_frames;
    engine_producer_feeds_two_engine_consumers_1000_frames;
    rings_leak_nothing;
    bad_input_is_refused;
    dropped_tokens_do_not_jam_the_ring;
    tokens_of_other_rings_and_consumers_are_refused;
    a_slow_mailbox_consumer_gets_the_newest_frame_and_never_holds_the_camera;
    consumers_attach_leave_and_come_back;
    nv12_frames_are_converted_in_place_and_verified;
    a_broken_converter_fails_the_frame_check;
}

on_gpu_backends! {
    ring_on_the_applications_cuda_context;
}
