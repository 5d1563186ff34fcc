//! Typed attribute plumbing shared by NvSciBuf and NvSciSync lists.
//!
//! Every key has one Rust element type whose size is the C element size, so the byte length handed
//! to the library is always `size_of::<T>() * count` and a caller cannot build a length mismatch.

use crate::error::{Error, Result};
use core::ffi::c_void;
use core::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
}

/// A type that can be an attribute element: same size as the C element, readable from raw bytes.
pub trait AttrElem: Copy + sealed::Sealed + 'static {
    /// The C representation (same size as `Self`).
    #[doc(hidden)]
    type Raw: Copy;
    /// Converts a value read from the library; `None` when the value is not representable.
    #[doc(hidden)]
    fn from_raw(raw: Self::Raw) -> Option<Self>;
}

macro_rules! plain_elem {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl AttrElem for $t {
            type Raw = $t;
            fn from_raw(raw: $t) -> Option<Self> { Some(raw) }
        }
    )*};
}
plain_elem!(u8, u32, u64, f32);

impl sealed::Sealed for bool {}
impl AttrElem for bool {
    type Raw = u8;
    fn from_raw(raw: u8) -> Option<Self> {
        match raw {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

/// Declares an open `#[repr(transparent)]` newtype over a C enum usable as an attribute element.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub struct $name:ident($repr:ty) {
            $( $(#[$cmeta:meta])* $konst:ident = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(pub $repr);

        impl $name {
            $( $(#[$cmeta])* pub const $konst: Self = Self($value as $repr); )*

            /// The name of this value, when this crate knows it.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $( Self::$konst => Some(stringify!($konst)), )*
                    _ => None,
                }
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}::{}", stringify!($name), n),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }

        impl $crate::attr::sealed_access::Sealed for $name {}
        impl $crate::attr::AttrElem for $name {
            type Raw = $repr;
            fn from_raw(raw: $repr) -> Option<Self> { Some(Self(raw)) }
        }
    };
}
pub(crate) use open_enum;

/// Re-export of the seal so macros in other modules can implement [`AttrElem`].
#[doc(hidden)]
pub mod sealed_access {
    pub use super::sealed::Sealed;
}

/// Implements [`AttrElem`] for a closed `#[repr(int)]` enum with a fallible conversion.
macro_rules! closed_elem {
    ($name:ty, $repr:ty, { $($value:expr => $variant:expr),* $(,)? }) => {
        impl $crate::attr::sealed_access::Sealed for $name {}
        impl $crate::attr::AttrElem for $name {
            type Raw = $repr;
            fn from_raw(raw: $repr) -> Option<Self> {
                match raw {
                    $( v if v == ($value as $repr) => Some($variant), )*
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use closed_elem;

/// Plain-data element implemented by a `#[repr(C)]` struct of bytes (any bit pattern valid).
macro_rules! pod_elem {
    ($name:ty) => {
        impl $crate::attr::sealed_access::Sealed for $name {}
        impl $crate::attr::AttrElem for $name {
            type Raw = $name;
            fn from_raw(raw: $name) -> Option<Self> {
                Some(raw)
            }
        }
    };
}
pub(crate) use pod_elem;

/// A typed attribute key: `F` is its family ([`BufFamily`](crate::buf::BufFamily) or
/// [`SyncFamily`](crate::sync::SyncFamily)), `T` the element type, `N` the largest element count.
///
/// Key numbers overlap between NvSciBuf and NvSciSync, so the family is part of the key's type
/// and a list reads only keys of its own family:
///
/// ```
/// use nvsci::buf::BufAttrList;
/// use nvsci::sync::SyncAttrList;
/// fn read(buf: &BufAttrList, sync: &SyncAttrList) -> nvsci::Result<(Option<bool>, Option<bool>)> {
///     Ok((buf.get_one(nvsci::buf::key::NEED_CPU_ACCESS)?, sync.get_one(nvsci::sync::key::NEED_CPU_ACCESS)?))
/// }
/// ```
///
/// An NvSciSync key given to an NvSciBuf list does not compile:
///
/// ```compile_fail,E0308
/// use nvsci::buf::BufAttrList;
/// fn read(buf: &BufAttrList) -> nvsci::Result<Option<bool>> {
///     buf.get_one(nvsci::sync::key::NEED_CPU_ACCESS)
/// }
/// ```
///
/// Nor does an NvSciBuf key given to an NvSciSync list:
///
/// ```compile_fail,E0308
/// use nvsci::sync::SyncAttrList;
/// fn read(sync: &SyncAttrList) -> nvsci::Result<Option<bool>> {
///     sync.get_one(nvsci::buf::key::NEED_CPU_ACCESS)
/// }
/// ```
pub struct Key<F, T, const N: usize> {
    raw: u32,
    name: &'static str,
    _ty: PhantomData<fn() -> (F, T)>,
}

impl<F, T, const N: usize> Clone for Key<F, T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F, T, const N: usize> Copy for Key<F, T, N> {}

impl<F, T, const N: usize> core::fmt::Debug for Key<F, T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (0x{:x})", self.name, self.raw)
    }
}

impl<F, T: AttrElem, const N: usize> Key<F, T, N> {
    pub(crate) const fn new(raw: u32, name: &'static str) -> Self {
        Self { raw, name, _ty: PhantomData }
    }

    /// The C key value.
    pub const fn raw(self) -> u32 {
        self.raw
    }

    /// The C key name.
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// The C key value and name together.
    pub(crate) const fn id(self) -> (u32, &'static str) {
        (self.raw, self.name)
    }
}

/// What the generic list code needs of a family's attribute-value enum (`BufAttr`, `SyncAttr`):
/// implemented by `attr_keys!`.
pub trait AttrValue: Copy + core::fmt::Debug {
    /// The C name of this attribute's key.
    fn key_name(&self) -> &'static str;
    /// The key value, element pointer and byte length to hand to the library. The pointer
    /// borrows from `self`.
    fn as_pair(&self) -> Result<(u32, *const c_void, usize)>;
}

/// Builds the (pointer, byte length) of one scalar value.
pub(crate) fn scalar<T: AttrElem>(v: &T) -> (*const c_void, usize) {
    (v as *const T as *const c_void, core::mem::size_of::<T>())
}

/// Builds the (pointer, byte length) of an array value, checking its element count.
pub(crate) fn array<T: AttrElem>(name: &'static str, v: &[T], max: usize) -> Result<(*const c_void, usize)> {
    if v.is_empty() || v.len() > max {
        return Err(Error::InvalidArgument {
            name,
            reason: format!("{} elements given, 1..={max} allowed", v.len()),
        });
    }
    Ok((v.as_ptr() as *const c_void, core::mem::size_of_val(v)))
}

/// Decodes a value returned by a getter into at most `N` typed elements.
///
/// # Safety
/// `value` must be NULL or point to `len` readable bytes (the library's getter contract).
pub(crate) unsafe fn decode<F, T: AttrElem, const N: usize>(
    key: Key<F, T, N>,
    value: *const c_void,
    len: usize,
) -> Result<heapless::Vec<T, N>> {
    let mut out = heapless::Vec::new();
    if value.is_null() || len == 0 {
        return Ok(out);
    }
    let size = core::mem::size_of::<T::Raw>();
    if !len.is_multiple_of(size) || len / size > N {
        return Err(Error::UnexpectedValue {
            key: key.name,
            detail: format!("{len} bytes is not 1..={N} elements of {size} bytes"),
        });
    }
    for i in 0..len / size {
        // SAFETY: `value` points to `len` readable bytes (caller contract) and `i * size + size <=
        // len`; the library makes no alignment promise, so read unaligned.
        let raw = unsafe { core::ptr::read_unaligned((value as *const u8).add(i * size) as *const T::Raw) };
        let v = T::from_raw(raw).ok_or_else(|| Error::UnexpectedValue {
            key: key.name,
            detail: format!("element {i} is not a valid {}", core::any::type_name::<T>()),
        })?;
        // Cannot fail: the count was checked against N above.
        let _ = out.push(v);
    }
    Ok(out)
}

/// Declares the keys of one attribute family: a `key` module of typed [`Key`] constants, the
/// enum of settable attributes, the table of every key with its C name and `key_name`, which
/// looks a raw key up in it. Each row names a key once: the enum variant (settable keys only),
/// the constant and the C key, whose name is taken from its identifier.
macro_rules! attr_keys {
    (
        $(#[$em:meta])* enum $enum_name:ident;
        $(#[$km:meta])* mod $key_mod:ident;
        family $fam:ty;
        in_one { $( $(#[$m1:meta])* $v1:ident, $c1:ident, $k1:ident : $t1:ty; )* }
        in_many { $( $(#[$m2:meta])* $v2:ident, $c2:ident, $k2:ident : [$t2:ty; $n2:expr]; )* }
        out_one { $( $(#[$m3:meta])* $c3:ident, $k3:ident : $t3:ty; )* }
        out_many { $( $(#[$m4:meta])* $c4:ident, $k4:ident : [$t4:ty; $n4:expr]; )* }
    ) => {
        $(#[$km])*
        pub mod $key_mod {
            use super::*;
            #[allow(unused_imports)]
            use $crate::attr::Key;
            $( $(#[$m1])* pub const $c1: Key<$fam, $t1, 1> = Key::new(sys::$k1, stringify!($k1)); )*
            $( $(#[$m2])* pub const $c2: Key<$fam, $t2, { $n2 }> = Key::new(sys::$k2, stringify!($k2)); )*
            $( $(#[$m3])* #[doc = "(output only)"] pub const $c3: Key<$fam, $t3, 1> = Key::new(sys::$k3, stringify!($k3)); )*
            $( $(#[$m4])* #[doc = "(output only)"] pub const $c4: Key<$fam, $t4, { $n4 }> = Key::new(sys::$k4, stringify!($k4)); )*
        }

        $(#[$em])*
        #[derive(Clone, Copy, Debug)]
        pub enum $enum_name<'a> {
            $( $(#[$m1])* $v1($t1), )*
            $( $(#[$m2])* $v2(&'a [$t2]), )*
        }

        impl $enum_name<'_> {
            /// The C name of this attribute's key.
            pub fn key_name(&self) -> &'static str {
                $crate::attr::AttrValue::key_name(self)
            }
        }

        impl $crate::attr::AttrValue for $enum_name<'_> {
            fn key_name(&self) -> &'static str {
                match self {
                    $( Self::$v1(_) => $key_mod::$c1.name(), )*
                    $( Self::$v2(_) => $key_mod::$c2.name(), )*
                }
            }

            fn as_pair(&self) -> $crate::error::Result<(u32, *const core::ffi::c_void, usize)> {
                Ok(match self {
                    $( Self::$v1(v) => { let (p, l) = $crate::attr::scalar(v); ($key_mod::$c1.raw(), p, l) } )*
                    $( Self::$v2(v) => {
                        let (p, l) = $crate::attr::array($key_mod::$c2.name(), v, $n2)?;
                        ($key_mod::$c2.raw(), p, l)
                    } )*
                })
            }
        }

        /// Every key this crate binds, with its C name (used to name conflicting keys).
        pub(crate) const ALL_KEYS: &[(u32, &str)] = &[
            $( $key_mod::$c1.id(), )*
            $( $key_mod::$c2.id(), )*
            $( $key_mod::$c3.id(), )*
            $( $key_mod::$c4.id(), )*
        ];

        /// The C name of a raw key, when this crate binds it.
        pub fn key_name(raw: u32) -> Option<&'static str> {
            ALL_KEYS.iter().find(|(k, _)| *k == raw).map(|(_, n)| *n)
        }
    };
}
pub(crate) use attr_keys;
