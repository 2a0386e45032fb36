#!/usr/bin/env bash
# The GPU calls of 2026-11-30's seventh session (session 55), on two H200s of one host
# (nvidia-h200-x2), from the checkout root, `.whl` carried (../shared/device/wheels.sh
# --kernel-tuner) and `.dbcarry` (the stores of the call before, where the machine was not
# kept; both start from session 54's final store, which holds the device's ceilings and the bf16
# table). Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261130g/calls.sh N
# GPU 0 and GPU 1 each run their own work with their own store (/tmp/home/<name>.db); nothing
# timed shares a GPU.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261130g
restore() {  # NAME: /tmp/home/NAME.db, from .dbcarry/NAME.db.gz where the machine was not kept
    [ -f "/tmp/home/$1.db" ] || { [ -f ".dbcarry/$1.db.gz" ] && gunzip -c ".dbcarry/$1.db.gz" > "/tmp/home/$1.db"; } || say "$1: starts empty"
}
save() {  # NAME: the store, checkpointed and gzipped into $OUT
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "/tmp/home/$1.db"
    gzip -c "/tmp/home/$1.db" > "$OUT/$1.db.gz"
}
table() {  # GPU DTYPE CALL: issue 36's table in DTYPE on one GPU, resumed until the call's time
    # is spent (the same command as the bf16 table of session 54, PERSISTENT now in the space)
    local g=$1 d=$2 c=$3 s=$SECONDS
    CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=/tmp/home/$d.db timeout -k 5 $(( $(left) - 25 )) python3 -m autotune run --family tc_wgmma --family tc_implicit_gemm --shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50 --layout NHWC --dtype "$d" --budget 60 --time-limit $(( $(left) - 45 )) > "$OUT/table_${d}_$c.log" 2>&1
    say "run $d table on GPU $g (call $c): rc=$? $((SECONDS - s)) s: $(tail -2 "$OUT/table_${d}_$c.log" | tr '\n' ' ')"
}
targets() {  # DTYPE CALL
    python3 results/tc_targets.py "/tmp/home/$1.db" > "$OUT/tc_targets_$1_$2.md" 2> "$OUT/tc_targets_$1_$2.log"
    say "tc_targets $1: rc=$? $(grep "stored in $1;" "$OUT/tc_targets_$1_$2.md")"
}
ab() {  # the persistent grid A/B (persistent_ab.py), on GPU 0, into /tmp/home/ab.db
    local i S s
    while read -r i S; do
        t=$(( $(left) - 15 )); [ "$t" -lt 30 ] && { say "ab $S: not run (time)"; continue; }
        s=$SECONDS; CUDA_VISIBLE_DEVICES=0 timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma --shape "$S" --subspace "$HERE/ab/ab_$i.toml" --strategy brute_force --exhaustive --no-baseline --storage /tmp/home/ab.db >> "$OUT/ab.log" 2>&1
        say "ab $S: rc=$? $((SECONDS - s)) s"
    done < "$HERE/ab/shapes.txt"
    python3 "$HERE/persistent_ab.py" table /tmp/home/ab.db > "$OUT/persistent_ab.md" 2>&1
    cat "$OUT/persistent_ab.md" >> "$OUT/summary.txt"
}
case "${1:?1 to 5}" in
1)  # GPU 1: the tf32 table starts. GPU 0: the GPU tests of PERSISTENT (test_gpu_tc_wgmma's
    # persistent grids at odd shapes in every dtype, test_gpu_export's persistent plan through
    # the C++ launch, test_runtime through the driver launcher), then the A/B.
    install || exit 1; restore tf32
    table 1 tf32 1 &
    ( export CUDA_VISIBLE_DEVICES=0; CAP=200 gpu_tests test_gpu_tc_wgmma test_gpu_export test_runtime )
    ab
    wait; save tf32; save ab
    (cd "$OUT" && tar -czf call1.tgz *.log *.md && rm -f *.log *.md) ;;
3)  # fp16's table on both GPUs (tf32's finished in call 2; fp16 had 15 of 42 layers): GPU 0
    # resumes VGG-16 then ResNet-50 in order; GPU 1, on a copy of the store, ResNet-50's last 12
    # layers. Then the copy merged back, and the targets.
    install || exit 1; restore fp16; cp /tmp/home/fp16.db /tmp/home/fp16b.db
    R="N=28,K=3,C=128,F=128,B=32 N=28,K=1,C=512,F=256,B=32 N=14,K=3,C=256,F=256,B=32,stride=2 N=14,K=1,C=256,F=1024,B=32 N=14,K=1,C=512,F=1024,B=32,stride=2 N=14,K=1,C=1024,F=256,B=32 N=14,K=3,C=256,F=256,B=32 N=14,K=1,C=1024,F=512,B=32 N=7,K=3,C=512,F=512,B=32,stride=2 N=7,K=1,C=512,F=2048,B=32 N=7,K=1,C=1024,F=2048,B=32,stride=2 N=7,K=1,C=2048,F=512,B=32 N=7,K=3,C=512,F=512,B=32"
    shapes=(); for S in $R; do shapes+=(--shape "$S"); done
    ( s=$SECONDS; CUDA_VISIBLE_DEVICES=1 AUTOTUNE_DB=/tmp/home/fp16b.db timeout -k 5 $(( $(left) - 40 )) python3 -m autotune run --family tc_wgmma --family tc_implicit_gemm "${shapes[@]}" --layout NHWC --dtype fp16 --budget 60 --time-limit $(( $(left) - 60 )) > "$OUT/table_fp16b_3.log" 2>&1
      say "run fp16 ResNet-50's last layers on GPU 1: rc=$? $((SECONDS - s)) s" ) &
    ( s=$SECONDS; CUDA_VISIBLE_DEVICES=0 AUTOTUNE_DB=/tmp/home/fp16.db timeout -k 5 $(( $(left) - 40 )) python3 -m autotune run --family tc_wgmma --family tc_implicit_gemm --shapes vgg16 --shapes resnet50 --layout NHWC --dtype fp16 --budget 60 --time-limit $(( $(left) - 60 )) > "$OUT/table_fp16_3.log" 2>&1
      say "run fp16 VGG-16 and ResNet-50 on GPU 0: rc=$? $((SECONDS - s)) s" ) &
    wait
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" /tmp/home/fp16b.db
    AUTOTUNE_DB=/tmp/home/fp16.db python3 -m autotune merge /tmp/home/fp16b.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    targets fp16 3; save fp16
    (cd "$OUT" && tar -czf call3.tgz *.log *.md && rm -f *.log *.md) ;;
4)  # fp16's three layers call 2 had not reached (AlexNet's conv1 and 13x13 C = 256 F = 256, on
    # GPU 0; OverFeat's conv1 on GPU 1), then the targets.
    install || exit 1; restore fp16; cp /tmp/home/fp16.db /tmp/home/fp16b.db
    one() {  # GPU STORE SHAPE...
        local g=$1 db=$2 s=$SECONDS; shift 2; local a=(); for S in "$@"; do a+=(--shape "$S"); done
        CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=/tmp/home/$db.db timeout -k 5 $(( $(left) - 30 )) python3 -m autotune run --family tc_wgmma --family tc_implicit_gemm "${a[@]}" --layout NHWC --dtype fp16 --budget 60 --time-limit $(( $(left) - 45 )) > "$OUT/table_${db}_4.log" 2>&1
        say "run fp16 $* on GPU $g: rc=$? $((SECONDS - s)) s"
    }
    one 0 fp16 N=55,K=11,C=3,F=64,B=128,stride=4 N=13,K=3,C=256,F=256,B=128 &
    one 1 fp16b N=56,K=11,C=3,F=96,B=128,stride=4 & wait
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" /tmp/home/fp16b.db
    AUTOTUNE_DB=/tmp/home/fp16.db python3 -m autotune merge /tmp/home/fp16b.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    targets fp16 4; save fp16
    (cd "$OUT" && tar -czf call4.tgz *.log *.md && rm -f *.log *.md) ;;
5)  # Why the 56x56 1x1 layers gained 1-5% from PERSISTENT where about 20% was predicted:
    # Nsight Compute on 56x56 C = 256 F = 128 bf16 (ab/ab_2.toml), session 54's best (4 tiles a
    # block on 98 blocks) against its persistent variant (132 blocks, 3 turns). Predicted: DRAM
    # throughput over half its peak in both, and about the same bytes moved.
    install || exit 1
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    S=N=56,K=1,C=256,F=128,B=32,dtype=bf16,layout=NHWC
    for v in stored persistent; do
        if [ $v = stored ]; then tpb=4 p=0; else tpb=1 p=1; fi
        sed -e "s/^TILES_PER_BLOCK = .*/TILES_PER_BLOCK = [$tpb]/" -e "s/^PERSISTENT = .*/PERSISTENT = [$p]/" "$HERE/ab/ab_2.toml" > "/tmp/ab_2_$v.toml"
        timeout -k 5 $(( $(left) / 2 )) $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-count 1 --set full ${NCU_OPTS:-} --export "$OUT/ncu_$v" --force-overwrite python3 -m autotune run --family tc_wgmma --shape "$S" --subspace "/tmp/ab_2_$v.toml" --strategy brute_force --exhaustive --no-baseline --storage "/tmp/ncu_${v}_$$.db" > "$OUT/ncu_$v.log" 2>&1
        say "ncu $v: rc=$?"
        $NCU --import "$OUT/ncu_$v.ncu-rep" --page details > "$OUT/ncu_${v}_details.txt" 2>&1; rm -f "$OUT/ncu_$v.ncu-rep"
        grep -E "Duration|Grid Size|DRAM Throughput|Memory Throughput|L2 Cache Throughput|SM Busy|Compute \(SM\) Throughput|Issue Slots Busy" "$OUT/ncu_${v}_details.txt" | head -10 >> "$OUT/summary.txt"
    done
    (cd "$OUT" && tar -czf call5.tgz ncu_* && rm -rf ncu_*) ;;
2)  # Both tables, each on its GPU, resumed where the last call stopped; then their targets.
    install || exit 1; restore tf32; restore fp16
    table 0 fp16 "$1" & table 1 tf32 "$1" & wait
    targets tf32 "$1"; targets fp16 "$1"
    save tf32; save fp16
    (cd "$OUT" && tar -czf "call$1.tgz" *.log *.md && rm -f *.log *.md) ;;
esac
