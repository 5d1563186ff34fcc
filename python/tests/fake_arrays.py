"""Objects that claim to be CUDA arrays, for the refusals of CPU-only calls (no GPU needed)."""


class CudaArrayInterface:
    """An object that says it is a CUDA array (its pointer is never read)."""

    def __init__(self, shape, typestr="|u1"):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (0x1000, False),
            "strides": None,
            "version": 3,
        }


class DlpackCuda:
    """An object whose DLPack device is CUDA device 0; exporting it fails the test, since the
    call must refuse it before that."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        raise AssertionError("a CUDA array was exported where the call should have refused it first")
