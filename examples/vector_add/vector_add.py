#!/usr/bin/env python
"""Kernel Tuner's smallest example, the sum of two vectors, in our words: a Kernel Tuner script
whose only change is the import line (`from kernel_tuner import tune_kernel` before).

    python examples/vector_add/vector_add.py [--strategy NAME] [--max-fevals N]

Each thread adds one element; the one tunable is the block's width. The answer makes every
configuration's output checked before it is timed.
"""

import argparse

import numpy as np

from autotune import tune_kernel

KERNEL = """
__global__ void vector_add(float *sum, const float *x, const float *y, int length) {
    int at = blockIdx.x * block_size_x + threadIdx.x;
    if (at < length) {
        sum[at] = x[at] + y[at];
    }
}
"""


def tune(strategy=None, strategy_options=None):
    length = 10_000_000
    rng = np.random.default_rng(1)
    x = rng.standard_normal(length).astype(np.float32)
    y = rng.standard_normal(length).astype(np.float32)
    out = np.zeros_like(x)
    arguments = [out, x, y, np.int32(length)]
    tune_params = {"block_size_x": [128 + 64 * i for i in range(15)]}
    answer = [x + y, None, None, None]
    return tune_kernel(
        "vector_add",
        KERNEL,
        length,
        arguments,
        tune_params,
        answer=answer,
        strategy=strategy,
        strategy_options=strategy_options,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", default=None, help="default: brute_force")
    parser.add_argument("--max-fevals", type=int, default=None)
    args = parser.parse_args()
    options = {"max_fevals": args.max_fevals} if args.max_fevals else None
    tune(args.strategy, options)


if __name__ == "__main__":
    main()
