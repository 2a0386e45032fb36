#!/bin/bash
# Issue 20, second stop: the tensor-core peaks measured again (best of three protocol-2 medians),
# then tc_wgmma's TF32 path tuned on the 19 distinct shapes of alexnet, overfeat and vgg16 (NHWC)
# to 20, then 40, then 60 evaluations per shape (each call resumes the same database), then the
# generic odd-shape GPU test of the tensor-core families. Run from the checkout root on the H100;
# DB started as a copy of results/autotune.db without its evaluations (the transfer limit), and
# was merged back with `autotune merge`. Logs: peaks_best_of_3.log, run_tf32_wgmma_budget*.log.
# Third stop (2026-11-27): resumed to 100 and 140 evaluations per shape on the H100 with
# `PEAKS=0 BUDGETS="100 140" TESTS=0` (DB: a copy of results/autotune.db holding only tc_wgmma's
# evaluations, merged back the same way).
set -u
DB=${DB:-seed.db}
OUT=${OUT:-results/h100/tensor_cores}
if [ "${PEAKS:-1}" = 1 ]; then
python -m autotune device --remeasure --ceiling tc_peak_tf32 --ceiling tc_peak_bf16 \
  --ceiling tc_peak_fp16 --storage "$DB" > "$OUT/peaks_best_of_3.log" 2>&1
fi
for BUDGET in ${BUDGETS:-20 40 60}; do
  timeout 300 python -m autotune run --family tc_wgmma --shapes alexnet --shapes overfeat \
    --shapes vgg16 --layout NHWC --dtype tf32 --budget "$BUDGET" --time-limit 285 \
    --storage "$DB" > "$OUT/run_tf32_wgmma_budget$BUDGET.log" 2>&1
done
[ "${TESTS:-1}" = 1 ] && python -m pytest -v -p no:cacheprovider -m gpu tests/gpu/test_gpu.py -k "tc_"
