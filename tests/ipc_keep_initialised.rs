//! `Ipc::keep_initialised`: NvSciIpcDeinit is process-wide ("Before calling this API, the user
//! shall ensure all existing opened endpoints are closed by NvSciIpcCloseEndpointSafe()",
//! nvsciipc.h, with no reference counting documented), so a program in which something besides
//! the crate uses NvSciIpc keeps it initialised. Its own test binary: the setting holds for the
//! rest of the process.
#![cfg(feature = "mock")]

use nvsci::ipc::Ipc;

#[test]
fn a_kept_initialisation_outlives_the_last_ipc() {
    let before = nvsci_mock::ipc::init_record();
    // Another user of NvSciIpc in this process initialised it itself (through the same table).
    let fns = nvsci_mock::ipc_fns();
    // SAFETY: NvSciIpcInit takes no arguments.
    assert_eq!(unsafe { fns.NvSciIpcInit.unwrap()() }, nvsci_sys::NvSciError_Success);
    let ipc = Ipc::mock().unwrap().keep_initialised();
    let second = ipc.clone();
    drop((ipc, second));
    let after = nvsci_mock::ipc::init_record();
    assert_eq!(after.deinits, before.deinits, "the crate de-initialised a kept NvSciIpc");
    assert!(after.initialised, "the other user's NvSciIpc is still initialised");
    // A later Ipc neither initialises again nor de-initialises.
    drop(Ipc::mock().unwrap());
    let last = nvsci_mock::ipc::init_record();
    assert_eq!((last.inits, last.deinits), (after.inits, after.deinits));
    assert!(last.initialised);
}
