"""Type stubs of the extension module (see the classes' docstrings for the rules)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Iterator, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

USER_HEADER_SIZE: int
MAX_FRAMES: int
MAX_CONSUMERS: int

def mock_handle_counts(*, settle: float = 10.0) -> dict[str, int]:
    """Live handles of the mock NvSci library in this process: ``modules``, ``attr_lists``,
    ``objects``, ``descs``, ``wait_contexts``, ``fences``, ``endpoints``; read once the CUDA
    teardown of dropped imports ran (waiting up to ``settle`` seconds for it)."""

# Anything a CUDA producer writes from: a numpy array, or a CUDA array (``__dlpack__`` or
# ``__cuda_array_interface__``: torch, CuPy, Numba, JAX).
ArrayLike = Any

class FrameFormat:
    """What one frame of a stream holds."""

    @staticmethod
    def nv12(width: int, height: int) -> FrameFormat: ...
    @staticmethod
    def nv12_block_linear(width: int, height: int) -> FrameFormat: ...
    @staticmethod
    def rgba(width: int, height: int) -> FrameFormat: ...
    @staticmethod
    def raw(size: int) -> FrameFormat: ...
    @property
    def kind(self) -> Literal["nv12", "rgba", "raw"]: ...
    @property
    def width(self) -> Optional[int]: ...
    @property
    def height(self) -> Optional[int]: ...

class ConsumerDesc:
    """One consumer: engine ``"cpu"`` or ``"cuda"``, mode ``"fifo"`` or ``"mailbox"``, a
    limit on the frames it holds and has queued (``None``: the stream's frames), and where it
    lives: this process, or the process at the other end of ``endpoint`` (the producer's end
    of an NvSciIpc channel), which attaches with ``Consumer.connect``."""

    engine: str
    mode: str
    limit: Optional[int]
    endpoint: Optional[str]
    def __init__(
        self, engine: str = "cpu", mode: str = "fifo", limit: Optional[int] = None, endpoint: Optional[str] = None
    ) -> None: ...

class RemoteSeat:
    """A seat for a consumer in another process, as the producer sees it."""

    consumer: int
    endpoint: str
    attached: bool
    attaches: int
    refused: int
    last_refusal: Optional[str]
    left: int
    lost: int

class Backend:
    """Where a stream's frames and fences come from."""

    @staticmethod
    def mock() -> Backend: ...
    @staticmethod
    def by_name(name: str) -> Backend: ...
    @property
    def kind(self) -> str: ...
    @property
    def has_cuda(self) -> bool: ...
    def explain(self) -> str: ...
    def flush_teardown(self, timeout: float = 10.0) -> int: ...
    def stream(
        self,
        format: FrameFormat,
        *,
        consumers: Optional[Sequence[ConsumerDesc]] = None,
        reserve: Optional[Sequence[ConsumerDesc]] = None,
        frames: int = 4,
        timeout: float = 2.0,
        gpu_cache: bool = True,
        producer: Literal["cpu", "cuda"] = "cpu",
    ) -> Tuple[Producer, list[Consumer]]: ...

class Plane:
    """One plane of a held frame, in place: ``numpy()`` / ``__array_interface__`` (CPU),
    ``__cuda_array_interface__`` (CUDA), ``__dlpack__`` / ``__dlpack_device__`` (both)."""

    @property
    def name(self) -> Literal["luma", "chroma", "rgba", "data"]: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> Literal["uint8"]: ...
    @property
    def writable(self) -> bool: ...
    @property
    def device(self) -> Literal["cpu", "cuda"]: ...
    @property
    def __array_interface__(self) -> dict[str, Any]: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def numpy(self) -> npt.NDArray[np.uint8]: ...

class Frame:
    """A frame a consumer holds; a context manager that releases it on exit."""

    def release(self, stream: Any = None) -> None: ...
    def __enter__(self) -> Frame: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    @property
    def held(self) -> bool: ...
    @property
    def sequence(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def capture_time(self) -> int: ...
    @property
    def user_header(self) -> bytes: ...
    @property
    def consumer(self) -> int: ...
    @property
    def planes(self) -> list[Plane]: ...
    @property
    def luma(self) -> Plane: ...
    @property
    def chroma(self) -> Plane: ...
    @property
    def rgba(self) -> Plane: ...
    @property
    def data(self) -> Plane: ...

class Consumer:
    """A consumer of a stream: ``for frame in consumer:``."""

    @staticmethod
    def connect(
        backend: Backend,
        endpoint: str,
        format: FrameFormat,
        desc: Optional[ConsumerDesc] = None,
        *,
        timeout: float = 5.0,
    ) -> Consumer: ...
    def acquire(self) -> Optional[Frame]: ...
    def __iter__(self) -> Iterator[Frame]: ...
    def __next__(self) -> Frame: ...
    def close(self) -> None: ...
    def __enter__(self) -> Consumer: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def id(self) -> int: ...
    @property
    def mode(self) -> Literal["fifo", "mailbox"]: ...
    @property
    def engine(self) -> Literal["cpu", "cuda"]: ...
    @property
    def delivered(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def last_sequence(self) -> Optional[int]: ...
    @property
    def timeout(self) -> float: ...
    @property
    def format(self) -> FrameFormat: ...

class ProducerFrame:
    """A frame the producer holds; a context manager that presents it on a clean exit and
    discards it when the block raises."""

    def write(
        self,
        array: Optional[ArrayLike] = None,
        *,
        luma: Optional[ArrayLike] = None,
        chroma: Optional[ArrayLike] = None,
    ) -> None: ...
    def present(self) -> None: ...
    def discard(self) -> None: ...
    def __enter__(self) -> ProducerFrame: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException] = None,
        tb: Optional[TracebackType] = None,
    ) -> bool: ...
    @property
    def held(self) -> bool: ...
    @property
    def sequence(self) -> int: ...
    @property
    def index(self) -> int: ...
    capture_time: Optional[int]
    user_header: bytes
    @property
    def planes(self) -> list[Plane]: ...
    @property
    def luma(self) -> Plane: ...
    @property
    def chroma(self) -> Plane: ...
    @property
    def rgba(self) -> Plane: ...
    @property
    def data(self) -> Plane: ...

class Producer:
    """The producing side of a stream (on the CPU, or on a CUDA stream)."""

    def acquire(self) -> ProducerFrame: ...
    def present(self, frame: ProducerFrame) -> None: ...
    def send(
        self,
        array: Optional[ArrayLike] = None,
        *,
        luma: Optional[ArrayLike] = None,
        chroma: Optional[ArrayLike] = None,
        capture_time: Optional[int] = None,
        user_header: Optional[bytes] = None,
    ) -> int: ...
    def attach(self, desc: ConsumerDesc) -> Consumer: ...
    @property
    def remote_seats(self) -> list[RemoteSeat]: ...
    def consumer_stats(self, consumer: int) -> Optional[dict[str, Any]]: ...
    @property
    def engine(self) -> Literal["cpu", "cuda"]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Producer: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def presented(self) -> int: ...
    @property
    def format(self) -> FrameFormat: ...
    @property
    def timeout(self) -> float: ...

def nv12_to_rgba(
    src: Union[Frame, ArrayLike],
    out: ArrayLike,
    *,
    stream: Any = None,
    sum: Optional[ArrayLike] = None,
) -> None:
    """Converts an NV12 image to RGBA (BT.601 studio range, integer arithmetic: the crate's
    ``nvsci::convert``) into ``out``, ``(height, width, 4)`` ``uint8`` with packed rows.

    ``src`` is a consumer's held ``Frame`` (NV12, pitch-linear), converted in place, or an NV12
    image array ``(height * 3 // 2, width)`` ``uint8`` (luma rows, then U, V rows). A CUDA
    frame or array runs the crate's CUDA kernel (the Rust consumer's) into a CUDA array of its
    device (torch, CuPy), enqueued on ``stream`` (``None`` or 0: the legacy default stream; an
    int ``CUstream``, or an object with ``__cuda_stream__`` or ``cuda_stream``): the frame's
    present fence is waited before it and its release ordered after it, as with
    ``__dlpack__(stream=...)``; the arrays are kept alive until it ran. A CPU frame or a numpy
    image converts on the CPU into a numpy array. ``sum`` (one ``uint64``/``int64`` element
    on the same device) gets R + G + B of the image added.

    Raises ``InvalidArgument`` naming ``src``, ``out``, ``stream`` or ``sum``;
    ``FrameReleased`` for a released frame."""
