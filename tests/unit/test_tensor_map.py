"""Tensor maps without a GPU: the driver call's arguments, and the driver's rules checked before
the call (the encoding itself runs in tests/gpu/test_gpu_tc_wgmma.py)."""

from __future__ import annotations

import ctypes

import pytest

from autotune.families.plan import Launch, TensorMap
from autotune.gpu.tensor_map import TensorMapError, arguments

FILTERS = TensorMap(
    "w", "bfloat16", dims=(64, 9, 100), strides=(128, 9 * 128), box=(64, 1, 96),
    element_strides=(1, 1, 1),
)  # fmt: skip
INPUT = TensorMap(
    "x", "float32", dims=(32, 29, 29, 3), strides=(128, 29 * 128, 29 * 29 * 128), box=(32, 128),
    element_strides=(1, 2, 2, 1), corners=((0, 0), (-4, -4)),
)  # fmt: skip
ADDRESS = 0x7F0000000200


def test_a_tiled_map_passes_extents_strides_and_box_innermost_first() -> None:
    dtype, rank, address, dims, strides, box, elem, interleave, swizzle, l2, fill = arguments(
        FILTERS, ADDRESS
    )
    assert (dtype, rank, address.value) == (9, 3, ADDRESS)  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    assert list(dims) == [64, 9, 100] and list(strides) == [128, 1152]
    assert isinstance(dims, ctypes.Array) and dims._type_ is ctypes.c_uint64
    assert list(box) == [64, 1, 96] and list(elem) == [1, 1, 1]
    assert (interleave, swizzle, l2, fill) == (0, 3, 2, 0)  # none, 128 B, 128 B lines, zeros


def test_an_im2col_map_passes_its_corners_and_copy_shape() -> None:
    args = arguments(INPUT, ADDRESS)
    assert args[0] == 7 and args[1] == 4  # FLOAT32, rank 4
    lower, upper, channels, pixels, elem = args[5:10]
    assert list(lower) == [0, 0] and list(upper) == [-4, -4] and lower._type_ is ctypes.c_int
    assert (channels, pixels) == (32, 128) and list(elem) == [1, 2, 2, 1]


@pytest.mark.parametrize(
    ("changes", "address", "message"),
    [
        ({}, ADDRESS + 8, "not 16-byte aligned"),
        ({"strides": (100, 900)}, ADDRESS, "multiples of 16"),
        ({"box": (128, 1, 96)}, ADDRESS, "256 bytes"),  # wider than the 128-byte swizzle
        ({"box": (64, 1, 512)}, ADDRESS, "outside 1..256"),
        ({"dtype": "float64"}, ADDRESS, "no TMA data type"),
        ({"strides": (128,)}, ADDRESS, "need 2 strides"),
        ({"element_strides": (1, 9, 1)}, ADDRESS, "1 to 8"),
        ({"swizzle_bytes": 256}, ADDRESS, "no 256-byte swizzle"),
        ({"corners": ((0,), (-4,))}, ADDRESS, "a corner per spatial dimension"),
    ],
)
def test_what_the_driver_would_refuse_is_a_sentence(changes, address, message) -> None:
    spec = FILTERS if "corners" not in changes else INPUT
    fields = {name: getattr(spec, name) for name in spec.__slots__} | changes
    with pytest.raises(TensorMapError, match=message):
        arguments(TensorMap(**fields), address)


class FakeEncoded:
    """Stands in for the driver's encoding: records the address a map was made for."""

    def __init__(self, spec: TensorMap, address: int) -> None:
        self.spec, self.address, self.pointer = spec, address, 0x1000


def test_binding_encodes_each_map_for_its_buffers_address(monkeypatch) -> None:
    from autotune.gpu import launch

    monkeypatch.setattr(launch, "EncodedMap", FakeEncoded)
    plan = Launch("k", grid=(1, 1, 1), block=(128, 1, 1), args=("x", 7, INPUT, FILTERS))
    ((fn, grid, block, spec, smem),) = launch.prepare((plan,), {"k": "function"})
    assert spec[2] is INPUT and spec[3] is FILTERS  # kept for binding, not made int32
    ((_, _, _, args, _),) = launch.bind(((fn, grid, block, spec, smem),), {"x": 0x200, "w": 0x400})
    assert args[:2] == (0x200, 7)
    assert [(a.encoded.spec, a.encoded.address) for a in args[2:]] == [
        (INPUT, 0x200),
        (FILTERS, 0x400),
    ]


def test_the_runtimes_driver_launch_encodes_a_map_once_per_address_it_sees(monkeypatch) -> None:
    from types import SimpleNamespace

    import autotune.gpu.launch as launch
    import autotune.gpu.tensor_map as tensor_map

    encoded, launched = [], []
    monkeypatch.setattr(
        tensor_map, "_encode", lambda spec, address, at, args=None: encoded.append(address)
    )

    def launch_kernel(fn, *args):
        params = (ctypes.c_void_p * 2).from_address(args[-2])
        launched.append(params[1])  # the map's address in the argument list

    monkeypatch.setattr(launch, "_launch_kernel", lambda: (launch_kernel, RuntimeError))
    plan = Launch("k", grid=(1, 1, 1), block=(128, 1, 1), args=("x", INPUT))
    op = launch.DriverLaunch(SimpleNamespace(ptr=1), plan)
    for address in (0x1000, 0x1000, 0x2000, 0x1000, 0x2000):
        op({"x": address}, 0)
    # Once per address, not per call: a layer's input alternates between a few blocks.
    assert encoded == [0x1000, 0x2000]
    assert launched[0] == launched[1] == launched[3] != launched[2] == launched[4]
    assert all(m % 64 == 0 for m in launched)  # where the driver writes maps
    # The oldest is dropped past MAPS_PER_SLOT addresses, and encoded again when it returns.
    for k in range(tensor_map.MAPS_PER_SLOT):
        op({"x": 0x10000 + 0x100 * k}, 0)
    op({"x": 0x1000}, 0)
    assert encoded.count(0x1000) == 2 and encoded.count(0x2000) == 1
    with pytest.raises(TensorMapError, match="not 16-byte aligned"):
        op({"x": 0x1008}, 0)


def test_the_driver_launch_hands_cuLaunchKernel_ints_and_argument_storage_made_once(
    monkeypatch,
) -> None:
    """CuPy's compiled binding of cuLaunchKernel gets the function, the geometry, the call's
    stream and the address of an argument list made once, whose buffer slots hold each call's
    addresses; a failure is a DriverError naming the driver's error."""
    from types import SimpleNamespace

    import autotune.gpu.launch as launch

    class Refused(Exception):
        pass

    calls = []

    def launch_kernel(*args):
        calls.append(args)
        if args[8] == 0xBAD:
            raise Refused("CUDA_ERROR_INVALID_CONTEXT: invalid device context")

    monkeypatch.setattr(launch, "_launch_kernel", lambda: (launch_kernel, Refused))
    plan = Launch("k", grid=(7, 2, 1), block=(128, 1, 1), args=("y", 5), smem_bytes=4096)
    op = launch.DriverLaunch(SimpleNamespace(ptr=0x7F00DEAD0000), plan)
    for stream, y in ((0x5000, 0x1000), (0x5000, 0x2000), (0x6000, 0x3000)):
        op({"y": y}, stream)
        fn, *dims, handle, params, extra = calls[-1]
        assert all(type(a) is int for a in calls[-1])
        assert (fn, dims, handle, extra) == (0x7F00DEAD0000, [7, 2, 1, 128, 1, 1, 4096], stream, 0)
        pointers = (ctypes.c_void_p * 2).from_address(params)
        slot = ctypes.c_uint64.from_address(pointers[0]).value
        value = ctypes.c_int32.from_address(pointers[1]).value
        assert (slot, value) == (y, 5)
    assert calls[0][9] == calls[1][9] == calls[2][9]  # one argument list, made once
    with pytest.raises(launch.DriverError, match="INVALID_CONTEXT"):
        op({"y": 0x4000}, 0xBAD)
