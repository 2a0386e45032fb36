#!/bin/bash
# tc_wgmma in TF32 on the H100: the family's GPU tests (odd shapes, every dtype), then a short
# sweep on four layers against cuDNN TF32: the 24 distinct tc_wgmma configs of the BF16/FP16
# tuning (results/h100/tensor_cores/best_{bf16,fp16}.csv) evaluated in TF32 first (seed.py),
# then the surrogate strategy up to BUDGET evaluations a layer. Run from the checkout root;
# everything goes to $OUT (default: this directory).
set -u
OUT=${OUT:-results/h100/tf32wg}
DB=${DB:-$OUT/tf32wg.db}
BUDGET=${BUDGET:-44}
HERE=results/h100/tf32wg
SHAPES=(N=13,K=3,C=192,F=384,B=128 N=12,K=3,C=1024,F=1024,B=128 N=56,K=3,C=128,F=256,B=32
  N=55,K=11,C=3,F=64,B=128,stride=4)  # AlexNet conv3, OverFeat L5, VGG16 conv3_1, AlexNet conv1
timeout 200 python -m pytest -v -p no:cacheprovider -m gpu tests/gpu/test_gpu_tc_wgmma.py \
  > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?" >> "$OUT/gpu_tests.log"
timeout 150 python "$HERE/seed.py" "$DB" results/h100/tensor_cores/best_bf16.csv \
  results/h100/tensor_cores/best_fp16.csv -- "${SHAPES[@]}" > "$OUT/seed.log" 2>&1
echo "seed rc=$?" >> "$OUT/seed.log"
timeout 200 python -m autotune run --family tc_wgmma "${SHAPES[@]/#/--shape=}" --layout NHWC \
  --dtype tf32 --budget "$BUDGET" --time-limit 185 --storage "$DB" > "$OUT/run.log" 2>&1
echo "run rc=$?" >> "$OUT/run.log"
python -m autotune best --storage "$DB" --dtype tf32 --output "$OUT/best_tf32.md"
python -m autotune best --storage "$DB" --dtype tf32 --format csv --output "$OUT/best_tf32.csv"
