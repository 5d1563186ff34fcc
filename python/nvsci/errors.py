"""The exceptions of the nvsci package, one class per error of the crate's layers.

Every exception is an :class:`Error`; its typed fields are attributes (``None`` where the
crate gave none). Argument errors are also ``ValueError``; timeouts also ``TimeoutError``;
DLPack export refusals also ``BufferError`` (what the array API's ``__dlpack__`` raises).
"""

from __future__ import annotations

from typing import Any


class Error(Exception):
    """Base of every exception the package raises."""

    def __init__(self, message: str = "", **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for name, value in fields.items():
            setattr(self, name, value)


# NvSci layer -------------------------------------------------------------------------------


class NvSciError(Error):
    """An NvSci call failed: ``function``, ``code`` (the NvSciError value), ``code_name``."""

    function: str
    code: int
    code_name: str | None


class RefusedError(NvSciError):
    """An NvSci call refused its arguments for a documented reason: ``culprit`` (the rule),
    ``key`` (the attribute key involved, if any) and ``argument`` (the C argument)."""

    culprit: str
    key: str | None
    argument: str


class AttrRefused(NvSciError):
    """An attribute list refused ``key`` set to ``value``."""

    key: str
    value: str


class ReconcileConflict(NvSciError):
    """Reconciliation failed: ``keys`` are the conflicting attributes, ``dump`` the library's
    description."""

    keys: list
    dump: str


class LoadError(Error):
    """The NvSci libraries could not be loaded."""


class UnsupportedError(Error):
    """Not supported here: ``what`` and ``reason`` (the crate's UnsupportedReason variant)."""

    what: str
    reason: str


class FenceTimeout(Error, TimeoutError):
    """A CPU wait on a fence ran out of time: ``function``, ``timeout_us``."""

    function: str
    timeout_us: int


# Arguments and the package's own use rules ------------------------------------------------


class InvalidArgument(Error, ValueError):
    """An argument was refused: ``name`` names it, ``reason`` says why."""

    name: str
    reason: str


class FrameReleased(InvalidArgument):
    """A frame (or a plane of it) used after its release, its present, or the end of its
    stream (``name`` is ``"frame"``)."""


class StreamClosed(InvalidArgument):
    """A producer or consumer used after ``close()`` (``name`` says which)."""


class ExportError(InvalidArgument, BufferError):
    """A DLPack export refused: ``name`` is the argument (``plane`` exported twice,
    ``stream`` of another device, ``dl_device``, ``copy``, ``max_version``)."""


# CUDA and Vulkan layers -------------------------------------------------------------------


class CudaError(Error):
    """A CUDA driver call failed: ``function``, ``code`` (the CUresult), ``code_name``."""

    function: str
    code: int
    code_name: str


class CudaUnavailable(CudaError):
    """No usable CUDA driver or device: ``reason``."""

    reason: str


class VulkanError(Error):
    """A Vulkan failure."""


# Stream (ring) layer ----------------------------------------------------------------------


class RingError(Error):
    """A failure of the stream."""


class RingTimeout(RingError, TimeoutError):
    """A stream wait ran out of time: ``waited_for`` is ``free_slot``, ``release_fence``,
    ``present_fence``, ``frame`` or ``remote_release``; ``slot``, ``sequence``, ``consumer``,
    ``holders`` (consumer indices) and ``endpoint`` where they apply; ``timeout`` in
    seconds."""

    waited_for: str
    slot: int | None
    sequence: int | None
    consumer: int | None
    holders: list | None
    endpoint: str | None
    timeout: float


class StreamEnded(RingError):
    """The producer in another process ended the stream: ``endpoint``."""

    endpoint: str


class NoSeat(RingError):
    """No vacant seat fits the consumer that asked to attach: ``fitting`` seats exist for
    its engine, all taken."""

    fitting: int


class AttachRefused(RingError):
    """The producer at the other end of ``endpoint`` refused this consumer's attach: ``field``
    names what did not fit the seat (``format``, ``engine``, ``limit``, ``mode``, ``stream``,
    ``generation`` or ``message``). The seat stays vacant for the next attach."""

    endpoint: str
    field: str


# IPC layer --------------------------------------------------------------------------------


class IpcError(Error):
    """An NvSciIpc failure: ``endpoint``."""

    endpoint: str


class PeerGone(IpcError):
    """The peer process went away: ``during`` says what was being done."""

    during: str


class IpcTimeout(IpcError, TimeoutError):
    """An IPC wait ran out of time: ``during``, ``timeout_us``."""

    during: str
    timeout_us: int


class EndpointError(IpcError):
    """An endpoint could not be used: ``reason``, ``code`` (the NvSciError value, if any)."""

    reason: str
    code: int | None


__all__ = [
    "Error",
    "NvSciError",
    "RefusedError",
    "AttrRefused",
    "ReconcileConflict",
    "LoadError",
    "UnsupportedError",
    "FenceTimeout",
    "InvalidArgument",
    "FrameReleased",
    "StreamClosed",
    "ExportError",
    "CudaError",
    "CudaUnavailable",
    "VulkanError",
    "RingError",
    "RingTimeout",
    "StreamEnded",
    "NoSeat",
    "AttachRefused",
    "IpcError",
    "PeerGone",
    "IpcTimeout",
    "EndpointError",
]
