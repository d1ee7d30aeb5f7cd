"""What a user's function returns, read as a numpy array without importing its framework.

numpy reads anything with ``__array__`` (CPU torch tensors, JAX arrays) or ``__dlpack__``, but
not bfloat16, which it has no type for: a torch bfloat16 tensor refuses ``__array__``, and a
numpy array of ``ml_dtypes.bfloat16`` (what JAX returns) has a type numpy cannot compute with.
Both are read here as float32 (a bfloat16 number is the top 16 bits of a float32 one), from the
array's own bits: a DLPack capsule is read with ``ctypes`` (its C layout is the DLPack
standard's), so no framework is imported. The format the values came in is kept, since it says
how finely the user's code rounds.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["Returned", "read_returned"]

#: DLPack's type code of bfloat16, and of the CPU device.
_DL_BFLOAT = 4
_DL_CPU = 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_DLManagedTensor._fields_ = [
    ("dl_tensor", _DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))),
]


class Returned:
    """A user's return value read as a numpy array (``__array__``), with the format it came in.

    Attributes
    ----------
    array : numpy.ndarray
        float32 for bfloat16 values, else as numpy reads them.
    format : str
        ``bfloat16``, or the array's dtype name.
    """

    def __init__(self, array: np.ndarray, fmt: str) -> None:
        self.array = array
        self.format = fmt

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.array if dtype is None else self.array.astype(dtype)


def _bfloat16_bits(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 numbers given as their uint16 bits."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _from_capsule(capsule: Any) -> np.ndarray | None:
    """A CPU bfloat16 DLPack tensor copied to float32 (None for any other tensor)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    pointer = get(capsule, b"dltensor")
    managed = ctypes.cast(pointer, ctypes.POINTER(_DLManagedTensor)).contents
    t = managed.dl_tensor
    try:
        if (t.dtype.code, t.dtype.bits, t.dtype.lanes) != (_DL_BFLOAT, 16, 1):
            return None
        if t.device.device_type != _DL_CPU:
            return None
        shape = [int(t.shape[i]) for i in range(t.ndim)]
        strides = [int(t.strides[i]) for i in range(t.ndim)] if t.strides else None
        if strides is None:
            strides = [int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(t.ndim)]
        if any(s < 0 for s in strides):
            return None
        if 0 in shape:
            return np.zeros(shape, dtype=np.float32)
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
        start = (t.data or 0) + int(t.byte_offset)
        flat = np.ctypeslib.as_array(ctypes.cast(start, ctypes.POINTER(ctypes.c_uint16)), (extent,))
        view = np.lib.stride_tricks.as_strided(flat, shape, [2 * s for s in strides])
        return _bfloat16_bits(np.array(view, copy=True))
    finally:
        rename = ctypes.pythonapi.PyCapsule_SetName
        rename.restype, rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
        rename(capsule, b"used_dltensor")
        if managed.deleter:
            managed.deleter(ctypes.pointer(managed))


def read_returned(out: Any) -> Any:
    """``out`` as a :class:`Returned` when it holds bfloat16 values (or is a numpy array or
    reads as one), else ``out`` itself, for the caller to read and refuse with its own words.

    Never raises: a value this cannot read is the caller's to explain.
    """
    try:
        if isinstance(out, np.ndarray):
            if out.dtype.name == "bfloat16":  # ml_dtypes (JAX's numpy arrays)
                return Returned(_bfloat16_bits(out.view(np.uint16)), "bfloat16")
            return Returned(out, out.dtype.name)
        if str(getattr(out, "dtype", "")).endswith("bfloat16") and hasattr(out, "__dlpack__"):
            array = _from_capsule(out.__dlpack__())
            if array is not None:
                return Returned(array, "bfloat16")
            return out
        if hasattr(out, "__array__"):
            array = np.asarray(out)
            return (
                read_returned(array)
                if array.dtype.name == "bfloat16"
                else Returned(array, array.dtype.name)
            )
        if hasattr(out, "__dlpack__"):
            array = np.from_dlpack(out)
            return Returned(array, array.dtype.name)
    except Exception:  # noqa: BLE001 - the caller reads it again and says what is wrong
        return out
    return out
