"""What kernels return, read without their framework: bfloat16 through DLPack (a torch
bfloat16 tensor refuses ``__array__``), and ``module_kernel`` importing torch only when called."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np
import pytest

from varcheck.core.arrays import Returned, _DLManagedTensor, read_returned
from varcheck.errors import VarcheckError


class _BFloat16Tensor:
    """A CPU bfloat16 tensor as a framework exports it: a ``dltensor`` capsule over its bits."""

    dtype = "torch.bfloat16"

    def __init__(self, bits: np.ndarray, strides: tuple[int, ...] | None = None) -> None:
        self.bits = bits  # kept alive while the capsule points at it
        self.shape = (ctypes.c_int64 * bits.ndim)(*bits.shape)
        self.strides = None if strides is None else (ctypes.c_int64 * bits.ndim)(*strides)

    def __array__(self, dtype=None, copy=None):  # noqa: ANN001, ANN204
        raise TypeError("Got unsupported ScalarType BFloat16")

    def __dlpack__(self, **kwargs):  # noqa: ANN003, ANN204
        managed = _DLManagedTensor()
        t = managed.dl_tensor
        t.data = self.bits.ctypes.data
        t.device.device_type, t.ndim = 1, self.bits.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 4, 16, 1
        t.shape = self.shape
        t.strides = self.strides
        self.managed = managed  # no deleter: this object owns the memory
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = (
            ctypes.py_object,
            [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p],
        )
        return new(ctypes.addressof(managed), b"dltensor", None)


def _bits(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def test_a_bfloat16_tensor_is_read_as_float32_through_dlpack() -> None:
    values = np.array([[0.5, 0.25, 1.0], [0.125, 3.0, -2.0]], np.float32)
    out = read_returned(_BFloat16Tensor(_bits(values)))
    assert isinstance(out, Returned) and out.format == "bfloat16"
    assert out.array.dtype == np.float32 and np.array_equal(out.array, values)


def test_a_strided_bfloat16_tensor_keeps_its_layout() -> None:
    """A transposed tensor: strides (1, 2) in elements over the same memory."""
    values = np.array([[0.5, 0.25], [1.0, 2.0]], np.float32)
    out = read_returned(_BFloat16Tensor(_bits(values), strides=(1, 2)))
    assert np.array_equal(out.array, values.T)


def test_what_cannot_be_read_is_left_to_the_caller() -> None:
    class Broken:
        def __array__(self, dtype=None, copy=None):  # noqa: ANN001, ANN204
            raise RuntimeError("Can't call numpy() on Tensor that requires grad.")

    broken = Broken()
    assert read_returned(broken) is broken and read_returned((1, 2)) == (1, 2)


def test_module_kernel_imports_torch_only_when_called() -> None:
    code = (
        "import sys, varcheck.kernels.modules, varcheck\n"
        "assert 'torch' not in sys.modules\n"
        "try:\n"
        "    varcheck.module_kernel(object())\n"
        "except varcheck.VarcheckError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if "needs torch" not in out.stdout:  # torch is installed here: it refuses the object
        assert "takes a torch.nn.Module" in out.stdout
    with pytest.raises(VarcheckError):
        import varcheck

        varcheck.module_kernel(object())


def test_a_user_function_returning_bfloat16_is_read_as_float32() -> None:
    """Samplers and kernels share the reading: a bfloat16 return is values, not a refusal."""
    from varcheck.core.user_code import call_user

    values = np.array([0.5, -1.25, 3.0], np.float32)
    tensor = _BFloat16Tensor(_bits(values))
    out, array = call_user(lambda: tensor, what="sampler s")
    assert out is tensor and array.dtype == np.float32 and np.array_equal(array, values)
