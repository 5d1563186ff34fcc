//! The public NvSciSync attribute keys.

use crate::attrs::{Access, Check, Count, Fmt, KeySpec};

macro_rules! key {
    ($k:ident, $elem:expr, $count:expr, $acc:ident, $check:expr, $fmt:ident) => {
        KeySpec {
            key: nvsci_sys::$k,
            name: stringify!($k),
            elem: $elem,
            count: $count,
            access: Access::$acc,
            check: $check,
            fmt: Fmt::$fmt,
        }
    };
}

use Check::{Any, Bool, OneOf, Range};
use Count::{One, UpTo};

const PERMS: &[u64] = &[
    nvsci_sys::NvSciSyncAccessPerm_WaitOnly,
    nvsci_sys::NvSciSyncAccessPerm_SignalOnly,
    nvsci_sys::NvSciSyncAccessPerm_WaitSignal,
];

/// Every public key this mock accepts.
pub(crate) static SYNC_KEYS: &[KeySpec] = &[
    key!(NvSciSyncAttrKey_NeedCpuAccess, 1, One, InOut, Bool, Bool),
    key!(NvSciSyncAttrKey_RequiredPerm, 8, One, InOut, OneOf(PERMS), Uint),
    key!(NvSciSyncAttrKey_ActualPerm, 8, One, Out, Any, Uint),
    key!(NvSciSyncAttrKey_WaiterContextInsensitiveFenceExports, 1, One, InOut, Bool, Bool),
    key!(NvSciSyncAttrKey_WaiterRequireTimestamps, 1, One, InOut, Bool, Bool),
    key!(NvSciSyncAttrKey_RequireDeterministicFences, 1, One, InOut, Bool, Bool),
    key!(NvSciSyncAttrKey_NumTimestampSlots, 4, One, Out, Any, Uint),
    key!(NvSciSyncAttrKey_NumTaskStatusSlots, 4, One, Out, Any, Uint),
    key!(NvSciSyncAttrKey_MaxPrimitiveValue, 8, One, Out, Any, Uint),
    key!(NvSciSyncAttrKey_PrimitiveInfo, 4, UpTo(16), InOut, Range(1, 5), Uint),
    key!(NvSciSyncAttrKey_PeerLocationInfo, 16, UpTo(128), InOut, Any, Hex),
    key!(NvSciSyncAttrKey_GpuId, 16, UpTo(16), InOut, Any, Hex),
    key!(NvSciSyncAttrKey_PeerHwEngineArray, 8, UpTo(128), InOut, Any, Hex),
];
