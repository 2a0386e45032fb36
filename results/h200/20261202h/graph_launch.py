"""What a CUDA graph's launch costs by what its kernel nodes carry: graphs of N launches of a
near-empty kernel (132 blocks of 384 threads, as tc_wgmma's grids on a full wave) captured
with CuPy, the kernel in turn with more of what our tc_wgmma launches have: five 128-byte
`__grid_constant__` parameters (tensor maps' size and alignment), 200 KB of dynamic shared
memory, clusters of two blocks, and each node's kernel from a module of its own (each tuned
configuration is its own cubin).

Per variant, medians over the replays of:
- `idle us`: CUDA events around the graph's launch on an idle GPU (the launch's latency and
  the nodes' time);
- `busy us`: the same behind a 300 us spin kernel, so that the host's launch is hidden (the
  nodes' time on the GPU alone);
- `latency us`: idle less busy;
- `host us`: the host's time in the launch call.

    python3 graph_launch.py [--nodes 58] [--replays 50] > out.md
"""

from __future__ import annotations

import argparse
import statistics
import time

import cupy as cp
import numpy as np
from cupy.cuda.function import CPointer

SOURCE = r"""
struct __align__(64) map_t { char bytes[128]; };
#ifndef CLUSTER
#define CLUSTER 1
#endif
#if CLUSTER > 1
#define DIMS __cluster_dims__(CLUSTER, 1, 1)
#else
#define DIMS
#endif
extern "C" __global__ void DIMS node(const int* __restrict__ a, const int* __restrict__ b,
                                     int* __restrict__ y
#if MAPS
    , const __grid_constant__ map_t m0, const __grid_constant__ map_t m1,
    const __grid_constant__ map_t m2, const __grid_constant__ map_t m3,
    const __grid_constant__ map_t m4
#endif
)
{
    int v = a[0] + b[0];
#if MAPS
    v += m0.bytes[0] + m1.bytes[1] + m2.bytes[2] + m3.bytes[3] + m4.bytes[4];
#endif
#if SMEM
    extern __shared__ int s[];
    s[threadIdx.x] = v;
    __syncthreads();
    v = s[(threadIdx.x + 1) % blockDim.x];
#endif
    if (threadIdx.x == 0) y[blockIdx.x] = v + (int)TAG;
}
extern "C" __global__ void spin(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"""

SMEM_BYTES = 200 * 1024
VARIANTS = {
    "plain": dict(MAPS=0, SMEM=0, CLUSTER=1, modules=1),
    "5 maps": dict(MAPS=1, SMEM=0, CLUSTER=1, modules=1),
    "200 KB smem": dict(MAPS=0, SMEM=1, CLUSTER=1, modules=1),
    "cluster 2": dict(MAPS=0, SMEM=0, CLUSTER=2, modules=1),
    "a module a node": dict(MAPS=0, SMEM=0, CLUSTER=1, modules=0),
    "maps + smem": dict(MAPS=1, SMEM=1, CLUSTER=1, modules=1),
    "maps + smem + a module a node": dict(MAPS=1, SMEM=1, CLUSTER=1, modules=0),
    "all four": dict(MAPS=1, SMEM=1, CLUSTER=2, modules=0),
}


def kernels(variant: dict, nodes: int) -> list:
    """The node kernel for each of `nodes` launches: one module for all, or one each."""
    count = 1 if variant["modules"] else nodes
    found = []
    for tag in range(count):
        options = ("-arch=sm_90", "-std=c++17") + tuple(
            f"-D{k}={variant[k]}" for k in ("MAPS", "SMEM", "CLUSTER")
        )
        module = cp.RawModule(code=SOURCE, options=options + (f"-DTAG={tag}",))
        fn = module.get_function("node")
        if variant["SMEM"]:
            fn.max_dynamic_shared_size_bytes = SMEM_BYTES
        found.append(fn)
    return [found[i % count] for i in range(nodes)]


def measure(variant: dict, nodes: int, replays: int, spin) -> dict:
    a, b = cp.ones(1, cp.int32), cp.ones(1, cp.int32)
    y = cp.zeros(132, cp.int32)
    host_maps = np.zeros((5, 128), np.int8)  # the maps' storage, copied at the capture
    maps = [CPointer(host_maps[i].ctypes.data) for i in range(5)]
    args = (a, b, y, *maps) if variant["MAPS"] else (a, b, y)
    smem = SMEM_BYTES if variant["SMEM"] else 0
    stream = cp.cuda.Stream(non_blocking=True)
    fns = kernels(variant, nodes)
    with stream:
        stream.begin_capture()
        for fn in fns:
            fn((132,), (384,), args, shared_mem=smem)
        graph = stream.end_capture()
    graph.upload(stream)
    stream.synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    figures = {"idle": [], "busy": [], "host": []}
    for _ in range(3):  # warm
        graph.launch(stream)
    stream.synchronize()
    for i in range(2 * replays):
        busy = i % 2 == 1
        stream.synchronize()
        time.sleep(0.001)
        if busy:
            spin((1,), (1,), (cp.int64(600_000),), stream=stream)  # ~300 us at 1.98 GHz
        start.record(stream)
        t = time.perf_counter()
        graph.launch(stream)
        host = time.perf_counter() - t
        end.record(stream)
        end.synchronize()
        figures["busy" if busy else "idle"].append(cp.cuda.get_elapsed_time(start, end) * 1e3)
        figures["host"].append(host * 1e6)
    assert int(y[0]) >= 2, "the nodes did not run"
    return {k: statistics.median(v) for k, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=58)
    parser.add_argument("--replays", type=int, default=50)
    args = parser.parse_args()
    spin = cp.RawModule(code=SOURCE, options=("-arch=sm_90", "-DMAPS=0", "-DSMEM=0", "-DTAG=0"))
    spin = spin.get_function("spin")
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# A CUDA graph's launch by what its {args.nodes} kernel nodes carry\n")
    print(f"{name}, CuPy {cp.__version__}, {args.replays} replays a way, medians.\n")
    print("| nodes carry | idle us | busy us | latency us | host us |")
    print("|---|--:|--:|--:|--:|")
    for label, variant in VARIANTS.items():
        f = measure(variant, args.nodes, args.replays, spin)
        print(
            f"| {label} | {f['idle']:.1f} | {f['busy']:.1f} | {f['idle'] - f['busy']:.1f} "
            f"| {f['host']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
