//! Loading NvSci at run time: missing libraries give an error listing every path tried, and
//! the dlopen/dlsym path itself works (exercised with the mock built as a shared object, loaded
//! under the real SONAMEs).
#![cfg(feature = "mock")]

use nvsci::sys::loader::{LoadError, JETPACK5_LIB_DIR, JETPACK6_LIB_DIR};
use nvsci::{Error, Implementation, IpcError, NvSci, NvSciError};
use std::path::Path;

mod common;

#[test]
fn missing_library_lists_every_path_and_does_not_panic() {
    let bogus = "/nonexistent/nvsci-test-dir";
    // This is the only test in this binary that touches the environment.
    std::env::set_var("NVSCI_LIB_DIR", bogus);
    let err = NvSci::load().expect_err("no NvSci here");
    std::env::remove_var("NVSCI_LIB_DIR");
    let Error::Load(LoadError::NotFound { library, tried }) = &err else {
        // On a Jetson the library exists; nothing to check there.
        if Path::new(JETPACK6_LIB_DIR).join("libnvscibuf.so.1").exists()
            || Path::new(JETPACK5_LIB_DIR).join("libnvscibuf.so.1").exists()
        {
            return;
        }
        panic!("expected NotFound, got {err:?}");
    };
    assert_eq!(*library, "libnvscibuf.so.1");
    let paths: Vec<&str> = tried.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            format!("{bogus}/libnvscibuf.so.1").as_str(),
            "/usr/lib/aarch64-linux-gnu/nvidia/libnvscibuf.so.1",
            "/usr/lib/aarch64-linux-gnu/tegra/libnvscibuf.so.1",
            "libnvscibuf.so.1",
        ]
    );
    let msg = err.to_string();
    assert!(msg.contains(bogus) && msg.contains("NVSCI_LIB_DIR"), "{msg}");
}

#[test]
fn mock_loaded_through_dlopen_under_the_real_sonames() {
    use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, BufType, Perm};
    use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};

    let (lib, dir) = common::mock_as_native("loader-test");
    assert_eq!(lib.implementation(), Implementation::Native);
    let (buf_path, sync_path) = lib.library_paths().unwrap();
    assert!(buf_path.ends_with("libnvscibuf.so.1") && sync_path.ends_with("libnvscisync.so.1"));

    {
        let m = BufModule::open(&lib).unwrap();
        let mut l = m.attr_list().unwrap();
        l.set(&[
            BufAttr::Types(&[BufType::RAW_BUFFER]),
            BufAttr::RawSize(512),
            BufAttr::NeedCpuAccess(true),
            BufAttr::RequiredPerm(Perm::ReadWrite),
        ])
        .unwrap();
        let o = BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap();
        o.cpu_write().unwrap().fill(0xa5);
        assert!(o.cpu_read().unwrap().iter().all(|&b| b == 0xa5));

        let sm = SyncModule::open(&lib).unwrap();
        let mut s = sm.attr_list().unwrap();
        s.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitSignal)]).unwrap();
        let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s]).unwrap()).unwrap();
        let f = obj.generate_fence().unwrap();
        obj.signal().unwrap();
        f.wait(&mut sm.cpu_wait_context().unwrap(), None).unwrap();
    }

    // The shared object's own accounting, read through dlsym: everything was freed.
    // SAFETY: the mock exports `uint64_t NvSciMockLiveHandles(void)`.
    let live = unsafe {
        let l = libloading::Library::new(dir.join("libnvscibuf.so.1")).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn() -> u64> = l.get(b"NvSciMockLiveHandles\0").unwrap();
        f()
    };
    assert_eq!(live, 0);
    drop(lib);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_not_a_loadable_library_reports_the_loaders_reason() {
    let dir = std::env::temp_dir().join(format!("nvsci-bad-elf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("libnvscibuf.so.1"), b"\x7fELF truncated").unwrap();
    // SAFETY: the only candidate is a truncated file, which the dynamic loader refuses before
    // running anything.
    let err = unsafe { NvSci::load_from_dirs(std::slice::from_ref(&dir)) }.unwrap_err();
    let Error::Load(LoadError::NotFound { tried, .. }) = &err else {
        panic!("expected NotFound, got {err:?}")
    };
    assert_eq!(tried.len(), 1);
    let reason = &tried[0].error;
    // glibc says "file too short" or "invalid ELF header"; either way the loader's own words, not
    // a bare "dlopen failed" and not "no such file".
    assert!(reason.contains("libnvscibuf.so.1") && reason != "no such file", "{reason}");
    assert!(!reason.eq_ignore_ascii_case("dlopen failed"), "{reason}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn loading_from_no_directory_says_so() {
    // SAFETY: nothing is loaded from an empty list.
    let err = unsafe { NvSci::load_from_dirs(&[]) }.unwrap_err();
    assert!(matches!(&err, Error::Load(LoadError::NotFound { tried, .. }) if tried.is_empty()), "{err:?}");
    // The message says why nothing was tried instead of listing nothing.
    let msg = err.to_string();
    assert!(msg.contains("no directory was given"), "{msg}");
    assert!(!msg.contains("tried: ."), "{msg}");
}

#[test]
fn nvsciipc_loads_through_dlopen_under_its_real_name() {
    let so = common::mock_shared_object().expect("libnvsci_mock.so not found next to the test binary");
    let dir = std::env::temp_dir().join(format!("nvsci-ipc-loader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("libnvsciipc.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(so.canonicalize().unwrap(), &link).unwrap();
    // SAFETY: `dir` holds only a link to this workspace's mock shared object.
    let ipc = unsafe { nvsci::ipc::Ipc::load_from_dirs(std::slice::from_ref(&dir)) }.unwrap();
    assert!(!ipc.is_mock(), "loaded through the real loader, not the in-process mock");
    // The shared object's copy of the mock has no configuration: the name is unknown.
    match nvsci::ipc::IpcEndpoint::open(&ipc, "nvscisync_a_0") {
        Err(Error::Ipc(IpcError::Endpoint { endpoint, code, .. })) => {
            assert_eq!(endpoint, "nvscisync_a_0");
            assert_eq!(code, Some(NvSciError(nvsci::sys::NvSciError_NoSuchEntry)), "not configured");
        }
        other => panic!("expected a not-configured error, got {other:?}"),
    }
    drop(ipc);
    let _ = std::fs::remove_dir_all(dir);
    // Nothing under either name: every path tried is listed.
    // SAFETY: the directory does not exist; nothing is loaded.
    let err = unsafe { nvsci::ipc::Ipc::load_from_dirs(&["/nonexistent/ipc".into()]) }.unwrap_err();
    let Error::Load(LoadError::NotFound { tried, .. }) = &err else {
        panic!("expected NotFound, got {err:?}")
    };
    let paths: Vec<&str> = tried.iter().map(|a| a.path.as_str()).collect();
    assert!(
        paths.contains(&"/nonexistent/ipc/libnvsciipc.so")
            && paths.contains(&"/nonexistent/ipc/libnvsciipc.so.1"),
        "{paths:?}"
    );
}
