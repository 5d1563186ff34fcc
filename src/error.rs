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

/// Why an operation is not supported where it ran: the `reason` of [`Error::Unsupported`].
///
/// Programs match on it to choose a fallback (another backend, another mapping); its `Display`
/// says what to use instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnsupportedReason {
    /// The loaded NvSci library does not export the function `what` names.
    MissingFunction,
    /// The implementation reports host-memory GPU interop but lacks the entry point `what`
    /// names.
    MissingHostGpuEntryPoint,
    /// This CUDA driver cannot import NvSciBuf objects (desktop drivers answer
    /// `CUDA_ERROR_NOT_SUPPORTED`; only Jetson / DRIVE drivers can).
    CudaWithoutNvSciBuf,
    /// This CUDA driver cannot import NvSciSync objects (only Jetson / DRIVE drivers can).
    CudaWithoutNvSciSync,
    /// The CUDA driver is older than the version that introduced the entry point (`since`, as
    /// the driver reports versions: 11070 is 11.7).
    CudaDriverTooOld {
        /// The first driver version with the entry point.
        since: i32,
    },
    /// No CUDA driver library (`libcuda.so`) was found.
    CudaDriverMissing,
    /// The CUDA driver did not report its version (`cuDriverGetVersion` failed), so an entry
    /// point newer than CUDA 11.4 is not called: the bindings would end the process if the
    /// driver lacked it.
    CudaDriverVersionUnknown,
    /// `cuInit` failed: the driver found no usable device or could not start.
    CudaInitFailed,
    /// The CUDA driver does not export the entry point `what` names.
    CudaEntryPointMissing,
    /// CUDA array mappings of NvSciBuf planes exist for block-linear images only (NVIDIA's
    /// documentation); pitch-linear planes map as buffers.
    ArrayOfPitchLinearPlane,
    /// The object's memory reaches CUDA as registered host memory, which cannot back an array.
    ArrayOfHostMemory,
    /// Planes whose pixels are not whole bytes cannot be addressed per pixel.
    SubBytePixels,
    /// An image whose planes nvscibuf.h gives no user planes for (`NvSciBufObjPutPixels`: one
    /// for RGBA, RAW and single-plane YUV images, Y, U and V for YUV images of more planes):
    /// several planes of an RGBA or RAW image, or YUV planes other than luma with interleaved
    /// chroma or luma with U and V.
    NoUserPlanes,
    /// The mock NvSci library does not lay out this kind of buffer (see docs/mock.md).
    MockLayout,
    /// The Vulkan device cannot export this semaphore type as an opaque fd.
    VulkanSemaphoreExport,
    /// The semaphore was created without `OPAQUE_FD` export.
    SemaphoreNotExportable,
    /// The Vulkan device cannot export this image (format, usage) as an opaque fd.
    VulkanImageExport,
    /// The Vulkan device cannot export this buffer usage as an opaque fd.
    VulkanBufferExport,
    /// No memory type of the Vulkan device has the required properties.
    VulkanMemoryType,
    /// No memory type allowed for an exportable buffer is host-visible and host-coherent.
    VulkanHostVisibleExport,
    /// The buffer lives in device-local memory, which the host cannot map.
    DeviceLocalBuffer,
    /// The ring's backend has no NvSci objects (NvSciBuf or NvSciSync) to hand out.
    NoNvSciObjects,
    /// The ring has no consumer of that index.
    NoSuchConsumer,
    /// No backend is usable: no NvSci, no CUDA + Vulkan GPU, and the `mock` feature is off.
    NoBackend,
    /// Block-linear frames need a ring backend built on NvSciBuf (the Vulkan backend lays out
    /// pitch-linear frames only).
    BlockLinearWithoutNvSci,
    /// A seat for a consumer in another process that attaches while the stream runs, with a
    /// CUDA producer: the producer imports every release object into CUDA once, when the stream
    /// is split, so it cannot take a consumer's new release object later.
    RemoteAttachWithCudaProducer,
    /// The crate was built without the cargo feature named.
    FeatureDisabled(&'static str),
    /// An async call (`Consumer::next_frame`, feature `tokio`) was polled outside a tokio
    /// runtime, or on one that is shutting down.
    NoTokioRuntime,
}

impl fmt::Display for UnsupportedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UnsupportedReason::*;
        match self {
            MissingFunction => f.write_str("the loaded NvSci library does not export this function"),
            MissingHostGpuEntryPoint => {
                f.write_str("the implementation reports host-memory GPU interop without this entry point")
            }
            CudaWithoutNvSciBuf => f.write_str(
                "this CUDA driver does not support NvSciBuf (desktop GPUs answer CUDA_ERROR_NOT_SUPPORTED; \
                 only Jetson/DRIVE do); use the mock NvSci library or Vulkan / CUDA-exported memory instead",
            ),
            CudaWithoutNvSciSync => f.write_str(
                "this CUDA driver does not support NvSciSync (only Jetson/DRIVE do); use timeline \
                 semaphores from the Vulkan backend instead",
            ),
            CudaDriverTooOld { since } => write!(
                f,
                "the CUDA driver is older than {}.{}, which introduced this entry point: build nvsci with \
                 the CUDA version feature of the driver (e.g. cuda-11040 for JetPack 5 / DRIVE OS 6)",
                since / 1000,
                since % 1000 / 10
            ),
            CudaDriverMissing => f.write_str("no CUDA driver library (libcuda.so) was found"),
            CudaDriverVersionUnknown => f.write_str(
                "the CUDA driver did not report its version (cuDriverGetVersion failed), so entry points \
                 newer than CUDA 11.4 are not called; build nvsci with the cuda-11040 feature to avoid them",
            ),
            CudaInitFailed => {
                f.write_str("cuInit failed: the CUDA driver found no usable device or could not start")
            }
            CudaEntryPointMissing => f.write_str("the CUDA driver does not export this entry point"),
            RemoteAttachWithCudaProducer => f.write_str(
                "a consumer in another process can attach to a running stream only with a CPU producer \
                 (a CUDA producer imports every release object once, when the stream is split); declare \
                 it with remote_consumer so that it attaches while the stream is built",
            ),
            ArrayOfPitchLinearPlane => f.write_str(
                "NVIDIA documents CUDA array mappings of NvSciBuf planes for block-linear images only; \
                 map the plane with map_buffer(plane.offset, pitch * height)",
            ),
            ArrayOfHostMemory => f.write_str(
                "arrays need a CUexternalMemory, and the implementation backs this object with host \
                 memory (the mock backs only block-linear images that name a GPU with CUDA virtual \
                 memory, and only where the driver offers it on the host NUMA node); map the buffer \
                 with map_buffer instead",
            ),
            SubBytePixels => {
                f.write_str("planes whose pixels are not whole bytes cannot be addressed per pixel")
            }
            NoUserPlanes => f.write_str(
                "nvscibuf.h gives pixel transfers one user plane for RGBA, RAW and single-plane YUV \
                 images and Y, U and V for YUV images of more planes; this image's planes are neither",
            ),
            MockLayout => f.write_str(
                "the mock lays out raw buffers and plane-based images (pitch-linear or block-linear, \
                 progressive or interlaced, padded or not) of the color formats it knows; tensors, arrays, \
                 pyramids, surface-based image keys, VPR and video memory are left to NVIDIA's library \
                 (see docs/mock.md)",
            ),
            VulkanSemaphoreExport => f.write_str(
                "the Vulkan device cannot export this semaphore type as an opaque fd (no \
                 VK_KHR_external_semaphore_fd, or OPAQUE_FD not exportable); software drivers such as \
                 lavapipe cannot",
            ),
            SemaphoreNotExportable => {
                f.write_str("the semaphore was created without OPAQUE_FD export (use new_exportable)")
            }
            VulkanImageExport => {
                f.write_str("the device does not support this image format and usage with OPAQUE_FD export")
            }
            VulkanBufferExport => {
                f.write_str("the device does not report OPAQUE_FD as exportable for this buffer usage")
            }
            VulkanMemoryType => f.write_str("no memory type of the device has the required properties"),
            VulkanHostVisibleExport => f.write_str(
                "no memory type allowed for an OPAQUE_FD-exportable buffer is both HOST_VISIBLE and \
                 HOST_COHERENT",
            ),
            DeviceLocalBuffer => f.write_str(
                "the buffer is in device-local memory; create it with ExportableBuffer::new_host_visible",
            ),
            NoNvSciObjects => f.write_str(
                "this ring's backend has no NvSci objects; use cpu_read/cpu_write, CUDA or the ring's fences",
            ),
            NoSuchConsumer => f.write_str("no such consumer in this ring"),
            NoBackend => f.write_str("no NvSci, no CUDA+Vulkan GPU, and the mock feature is disabled"),
            BlockLinearWithoutNvSci => f.write_str(
                "block-linear frames need an NvSci backend (NVIDIA's library or the mock); the Vulkan \
                 backend lays out pitch-linear frames only",
            ),
            FeatureDisabled(feature) => write!(f, "built without the `{feature}` feature"),
            NoTokioRuntime => f.write_str(
                "no tokio runtime runs this future (or it is shutting down): poll it on a tokio \
                 runtime (a consumer in another process needs its I/O driver: `enable_io()` or
                 `enable_all()`)",
            ),
        }
    }
}

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
        /// Why (match on it to choose a fallback); its text says what to use instead.
        reason: UnsupportedReason,
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
    /// A wait ran out of time, anywhere in the crate: `waited_for` says what it waited for (a
    /// fence, an IPC endpoint, or in the frame ring the slot, the frame and the consumers
    /// holding it), `timeout` how long.
    #[error("no {waited_for} within {timeout:?}")]
    Timeout {
        /// What was waited for.
        waited_for: Wait,
        /// The timeout that expired.
        timeout: std::time::Duration,
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
    /// The operation needs a permission the object does not have.
    #[error("permission denied: {0}")]
    PermissionDenied(&'static str),
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
        expected: crate::list_state::ListState,
        /// The state the library reports for the list.
        found: crate::list_state::ListState,
    },
    /// An NvSci call refused its arguments (`code` is the library's status, usually
    /// `NvSciError_BadParameter`) and the crate names why: `culprit` says which key, argument or
    /// documented rule of the call was broken. The crate explains a refusal only when the
    /// arguments it passed leave one documented reason; otherwise the error stays
    /// [`Error::NvSci`].
    #[error("{function} failed: {code}: {culprit}")]
    Refused {
        /// The C function that refused the call.
        function: &'static str,
        /// The library's status code.
        code: NvSciError,
        /// The key, argument or rule that was broken.
        culprit: Culprit,
    },
    /// A fixed-capacity container was full.
    #[error("capacity of {what} exceeded (max {max})")]
    Capacity {
        /// Which container.
        what: &'static str,
        /// Its capacity.
        max: usize,
    },
    /// A CUDA failure: a driver call, a missing driver or device, or an array mapping that would
    /// not fit (see [`CudaError`]).
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// A Vulkan failure: a call, or a missing loader, driver or device (see [`VulkanError`]).
    #[error(transparent)]
    Vulkan(#[from] VulkanError),
    /// A frame-ring failure: a wait that ran out of time, or a stream its producer ended (see
    /// [`RingError`]).
    #[error(transparent)]
    Ring(#[from] RingError),
    /// An NvSciIpc failure: an endpoint that cannot be used, a peer that went away, or a wait
    /// that ran out of time (see [`IpcError`]).
    #[error(transparent)]
    Ipc(#[from] IpcError),
}

/// A failure of the CUDA layer ([`Error::Cuda`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// A CUDA driver call failed.
    #[error("{function} failed: CUDA error {code} ({name})")]
    Call {
        /// The CUDA function that failed.
        function: &'static str,
        /// The `CUresult` value.
        code: u32,
        /// The `CUresult` name, when known.
        name: &'static str,
    },
    /// No usable CUDA driver or device; the message says what to do instead.
    #[error("CUDA is not available: {reason}")]
    Unavailable {
        /// What is missing and what to use instead.
        reason: String,
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
}

/// A failure of the Vulkan layer ([`Error::Vulkan`], feature `vulkan`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VulkanError {
    /// A Vulkan call failed.
    #[error("{function} failed: VkResult {code} ({})", vk_result_name(*code))]
    Call {
        /// The Vulkan function that failed.
        function: &'static str,
        /// The `VkResult` value.
        code: i32,
    },
    /// No usable Vulkan loader, driver or device; the message says what was looked for and what
    /// was found.
    #[error("Vulkan is not available: {reason}")]
    Unavailable {
        /// What is missing, what was found instead and what to do.
        reason: String,
    },
}

/// A failure of the frame ring ([`Error::Ring`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// The producer at the other end of an IPC endpoint ended its frame stream (its ring's
    /// producer was dropped): no more frames will come.
    #[error("IPC endpoint `{endpoint}`: the producer ended the frame stream")]
    Ended {
        /// The endpoint's name.
        endpoint: String,
    },
    /// No vacant seat fits the consumer that asked to attach: the stream has `fitting` seats
    /// for its engine (declared at build time, attached or reserved), all taken.
    #[error("no vacant consumer seat for this engine: all {fitting} fitting seats are taken")]
    NoSeat {
        /// Seats of the stream whose engine fits the consumer.
        fitting: usize,
    },
    /// An attach through an IPC endpoint was refused: `field` of the attach does not fit the
    /// stream's seat at the other end of `endpoint`. The stream and its other consumers go on;
    /// the seat stays vacant for the next attach.
    #[error("IPC endpoint `{endpoint}`: attach refused: {field}")]
    AttachRefused {
        /// The endpoint's name.
        endpoint: String,
        /// What did not fit.
        field: AttachField,
    },
    /// A thread the stream needs could not be started (`std::thread::Builder::spawn` failed:
    /// the process's thread limit, or memory).
    #[error("the stream's {thread} thread could not be started: {reason}")]
    NoThread {
        /// Which thread.
        thread: &'static str,
        /// What the system answered.
        reason: String,
    },
}

/// What did not fit in a refused attach ([`RingError::AttachRefused`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttachField {
    /// The attach names another stream (another producer, or an earlier run of this one).
    Stream,
    /// The attach answers an earlier offer of the seat: a stale or replayed attach.
    Generation,
    /// The consumer's engine is not the seat's (CPU against CUDA, or another GPU).
    Engine,
    /// The consumer's frame format is not the stream's.
    Format,
    /// A limit of 0 frames.
    Limit,
    /// A queue mode this side does not know.
    Mode,
    /// Not an attach message at all: the peer is not a consumer of this stream.
    Message,
}

impl AttachField {
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Stream => 1,
            Self::Generation => 2,
            Self::Engine => 3,
            Self::Format => 4,
            Self::Limit => 5,
            Self::Mode => 6,
            Self::Message => 7,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Stream,
            2 => Self::Generation,
            3 => Self::Engine,
            4 => Self::Format,
            5 => Self::Limit,
            6 => Self::Mode,
            7 => Self::Message,
            _ => return None,
        })
    }
}

impl fmt::Display for AttachField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stream => "the stream token names another stream",
            Self::Generation => "the attach answers an earlier offer of the seat (stale or replayed)",
            Self::Engine => "the consumer's engine is not the seat's",
            Self::Format => "the consumer's frame format is not the stream's",
            Self::Limit => "a limit of 0 frames",
            Self::Mode => "an unknown queue mode",
            Self::Message => "not an attach message",
        })
    }
}

/// What an [`Error::Timeout`] waited for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// A fence to expire, waited for on the CPU by `function` (`NvSciSyncFenceWait`,
    /// `vkWaitSemaphores`, `vkWaitForFences`).
    Fence {
        /// The waiting function.
        function: &'static str,
    },
    /// An IPC endpoint: `during` says what (connecting, a read, room to write).
    Endpoint {
        /// The endpoint's name.
        endpoint: String,
        /// What was being waited for.
        during: &'static str,
    },
    /// A free slot (the producer): every slot was held; `slot` was presented longest ago
    /// (frame `sequence`) and `holders` hold it or have it queued.
    FreeSlot {
        /// The slot presented longest ago.
        slot: usize,
        /// The frame presented in it.
        sequence: u64,
        /// The consumers holding it.
        holders: crate::pipeline::ConsumerSet,
    },
    /// The release fence of consumer `consumer` for slot `slot` to expire (the producer).
    ReleaseFence {
        /// The slot.
        slot: usize,
        /// The consumer whose fence did not expire.
        consumer: usize,
    },
    /// The present fence of frame `sequence` in slot `slot` to expire.
    PresentFence {
        /// The slot.
        slot: usize,
        /// The frame.
        sequence: u64,
    },
    /// A presented frame (a consumer).
    Frame,
    /// The release of slot `slot` (frame `sequence`) by consumer `consumer`, in another
    /// process at the other end of `endpoint` (the producer).
    RemoteRelease {
        /// The slot.
        slot: usize,
        /// The frame.
        sequence: u64,
        /// The consumer.
        consumer: usize,
        /// The endpoint's name.
        endpoint: String,
    },
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fence { function } => write!(f, "fence expiry ({function})"),
            Self::Endpoint { endpoint, during } => write!(f, "{during} on IPC endpoint `{endpoint}`"),
            Self::FreeSlot { slot, sequence, holders } => {
                write!(f, "free slot (slot {slot}, frame {sequence}, is held by consumers {holders:?})")
            }
            Self::ReleaseFence { slot, consumer } => {
                write!(f, "expiry of the release fence of consumer {consumer} for slot {slot}")
            }
            Self::PresentFence { slot, sequence } => {
                write!(f, "expiry of the present fence of frame {sequence} (slot {slot})")
            }
            Self::Frame => f.write_str("presented frame"),
            Self::RemoteRelease { slot, sequence, consumer, endpoint } => write!(
                f,
                "release of slot {slot} (frame {sequence}) by consumer {consumer} in another process (endpoint `{endpoint}`)"
            ),
        }
    }
}

/// A failure of the NvSciIpc layer ([`Error::Ipc`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IpcError {
    /// An IPC endpoint could not be used: `endpoint` names it, `reason` says what happened (not
    /// configured, busy, peer gone, message too large, ...).
    #[error("IPC endpoint `{endpoint}`: {reason}")]
    Endpoint {
        /// The endpoint's name.
        endpoint: String,
        /// What went wrong.
        reason: String,
        /// The NvSci status code behind it, if any.
        code: Option<NvSciError>,
    },
    /// The peer process of an endpoint went away (closed or reset its endpoint, or exited).
    #[error("IPC endpoint `{endpoint}`: the peer is gone (connection reset) during {during}")]
    PeerGone {
        /// The endpoint's name.
        endpoint: String,
        /// What was being done.
        during: &'static str,
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

impl Error {
    /// The key, argument or rule a refused NvSci call broke ([`Error::Refused`]), `None` for any
    /// other error.
    pub fn culprit(&self) -> Option<&Culprit> {
        match self {
            Error::Refused { culprit, .. } => Some(culprit),
            _ => None,
        }
    }
}

/// What a refused NvSci call did wrong ([`Error::Refused`]), each case a sentence of NVIDIA's
/// headers (nvscibuf.h / nvscisync.h) the crate can check: [`key`](Self::key) and
/// [`argument`](Self::argument) name the attribute key and the argument involved.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Culprit {
    /// CPU access to a buffer whose lists did not ask for it: the reconciled
    /// `NvSciBufGeneralAttrKey_NeedCpuAccess` is unset or false ("NvSciBufObj either did not
    /// request for CPU access by setting NvSciBufGeneralAttrKey_NeedCpuAccess to true",
    /// `NvSciBufObjGetCpuPtr` / `NvSciBufObjGetConstCpuPtr`). Set it in the list of the process
    /// that maps the buffer.
    CpuAccessNotRequested,
    /// A CPU fence generation or signal on a sync object whose signaler is not this process's
    /// CPU ("syncObj is not a CPU Signaler" or "does not own the backing primitive",
    /// `NvSciSyncObjSignal` / `NvSciSyncObjGenerateFence`): the signaler's list must set
    /// `NvSciSyncAttrKey_NeedCpuAccess` with a signal permission, and the object must not be an
    /// import.
    NotCpuSignaler,
    /// A CPU wait on a fence whose object gives this process no CPU wait permission ("caller
    /// doesn't have CPU wait permissions in NvSciSyncObj associated with syncFence",
    /// `NvSciSyncFenceWait`): no list set `NvSciSyncAttrKey_NeedCpuAccess` with a wait
    /// permission.
    NotCpuWaiter,
    /// A CPU wait with a wait context of another module than the fence's object ("syncFence and
    /// context are associated with different NvSciSyncModule", `NvSciSyncFenceWait`).
    WaitContextOfAnotherModule,
    /// An image plane array of `len` elements in a list whose `NvSciBufImageAttrKey_PlaneCount`
    /// is `plane_count` (an attribute "set to an unsupported value considering the data type(s)",
    /// `NvSciBufAttrListReconcile`): every per-plane key holds one element per plane.
    PlaneArrayLength {
        /// The per-plane key whose length differs.
        key: &'static str,
        /// Elements it holds.
        len: usize,
        /// The plane count of the lists.
        plane_count: u32,
    },
    /// Lists bound to different modules in one call ("not all the lists in inputArray are
    /// bound to the same module", `Nv*AttrListReconcile` / `Nv*AttrListAppendUnreconciled`):
    /// list `index` belongs to another module than list 0.
    ListsOfTwoModules {
        /// Position of the first list of another module in the call's input.
        index: usize,
    },
    /// A reconciled list where only unreconciled ones are accepted ("any of the lists in
    /// inputArray is reconciled", `Nv*AttrListReconcile` / `Nv*AttrListAppendUnreconciled`).
    AlreadyReconciled {
        /// Position of the reconciled list in the call's input.
        index: usize,
    },
    /// One list given twice in one call ("an attribute list appears multiple times in
    /// inputArray", `Nv*AttrListReconcile` / `Nv*AttrListAppendUnreconciled`).
    SameListTwice {
        /// Its first position in the call's input.
        first: usize,
        /// Its second position.
        second: usize,
    },
    /// A slot index past the list's slots ("slotIndex >= slot count",
    /// `Nv*AttrListSlotGetAttrs`).
    SlotOutOfRange {
        /// The slot asked for.
        slot: usize,
        /// The list's slot count.
        slot_count: usize,
    },
    /// An NvSciBuf list without `NvSciBufGeneralAttrKey_Types` where the call needs it ("the
    /// NvSciBufGeneralAttrKey_Types key is not set on origAttrList", `NvSciBufAttrListClone`;
    /// the same for `NvSciBufAttrListAppendUnreconciled`): set `Types` first.
    ListWithoutTypes {
        /// Position of the list in the call's input (0 for a clone).
        index: usize,
    },
    /// An output-only key read from an unreconciled list ("attrList is unreconciled and any of
    /// the NvSciBufAttrKey(s) specified in NvSciBufAttrKeyValuePair is output only",
    /// `NvSciBufAttrListGetAttrs` / `NvSciBufAttrListSlotGetAttrs`): the library computes the
    /// key when it reconciles; read it from the reconciled list (or an object's list).
    OutputOnlyKey {
        /// The C name of the key.
        key: &'static str,
    },
    /// An input-only key read from a reconciled list ("attrList is reconciled and any of the
    /// NvSciBufAttrKey(s) specified in NvSciBufAttrKeyValuePair is input only", same functions):
    /// reconciliation consumes the key; read it from the unreconciled lists.
    InputOnlyKey {
        /// The C name of the key.
        key: &'static str,
    },
}

impl Culprit {
    /// The C name of the attribute key involved, if one is.
    pub fn key(&self) -> Option<&'static str> {
        Some(match self {
            Culprit::CpuAccessNotRequested => "NvSciBufGeneralAttrKey_NeedCpuAccess",
            Culprit::NotCpuSignaler | Culprit::NotCpuWaiter => "NvSciSyncAttrKey_NeedCpuAccess",
            Culprit::PlaneArrayLength { key, .. } => key,
            Culprit::ListWithoutTypes { .. } => "NvSciBufGeneralAttrKey_Types",
            Culprit::OutputOnlyKey { key } | Culprit::InputOnlyKey { key } => key,
            _ => return None,
        })
    }

    /// The C name of the argument of the refused call that was wrong.
    pub fn argument(&self) -> &'static str {
        match self {
            Culprit::CpuAccessNotRequested => "bufObj",
            Culprit::NotCpuSignaler => "syncObj",
            Culprit::NotCpuWaiter => "syncFence",
            Culprit::WaitContextOfAnotherModule => "context",
            Culprit::PlaneArrayLength { .. }
            | Culprit::ListsOfTwoModules { .. }
            | Culprit::AlreadyReconciled { .. }
            | Culprit::SameListTwice { .. } => "inputArray",
            Culprit::SlotOutOfRange { .. } => "slotIndex",
            Culprit::ListWithoutTypes { .. } => "origAttrList",
            Culprit::OutputOnlyKey { .. } | Culprit::InputOnlyKey { .. } => "pairArray",
        }
    }
}

impl fmt::Display for Culprit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Culprit::CpuAccessNotRequested => f.write_str(
                "CPU access to a buffer whose lists did not ask for it \
                 (set NvSciBufGeneralAttrKey_NeedCpuAccess = true)",
            ),
            Culprit::NotCpuSignaler => f.write_str(
                "the CPU of this process is not the object's signaler (the signaler's list must set \
                 NvSciSyncAttrKey_NeedCpuAccess with SignalOnly or WaitSignal)",
            ),
            Culprit::NotCpuWaiter => f.write_str(
                "the object gives this process no CPU wait permission (a list must set \
                 NvSciSyncAttrKey_NeedCpuAccess with WaitOnly or WaitSignal)",
            ),
            Culprit::WaitContextOfAnotherModule => {
                f.write_str("the CPU wait context belongs to another module than the fence's object")
            }
            Culprit::PlaneArrayLength { key, len, plane_count } => {
                write!(f, "{key} holds {len} elements but PlaneCount is {plane_count}")
            }
            Culprit::ListsOfTwoModules { index } => {
                write!(f, "list {index} belongs to another module than list 0")
            }
            Culprit::AlreadyReconciled { index } => {
                write!(f, "list {index} is already reconciled (only unreconciled lists are accepted)")
            }
            Culprit::SameListTwice { first, second } => {
                write!(f, "the same list is given twice (positions {first} and {second})")
            }
            Culprit::SlotOutOfRange { slot, slot_count } => {
                write!(f, "slot {slot} is out of range (the list has {slot_count} slots)")
            }
            Culprit::ListWithoutTypes { index } => {
                write!(f, "list {index} does not set NvSciBufGeneralAttrKey_Types")
            }
            Culprit::OutputOnlyKey { key } => write!(
                f,
                "{key} is an output key: an unreconciled list does not hold it (read it from the reconciled list)"
            ),
            Culprit::InputOnlyKey { key } => write!(
                f,
                "{key} is an input key: a reconciled list does not hold it (read it from the unreconciled lists)"
            ),
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
    use super::{Error, VulkanError};

    /// Values from the Vulkan specification's `VkResult` table.
    #[test]
    fn vulkan_results_are_named_by_ash() {
        let e = Error::Vulkan(VulkanError::Call { function: "vkAllocateMemory", code: -2 });
        assert_eq!(e.to_string(), "vkAllocateMemory failed: VkResult -2 (VK_ERROR_OUT_OF_DEVICE_MEMORY)");
        let e = Error::Vulkan(VulkanError::Call { function: "vkGetMemoryFdKHR", code: -1000072003 });
        assert!(e.to_string().ends_with("(VK_ERROR_INVALID_EXTERNAL_HANDLE)"), "{e}");
    }
}
