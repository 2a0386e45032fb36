"""How each problem dtype is stored in device arrays: array types, the NaN poison, BF16 rounding.

FP32 and TF32 store float32, FP16 float16, BF16 its 16 bits in uint16 arrays (CuPy has no
bfloat16 type). The host-side functions here are NumPy; the CUDA snippets are compiled by the
GPU session, the only module that builds CuPy kernels from them.
"""

from __future__ import annotations

import numpy as np

from autotune.model.precision import precision_of

# Array element type (NumPy/CuPy name) per storage type of model/precision.py.
ARRAY_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "uint16"}
BF16_NAN = 0x7FC0  # the quiet NaN: exponent all ones, top mantissa bit set

# CUDA: the FP32 value x rounded to BF16 bits y, to nearest, ties to even (NaN stays a NaN).
BF16_ROUND_CUDA = (
    "unsigned int u = __float_as_uint(x);"
    "y = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)0x7FC0 :"
    " (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)"
)

# CUDA: a stored element `y` (of the array type above) as a double.
AS_DOUBLE_CUDA = {
    "float32": "(double)y",
    "float16": "(double)(float)y",
    "bfloat16": "(double)__uint_as_float(((unsigned int)y) << 16)",
}


def storage_of(dtype: str) -> str:
    """The storage type of a problem dtype: float32, float16 or bfloat16."""
    return precision_of(dtype).storage


def array_dtype(dtype: str) -> str:
    """The element type of a dtype's device arrays."""
    return ARRAY_DTYPES[storage_of(dtype)]


def nan_fill(dtype: str) -> np.generic:
    """The value output buffers are poisoned with: a NaN of the storage type (as its bits for
    BF16)."""
    storage = storage_of(dtype)
    if storage == "bfloat16":
        return np.uint16(BF16_NAN)
    return np.dtype(ARRAY_DTYPES[storage]).type(np.nan)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """FP32 values rounded to BF16 (nearest, ties to even), as uint16 bits; NaN -> 0x7FC0.
    The same rounding as BF16_ROUND_CUDA, for the host and its tests."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, np.uint16(BF16_NAN), rounded)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """BF16 bits (uint16) as the float32 values they hold (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    """FP32 values as a dtype stores them (host arrays)."""
    storage = storage_of(dtype)
    if storage == "bfloat16":
        return bf16_bits(values)
    return np.asarray(values, dtype=np.float32).astype(ARRAY_DTYPES[storage])


def stored_values(array: np.ndarray, dtype: str) -> np.ndarray:
    """A host copy of a stored array as float64 values (BF16 bits decoded)."""
    if storage_of(dtype) == "bfloat16":
        return bf16_values(array).astype(np.float64)
    return np.asarray(array).astype(np.float64)


__all__ = [
    "ARRAY_DTYPES",
    "AS_DOUBLE_CUDA",
    "BF16_NAN",
    "BF16_ROUND_CUDA",
    "array_dtype",
    "bf16_bits",
    "bf16_values",
    "nan_fill",
    "storage_of",
    "stored_values",
    "to_storage",
]
