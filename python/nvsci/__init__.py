"""nvsci: frames of NvSciBuf/NvSciSync streams (or of the mock NvSci library) in Python,
without copies.

    import nvsci
    producer, (consumer,) = nvsci.Backend.mock().stream(nvsci.FrameFormat.nv12(64, 32))
    producer.send(numpy.zeros((48, 64), numpy.uint8))
    producer.close()
    for frame in consumer:
        with frame:
            luma = frame.luma.numpy()          # read-only view of the frame in place

CUDA frames export their planes through ``__dlpack__`` / ``__dlpack_device__`` and
``__cuda_array_interface__``: ``torch.from_dlpack(frame.luma)``. ``nv12_to_rgba(frame, out)``
runs the crate's NV12 -> RGBA conversion (its CUDA kernel on a CUDA frame) on a frame in place.
"""

from ._nvsci import (
    MAX_CONSUMERS,
    MAX_FRAMES,
    USER_HEADER_SIZE,
    Backend,
    Consumer,
    ConsumerDesc,
    Frame,
    FrameFormat,
    Plane,
    Producer,
    ProducerFrame,
    RemoteSeat,
    mock_handle_counts,
    nv12_to_rgba,
)
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors

__all__ = [
    "MAX_CONSUMERS",
    "MAX_FRAMES",
    "USER_HEADER_SIZE",
    "Backend",
    "Consumer",
    "ConsumerDesc",
    "Frame",
    "FrameFormat",
    "Plane",
    "Producer",
    "ProducerFrame",
    "RemoteSeat",
    "mock_handle_counts",
    "nv12_to_rgba",
    *_errors,
]
