//! Function tables: one field per NvSci entry point, each an `Option` of the C function pointer.
//!
//! The tables are filled by [`crate::loader`] from the real shared libraries, or field by field by an
//! emulation. A field that is `None` means "this library does not provide the function"; callers
//! turn that into an "unsupported" error instead of crashing. Required functions are checked at load
//! time, so for a table that came from the loader they are always `Some`.
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::*;

macro_rules! fn_table {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            required { $($req:ident : $req_ty:ident,)* }
            optional { $($opt:ident : $opt_ty:ident,)* }
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            $(
                #[doc = concat!("`", stringify!($req), "` (required at load time).")]
                pub $req: $req_ty,
            )*
            $(
                #[doc = concat!("`", stringify!($opt), "` (optional: added in a later minor version).")]
                pub $opt: $opt_ty,
            )*
        }

        impl $name {
            /// A table with every entry missing; emulations start from it.
            pub const EMPTY: Self = Self {
                $($req: None,)*
                $($opt: None,)*
            };

            /// Names of the functions a library must export for the table to load.
            pub const REQUIRED: &'static [&'static str] = &[$(stringify!($req),)*];

            /// Names of the functions resolved only if present.
            pub const OPTIONAL: &'static [&'static str] = &[$(stringify!($opt),)*];

            /// Resolves every entry from `lib`.
            ///
            /// Returns the name of the first required symbol that is missing.
            ///
            /// # Safety
            /// `lib` must be a library whose exported symbols of these names have the C signatures
            /// of the header this crate was generated from, and it must stay loaded for as long as
            /// the returned table (or any copy of it) is used.
            pub unsafe fn resolve(lib: &libloading::Library) -> Result<Self, &'static str> {
                Ok(Self {
                    $(
                        // SAFETY: the caller guarantees the symbol has this signature; a function
                        // pointer and `Option<fn>` share the layout of a nullable pointer.
                        $req: match unsafe { lookup(lib, stringify!($req)) } {
                            // SAFETY: `p` is the non-NULL address of that symbol (see above).
                            Some(p) => unsafe { core::mem::transmute::<*const core::ffi::c_void, $req_ty>(p) },
                            None => return Err(stringify!($req)),
                        },
                    )*
                    $(
                        // SAFETY: as above; a missing optional symbol stays `None`.
                        $opt: match unsafe { lookup(lib, stringify!($opt)) } {
                            // SAFETY: `p` is the non-NULL address of that symbol (see above).
                            Some(p) => unsafe { core::mem::transmute::<*const core::ffi::c_void, $opt_ty>(p) },
                            None => None,
                        },
                    )*
                })
            }

            /// Whether every required entry is present (true for any table that came from `resolve`).
            pub fn has_required(&self) -> bool {
                true $(&& self.$req.is_some())*
            }
        }
    };
}

/// Looks up `name` in `lib`, returning a non-null address or `None`.
///
/// # Safety
/// Same contract as `libloading::Library::get`.
unsafe fn lookup(lib: &libloading::Library, name: &str) -> Option<*const core::ffi::c_void> {
    let mut buf = [0u8; 64];
    let bytes = name.as_bytes();
    if bytes.len() >= buf.len() {
        return None;
    }
    buf[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: the symbol is only read as an address here; interpreting it is the caller's job.
    let sym = unsafe { lib.get::<*const core::ffi::c_void>(&buf[..=bytes.len()]) }.ok()?;
    let ptr = *sym;
    (!ptr.is_null()).then_some(ptr)
}

fn_table! {
    /// Entry points of `libnvscibuf.so.1`.
    pub struct NvSciBufFns {
        required {
            NvSciBufModuleOpen: PFN_NvSciBufModuleOpen,
            NvSciBufModuleClose: PFN_NvSciBufModuleClose,
            NvSciBufCheckVersionCompatibility: PFN_NvSciBufCheckVersionCompatibility,
            NvSciBufAttrListCreate: PFN_NvSciBufAttrListCreate,
            NvSciBufAttrListFree: PFN_NvSciBufAttrListFree,
            NvSciBufAttrListSetAttrs: PFN_NvSciBufAttrListSetAttrs,
            NvSciBufAttrListGetSlotCount: PFN_NvSciBufAttrListGetSlotCount,
            NvSciBufAttrListGetAttrs: PFN_NvSciBufAttrListGetAttrs,
            NvSciBufAttrListSlotGetAttrs: PFN_NvSciBufAttrListSlotGetAttrs,
            NvSciBufAttrListDebugDump: PFN_NvSciBufAttrListDebugDump,
            NvSciBufAttrListReconcile: PFN_NvSciBufAttrListReconcile,
            NvSciBufAttrListClone: PFN_NvSciBufAttrListClone,
            NvSciBufAttrListAppendUnreconciled: PFN_NvSciBufAttrListAppendUnreconciled,
            NvSciBufAttrListIsReconciled: PFN_NvSciBufAttrListIsReconciled,
            NvSciBufAttrListValidateReconciled: PFN_NvSciBufAttrListValidateReconciled,
            NvSciBufObjAlloc: PFN_NvSciBufObjAlloc,
            NvSciBufAttrListReconcileAndObjAlloc: PFN_NvSciBufAttrListReconcileAndObjAlloc,
            NvSciBufObjFree: PFN_NvSciBufObjFree,
            NvSciBufObjDup: PFN_NvSciBufObjDup,
            NvSciBufObjDupWithReducePerm: PFN_NvSciBufObjDupWithReducePerm,
            NvSciBufObjGetAttrList: PFN_NvSciBufObjGetAttrList,
            NvSciBufObjGetCpuPtr: PFN_NvSciBufObjGetCpuPtr,
            NvSciBufObjGetConstCpuPtr: PFN_NvSciBufObjGetConstCpuPtr,
            NvSciBufObjFlushCpuCacheRange: PFN_NvSciBufObjFlushCpuCacheRange,
            NvSciBufAttrListIpcExportUnreconciled: PFN_NvSciBufAttrListIpcExportUnreconciled,
            NvSciBufAttrListIpcExportReconciled: PFN_NvSciBufAttrListIpcExportReconciled,
            NvSciBufAttrListIpcImportUnreconciled: PFN_NvSciBufAttrListIpcImportUnreconciled,
            NvSciBufAttrListIpcImportReconciled: PFN_NvSciBufAttrListIpcImportReconciled,
            NvSciBufAttrListFreeDesc: PFN_NvSciBufAttrListFreeDesc,
            NvSciBufObjIpcExport: PFN_NvSciBufObjIpcExport,
            NvSciBufObjIpcImport: PFN_NvSciBufObjIpcImport,
            NvSciBufIpcExportAttrListAndObj: PFN_NvSciBufIpcExportAttrListAndObj,
            NvSciBufIpcImportAttrListAndObj: PFN_NvSciBufIpcImportAttrListAndObj,
            NvSciBufAttrListAndObjFreeDesc: PFN_NvSciBufAttrListAndObjFreeDesc,
        }
        optional {
            NvSciBufObjValidate: PFN_NvSciBufObjValidate,
            NvSciBufObjGetPixels: PFN_NvSciBufObjGetPixels,
            NvSciBufObjPutPixels: PFN_NvSciBufObjPutPixels,
        }
    }
}

fn_table! {
    /// Entry points of `libnvscisync.so.1`.
    pub struct NvSciSyncFns {
        required {
            NvSciSyncModuleOpen: PFN_NvSciSyncModuleOpen,
            NvSciSyncModuleClose: PFN_NvSciSyncModuleClose,
            NvSciSyncCheckVersionCompatibility: PFN_NvSciSyncCheckVersionCompatibility,
            NvSciSyncCpuWaitContextAlloc: PFN_NvSciSyncCpuWaitContextAlloc,
            NvSciSyncCpuWaitContextFree: PFN_NvSciSyncCpuWaitContextFree,
            NvSciSyncAttrListCreate: PFN_NvSciSyncAttrListCreate,
            NvSciSyncAttrListFree: PFN_NvSciSyncAttrListFree,
            NvSciSyncAttrListIsReconciled: PFN_NvSciSyncAttrListIsReconciled,
            NvSciSyncAttrListValidateReconciled: PFN_NvSciSyncAttrListValidateReconciled,
            NvSciSyncAttrListSetAttrs: PFN_NvSciSyncAttrListSetAttrs,
            NvSciSyncAttrListGetAttrs: PFN_NvSciSyncAttrListGetAttrs,
            NvSciSyncAttrListGetAttr: PFN_NvSciSyncAttrListGetAttr,
            NvSciSyncAttrListGetSlotCount: PFN_NvSciSyncAttrListGetSlotCount,
            NvSciSyncAttrListSlotGetAttrs: PFN_NvSciSyncAttrListSlotGetAttrs,
            NvSciSyncAttrListAppendUnreconciled: PFN_NvSciSyncAttrListAppendUnreconciled,
            NvSciSyncAttrListClone: PFN_NvSciSyncAttrListClone,
            NvSciSyncAttrListReconcile: PFN_NvSciSyncAttrListReconcile,
            NvSciSyncAttrListDebugDump: PFN_NvSciSyncAttrListDebugDump,
            NvSciSyncAttrListReconcileAndObjAlloc: PFN_NvSciSyncAttrListReconcileAndObjAlloc,
            NvSciSyncObjAlloc: PFN_NvSciSyncObjAlloc,
            NvSciSyncObjDup: PFN_NvSciSyncObjDup,
            NvSciSyncObjGetAttrList: PFN_NvSciSyncObjGetAttrList,
            NvSciSyncObjFree: PFN_NvSciSyncObjFree,
            NvSciSyncObjGenerateFence: PFN_NvSciSyncObjGenerateFence,
            NvSciSyncObjSignal: PFN_NvSciSyncObjSignal,
            NvSciSyncFenceClear: PFN_NvSciSyncFenceClear,
            NvSciSyncFenceDup: PFN_NvSciSyncFenceDup,
            NvSciSyncFenceWait: PFN_NvSciSyncFenceWait,
            NvSciSyncFenceGetTimestamp: PFN_NvSciSyncFenceGetTimestamp,
            NvSciSyncAttrListIpcExportUnreconciled: PFN_NvSciSyncAttrListIpcExportUnreconciled,
            NvSciSyncAttrListIpcExportReconciled: PFN_NvSciSyncAttrListIpcExportReconciled,
            NvSciSyncAttrListIpcImportUnreconciled: PFN_NvSciSyncAttrListIpcImportUnreconciled,
            NvSciSyncAttrListIpcImportReconciled: PFN_NvSciSyncAttrListIpcImportReconciled,
            NvSciSyncAttrListFreeDesc: PFN_NvSciSyncAttrListFreeDesc,
            NvSciSyncObjIpcExport: PFN_NvSciSyncObjIpcExport,
            NvSciSyncObjIpcImport: PFN_NvSciSyncObjIpcImport,
            NvSciSyncIpcExportFence: PFN_NvSciSyncIpcExportFence,
            NvSciSyncIpcImportFence: PFN_NvSciSyncIpcImportFence,
            NvSciSyncIpcExportAttrListAndObj: PFN_NvSciSyncIpcExportAttrListAndObj,
            NvSciSyncIpcImportAttrListAndObj: PFN_NvSciSyncIpcImportAttrListAndObj,
            NvSciSyncAttrListAndObjFreeDesc: PFN_NvSciSyncAttrListAndObjFreeDesc,
        }
        optional {
            NvSciSyncObjValidate: PFN_NvSciSyncObjValidate,
            NvSciSyncFenceWaitWithMode: PFN_NvSciSyncFenceWaitWithMode,
            NvSciSyncFenceExtractFence: PFN_NvSciSyncFenceExtractFence,
            NvSciSyncFenceUpdateFence: PFN_NvSciSyncFenceUpdateFence,
        }
    }
}

fn_table! {
    /// Entry points of `libnvsciipc.so` (NvSciIpc 1.x, Linux). The `*Safe` variants and the version
    /// check arrived in DRIVE OS 6.0; safety builds of the library answer the plain `Read`,
    /// `Write` and `GetEvent` with `NvSciError_NotSupported`, so callers prefer a `*Safe` entry
    /// when it is present.
    pub struct NvSciIpcFns {
        required {
            NvSciIpcInit: PFN_NvSciIpcInit,
            NvSciIpcDeinit: PFN_NvSciIpcDeinit,
            NvSciIpcOpenEndpoint: PFN_NvSciIpcOpenEndpoint,
            NvSciIpcCloseEndpoint: PFN_NvSciIpcCloseEndpoint,
            NvSciIpcResetEndpoint: PFN_NvSciIpcResetEndpoint,
            NvSciIpcRead: PFN_NvSciIpcRead,
            NvSciIpcWrite: PFN_NvSciIpcWrite,
            NvSciIpcGetEndpointInfo: PFN_NvSciIpcGetEndpointInfo,
            NvSciIpcGetLinuxEventFd: PFN_NvSciIpcGetLinuxEventFd,
            NvSciIpcGetEvent: PFN_NvSciIpcGetEvent,
        }
        optional {
            NvSciIpcCloseEndpointSafe: PFN_NvSciIpcCloseEndpointSafe,
            NvSciIpcResetEndpointSafe: PFN_NvSciIpcResetEndpointSafe,
            NvSciIpcReadSafe: PFN_NvSciIpcReadSafe,
            NvSciIpcWriteSafe: PFN_NvSciIpcWriteSafe,
            NvSciIpcGetEventSafe: PFN_NvSciIpcGetEventSafe,
            NvSciIpcCheckVersionCompatibility: PFN_NvSciIpcCheckVersionCompatibility,
        }
    }
}
