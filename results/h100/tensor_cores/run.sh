#!/bin/bash
# Issue 20 on the H100: the tensor-core families tuned on alexnet, overfeat and vgg16 in bf16, fp16
# and tf32 (NHWC), cuDNN measured in the same dtype and layout, then the families' GPU tests.
# Run from the checkout root: BUDGET=6 first (run_budget6.log), then BUDGET=20 resumed the same
# database (run_budget20.log). Logs go to $OUT (default: this directory).
set -u
DB=${DB:-results/autotune.db}
BUDGET=${BUDGET:-20}
OUT=${OUT:-results/h100/tensor_cores}
run() { timeout "$1" python -m autotune run --family tc_wgmma --family tc_implicit_gemm \
  --shapes alexnet --shapes overfeat --shapes vgg16 --layout NHWC --dtype "$2" --budget "$BUDGET" \
  --time-limit "$(( $1 - 15 ))" --storage "$DB" >> "$OUT/run.log" 2>&1; echo "run $2 rc=$?" >> "$OUT/run.log"; }
run 150 bf16
run 150 fp16
run 100 tf32
python -m pytest -v -p no:cacheprovider -m gpu tests/gpu/test_gpu_tc_implicit_gemm.py tests/gpu/test_gpu_tc_wgmma.py
