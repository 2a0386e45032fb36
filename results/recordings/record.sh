#!/bin/sh
# Exhaustive recordings for `autotune bench search`: brute force over every valid configuration
# of each family's recording subspace (autotune/data/recording/h100.toml) at the shapes below,
# then the export. Resumable: each run stops after LIMIT seconds (default 540) and the same
# command carries on where it stopped, evaluating nothing twice.
#   usage: sh results/recordings/record.sh [DB] [LIMIT_S] [OUTPUT]
set -e
DB=${1:-results/recordings/h100.db}
LIMIT=${2:-540}
OUTPUT=${3:-results/recordings/h100.jsonl.gz}
PY=${PYTHON:-python3}
SUB=autotune/data/recording/h100.toml
START=$(date +%s)

record() {
    left=$((LIMIT - ($(date +%s) - START)))
    if [ "$left" -lt 10 ]; then return 0; fi
    $PY -m autotune run --strategy brute_force --exhaustive --subspace "$SUB" --no-baseline \
        --time-limit "$left" --storage "$DB" "$@"
}

record --family chen_special --shape N=4096,K=3,C=1,F=16 --shape N=1024,K=5,C=1,F=64
record --family chen_general --shape N=128,K=5,C=64,F=64 --shape N=256,K=5,C=64,F=64 \
    --shape N=128,K=7,C=64,F=64 --shape N=128,K=7,C=256,F=256
record --family maxdnn --shape N=27,K=5,C=64,F=192,B=128 --shape N=13,K=3,C=256,F=256,B=128 \
    --shape N=12,K=3,C=256,F=512,B=128
record --family implicit_gemm --shape N=128,K=3,C=64,F=64 --shape N=128,K=3,C=256,F=256
record --family im2col_gemm --shape N=128,K=3,C=64,F=64 --shape N=128,K=5,C=64,F=64
record --family smem_channels --shape N=128,K=3,C=64,F=64 --shape N=256,K=3,C=64,F=64

$PY -m autotune export-recording --storage "$DB" --subspace "$SUB" --output "$OUTPUT"
