"""Standalone GPU harness for tc_implicit_gemm (before the session handles 16-bit buffers).

Compiles with the project's Compiler (NVRTC, sm_90, its options), loads the cubin with CuPy,
checks against PyTorch's float64 conv2d over the stored inputs (relative L2), and times under
protocol 2 (a 256 MiB write before every sample, events around the launches) beside
torch.nn.functional.conv2d (cuDNN) on channels_last tensors of the same dtype.

  python harness.py check            # odd shapes x dtypes x configurations
  python harness.py bench OUT.json   # sweep on AlexNet conv3 / OverFeat L5, bf16 and tf32
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cupy as cp
import torch

from autotune.gpu.compiler import Compiler

SRC = Path("kernels/tc_implicit_gemm.cu")
STORAGE = {"tf32": 0, "fp16": 1, "bf16": 2}
TORCH = {"tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ES = {"tf32": 4, "fp16": 2, "bf16": 2}
TOL = {"tf32": 1e-3, "fp16": 1e-3, "bf16": 5e-3}
COMPILER = Compiler(arch="sm_90")


def cdiv(a, b):
    return -(-a // b)


def plan(p, dtype, cfg):
    """(defines, launches) as the family plans them: launches = [(entry, grid, block, smem)]."""
    s = (p["N"] - 1) * p["stride"] + p["K"]
    gm, gk = p["B"] * p["N"] ** 2, p["K"] ** 2 * p["C"]
    row = cfg["BK"] * ES[dtype] + (0 if cfg["SWIZZLE"] else 16)
    smem = cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * row
    threads = (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"]) * 32
    defines = dict(B=p["B"], C=p["C"], N=p["N"], K=p["K"], F=p["F"], STRIDE=p["stride"])
    defines["STORAGE"] = STORAGE[dtype]
    defines.update(cfg)
    mt, nt = cdiv(gm, cfg["BM"]), cdiv(p["F"], cfg["BN"])
    grid = (mt * nt, 1, cfg["SPLIT_K"]) if cfg["RASTER"] else (mt, nt, cfg["SPLIT_K"])
    launches = [("tc_implicit_gemm", grid, (threads, 1, 1), smem)]
    if cfg["SPLIT_K"] > 1:
        launches.append(("tc_reduce", (cdiv(gm * p["F"], 256), 1, 1), (256, 1, 1), 0))
    del s, gk
    return tuple(defines.items()), launches


class Kernel:
    def __init__(self, p, dtype, cfg):
        self.p, self.dtype, self.cfg = p, dtype, cfg
        defines, self.launches = plan(p, dtype, cfg)
        compiled = COMPILER.compile_source(SRC, defines)
        self.spills = compiled.spills
        self.registers = compiled.max_registers
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
            fh.write(compiled.cubin)
        self.module_path = fh.name
        self.module = None

    def load(self):
        self.module = cp.RawModule(path=self.module_path)
        self.funcs = {}
        for entry, _, _, smem in self.launches:
            f = self.module.get_function(entry)
            if smem > 48 * 1024:
                f.max_dynamic_shared_size_bytes = smem
            self.funcs[entry] = f

    def __call__(self, x, w, y, scratch):
        if self.module is None:
            self.load()
        out = scratch if self.cfg["SPLIT_K"] > 1 else y
        entry, grid, block, smem = self.launches[0]
        self.funcs[entry](grid, block, (x, w, out), shared_mem=smem)
        if self.cfg["SPLIT_K"] > 1:
            entry, grid, block, smem = self.launches[1]
            self.funcs[entry](grid, block, (scratch, y))


def as_cupy(t):
    if t.dtype in (torch.bfloat16, torch.float16):
        return cp.asarray(t.view(torch.int16))
    return cp.asarray(t)


def inputs(p, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    s = (p["N"] - 1) * p["stride"] + p["K"]
    x = (torch.rand((p["B"], s, s, p["C"]), generator=g, device="cuda") * 2 - 1).to(TORCH[dtype])
    w = torch.rand((p["F"], p["K"], p["K"], p["C"]), generator=g, device="cuda") * 2 - 1
    return x, w.to(TORCH[dtype])


def reference(p, x, w):
    x64 = x.double().permute(0, 3, 1, 2)
    w64 = w.double().permute(0, 3, 1, 2)
    y = torch.nn.functional.conv2d(x64, w64, stride=p["stride"])
    return y.permute(0, 2, 3, 1).contiguous()


def outputs(p, dtype, cfg):
    y = torch.full((p["B"], p["N"], p["N"], p["F"]), float("nan"), device="cuda").to(TORCH[dtype])
    scratch = None
    if cfg["SPLIT_K"] > 1:
        scratch = cp.full((cfg["SPLIT_K"], p["B"] * p["N"] ** 2 * p["F"]), cp.nan, cp.float32)
    return y, scratch


def rel_l2(y, ref):
    d = y.double() - ref
    return float(torch.linalg.vector_norm(d) / torch.linalg.vector_norm(ref))


def valid(p, dtype, cfg):
    """Whether cfg is in the family's space for this problem."""
    from autotune.model.space import ARCH_LIMITS, Config, SearchSpace

    space = SearchSpace.from_toml("search_spaces/tc_implicit_gemm.toml")
    fields = dict(N=p["N"], K=p["K"], C=p["C"], F=p["F"], B=p["B"], stride=p["stride"])
    fields.update(
        S=(p["N"] - 1) * p["stride"] + p["K"], ELEM_BYTES=ES[dtype], TENSOR_CORE=1, NHWC=1
    )
    key = (tuple(fields.items()),)
    if key not in _BOUND:
        _BOUND[key] = space.bind(fields, ARCH_LIMITS["sm_90"])
    return _BOUND[key] if cfg is None else _BOUND[key].is_valid(Config.of(cfg))


def bound(p, dtype):
    return valid(p, dtype, None)


_BOUND = {}


def compile_all(jobs):
    COMPILER.start_pool(14)
    try:
        with ThreadPoolExecutor(14) as pool:
            return list(pool.map(lambda j: Kernel(*j), jobs))
    finally:
        COMPILER.stop_pool()


CHECK_CONFIGS = [
    dict(
        BM=128,
        BN=128,
        BK=32,
        WM=64,
        WN=32,
        STAGES=3,
        SWIZZLE=1,
        SPLIT_K=1,
        GATHER=0,
        MIN_BLOCKS=1,
        FRAG_DB=1,
        RASTER=1,
        TF32_ROUND=0,
    ),
    dict(
        BM=64,
        BN=64,
        BK=64,
        WM=32,
        WN=32,
        STAGES=4,
        SWIZZLE=0,
        SPLIT_K=2,
        GATHER=1,
        MIN_BLOCKS=2,
        FRAG_DB=0,
        RASTER=1,
        TF32_ROUND=1,
    ),
    dict(
        BM=32,
        BN=32,
        BK=16,
        WM=16,
        WN=16,
        STAGES=2,
        SWIZZLE=1,
        SPLIT_K=4,
        GATHER=0,
        MIN_BLOCKS=1,
        FRAG_DB=1,
        RASTER=0,
        TF32_ROUND=1,
    ),
    dict(
        BM=64,
        BN=128,
        BK=32,
        WM=32,
        WN=64,
        STAGES=4,
        SWIZZLE=1,
        SPLIT_K=1,
        GATHER=1,
        MIN_BLOCKS=1,
        FRAG_DB=0,
        RASTER=0,
        TF32_ROUND=0,
    ),
    dict(
        BM=256,
        BN=64,
        BK=16,
        WM=64,
        WN=32,
        STAGES=5,
        SWIZZLE=0,
        SPLIT_K=3,
        GATHER=0,
        MIN_BLOCKS=1,
        FRAG_DB=1,
        RASTER=1,
        TF32_ROUND=0,
    ),
    dict(
        BM=128,
        BN=64,
        BK=64,
        WM=64,
        WN=16,
        STAGES=3,
        SWIZZLE=1,
        SPLIT_K=1,
        GATHER=0,
        MIN_BLOCKS=2,
        FRAG_DB=1,
        RASTER=0,
        TF32_ROUND=1,
    ),
]


def check():
    rng = random.Random(20)
    shapes = []
    for _ in range(14):
        k = rng.choice([1, 3, 5, 11])
        shapes.append(
            dict(
                N=rng.choice([1, 7, 13, 37]),
                K=k,
                C=rng.choice([3, 5, 12, 64, 96]),
                F=rng.choice([10, 100, 7, 64, 33]),
                B=rng.choice([1, 3]),
                stride=rng.choice([1, 2, 4]),
            )
        )
    shapes += [
        dict(N=55, K=11, C=3, F=64, B=2, stride=4),
        dict(N=13, K=3, C=192, F=384, B=4, stride=1),
    ]
    jobs = []
    for p, dtype in itertools.product(shapes, TOL):
        picks = []
        for cfg in CHECK_CONFIGS:
            cfg = dict(cfg, GATHER=int(p["C"] % (16 // ES[dtype]) != 0))
            cfg["TF32_ROUND"] = cfg["TF32_ROUND"] if dtype == "tf32" else 0
            cfg["BK"] = max(min(cfg["BK"], 256 // ES[dtype]), 32 // ES[dtype])
            if valid(p, dtype, cfg):
                picks.append(cfg)
        picks += [c.as_dict() for c in rng.sample(list(bound(p, dtype)), 4)]
        jobs += [(p, dtype, c) for c in picks]
    kernels = compile_all(jobs)
    worst, failed = {}, []
    for kern in kernels:
        p, dtype, cfg = kern.p, kern.dtype, kern.cfg
        x, w = inputs(p, dtype, 1)
        y, scratch = outputs(p, dtype, cfg)
        kern(as_cupy(x), as_cupy(w), as_cupy(y), scratch)
        cp.cuda.runtime.deviceSynchronize()
        err = rel_l2(y, reference(p, x, w))
        worst[dtype] = max(worst.get(dtype, 0.0), err)
        if not err <= TOL[dtype] or kern.spills:
            failed.append((p, dtype, cfg, err, kern.spills))
    print(f"checked {len(kernels)} (shape, dtype, config); worst rel L2: {worst}")
    for f in failed:
        print("FAIL", f)
    return not failed


def flush_timer():
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.float32, device="cuda")  # 256 MiB

    def time_it(fn, warmup=3, samples=25):
        for _ in range(warmup):
            fn()
        events = []
        for _ in range(samples):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events.append((start, end))
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) * 1e-3 for s, e in events)
        return times[len(times) // 2]

    return time_it


SHAPES = {
    "alexnet_conv1": dict(N=55, K=11, C=3, F=64, B=128, stride=4),
    "alexnet_conv3": dict(N=13, K=3, C=192, F=384, B=128, stride=1),
    "overfeat_L5": dict(N=12, K=3, C=1024, F=1024, B=128, stride=1),
}


def sweep_configs(p, dtype, rng, count):
    """Large-tile configurations of the space around the best of the random sweeps (128-byte
    tile rows, warp tiles of 64 x 64 and 64 x 32, filter-major order)."""
    tiles = [
        (128, 128, 64, 64),
        (256, 128, 64, 64),
        (128, 256, 64, 64),
        (128, 64, 64, 32),
        (64, 128, 32, 64),
        (128, 128, 64, 32),
        (256, 64, 64, 32),
        (128, 128, 32, 64),
    ]
    picks = []
    for (bm, bn, wm, wn), stages, frag, blocks, rnd in itertools.product(
        tiles, (2, 3, 4), (0, 1), (1, 2, 3), (0, 1) if dtype == "tf32" else (0,)
    ):
        cfg = dict(
            BM=bm,
            BN=bn,
            BK=128 // ES[dtype],
            WM=wm,
            WN=wn,
            STAGES=stages,
            SWIZZLE=1,
            SPLIT_K=1,
            GATHER=0,
            MIN_BLOCKS=blocks,
            FRAG_DB=frag,
            RASTER=1,
            TF32_ROUND=rnd,
        )
        if valid(p, dtype, cfg):
            picks.append(cfg)
    rng.shuffle(picks)
    return picks[:count]


DTYPES = ("bf16", "tf32")


def bench(out_path, count=40):
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    time_it = flush_timer()
    rng = random.Random(7)
    results = []
    for name, p in SHAPES.items():
        flops = 2 * p["B"] * p["N"] ** 2 * p["F"] * p["C"] * p["K"] ** 2
        for dtype in DTYPES:
            x, w = inputs(p, dtype, 1)
            ref = reference(p, x, w)
            xc = x.permute(0, 3, 1, 2)  # NCHW view of NHWC memory: channels_last
            wc = w.permute(0, 3, 1, 2)
            cudnn = time_it(
                lambda xc=xc, wc=wc, s=p["stride"]: torch.nn.functional.conv2d(xc, wc, stride=s)
            )
            yc = torch.nn.functional.conv2d(xc, wc, stride=p["stride"])
            cudnn_err = rel_l2(yc.permute(0, 2, 3, 1), ref)
            results.append(
                dict(
                    shape=name,
                    dtype=dtype,
                    kernel="cudnn",
                    seconds=cudnn,
                    gflops=flops / cudnn / 1e9,
                    rel_l2=cudnn_err,
                )
            )
            print(
                name, dtype, "cudnn", f"{flops / cudnn / 1e9:.0f} GFlop/s", f"err {cudnn_err:.2e}"
            )
            if dtype == "fp16":  # the best bf16 configurations, in fp16
                done = sorted(
                    (
                        r
                        for r in results
                        if r["shape"] == name and r["dtype"] == "bf16" and r["kernel"] != "cudnn"
                    ),
                    key=lambda r: r["seconds"],
                )
                cfgs = [r["config"] for r in done[:8]]
            else:
                cfgs = sweep_configs(p, dtype, rng, count)
            kernels = compile_all([(p, dtype, c) for c in cfgs])
            for kern in kernels:
                if kern.spills:
                    continue
                y, scratch = outputs(p, dtype, kern.cfg)
                args = (as_cupy(x), as_cupy(w), as_cupy(y), scratch)
                try:
                    kern(*args)
                    cp.cuda.runtime.deviceSynchronize()
                except Exception as err:
                    print("launch failed", kern.cfg, err)
                    continue
                err = rel_l2(y, ref)
                t = time_it(lambda kern=kern, args=args: kern(*args))
                results.append(
                    dict(
                        shape=name,
                        dtype=dtype,
                        kernel="tc_implicit_gemm",
                        config=kern.cfg,
                        seconds=t,
                        gflops=flops / t / 1e9,
                        rel_l2=err,
                        registers=kern.registers,
                    )
                )
            best = sorted(
                (
                    r
                    for r in results
                    if r["shape"] == name and r["dtype"] == dtype and r["kernel"] != "cudnn"
                ),
                key=lambda r: r["seconds"],
            )[:3]
            for r in best:
                print(
                    name,
                    dtype,
                    f"{r['gflops']:.0f} GFlop/s",
                    f"err {r['rel_l2']:.2e}",
                    r["registers"],
                    r["config"],
                )
    Path(out_path).write_text(
        json.dumps(dict(device=torch.cuda.get_device_name(), results=results), indent=1)
    )


def time_list(shape, dtype, configs):
    """Time given configurations (in the space or not) beside cuDNN: for probing the space's
    edges, e.g. register estimates that may be too strict."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    time_it = flush_timer()
    p = SHAPES[shape]
    flops = 2 * p["B"] * p["N"] ** 2 * p["F"] * p["C"] * p["K"] ** 2
    x, w = inputs(p, dtype, 1)
    ref = reference(p, x, w)
    xc, wc = x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2)
    t = time_it(lambda: torch.nn.functional.conv2d(xc, wc, stride=p["stride"]))
    print(shape, dtype, "cudnn", f"{flops / t / 1e9:.0f}")
    for kern in compile_all([(p, dtype, c) for c in configs]):
        y, scratch = outputs(p, dtype, kern.cfg)
        args = (as_cupy(x), as_cupy(w), as_cupy(y), scratch)
        kern(*args)
        cp.cuda.runtime.deviceSynchronize()
        t = time_it(lambda kern=kern, args=args: kern(*args))
        print(
            shape,
            dtype,
            f"{flops / t / 1e9:.0f}",
            f"err {rel_l2(y, ref):.2e}",
            kern.registers,
            kern.spills,
            valid(p, dtype, kern.cfg),
            kern.cfg,
        )


if __name__ == "__main__":
    if sys.argv[1] == "time":
        time_list(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
        sys.exit(0)
    if len(sys.argv) > 4:
        DTYPES = tuple(sys.argv[4].split(","))
    if sys.argv[1] == "check":
        sys.exit(0 if check() else 1)
    bench(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 40)
