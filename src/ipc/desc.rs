//! Export descriptors: what one process sends another (over an [`IpcEndpoint`](super::IpcEndpoint)
//! or any channel) so that the other can import an attribute list, object or fence.
//!
//! The fixed-size descriptors have the sizes of NVIDIA's C types: 256 bytes for an NvSciBuf
//! object, 1024 for an NvSciSync object, 56 for a fence. Attribute-list descriptors have the
//! length the library chose.

use crate::error::{Error, Result};

macro_rules! fixed_desc {
    ($(#[$m:meta])* $name:ident, $size:expr, $what:literal) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name(pub(crate) [u8; $size]);

        impl $name {
            /// The descriptor's size in bytes (that of the C type).
            pub const SIZE: usize = $size;

            /// The descriptor's bytes, to send to the importing process.
            pub fn as_bytes(&self) -> &[u8; $size] {
                &self.0
            }

            /// A descriptor received from the exporting process. A length other than
            /// [`SIZE`](Self::SIZE) is an [`Error::InvalidDescriptor`]; the contents are checked by
            /// the library on import.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
                <[u8; $size]>::try_from(bytes).map(Self).map_err(|_| Error::InvalidDescriptor {
                    what: $what,
                    reason: format!("{} bytes, expected {}", bytes.len(), $size),
                })
            }

            pub(crate) fn words<const N: usize>(&self) -> [u64; N] {
                let mut w = [0u64; N];
                for (w, c) in w.iter_mut().zip(self.0.chunks_exact(8)) {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    *w = u64::from_ne_bytes(b);
                }
                w
            }

            pub(crate) fn from_words(words: &[u64]) -> Self {
                let mut b = [0u8; $size];
                for (c, w) in b.chunks_exact_mut(8).zip(words) {
                    c.copy_from_slice(&w.to_ne_bytes());
                }
                Self(b)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($name), "({} bytes)"), $size)
            }
        }
    };
}

fixed_desc!(
    /// An exported NvSciBuf object (`NvSciBufObjIpcExportDescriptor`, 256 bytes).
    BufObjDescriptor,
    256,
    "NvSciBuf object"
);
fixed_desc!(
    /// An exported NvSciSync object (`NvSciSyncObjIpcExportDescriptor`, 1024 bytes).
    SyncObjDescriptor,
    1024,
    "NvSciSync object"
);
fixed_desc!(
    /// An exported fence (`NvSciSyncFenceIpcExportDescriptor`, 56 bytes).
    FenceDescriptor,
    56,
    "NvSciSync fence"
);

/// An exported attribute list, or an attribute list together with an object (the
/// `*IpcExportAttrListAndObj` functions); its length is the library's choice.
#[derive(Clone, PartialEq, Eq)]
pub struct AttrListDescriptor(pub(crate) Vec<u8>);

impl AttrListDescriptor {
    /// The descriptor's bytes, to send to the importing process.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A descriptor received from the exporting process (an empty one is an
    /// [`Error::InvalidDescriptor`]; the contents are checked by the library on import).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.is_empty() {
            return Err(Error::InvalidDescriptor { what: "attribute list", reason: "empty".into() });
        }
        Ok(Self(bytes.to_vec()))
    }

    /// The outcome of an export call that hands out a library-owned buffer: on success the
    /// buffer `(ptr, len)` copied (and freed with `free`), else the error naming the export
    /// function.
    ///
    /// # Safety
    /// On success `ptr` must be a buffer of `len` bytes returned by the export function that
    /// `free` frees, not yet freed.
    pub(crate) unsafe fn exported(
        ep: &super::IpcEndpoint,
        exported: Result<(*mut core::ffi::c_void, usize)>,
        free: impl FnOnce(*mut core::ffi::c_void),
    ) -> Result<Self> {
        let (ptr, len) = exported.map_err(|e| ep.export_failure(e))?;
        // SAFETY: forwarded contract.
        Ok(unsafe { Self::take(ptr, len, free) })
    }

    /// Copies a library-owned descriptor buffer and frees it with `free`.
    ///
    /// # Safety
    /// `ptr` must be a buffer of `len` bytes returned by the export function that `free`
    /// belongs to, not yet freed.
    unsafe fn take(
        ptr: *mut core::ffi::c_void,
        len: usize,
        free: impl FnOnce(*mut core::ffi::c_void),
    ) -> Self {
        let bytes = if ptr.is_null() || len == 0 {
            Vec::new()
        } else {
            // SAFETY: forwarded contract: `len` readable bytes at `ptr`.
            unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }.to_vec()
        };
        // Forwarded contract: freed once, with its own free function.
        free(ptr);
        Self(bytes)
    }
}

impl std::fmt::Debug for AttrListDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AttrListDescriptor({} bytes)", self.0.len())
    }
}
