"""Encoding TMA tensor maps (autotune.families.plan.TensorMap) for a bound buffer.

A tensor map holds its tensor's global address, so it is made when a plan's buffers are bound,
through the driver's cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col (libcuda, through ctypes:
CuPy does not wrap them), and passed to the kernel by value. `arguments` turns a map and an
address into the driver call's arguments and checks the driver's rules first
(families/plan.py's check_tensor_map, and the address's alignment), so that a plan that breaks
one fails with a sentence rather than CUDA_ERROR_INVALID_VALUE.
"""

from __future__ import annotations

import ctypes

from autotune.families.plan import (
    TMA_DATA_TYPES,
    TMA_SWIZZLES,
    TensorMap,
    TensorMapError,
    check_tensor_map,
)

MAP_BYTES = 128  # sizeof(CUtensorMap)
MAP_ALIGN = 64  # the driver writes the map only at a 64-byte aligned address

# Enumerations of cuda.h (CUtensorMapL2promotion, CUtensorMapInterleave, CUtensorMapFloatOOBfill);
# the data types and swizzles are families/plan.py's, beside the rules a map obeys.
L2_PROMOTION_128B = 2  # lines fetched into L2 128 bytes at a time
INTERLEAVE_NONE = 0
OOB_FILL_ZEROS = 0  # elements outside the tensor land as zeros
# Encoded maps a prepared launch keeps per tensor-map argument, one per buffer address: a layer
# of a model sees its input at a few addresses, which the caching allocator hands back in turn.
MAPS_PER_SLOT = 8


def arguments(spec: TensorMap, address: int) -> tuple:
    """The encode call's arguments after the map (data type, rank, address, extents, strides,
    then box or corners and copy shape, element strides, interleave, swizzle, L2 promotion,
    fill), as ctypes values; raises TensorMapError where the driver's rules are broken."""
    check_tensor_map(spec)
    if address % 16:
        raise TensorMapError(
            f"tensor map of {spec.buffer}: address {address:#x} is not 16-byte aligned"
        )
    rank = len(spec.dims)
    common = (
        TMA_DATA_TYPES[spec.dtype],
        rank,
        ctypes.c_void_p(address),
        (ctypes.c_uint64 * rank)(*spec.dims),
        (ctypes.c_uint64 * (rank - 1))(*spec.strides),
    )
    tail = (
        (ctypes.c_uint32 * rank)(*spec.element_strides),
        INTERLEAVE_NONE,
        TMA_SWIZZLES[spec.swizzle_bytes],
        L2_PROMOTION_128B,
        OOB_FILL_ZEROS,
    )
    if not spec.im2col:
        return (*common, (ctypes.c_uint32 * rank)(*spec.box), *tail)
    lower, upper = spec.corners
    channels, pixels = spec.box
    corner = ctypes.c_int * (rank - 2)
    return (*common, corner(*lower), corner(*upper), channels, pixels, *tail)


class EncodedMap:
    """One encoded CUtensorMap in host memory, 64-byte aligned; `pointer` is its address, what a
    launcher's argument list points at (the driver copies the 128 bytes at each launch)."""

    __slots__ = ("_storage", "pointer")

    def __init__(self, spec: TensorMap, address: int, args: tuple | None = None) -> None:
        self._storage = ctypes.create_string_buffer(MAP_BYTES + MAP_ALIGN)
        start = ctypes.addressof(self._storage)
        self.pointer = start + (-start % MAP_ALIGN)
        _encode(spec, address, self.pointer, args)

    @property
    def value(self) -> bytes:
        return ctypes.string_at(self.pointer, MAP_BYTES)


class MapSlot:
    """A tensor-map argument of a launch prepared once and called many times (the runtime's
    driver launcher): the encode call's arguments are made and checked once, and a map is
    encoded once per buffer address and kept (the last MAPS_PER_SLOT addresses), so that a call
    whose buffer sits where an earlier one's did, as PyTorch's caching allocator hands the same
    blocks back forward after forward, encodes nothing. The driver copies the map's bytes at
    each launch (and a captured graph at capture), so the argument list may point at any of
    them."""

    __slots__ = ("spec", "_arguments", "_maps")

    def __init__(self, spec: TensorMap) -> None:
        self.spec = spec
        self._arguments = arguments(spec, 0)  # the rules that do not depend on the address
        self._maps: dict[int, EncodedMap] = {}

    def bind(self, address: int) -> int:
        """The pointer of the map encoded for `address` (encoding it on its first call)."""
        found = self._maps.get(address)
        if found is None:
            if address % 16:
                raise TensorMapError(
                    f"tensor map of {self.spec.buffer}: address {address:#x} is not 16-byte aligned"
                )
            if len(self._maps) >= MAPS_PER_SLOT:
                del self._maps[next(iter(self._maps))]  # the oldest
            args = (*self._arguments[:2], ctypes.c_void_p(address), *self._arguments[3:])
            found = self._maps[address] = EncodedMap(self.spec, address, args)
        return found.pointer


def _encode(spec: TensorMap, address: int, pointer: int, args: tuple | None = None) -> None:
    """Encode `spec` for `address` into the 128 bytes at `pointer` (`args`: the encode call's
    arguments for that address when the caller made them already)."""
    if args is None:
        args = arguments(spec, address)
    driver = _driver()
    encode = driver.cuTensorMapEncodeIm2col if spec.im2col else driver.cuTensorMapEncodeTiled
    code = encode(ctypes.c_void_p(pointer), *args)
    if code:
        refused = _error_name(code)
        raise TensorMapError(f"tensor map of {spec.buffer}: the driver refused it ({refused})")


_DRIVER = None


def _driver():
    global _DRIVER
    if _DRIVER is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
        lib.cuTensorMapEncodeIm2col.restype = ctypes.c_int
        _DRIVER = lib
    return _DRIVER


def _error_name(code: int) -> str:
    name = ctypes.c_char_p()
    _driver().cuGetErrorName(code, ctypes.byref(name))
    return name.value.decode() if name.value else f"error {code}"
