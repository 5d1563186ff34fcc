//! NvSciSync attribute keys and value types.

use crate::attr::{attr_keys, closed_elem, open_enum};
use crate::buf::PeerHwEngine;
use crate::GpuId;
use nvsci_sys as sys;

/// NvSciSync access permission (`NvSciSyncAccessPerm`, an 8-byte value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum SyncPerm {
    /// Waits only.
    WaitOnly = sys::NvSciSyncAccessPerm_WaitOnly,
    /// Signals only.
    SignalOnly = sys::NvSciSyncAccessPerm_SignalOnly,
    /// Waits and signals.
    WaitSignal = sys::NvSciSyncAccessPerm_WaitSignal,
}
closed_elem!(SyncPerm, u64, {
    sys::NvSciSyncAccessPerm_WaitOnly => SyncPerm::WaitOnly,
    sys::NvSciSyncAccessPerm_SignalOnly => SyncPerm::SignalOnly,
    sys::NvSciSyncAccessPerm_WaitSignal => SyncPerm::WaitSignal,
});

open_enum! {
    /// `NvSciSyncAttrValPrimitiveType`: the hardware primitive behind a sync object.
    pub struct PrimitiveType(u32) {
        /// Tegra syncpoint.
        SYNCPOINT = sys::NvSciSyncAttrValPrimitiveType_Syncpoint,
        /// 32-bit semaphore in system memory.
        SYSMEM_SEMAPHORE = sys::NvSciSyncAttrValPrimitiveType_SysmemSemaphore,
        /// 64-bit semaphore in system memory.
        SYSMEM_SEMAPHORE_PAYLOAD_64B = sys::NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b,
    }
}

const _: () = assert!(core::mem::size_of::<SyncPerm>() == nvsci_sys::NVSCI_SYNC_ACCESS_PERM_SIZE);

attr_keys! {
    /// One NvSciSync attribute to set, with its typed value. Output-only keys have no variant.
    enum SyncAttr;
    /// Typed NvSciSync keys for the getters.
    mod key;
    family crate::sync::SyncFamily;
    in_one {
        /// Whether the CPU signals or waits.
        NeedCpuAccess, NEED_CPU_ACCESS, NvSciSyncAttrKey_NeedCpuAccess: bool;
        /// What this user does with the object (8-byte value).
        RequiredPerm, REQUIRED_PERM, NvSciSyncAttrKey_RequiredPerm: SyncPerm;
        /// Fences may be waited on from any context.
        WaiterContextInsensitiveFenceExports, WAITER_CONTEXT_INSENSITIVE_FENCE_EXPORTS, NvSciSyncAttrKey_WaiterContextInsensitiveFenceExports: bool;
        /// Waiters want signal timestamps.
        WaiterRequireTimestamps, WAITER_REQUIRE_TIMESTAMPS, NvSciSyncAttrKey_WaiterRequireTimestamps: bool;
        /// Every signal advances the fence value by exactly one.
        RequireDeterministicFences, REQUIRE_DETERMINISTIC_FENCES, NvSciSyncAttrKey_RequireDeterministicFences: bool;
    }
    in_many {
        /// Acceptable primitive types.
        PrimitiveInfo, PRIMITIVE_INFO, NvSciSyncAttrKey_PrimitiveInfo: [PrimitiveType; 5];
        /// GPUs that use the object.
        GpuId, GPU_ID, NvSciSyncAttrKey_GpuId: [GpuId; 16];
        /// Hardware engines that signal or wait on the object, each with its platform.
        PeerHwEngineArray, PEER_HW_ENGINE_ARRAY, NvSciSyncAttrKey_PeerHwEngineArray: [PeerHwEngine; sys::NV_SCI_BUF_PEER_HW_ENGINE_MAX_NUMBER as usize];
    }
    out_one {
        /// Reconciled permission.
        ACTUAL_PERM, NvSciSyncAttrKey_ActualPerm: SyncPerm;
        /// Timestamp slots.
        NUM_TIMESTAMP_SLOTS, NvSciSyncAttrKey_NumTimestampSlots: u32;
        /// Task-status slots.
        NUM_TASK_STATUS_SLOTS, NvSciSyncAttrKey_NumTaskStatusSlots: u32;
        /// Largest primitive value before wrap-around.
        MAX_PRIMITIVE_VALUE, NvSciSyncAttrKey_MaxPrimitiveValue: u64;
    }
    out_many {
    }
}
