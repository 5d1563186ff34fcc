//! The crate's single error type.

use core::fmt;

/// An NvSci status code, kept open: libraries newer than these bindings may return codes this
/// crate does not name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct NvSciError(pub u32);

impl NvSciError {
    /// `NvSciError_Success`.
    pub const SUCCESS: Self = Self(nvsci_sys::NvSciError_Success);
    /// `NvSciError_NotSupported`.
    pub const NOT_SUPPORTED: Self = Self(nvsci_sys::NvSciError_NotSupported);
    /// `NvSciError_BadParameter`.
    pub const BAD_PARAMETER: Self = Self(nvsci_sys::NvSciError_BadParameter);
    /// `NvSciError_InsufficientMemory`.
    pub const INSUFFICIENT_MEMORY: Self = Self(nvsci_sys::NvSciError_InsufficientMemory);
    /// `NvSciError_Timeout`.
    pub const TIMEOUT: Self = Self(nvsci_sys::NvSciError_Timeout);
    /// `NvSciError_ReconciliationFailed`.
    pub const RECONCILIATION_FAILED: Self = Self(nvsci_sys::NvSciError_ReconciliationFailed);
    /// `NvSciError_ClearedFence`.
    pub const CLEARED_FENCE: Self = Self(nvsci_sys::NvSciError_ClearedFence);
    /// `NvSciError_InvalidState`.
    pub const INVALID_STATE: Self = Self(nvsci_sys::NvSciError_InvalidState);
    /// `NvSciError_BadAddress`.
    pub const BAD_ADDRESS: Self = Self(nvsci_sys::NvSciError_BadAddress);
    /// `NvSciError_AccessDenied`.
    pub const ACCESS_DENIED: Self = Self(nvsci_sys::NvSciError_AccessDenied);

    /// The C enumerator name, when this crate knows the code.
    #[allow(non_upper_case_globals)]
    pub fn name(self) -> Option<&'static str> {
        use nvsci_sys::*;
        Some(match self.0 {
            NvSciError_Success => "NvSciError_Success",
            NvSciError_Unknown => "NvSciError_Unknown",
            NvSciError_NotImplemented => "NvSciError_NotImplemented",
            NvSciError_NotSupported => "NvSciError_NotSupported",
            NvSciError_AccessDenied => "NvSciError_AccessDenied",
            NvSciError_NotPermitted => "NvSciError_NotPermitted",
            NvSciError_InvalidState => "NvSciError_InvalidState",
            NvSciError_InvalidOperation => "NvSciError_InvalidOperation",
            NvSciError_NotInitialized => "NvSciError_NotInitialized",
            NvSciError_AlreadyInUse => "NvSciError_AlreadyInUse",
            NvSciError_AlreadyDone => "NvSciError_AlreadyDone",
            NvSciError_NotYetAvailable => "NvSciError_NotYetAvailable",
            NvSciError_NoLongerAvailable => "NvSciError_NoLongerAvailable",
            NvSciError_InsufficientMemory => "NvSciError_InsufficientMemory",
            NvSciError_InsufficientResource => "NvSciError_InsufficientResource",
            NvSciError_ResourceError => "NvSciError_ResourceError",
            NvSciError_BadParameter => "NvSciError_BadParameter",
            NvSciError_BadAddress => "NvSciError_BadAddress",
            NvSciError_TooBig => "NvSciError_TooBig",
            NvSciError_Overflow => "NvSciError_Overflow",
            NvSciError_InconsistentData => "NvSciError_InconsistentData",
            NvSciError_InsufficientData => "NvSciError_InsufficientData",
            NvSciError_IndexOutOfRange => "NvSciError_IndexOutOfRange",
            NvSciError_ValueOutOfRange => "NvSciError_ValueOutOfRange",
            NvSciError_Timeout => "NvSciError_Timeout",
            NvSciError_TryItAgain => "NvSciError_TryItAgain",
            NvSciError_Busy => "NvSciError_Busy",
            NvSciError_InterruptedCall => "NvSciError_InterruptedCall",
            NvSciError_NoSuchDevice => "NvSciError_NoSuchDevice",
            NvSciError_NoSpace => "NvSciError_NoSpace",
            NvSciError_IO => "NvSciError_IO",
            NvSciError_ReconciliationFailed => "NvSciError_ReconciliationFailed",
            NvSciError_AttrListValidationFailed => "NvSciError_AttrListValidationFailed",
            NvSciError_ObjValidationFailed => "NvSciError_ObjValidationFailed",
            NvSciError_UnsupportedConfig => "NvSciError_UnsupportedConfig",
            NvSciError_ClearedFence => "NvSciError_ClearedFence",
            _ => return None,
        })
    }
}

impl fmt::Debug for NvSciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for NvSciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} (0x{:x})", self.0),
            None => write!(f, "NvSci error 0x{:x}", self.0),
        }
    }
}

/// Keys named by a failed reconciliation (at most this many are kept).
pub const MAX_CONFLICT_KEYS: usize = 16;

/// Every error this crate returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An NvSci call returned a failure code.
    #[error("{function} failed: {code}")]
    NvSci {
        /// The C function that failed.
        function: &'static str,
        /// Its status code.
        code: NvSciError,
    },
    /// The NvSci libraries could not be loaded (missing file, missing symbol, wrong major
    /// version); the message lists every path tried.
    #[error("could not load NvSci: {0}")]
    Load(#[from] nvsci_sys::loader::LoadError),
    /// The loaded library (or the platform) does not provide this operation.
    #[error("{what} is not supported: {reason}")]
    Unsupported {
        /// The operation or symbol.
        what: &'static str,
        /// Why, and what to use instead.
        reason: &'static str,
    },
    /// Reconciliation failed; `keys` names the conflicting attributes the library reported and
    /// `dump` holds its textual description of the conflict (may be empty).
    #[error("reconciliation failed ({function}): conflicting keys [{}]{}", keys.join(", "), if dump.is_empty() { String::new() } else { format!("; {dump}") })]
    ReconcileConflict {
        /// The reconcile function that failed.
        function: &'static str,
        /// Names of the conflicting keys.
        keys: Vec<&'static str>,
        /// The library's dump of the conflict list.
        dump: String,
    },
    /// A CPU wait on a fence ran out of time.
    #[error("{function} timed out after {timeout_us} us")]
    Timeout {
        /// The waiting function.
        function: &'static str,
        /// The timeout that expired, in microseconds.
        timeout_us: i64,
    },
    /// A frame-ring operation ran out of time; `detail` names who holds the frame or whose
    /// fence did not expire.
    #[error("{detail}")]
    RingTimeout {
        /// Who or what the ring waited for.
        detail: String,
        /// The ring's timeout, in microseconds.
        timeout_us: i64,
    },
    /// An IPC endpoint could not be used: `endpoint` names it, `reason` says what happened (not
    /// configured, busy, peer gone, message too large, ...).
    #[error("IPC endpoint `{endpoint}`: {reason}")]
    Ipc {
        /// The endpoint's name.
        endpoint: String,
        /// What went wrong.
        reason: String,
        /// The NvSci status code behind it, if any.
        code: Option<NvSciError>,
    },
    /// The peer process of an endpoint went away (closed or reset its endpoint, or exited).
    #[error("IPC endpoint `{endpoint}`: the peer is gone (connection reset) during {during}")]
    IpcPeerGone {
        /// The endpoint's name.
        endpoint: String,
        /// What was being done.
        during: &'static str,
    },
    /// The producer at the other end of an IPC endpoint ended its frame stream (its ring's
    /// producer was dropped): no more frames will come.
    #[error("IPC endpoint `{endpoint}`: the producer ended the frame stream")]
    RingEnded {
        /// The endpoint's name.
        endpoint: String,
    },
    /// An IPC operation ran out of time.
    #[error("IPC endpoint `{endpoint}`: {during} timed out after {timeout_us} us")]
    IpcTimeout {
        /// The endpoint's name.
        endpoint: String,
        /// What was being waited for.
        during: &'static str,
        /// The timeout that expired, in microseconds.
        timeout_us: i64,
    },
    /// An import asked for more permission than the exporter granted.
    #[error("{what}: the exporter granted less than the {requested} this import asked for")]
    ImportPermission {
        /// What was imported.
        what: &'static str,
        /// The permission asked for.
        requested: &'static str,
    },
    /// A descriptor was refused: wrong size, another endpoint's, truncated or corrupted.
    #[error("invalid {what} descriptor: {reason}")]
    InvalidDescriptor {
        /// Which descriptor type.
        what: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// An argument was rejected before reaching the library.
    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument {
        /// The argument (or attribute key) that was wrong.
        name: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// An attribute list refused a value: `key` and `value` say which (found by setting the
    /// attributes of the failed call one at a time on a copy of the list), `code` is the
    /// library's answer.
    #[error("{function} refused {key}: {value} ({code})")]
    AttrRefused {
        /// The set function that refused it.
        function: &'static str,
        /// The C name of the refused key.
        key: &'static str,
        /// The value given (the attribute as written in Rust).
        value: String,
        /// The library's status code.
        code: NvSciError,
    },
    /// The library returned a value this crate cannot represent.
    #[error("attribute {key} holds an unexpected value: {detail}")]
    UnexpectedValue {
        /// The attribute key.
        key: &'static str,
        /// What was found.
        detail: String,
    },
    /// A CUDA array mapping would reach past the memory it maps: in the driver's own layout
    /// ([`cuda::CudaGpu::array_footprint`](crate::cuda::CudaGpu::array_footprint)) the array
    /// covers `footprint` bytes from `offset`, and the import holds `size`. The driver itself
    /// does not check this: such a mapping would overlap whatever follows the import.
    #[error(
        "a CUDA array covering {footprint} bytes (the driver's layout) at offset {offset} does not fit in \
         the {size} imported bytes"
    )]
    ArrayFootprint {
        /// Offset of the array in the import.
        offset: u64,
        /// Bytes the array covers in the driver's layout, all levels included.
        footprint: u64,
        /// Bytes imported.
        size: u64,
    },
    /// The operation needs a permission the object does not have.
    #[error("permission denied: {0}")]
    PermissionDenied(&'static str),
    /// A CUDA driver call failed.
    #[error("{function} failed: CUDA error {code} ({name})")]
    Cuda {
        /// The CUDA function that failed.
        function: &'static str,
        /// The `CUresult` value.
        code: u32,
        /// The `CUresult` name, when known.
        name: &'static str,
    },
    /// No usable CUDA driver or device; the message says what to do instead.
    #[error("CUDA is not available: {reason}")]
    CudaUnavailable {
        /// What is missing and what to use instead.
        reason: String,
    },
    /// A Vulkan call failed (feature `vulkan`).
    #[error("{function} failed: VkResult {code} ({})", vk_result_name(*code))]
    Vulkan {
        /// The Vulkan function that failed.
        function: &'static str,
        /// The `VkResult` value.
        code: i32,
    },
    /// No usable Vulkan loader, driver or device; the message says what was looked for and what
    /// was found.
    #[error("Vulkan is not available: {reason}")]
    VulkanUnavailable {
        /// What is missing, what was found instead and what to do.
        reason: String,
    },
    /// A handle given to one of the constructors that adopt handles of other libraries
    /// (`from_foreign`, `from_raw_owned`) was NULL. Nothing was created or freed.
    #[error("the foreign {what} is NULL")]
    NullHandle {
        /// The C type of the handle (`NvSciBufAttrList`, `NvSciBufObj`, `NvSciSyncAttrList`,
        /// `NvSciSyncObj`, or `NvSciSyncFence` for a NULL fence pointer).
        what: &'static str,
    },
    /// An attribute list adopted from another library is reconciled where an unreconciled one
    /// was expected, or the other way round.
    #[error("the foreign {list} is {found}, not {expected}")]
    ListStateMismatch {
        /// The C type of the list (`NvSciBufAttrList` or `NvSciSyncAttrList`).
        list: &'static str,
        /// The state the caller asked for.
        expected: crate::ListState,
        /// The state the library reports for the list.
        found: crate::ListState,
    },
    /// A fixed-capacity container was full.
    #[error("capacity of {what} exceeded (max {max})")]
    Capacity {
        /// Which container.
        what: &'static str,
        /// Its capacity.
        max: usize,
    },
}

impl Error {
    /// The conflicting keys of a failed reconciliation ([`Error::ReconcileConflict`]), `None`
    /// for any other error.
    pub fn conflict_keys(&self) -> Option<&[&'static str]> {
        match self {
            Error::ReconcileConflict { keys, .. } => Some(keys),
            _ => None,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Turns a C status into `Ok(())` or [`Error::NvSci`].
pub(crate) fn check(function: &'static str, code: nvsci_sys::NvSciError) -> Result<()> {
    if code == nvsci_sys::NvSciError_Success {
        Ok(())
    } else {
        Err(Error::NvSci { function, code: NvSciError(code) })
    }
}

/// Name of a `VkResult`, from ash's own table (`VK_` and ash's name, e.g.
/// `VK_ERROR_OUT_OF_HOST_MEMORY`); a value ash does not name prints as its number.
#[cfg(feature = "vulkan")]
fn vk_result_name(code: i32) -> String {
    format!("VK_{:?}", ash::vk::Result::from_raw(code))
}

/// Without the `vulkan` feature no Vulkan call is made, so no `VkResult` is ever named.
#[cfg(not(feature = "vulkan"))]
fn vk_result_name(_code: i32) -> &'static str {
    "VkResult"
}

pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument { name, reason: reason.into() }
}

#[cfg(all(test, feature = "vulkan"))]
mod tests {
    use super::Error;

    /// Values from the Vulkan specification's `VkResult` table.
    #[test]
    fn vulkan_results_are_named_by_ash() {
        let e = Error::Vulkan { function: "vkAllocateMemory", code: -2 };
        assert_eq!(e.to_string(), "vkAllocateMemory failed: VkResult -2 (VK_ERROR_OUT_OF_DEVICE_MEMORY)");
        let e = Error::Vulkan { function: "vkGetMemoryFdKHR", code: -1000072003 };
        assert!(e.to_string().ends_with("(VK_ERROR_INVALID_EXTERNAL_HANDLE)"), "{e}");
    }
}
