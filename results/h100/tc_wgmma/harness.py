"""Standalone GPU harness for tc_wgmma: correctness vs float64 torch conv2d, and timing (L2 flush
before each sample) beside cuDNN bf16 channels_last. Usage: harness.py check|time OUTDIR"""
import itertools, json, os, sys, time
from pathlib import Path
import numpy as np
import cupy as cp
import torch
from autotune.gpu.compiler import Compiler

SRC = Path("kernels/tc_wgmma.cu")
TOL = {"fp16": 1e-3, "bf16": 5e-3}
STORAGE = {"fp16": 1, "bf16": 2}
TDT = {"fp16": torch.float16, "bf16": torch.bfloat16}
compiler = Compiler(arch="sm_90")
_mods = {}

def defines(p, cfg, dtype):
    B, N, K, C, F, s = p
    cfg = dict(cfg)
    if C % 8:
        cfg["C_OUTER"] = 0
    d = dict(B=B, C=C, N=N, K=K, F=F, STRIDE=s, STORAGE=STORAGE[dtype], **cfg)
    return tuple(d.items())

def compile_all(jobs):
    from concurrent.futures import ThreadPoolExecutor
    compiler.start_pool(14)
    keys = list(dict.fromkeys(jobs))
    with ThreadPoolExecutor(14) as ex:
        res = list(ex.map(lambda d: _try(d), keys))
    compiler.stop_pool()
    return dict(zip(keys, res))

def _try(d):
    try:
        return compiler.compile_source(SRC, d, arch_specific=True)
    except Exception as e:
        return str(e)

def load(ck):
    if ck.key not in _mods:
        path = f"/tmp/{ck.key}.cubin"
        open(path, "wb").write(ck.cubin)
        _mods[ck.key] = cp.RawModule(path=path)
    return _mods[ck.key]

def make_inputs(p, dtype, seed=0):
    B, N, K, C, F, s = p
    S = (N - 1) * s + K
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.rand((B, S, S, C), device="cuda", generator=g) * 2 - 1).to(TDT[dtype])
    w = (torch.rand((F, K, K, C), device="cuda", generator=g) * 2 - 1).to(TDT[dtype])
    return x, w

def runner(ck, p, cfg, dtype, x, w, y):
    B, N, K, C, F, s = p
    mod = load(ck)
    fn = mod.get_function("tc_wgmma")
    BM, BN, WG, ST, SK = cfg["BM"], cfg["BN"], cfg["WG"], cfg["STAGES"], cfg["SPLIT_K"]
    P = cfg.get("PRODUCER", 0)
    smem = ST * (BM + BN) * 128 + 1024 + 16 * ST * P
    fn.max_dynamic_shared_size_bytes = smem
    M = B * N * N
    tiles = ((F + BN - 1) // BN) * ((M + BM - 1) // BM)
    tpb = cfg.get("TILES_PER_BLOCK", 1)
    grid = ((tiles + tpb - 1) // tpb, 1, SK)
    xa = cp.asarray(x.view(torch.int16)); wa = cp.asarray(w.view(torch.int16)); ya = cp.asarray(y.view(torch.int16))
    if SK == 1:
        def run():
            fn(grid, (128 * (WG + P),), (xa, wa, ya), shared_mem=smem)
    else:
        part = cp.full((SK, M, F), cp.nan, dtype=cp.float32)
        red = mod.get_function("tc_wgmma_reduce")
        def run():
            fn(grid, (128 * (WG + P),), (xa, wa, part), shared_mem=smem)
            red(((M * F + 255) // 256,), (256,), (part, ya))
    return run

def reference(p, x, w):
    B, N, K, C, F, s = p
    xr = x.double().permute(0, 3, 1, 2); wr = w.double().permute(0, 3, 1, 2)
    return torch.nn.functional.conv2d(xr, wr, stride=s).permute(0, 2, 3, 1)

def rel(y, ref):
    d = y.double() - ref
    return float(torch.linalg.norm(d) / torch.linalg.norm(ref))

SHAPES = [  # B, N, K, C, F, stride
    (1, 1, 1, 8, 10, 1), (3, 7, 3, 16, 100, 1), (1, 13, 5, 64, 10, 2), (3, 37, 3, 96, 100, 1),
    (1, 7, 11, 8, 64, 4), (3, 13, 1, 96, 100, 2), (1, 37, 5, 16, 10, 4), (3, 1, 11, 64, 100, 1),
    (2, 13, 3, 192, 70, 1), (1, 7, 3, 8, 200, 2), (3, 13, 3, 40, 33, 1), (1, 37, 1, 64, 256, 1),
    (3, 13, 11, 3, 10, 4), (1, 7, 5, 5, 100, 2), (3, 37, 3, 3, 64, 1), (1, 1, 3, 5, 10, 1),
]
CONFIGS0 = [
    dict(BM=64, BN=64, WG=1, STAGES=3, SPLIT_K=1),
    dict(BM=128, BN=128, WG=1, STAGES=4, SPLIT_K=1),
    dict(BM=128, BN=96, WG=2, STAGES=5, SPLIT_K=1),
    dict(BM=256, BN=128, WG=2, STAGES=3, SPLIT_K=1),
    dict(BM=128, BN=192, WG=2, STAGES=3, SPLIT_K=3),
    dict(BM=64, BN=64, WG=1, STAGES=6, SPLIT_K=2),
]

CONFIGS = [dict(c, PRODUCER=p, C_OUTER=p, L1_CACHE=p, TILES_PER_BLOCK=t) for c in CONFIGS0 for p in (0, 1) for t in (1, 3)]

def check(out):
    jobs = [(p, i, dt) for p in SHAPES for i, c in enumerate(CONFIGS) for dt in ("bf16", "fp16")
            ]
    compiled = compile_all([defines(p, CONFIGS[i], dt) for p, i, dt in jobs])
    rows, bad = [], 0
    for p, i, dt in jobs:
        cfg = CONFIGS[i]
        ck = compiled[defines(p, cfg, dt)]
        if isinstance(ck, str):
            rows.append(dict(shape=p, cfg=cfg, dtype=dt, error=ck[:300])); bad += 1; continue
        x, w = make_inputs(p, dt)
        B, N, K, C, F, s = p
        y = torch.full((B, N, N, F), float("nan"), device="cuda", dtype=TDT[dt])
        runner(ck, p, cfg, dt, x, w, y)()
        torch.cuda.synchronize()
        e = rel(y, reference(p, x, w))
        ok = e <= TOL[dt] and bool(torch.isfinite(y).all())
        bad += not ok
        rows.append(dict(shape=p, cfg=cfg, dtype=dt, rel=e, ok=ok, regs=ck.max_registers, spills=ck.spills))
        if not ok: print("FAIL", p, cfg, dt, e, flush=True)
    print(f"check: {len(rows) - bad}/{len(rows)} pass", flush=True)
    json.dump(rows, open(out / "check.json", "w"), indent=0, default=str)

def timed(run, flush, n=40):
    for _ in range(3): run()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for a, b in zip(starts, ends):
        flush.fill_(1); a.record(); run(); b.record()
    torch.cuda.synchronize()
    return float(np.median([a.elapsed_time(b) for a, b in zip(starts, ends)]))

TIME_SHAPES = {  # B, N, K, C, F, stride: autotune/data/shape_sets.toml, alexnet and overfeat
    "alexnet_conv1": (128, 55, 11, 3, 64, 4), "alexnet_conv2": (128, 27, 5, 64, 192, 1),
    "alexnet_conv3": (128, 13, 3, 192, 384, 1), "alexnet_conv4": (128, 13, 3, 384, 256, 1),
    "alexnet_conv5": (128, 13, 3, 256, 256, 1), "overfeat_L1": (128, 56, 11, 3, 96, 4),
    "overfeat_L2": (128, 20, 5, 96, 256, 1), "overfeat_L3": (128, 12, 3, 256, 512, 1),
    "overfeat_L4": (128, 12, 3, 512, 1024, 1), "overfeat_L5": (128, 12, 3, 1024, 1024, 1),
}
if os.environ.get("SHAPES"):
    TIME_SHAPES = {k: TIME_SHAPES[k] for k in os.environ["SHAPES"].split(",")}

def time_mode(out, configs):
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")  # 256 MB
    dt = "bf16"
    jobs = [defines(p, c, dt) for p in TIME_SHAPES.values() for c in configs]
    compiled = compile_all(jobs)
    rows = []
    for name, p in TIME_SHAPES.items():
        B, N, K, C, F, s = p
        flops = 2 * B * N * N * K * K * C * F
        x, w = make_inputs(p, dt)
        xc = x.permute(0, 3, 1, 2); wc = w.permute(0, 3, 1, 2)  # channels_last views
        assert xc.is_contiguous(memory_format=torch.channels_last)
        torch.backends.cudnn.benchmark = True
        cud = lambda: torch.nn.functional.conv2d(xc, wc, stride=s)
        t = timed(cud, flush)
        rows.append(dict(shape=name, impl="cudnn", ms=t, gflops=flops / t / 1e6))
        print(name, "cudnn", round(t, 4), round(flops / t / 1e6), flush=True)
        ref = reference(p, x, w) if B * N * N * F * C * K * K < 5e10 else None
        for c in configs:
            ck = compiled[defines(p, c, dt)]
            if isinstance(ck, str):
                print(name, c, "compile error", ck[:200]); continue
            if c["SPLIT_K"] > 1 and (F + c["BN"] - 1) // c["BN"] * ((B*N*N + c["BM"] - 1) // c["BM"]) > 264: continue
            y = torch.full((B, N, N, F), float("nan"), device="cuda", dtype=torch.bfloat16)
            run = runner(ck, p, c, dt, x, w, y)
            run(); torch.cuda.synchronize()
            e = rel(y, ref) if ref is not None else -1
            t = timed(run, flush)
            rows.append(dict(shape=name, impl="tc_wgmma", cfg=c, ms=t, gflops=flops / t / 1e6, rel=e, regs=ck.max_registers, spills=ck.spills))
            print(name, c, round(t, 4), round(flops / t / 1e6), f"rel={e:.2e}", ck.max_registers, flush=True)
    json.dump(rows, open(out / "time.json", "w"), indent=0, default=str)

if __name__ == "__main__":
    out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if sys.argv[1] in ("check", "both"):
        check(out)
    if sys.argv[1] == "one":  # one shape, one config, a few runs (for ncu)
        p = TIME_SHAPES[sys.argv[3]]
        c = dict(zip(("BM", "BN", "WG", "STAGES", "SPLIT_K", "PRODUCER", "C_OUTER", "L1_CACHE", "TILES_PER_BLOCK"), map(int, sys.argv[4].split(","))))
        ck = compiler.compile_source(SRC, defines(p, c, "bf16"), arch_specific=True)
        x, w = make_inputs(p, "bf16")
        y = torch.empty((p[0], p[1], p[1], p[4]), device="cuda", dtype=torch.bfloat16)
        run = runner(ck, p, c, "bf16", x, w, y)
        for _ in range(3): run()
        torch.cuda.synchronize()
    if sys.argv[1] == "timecfg":
        cfgs = [dict(zip(("BM", "BN", "WG", "STAGES", "SPLIT_K", "PRODUCER", "C_OUTER", "L1_CACHE", "TILES_PER_BLOCK"), map(int, t.split(",")))) for t in sys.argv[3].split(";")]
        time_mode(out, cfgs)
    if sys.argv[1] in ("time", "both"):
        cfgs = [dict(BM=bm, BN=bn, WG=wg, STAGES=st, SPLIT_K=1)
                for bm, bn, wg, st in [(128, 128, 1, 4), (128, 128, 1, 6), (128, 256, 2, 4), (256, 128, 2, 4),
                                       (128, 192, 1, 5), (256, 192, 2, 3), (128, 128, 2, 5), (64, 256, 1, 4),
                                       (256, 256, 2, 3), (128, 256, 1, 4)]
                if (bm // (64 * wg)) * bn // 2 <= 128]
        cfgs = [dict(c, PRODUCER=0, C_OUTER=0, L1_CACHE=0, TILES_PER_BLOCK=1) for c in cfgs]
        time_mode(out, cfgs)
    print("elapsed", round(time.time() - t0, 1))
