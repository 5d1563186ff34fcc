//! `nvsci._nvsci`: the extension module behind the `nvsci` Python package. Frames of an nvsci
//! stream reach Python in place: numpy views of CPU frames, DLPack capsules and the CUDA array
//! interface of CUDA frames with the array API's stream semantics.
#![deny(unsafe_op_in_unsafe_fn)]

mod array;
mod consumer;
mod convert;
mod cuda;
mod errors;
mod plane;
mod stream;
mod write;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Live handles of the mock NvSci library in this process (its ledger): modules, attribute
/// lists, objects, descriptors, wait contexts, fences and IPC endpoints. All zero once every
/// stream built on `Backend.mock()` and everything taken from it is gone.
///
/// A CUDA engine's imports hold the NvSci objects they imported, and the crate destroys
/// dropped imports on its teardown thread once the work queued before the drop finished
/// (`Drop` never waits): with a CUDA GPU, the counts are read once those destroys ran, after
/// waiting up to `settle` seconds for them (`Backend.flush_teardown`).
#[pyfunction]
#[pyo3(signature = (*, settle=10.0))]
fn mock_handle_counts(py: Python<'_>, settle: f64) -> PyResult<Bound<'_, PyDict>> {
    let settle = std::time::Duration::try_from_secs_f64(settle)
        .map_err(|_| errors::invalid(py, "settle", format!("{settle} s: not a duration")))?;
    // Conversions enqueued on callers' streams hold the arrays they read (which may be planes
    // of frames) until they ran.
    convert::reap(true);
    py.detach(|| {
        let backend = nvsci::pipeline::Backend::with_library(nvsci::NvSci::mock());
        if let Some(gpu) = backend.cuda() {
            gpu.flush_teardown(settle);
        }
    });
    let c = nvsci_mock::global_ledger().counts();
    let d = PyDict::new(py);
    d.set_item("modules", c.modules)?;
    d.set_item("attr_lists", c.attr_lists)?;
    d.set_item("objects", c.objects)?;
    d.set_item("descs", c.descs)?;
    d.set_item("wait_contexts", c.wait_contexts)?;
    d.set_item("fences", c.fences)?;
    d.set_item("endpoints", c.endpoints)?;
    Ok(d)
}

#[pymodule]
fn _nvsci(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<stream::PyBackend>()?;
    m.add_class::<stream::PyFrameFormat>()?;
    m.add_class::<stream::PyConsumerDesc>()?;
    m.add_class::<stream::PyProducer>()?;
    m.add_class::<stream::PyProducerFrame>()?;
    m.add_class::<consumer::PyConsumer>()?;
    m.add_class::<consumer::PyFrame>()?;
    m.add_class::<plane::PyPlane>()?;
    m.add_class::<stream::PyRemoteSeat>()?;
    m.add_function(wrap_pyfunction!(mock_handle_counts, m)?)?;
    m.add_function(wrap_pyfunction!(convert::nv12_to_rgba, m)?)?;
    m.add("USER_HEADER_SIZE", nvsci::pipeline::USER_HEADER_SIZE)?;
    m.add("MAX_FRAMES", nvsci::pipeline::MAX_FRAMES)?;
    m.add("MAX_CONSUMERS", nvsci::pipeline::MAX_CONSUMERS)?;
    Ok(())
}
