"""What timing protocol 2 adds to a kernel's sample on this GPU: a kernel of one warp that
spins for SPIN_NS nanoseconds on the global timer and touches no memory, timed through
autotune's tune_kernel (protocol 2: the L2 flush, then events around the launch), for
SPIN_NS = 0 (an empty kernel) up to 40 us. A sample's excess over SPIN_NS is what the protocol
adds to every kernel it times, the kernel's own work aside. From the checkout root on a GPU
machine:
    python3 results/h200/20261130h/timer_floor.py > timer_floor.md"""

import numpy as np

from autotune import tune_kernel

SPIN = r"""
__global__ void spin(int *out) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < SPIN_NS);
    if (now == 0) out[threadIdx.x] = 1;  // never: keeps the loop
}
"""
SPINS_NS = [0, 2_000, 5_000, 10_000, 20_000, 40_000]


def main() -> None:
    out = np.zeros(32, dtype=np.int32)
    results, env = tune_kernel(
        "spin",
        SPIN,
        32,
        [out],
        {"block_size_x": [32], "SPIN_NS": SPINS_NS},
        strategy="brute_force",
        quiet=True,
    )
    print(f"# Timing protocol 2's floor on {env['device_name']}\n")
    print("| SPIN_NS | median ms | IQR ms | over the spin, us |")
    print("|--:|--:|--:|--:|")
    for r in sorted(results, key=lambda r: r["SPIN_NS"]):
        iqr = (
            np.percentile(r["times"], 75) - np.percentile(r["times"], 25)
            if r.get("times")
            else float("nan")
        )
        excess_us = r["time"] * 1e3 - r["SPIN_NS"] / 1e3
        print(f"| {r['SPIN_NS']} | {r['time']:.5f} | {iqr:.5f} | {excess_us:.2f} |")


if __name__ == "__main__":
    main()
