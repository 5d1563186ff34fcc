//! The shared object `libnvsci_mock.so` (the `nvsci-mock-so` package, a dev-dependency, which
//! links this crate with `--features export`) loads through the real loader under the NvSci
//! library names.
#![cfg(all(feature = "export", target_os = "linux"))]

use nvsci_sys::loader;
use nvsci_sys::*;
use std::path::PathBuf;
use std::ptr;

/// The shared object: `NVSCI_MOCK_SO`, else next to this test executable
/// (`target/<profile>/deps/`), one folder up, or in `../lib` (the layout of a test bundle).
fn cdylib() -> PathBuf {
    if let Some(p) = std::env::var_os("NVSCI_MOCK_SO") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    let candidates =
        [dir.join("libnvsci_mock.so"), dir.join("../libnvsci_mock.so"), dir.join("../lib/libnvsci_mock.so")];
    candidates.iter().find(|p| p.exists()).cloned().unwrap_or_else(|| candidates[0].clone())
}

#[test]
fn loads_as_nvsci_libraries() {
    let lib = cdylib();
    assert!(lib.exists(), "{} missing", lib.display());
    let dir = std::env::temp_dir().join(format!("nvsci-mock-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in [loader::NVSCIBUF_SONAME, loader::NVSCISYNC_SONAME] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link).unwrap();
    }
    // SAFETY: `dir` holds only links to this workspace's mock shared object.
    let libs = unsafe { loader::load_from(std::slice::from_ref(&dir), false) }.unwrap();
    assert!(libs.buf().has_required());
    assert!(libs.sync().has_required());
    assert!(libs.buf().NvSciBufObjValidate.is_some());
    assert!(libs.buf().NvSciBufObjGetPixels.is_some());
    assert!(libs.sync().NvSciSyncFenceExtractFence.is_some());
    assert!(libs.sync().NvSciSyncFenceWaitWithMode.is_none());

    let t = *libs.buf();
    unsafe {
        let mut m = ptr::null_mut();
        assert_eq!((t.NvSciBufModuleOpen.unwrap())(&mut m), NvSciError_Success);
        let mut l = ptr::null_mut();
        assert_eq!((t.NvSciBufAttrListCreate.unwrap())(m, &mut l), NvSciError_Success);
        let ty = NvSciBufType_RawBuffer;
        let mut p = NvSciBufAttrKeyValuePair {
            key: NvSciBufGeneralAttrKey_Types,
            value: (&ty as *const u32).cast(),
            len: 4,
        };
        assert_eq!((t.NvSciBufAttrListSetAttrs.unwrap())(l, &mut p, 1), NvSciError_Success);
        assert_eq!((t.NvSciBufAttrListGetSlotCount.unwrap())(l), 1);
        (t.NvSciBufAttrListFree.unwrap())(l);
        (t.NvSciBufModuleClose.unwrap())(m);
    }
    drop(libs);
    let _ = std::fs::remove_dir_all(&dir);
}
