"""One launch of one configuration, for ncu: python profile_one.py SHAPE DTYPE 'JSON config'."""

import json
import sys

import cupy as cp
import harness as h

p = h.SHAPES[sys.argv[1]]
dtype, cfg = sys.argv[2], json.loads(sys.argv[3])
kern = h.Kernel(p, dtype, cfg)
x, w = h.inputs(p, dtype, 1)
y, scratch = h.outputs(p, dtype, cfg)
args = (h.as_cupy(x), h.as_cupy(w), h.as_cupy(y), scratch)
for _ in range(3):
    kern(*args)
cp.cuda.runtime.deviceSynchronize()
print("registers", kern.registers, "err", h.rel_l2(y, h.reference(p, x, w)))
