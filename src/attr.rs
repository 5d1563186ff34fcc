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

/// Which library an attribute key belongs to (key numbers overlap between the two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// NvSciBuf keys.
    Buf,
    /// NvSciSync keys.
    Sync,
}

/// A typed attribute key: `T` is the element type, `N` the largest element count.
pub struct Key<T, const N: usize> {
    raw: u32,
    name: &'static str,
    family: Family,
    _elem: PhantomData<fn() -> T>,
}

impl<T, const N: usize> Clone for Key<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for Key<T, N> {}

impl<T, const N: usize> core::fmt::Debug for Key<T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (0x{:x})", self.name, self.raw)
    }
}

impl<T: AttrElem, const N: usize> Key<T, N> {
    pub(crate) const fn new(raw: u32, name: &'static str, family: Family) -> Self {
        Self { raw, name, family, _elem: PhantomData }
    }

    /// The C key value.
    pub const fn raw(self) -> u32 {
        self.raw
    }

    /// The C key name.
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// The library family the key belongs to.
    pub const fn family(self) -> Family {
        self.family
    }
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
pub(crate) unsafe fn decode<T: AttrElem, const N: usize>(
    key: Key<T, N>,
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

/// Declares typed keys (a `key` module of [`Key`] constants), the settable-attribute enum and the
/// table of key names of one attribute family.
macro_rules! attr_keys {
    (
        $(#[$em:meta])* enum $enum_name:ident;
        $(#[$km:meta])* mod $key_mod:ident;
        key_type $kt:ident;
        family $fam:ident;
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
            $( $(#[$m1])* pub const $c1: Key<$t1, 1> = Key::new(sys::$k1, stringify!($k1), $crate::attr::Family::$fam); )*
            $( $(#[$m2])* pub const $c2: Key<$t2, { $n2 }> = Key::new(sys::$k2, stringify!($k2), $crate::attr::Family::$fam); )*
            $( $(#[$m3])* #[doc = "(output only)"] pub const $c3: Key<$t3, 1> = Key::new(sys::$k3, stringify!($k3), $crate::attr::Family::$fam); )*
            $( $(#[$m4])* #[doc = "(output only)"] pub const $c4: Key<$t4, { $n4 }> = Key::new(sys::$k4, stringify!($k4), $crate::attr::Family::$fam); )*
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
                match self {
                    $( Self::$v1(_) => stringify!($k1), )*
                    $( Self::$v2(_) => stringify!($k2), )*
                }
            }

            /// The key value, element pointer and byte length to hand to the library. The pointer
            /// borrows from `self`.
            pub(crate) fn as_pair(&self) -> $crate::error::Result<(sys::$kt, *const core::ffi::c_void, usize)> {
                Ok(match self {
                    $( Self::$v1(v) => { let (p, l) = $crate::attr::scalar(v); (sys::$k1, p, l) } )*
                    $( Self::$v2(v) => { let (p, l) = $crate::attr::array(stringify!($k2), v, $n2)?; (sys::$k2, p, l) } )*
                })
            }
        }

        /// Every key this crate binds, with its C name (used to name conflicting keys).
        pub(crate) const ALL_KEYS: &[(sys::$kt, &str)] = &[
            $( (sys::$k1, stringify!($k1)), )*
            $( (sys::$k2, stringify!($k2)), )*
            $( (sys::$k3, stringify!($k3)), )*
            $( (sys::$k4, stringify!($k4)), )*
        ];
    };
}
pub(crate) use attr_keys;
