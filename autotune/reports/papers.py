"""The seed papers' figures, quoted as data: what REPORT.md puts our measurements beside."""

from __future__ import annotations

# 000: Chen et al., DAC 2017 (a Kepler K40m against cuDNN 5.1).
CHEN_FIG7_PER_K = {1: 6.16, 3: 6.43, 5: 2.90}  # average speedup over cuDNN 5.1 per filter size
CHEN_FIG7_MEAN = 5.16
CHEN_FIG8_PER_K = {3: 30.5, 5: 45.3, 7: 30.8}  # average improvement over cuDNN, %
CHEN_FIG8_MEAN = 35.5
CHEN_BANK_LOSS_PCT = 19
# Their Table 1: the general-case kernel's best configuration per filter size CHEN_TABLE1_K.
CHEN_TABLE1 = {
    "W": (32, 32, 64),
    "H": (4, 8, 4),
    "FTB": (64, 32, 32),
    "WT": (16, 8, 8),
    "FT": (4, 8, 8),
    "CSH": (2, 1, 1),
}
CHEN_TABLE1_K = (3, 5, 7)
# 002: Lavin, maxDNN, 2015. (cuDNN v2 RC1 %, maxDNN %) per layer, GTX 980 (Maxwell GM204),
# batch 128.
MAXDNN_TABLE1 = {
    ("alexnet", "conv1"): (32.5, 93.4),
    ("alexnet", "conv2"): (46.7, 95.5),
    ("alexnet", "conv3"): (51.5, 95.1),
    ("alexnet", "conv4"): (57.6, 95.0),
    ("alexnet", "conv5"): (55.9, 94.6),
    ("overfeat", "L1"): (39.6, 70.3),
    ("overfeat", "L2"): (74.0, 95.6),
    ("overfeat", "L3"): (54.2, 94.4),
    ("overfeat", "L4"): (62.9, 96.2),
    ("overfeat", "L5"): (63.2, 96.3),
}
# 001: the course report. Its GPU GEMM's time saving over the CPU, the report's only figure.
FC_TIME_SAVED_PCT = 99.86
