#!/usr/bin/env python
"""Kernel Tuner's convolution example in our words: a Kernel Tuner script whose only change is
the import line (`from kernel_tuner import tune_kernel` before).

    python examples/convolution/convolution.py [--strategy NAME] [--max-fevals N]

A 4096 x 4096 image, a 17 x 17 filter in constant memory (cmem_args), four tunables: the block's
width and height and the outputs per thread in each direction; the grid divides the image by
block size times tile size (grid_div_x, grid_div_y). Unlike the original, the script gives the
answer (computed here in float64 through FFTs), so that every configuration is checked.
"""

import argparse
from pathlib import Path

import numpy as np

from autotune import tune_kernel

SIDE = 4096
TAPS = 17


def correlate(image, weights):
    """The valid cross-correlation of a pre-padded image, in float64 through FFTs."""
    flipped = weights[::-1, ::-1].astype(np.float64)
    spectrum = np.fft.rfft2(image.astype(np.float64)) * np.fft.rfft2(flipped, s=image.shape)
    full = np.fft.irfft2(spectrum, s=image.shape)
    return full[TAPS - 1 : TAPS - 1 + SIDE, TAPS - 1 : TAPS - 1 + SIDE]


def tune(strategy=None, strategy_options=None):
    source = Path(__file__).with_name("convolution.cu")
    rng = np.random.default_rng(2)
    image = rng.standard_normal((SIDE + TAPS - 1) ** 2).astype(np.float32)
    weights = rng.standard_normal(TAPS * TAPS).astype(np.float32)
    out = np.zeros(SIDE * SIDE, dtype=np.float32)
    expected = correlate(image.reshape(SIDE + TAPS - 1, -1), weights.reshape(TAPS, TAPS))

    tune_params = {
        "block_size_x": [16 * i for i in range(1, 9)],
        "block_size_y": [2**i for i in range(6)],
        "tile_size_x": [1, 2, 4],
        "tile_size_y": [1, 2, 4],
    }
    return tune_kernel(
        "convolution_kernel",
        str(source),
        (SIDE, SIDE),
        [out, image, weights],
        tune_params,
        grid_div_x=["block_size_x", "tile_size_x"],
        grid_div_y=["block_size_y", "tile_size_y"],
        cmem_args={"d_filter": weights},
        answer=[expected.astype(np.float32).ravel(), None, None],
        atol=1e-3,
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
