"""On a CUDA device with PyTorch: autotune.conv2d against PyTorch's float64 conv2d over random
shapes (odd sizes, strides, batch, padding), under every miss policy, for every family the
runtime can call, on CuPy arrays and tensors, on the caller's stream, and as a torch module."""

from __future__ import annotations

import random
import zlib

import pytest

from autotune.families import FAMILIES
from autotune.gpu.timing import TimingPolicy
from autotune.runtime.calls import Call
from autotune.runtime.dispatch import serves_calls
from autotune.runtime.lookup import LookupMiss

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

TOLERANCE = 1e-5  # FP32, as every candidate is checked (DESIGN section 2)
QUICK = TimingPolicy(warmup=1, min_repeats=3, min_time_s=0.0, max_repeats=5, max_time_s=0.5)
# The families that serve FP32 calls with TF32 off (the tensor-core ones compute other dtypes:
# test_runtime_precision.py).
CONV2D = [
    name
    for name, family in FAMILIES.items()
    if family.problem_type.__name__ == "ConvProblem"
    and name != "tiled2d"
    and serves_calls(family)
    and "fp32" in family.dtypes
]
# Tuned on a miss below: a C > 1 shape (every general family) and a C = 1 one (chen_special).
SEED_SHAPES = [
    dict(B=2, C=8, H=20, F=16, K=3, stride=1, padding=1),
    dict(B=1, C=1, H=40, F=4, K=5, stride=1, padding=2),
]


def random_shape(
    rng: random.Random, channels: int | None = None, k: int | None = None, stride: int | None = None
) -> dict:
    k = k or rng.choice([1, 3, 3, 5, 7, 11])
    stride = stride or rng.choice([1, 1, 2, 3, 4] if k == 11 else [1, 1, 2, 3])
    padding = rng.randint(0, k // 2 + 1)
    side = rng.randint(max(1, k - 2 * padding), 45)
    return dict(
        B=rng.choice([1, 2, 3, 5]),
        C=channels if channels is not None else rng.choice([1, 3, 7, 16, 33]),
        H=side,
        F=rng.choice([1, 4, 9, 20, 33]),
        K=k,
        stride=stride,
        padding=padding,
    )


def inputs(shape: dict, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(shape["B"], shape["C"], shape["H"], shape["H"], device="cuda", generator=g)
    w = torch.rand(shape["F"], shape["C"], shape["K"], shape["K"], device="cuda", generator=g)
    return x * 2 - 1, w * 2 - 1


def rel_error(y, x, w, shape) -> float:
    ref = torch.nn.functional.conv2d(
        x.double(), w.double(), stride=shape["stride"], padding=shape["padding"]
    )
    assert tuple(y.shape) == tuple(ref.shape), (tuple(y.shape), tuple(ref.shape))
    den = torch.linalg.vector_norm(ref).item()
    num = torch.linalg.vector_norm(y.double() - ref).item()
    return num / den if den else num


def check(rt, shape: dict, seed: int, on_miss: str) -> str | None:
    """None when autotune.conv2d matches the reference, else what went wrong."""
    x, w = inputs(shape, seed)
    y = rt.conv2d(x, w, shape["stride"], shape["padding"], on_miss)
    torch.cuda.synchronize()
    err = rel_error(y, x, w, shape)
    if not err <= TOLERANCE:  # NaN fails too
        return f"{shape} ({on_miss}): relative error {err:.2e}"
    return None


@pytest.fixture(scope="module", autouse=True)
def strict_fp32():
    """These calls are FP32 with TF32 off (PyTorch allows TF32 in convolutions by default, and
    the runtime then may serve a call with a tf32 plan, as cuDNN does)."""
    allowed = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = allowed


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cubins")


def make_runtime(database, cache, families=None, budget=3, launcher="cupy"):
    from autotune.runtime import Runtime

    return Runtime(
        database,
        families=families,
        cache_dir=cache,
        tune_budget=budget,
        tune_timing=QUICK,
        launcher=launcher,
    )


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, cache):
    """A store filled by on_miss="tune" on the seed shapes (every family the runtime can call,
    a few evaluations each), with what those first calls got wrong."""
    database = str(tmp_path_factory.mktemp("runtime") / "runtime.db")
    rt = make_runtime(database, cache)
    failed = [check(rt, shape, 1, "tune") for shape in SEED_SHAPES]
    return database, [f for f in failed if f]


def test_an_empty_store_is_a_miss_unless_tuning(tmp_path, cache):
    rt = make_runtime(str(tmp_path / "empty.db"), cache)
    shape = SEED_SHAPES[0]
    x, w = inputs(shape, 0)
    for policy in ("error", "nearest"):
        with pytest.raises(LookupMiss):
            rt.conv2d(x, w, shape["stride"], shape["padding"], policy)


def test_every_miss_policy_matches_float64(tuned, cache):
    database, failed = tuned  # "tune": each seed shape tuned, stored and served
    rt = make_runtime(database, cache)
    first = SEED_SHAPES[0]
    # Stored now: "error" serves the stored shape, and refuses another.
    failed = [*failed, check(rt, first, 2, "error")]
    other = dict(first, H=first["H"] + 3)
    x, w = inputs(other, 3)
    with pytest.raises(LookupMiss, match="on_miss='error'"):
        rt.conv2d(x, w, other["stride"], other["padding"], "error")
    # "nearest" over random shapes.
    rng = random.Random(19)
    failed += [check(rt, random_shape(rng), 10 + i, "nearest") for i in range(12)]
    # "tune" on one random shape, with one family (to keep the test short).
    quick = make_runtime(database, cache, families=["implicit_gemm"], budget=2)
    failed.append(check(quick, random_shape(rng, channels=5), 40, "tune"))
    failed = [f for f in failed if f]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("family", CONV2D)
def test_each_family_serves_random_shapes_from_the_nearest_stored_one(family, tuned, cache):
    rt = make_runtime(tuned[0], cache, families=[family])
    # Seeded by the name's CRC (str hashes differ between processes): the same shapes each run.
    rng = random.Random(zlib.crc32(family.encode()) % 1000)
    failed, served = [], 0
    for i in range(6):
        if family == "winograd":  # it computes only 3 x 3 filters at stride 1
            shape = random_shape(rng, k=3, stride=1)
        elif family == "chen_special":  # one input channel at stride 1
            shape = random_shape(rng, channels=1, stride=1)
        else:
            shape = random_shape(rng)
        try:
            failed.append(check(rt, shape, 100 + i, "nearest"))
            served += 1
        except LookupMiss as miss:
            # The family may not compute this shape at all (chen_special's K, maxdnn's C*K*K).
            assert "made valid" in str(miss), (shape, str(miss))
    failed = [f for f in failed if f]
    assert served, f"{family} served none of the random shapes"
    assert not failed, "\n".join(failed)
    families = {choice.family for choice in rt.prepared().values()}
    assert families == {family}


def test_cupy_arrays_and_the_callers_stream(tuned, cache):
    import cupy as cp

    rt = make_runtime(tuned[0], cache)
    shape = dict(B=3, C=7, H=23, F=9, K=3, stride=2, padding=1)
    x, w = inputs(shape, 7)
    y = rt.conv2d(cp.from_dlpack(x), cp.from_dlpack(w), 2, 1)
    assert isinstance(y, cp.ndarray)
    torch.cuda.synchronize()
    assert rel_error(torch.from_dlpack(y), x, w, shape) <= TOLERANCE
    # On a side stream of PyTorch's: queued there, correct once it is done.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = rt.conv2d(x, w, 2, 1)
    side.synchronize()
    assert rel_error(y, x, w, shape) <= TOLERANCE
    # A CuPy stream of the caller's.
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        y = rt.conv2d(cp.from_dlpack(x), cp.from_dlpack(w), 2, 1)
    stream.synchronize()
    assert rel_error(torch.from_dlpack(y), x, w, shape) <= TOLERANCE


def test_the_driver_launcher_matches_float64(tuned, cache):
    """The same plans launched through cuLaunchKernel (every family, padding, conversions)."""
    failed = []
    for family in [None, *CONV2D]:
        rt = make_runtime(tuned[0], cache, [family] if family else None, launcher="driver")
        rng = random.Random(7 + len(family or ""))
        for i in range(3):
            if family == "winograd":  # it computes only 3 x 3 filters at stride 1
                shape = random_shape(rng, k=3, stride=1)
            else:
                shape = random_shape(rng, channels=1 if family == "chen_special" else None)
            try:
                failed.append(check(rt, shape, 200 + i, "nearest"))
            except LookupMiss:
                pass  # a shape this family does not compute
    failed = [f for f in failed if f]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("launcher", ["cupy", "driver"])
def test_calls_from_another_thread(tuned, cache, launcher):
    import threading

    rt = make_runtime(tuned[0], cache, launcher=launcher)
    shape = dict(B=2, C=8, H=19, F=16, K=3, stride=1, padding=2)
    x, w = inputs(shape, 12)
    out = {}

    def work():
        try:
            out["y"] = rt.conv2d(x, w, 1, 2)
            torch.cuda.synchronize()
        except Exception as err:  # reported below, in the test's thread
            out["error"] = err

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert "error" not in out, out.get("error")
    assert rel_error(out["y"], x, w, shape) <= TOLERANCE


def test_a_pre_padded_input_is_used_in_place_and_views_are_copied(tuned, cache):
    rt = make_runtime(tuned[0], cache)
    shape = dict(B=2, C=8, H=22, F=16, K=3, stride=1, padding=0)  # the first seed, pre-padded
    x, w = inputs(shape, 8)
    y = rt.conv2d(x, w, 1, 0, "error")
    torch.cuda.synchronize()
    assert rel_error(y, x, w, shape) <= TOLERANCE
    (entry,) = [e for k, e in rt.entries.items() if Call.of(k).H == 22 and Call.of(k).padding == 0]
    assert entry.pad is None and entry.choice.exact
    # A non-contiguous view (channels last in memory) gives the same result.
    xt = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    assert not xt.is_contiguous()
    y2 = rt.conv2d(xt, w, 1, 0, "error")
    torch.cuda.synchronize()
    assert torch.equal(y, y2)


def test_bad_arguments_are_one_line_errors(tuned, cache):
    from autotune.runtime import CallError

    rt = make_runtime(tuned[0], cache)
    x, w = inputs(SEED_SHAPES[0], 9)
    for bad in (
        lambda: rt.conv2d(x.double(), w),
        lambda: rt.conv2d(x, w[:, :3]),
        lambda: rt.conv2d(x[..., :-1], w),
        lambda: rt.conv2d(x, w, on_miss="guess"),
        lambda: rt.conv2d(x.cpu(), w.cpu()),
    ):
        with pytest.raises(CallError) as err:
            bad()
        assert "\n" not in str(err.value)


def test_the_torch_module_is_a_drop_in_forward(tuned, cache):
    from autotune.runtime import Conv2d

    rt = make_runtime(tuned[0], cache)
    conv = torch.nn.Conv2d(8, 16, 3, stride=1, padding=1, bias=True).cuda()
    layer = Conv2d.from_torch(conv, runtime_=rt)
    x, _ = inputs(SEED_SHAPES[0], 11)
    with torch.inference_mode():
        y = layer(x)
        ref = torch.nn.functional.conv2d(
            x.double(), conv.weight.double(), conv.bias.double(), padding=1
        )
    err = (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()
    assert err <= TOLERANCE
    with pytest.raises(RuntimeError, match="forward only"):
        layer(x.requires_grad_())
