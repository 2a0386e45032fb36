#!/usr/bin/env bash
# Session 78's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261203/calls.sh K, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin", ".dbcarry"]: `.whl` less Kernel Tuner's wheels, and the
# tables' store (../20261201k/call3/store.db.gz with the store_delta.db.gz of ../20261202,
# b, c, d, e and f merged in, in turn, plus this session's deltas of the calls before) as
# .dbcarry/autotune.db.gz. Sent with results/campaigns/20261129-h100.db.gz,
# results/recordings/h100.db.gz, ../20261201k/call3/store.db.gz, ../20261201b and c's stores
# and the six store deltas moved out of the checkout, which is otherwise larger than one call
# carries. Each call returns what it stored as delta.db.gz (store_delta.py).
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261203
BOTH=results/h200/20261202e/both_sides_best.py  # ours (the store's pick) and cuDNN, in turns
PEAKS="--shape N=12,K=3,C=1024,F=1024,B=128 --shape N=28,K=3,C=512,F=512,B=32 --shape N=12,K=3,C=512,F=1024,B=128"
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
mark() { python3 $HERE/store_delta.py mark "$AUTOTUNE_DB" > /tmp/marks.json; }
delta() { python3 $HERE/store_delta.py cut "$AUTOTUNE_DB" /tmp/marks.json /tmp/delta.db | tee -a "$OUT/summary.txt" && gzip -c /tmp/delta.db > "$OUT/delta.db.gz"; }
search() {  # DTYPE BUDGET SECONDS SHAPE-ARGS...: the default search of the current code
    local d=$1 b=$2 t=$3 s=$SECONDS; shift 3
    [ "$t" -gt $(( $(left) - 30 )) ] && t=$(( $(left) - 30 ))
    [ "$t" -lt 30 ] && { say "search $d: not run (time)"; return; }
    timeout -k 5 $(( t + 20 )) python3 -m autotune run --family tc_wgmma "$@" --layout NHWC --dtype $d --budget $b --no-baseline --time-limit $t > "$OUT/search_$d.log" 2>&1
    say "search $d to $b: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/search_$d.log")"
}
both_sides() {  # DTYPE REPEATS SHAPE-ARGS...: ours (the store's best) and cuDNN, order alternating
    local d=$1 r=$2 s=$SECONDS t=$(( $(left) - 15 )); shift 2
    [ "$t" -lt 30 ] && { say "both_sides $d: not run (time)"; return; }
    timeout -k 5 $t python3 $BOTH "$AUTOTUNE_DB" --dtype $d --repeats $r "$@" > "$OUT/both_sides_$d.md" 2> "$OUT/both_sides_$d.log"
    say "both_sides $d x$r: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/both_sides_$d.md" >> "$OUT/summary.txt"
}
peaks() {
    s=$SECONDS; timeout -k 5 90 python3 -m autotune device --remeasure --ceiling tc_peak_tf32 --ceiling tc_peak_bf16 --ceiling tc_peak_fp16 > "$OUT/device.log" 2>&1
    say "peaks: rc=$? $((SECONDS - s)) s"
    python3 -c "import sqlite3, sys; [print(*r) for r in sqlite3.connect(sys.argv[1]).execute(\"select name, value, unit, created_at from ceilings where name like 'tc_peak%' order by id desc limit 3\")]" "$AUTOTUNE_DB" >> "$OUT/summary.txt"
}
case "${1:?1}" in
1)  # The issue's peak target: the best layer at 90% of its dtype's measured tensor-core peak
    # (session 74: tf32 88.3, bf16 87.3, fp16 88.3%). The three layers nearest it in 16 bits
    # (VGG-16/OverFeat-sized 3x3 layers: 12x12 C = 1024 F = 1024 and C = 512 F = 1024 at
    # B = 128, 28x28 C = 512 F = 512) hold only 3 evaluations each of the current code
    # (07695b7025a6c4e8), the old ranking's top measured again; tf32's hold 144-148. The
    # default search of the current code to 150 evaluations on those six studies.
    # Predicted: 2-3.5 evaluations a second (session 72), about 60 s a study; the pick moves
    # on 2-4 of the six, by 1-3% (the 12x12 C = 1024 layer's 4.36 waves of 128 x 256 tiles
    # favour 192 x 128, 5.8 waves, which the old text's searches picked there).
    install || exit 1
    restore_db
    mark
    clocks
    search bf16 150 260 $PEAKS
    search fp16 150 260 $PEAKS
    clocks
    delta; pack ;;
2)  # Call 1's searches, then the peaks and both sides on the searched layers, three times
    # each, the order alternating, and each dtype's peak share (../20261202c/peak_share.py).
    install || exit 1
    restore_db
    mark
    clocks
    peaks
    for d in bf16 fp16; do both_sides $d 3 $PEAKS; done
    python3 results/h200/20261202c/peak_share.py "$AUTOTUNE_DB" "$OUT"/both_sides_bf16.md "$OUT"/both_sides_fp16.md > "$OUT/peak_share.md" 2>&1
    cat "$OUT/peak_share.md" >> "$OUT/summary.txt"
    clocks
    delta; pack ;;
3)  # Call 2: the searches moved no best of the peak layers by more than 0.5% (bf16 12x12
    # C = 1024 F = 1024 0.4249 -> 0.4247 ms, 192 x 128 tiles of three consumer warpgroups);
    # measured beside the peaks of this call (bf16 915.4, fp16 873.3 TFLOP/s, 2.4% under
    # session 73's) the best layers are at 89.5% (bf16) and 88.4% (fp16). What bounds them?
    # The peak loop reads 80 of the ~128 bytes a clock shared memory gives (ceiling_wgmma.cu);
    # a convolution's tiles also land their operands there: 192 x 128 tiles, each warpgroup
    # reading the shared 128 filter rows again, ask about 96 bytes a clock of wgmma reads and
    # 53 of TMA writes at the full tensor rate (149 > 128), 128 x 256 tiles 80 + 48.
    # Nsight Compute (its sections, clocks left alone) on bf16's 12x12 C = 1024 F = 1024:
    # our pick, a 128 x 256 tile of the same kind, cuDNN's kernel, and the peak loop.
    # Predicted: our pick's shared-memory pipe at 85-100% of its peak with the tensor pipe at
    # 80-90%; the peak loop's tensor pipe above 95% at a lower SM clock than ours (power);
    # cuDNN's shared memory as busy as ours.
    install || exit 1
    restore_db
    clocks
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats"
    # (call 3's first try asked for regex metrics that ncu 2025 names otherwise: the sections
    # alone, and the names it has for the tensor pipes and shared memory listed)
    "$NCU" --query-metrics --chip gh100 2>&1 | grep -E "gmma|pipe_shared|mem_shared|tma" | cut -c1-160 > "$OUT/ncu_metric_names.txt"
    MORE="--metrics sm__cycles_elapsed.avg.per_second"
    L12="N=12,K=3,C=1024,F=1024,B=128"
    PICK='{"BM":192,"BN":128,"C_OUTER":1,"GEMM_1X1":0,"L1_CACHE":0,"MULTICAST":1,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":4,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":3}'
    WIDE='{"BM":128,"BN":256,"C_OUTER":1,"GEMM_1X1":0,"L1_CACHE":0,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":4,"STAGING":1,"STORE_TMA":0,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2}'
    for v in pick wide; do
        c=$PICK; [ $v = wide ] && c=$WIDE
        s=$SECONDS; timeout -k 5 120 "$NCU" --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 --clock-control none $SECTIONS $MORE \
            python3 results/h200/20261201/placement.py --shape $L12 --dtype bf16 --config "$c" --repeats 5 > "$OUT/ncu_ours_$v.txt" 2>&1
        say "ncu ours $v: rc=$? $((SECONDS - s)) s"
    done
    s=$SECONDS; timeout -k 5 120 "$NCU" --target-processes all --profile-from-start off --clock-control none $SECTIONS $MORE \
        python3 results/h200/20261202b/cudnn_flushed.py 12 3 1024 1024 128 1 bf16 > "$OUT/ncu_cudnn.txt" 2>&1
    say "ncu cudnn: rc=$? $((SECONDS - s)) s"
    s=$SECONDS; AUTOTUNE_DB=/tmp/scratch.db timeout -k 5 120 "$NCU" --target-processes all --kernel-name regex:wgmma_peak --launch-skip 2 --launch-count 1 --clock-control none $SECTIONS $MORE \
        python3 -m autotune device --remeasure --ceiling tc_peak_bf16 > "$OUT/ncu_peak.txt" 2>&1
    say "ncu peak: rc=$? $((SECONDS - s)) s"
    for f in "$OUT"/ncu_*.txt; do
        say "== $(basename $f): $(grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Shared Memory|gmma|tma|per_second|lsu_wavefronts_mem_shared" "$f" | sed 's/  */ /g' | head -24 | tr '\n' ';')"
    done
    clocks
    pack ;;
4)  # Call 3: on bf16's 12x12 C = 1024 F = 1024 our pick keeps the tensor pipe busy 93.5% of
    # its cycles at 1.64 GHz, the peak loop 98.5% at 1.75 GHz (cuDNN's kernel 84.2% at 1.67):
    # the clock the board holds under a kernel that also moves its operands costs 6.3%, the
    # pipe's idle cycles 5% (the 5.82 waves' last one alone 3%). Now the 16-bit 1x1 layers
    # below cuDNN, which take 12-18 us: bf16's 28x28 C = 512 F = 256 (0.956x) and 7x7 C = 512
    # F = 2048 (0.946x), each side's kernel after protocol 2's flush (the cache left alone).
    # Predicted: both sides read the layer's bytes from DRAM (38.5 and 10 MB with the output);
    # on 28x28 neither holds DRAM above 70% of its peak; cuDNN's clock the same as ours
    # (short kernels do not throttle); its tensor pipe no busier than ours.
    install || exit 1
    clocks
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats"
    MORE="--metrics sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
    C28='{"BM":128,"BN":128,"C_OUTER":1,"GEMM_1X1":1,"L1_CACHE":0,"MULTICAST":1,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":6,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2}'
    C7='{"BM":128,"BN":112,"C_OUTER":1,"GEMM_1X1":1,"L1_CACHE":0,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":6,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2}'
    for v in 28 7; do
        if [ $v = 28 ]; then shape=N=28,K=1,C=512,F=256,B=32; c=$C28; args="28 1 512 256 32 1"; else shape=N=7,K=1,C=512,F=2048,B=32; c=$C7; args="7 1 512 2048 32 1"; fi
        s=$SECONDS; timeout -k 5 120 "$NCU" --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 --cache-control none --clock-control none $SECTIONS $MORE \
            python3 results/h200/20261201/placement.py --shape $shape --dtype bf16 --config "$c" --repeats 5 > "$OUT/ncu_ours_$v.txt" 2>&1
        say "ncu ours $v: rc=$? $((SECONDS - s)) s"
        s=$SECONDS; timeout -k 5 120 "$NCU" --target-processes all --profile-from-start off --cache-control none --clock-control none $SECTIONS $MORE \
            python3 results/h200/20261202b/cudnn_flushed.py $args bf16 > "$OUT/ncu_cudnn_$v.txt" 2>&1
        say "ncu cudnn $v: rc=$? $((SECONDS - s)) s"
    done
    for f in "$OUT"/ncu_*.txt; do
        say "== $(basename $f): $(grep -E "^ *[a-z_0-9]+ \(|Duration|SM Frequency|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit|dram__bytes|Grid Size|Block Size|Registers" "$f" | sed 's/  */ /g' | head -20 | tr '\n' ';')"
    done
    clocks
    pack ;;
5)  # The closing table of call 1's searches showed, for bf16's 12x12 C = 1024 F = 1024, a
    # configuration of an older text of the kernel (0.4203 ms, measured once) where `autotune
    # best` reads the current code's 0.425. Fixed (674e6d3): the run's store reads the digests
    # its runner built. The same command again (the studies at their budget: it resumes and
    # confirms), then `autotune best` on the same shape.
    # Predicted: "0 new evaluations"; the table's row is the current code's pick, 0.42-0.43 ms
    # with its repeats counted, as `autotune best` shows it.
    install || exit 1
    restore_db
    s=$SECONDS; timeout -k 5 200 python3 -m autotune run --family tc_wgmma --shape N=12,K=3,C=1024,F=1024,B=128 --layout NHWC --dtype bf16 --budget 150 --no-baseline > "$OUT/run_again.log" 2>&1
    say "run again: rc=$? $((SECONDS - s)) s"; grep -E "new evaluations|^\| tc_wgmma" "$OUT/run_again.log" | cut -c1-400 >> "$OUT/summary.txt"
    python3 -m autotune best --family tc_wgmma --dtype bf16 --columns shape,config,time_ms,measurements 2>&1 | grep "N=12,K=3,C=1024,F=1024" | cut -c1-400 >> "$OUT/summary.txt"
    pack ;;
6)  # Call 4: cuDNN's kernel on bf16's 7x7 C = 512 F = 2048 (128 x 224 tiles, 112 of them, 4
    # stages, clusters of 4) is 11% faster warm than our pick (128 x 112, persistent). Our own
    # 128 x 224 tiles are slower still (0.0134 ms stored by TMA at 3 stages, 0.0161-0.0166 from
    # registers at 3-5), so the stages are not it. Nsight Compute, warp states and schedulers
    # included, on ours at 128 x 224 (3 stages, TMA store), our pick and cuDNN's.
    # Predicted: at the same clock, ours at 128 x 224 has its consumer warps waiting on the
    # slots' mbarriers (the loads) for most of their stalls, and issues more instructions a tile
    # than cuDNN's; cuDNN's L2 sectors read a tile fewer (its clusters share an operand).
    install || exit 1
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    "$NCU" --query-metrics --chip gh100 2>&1 | grep -i -E "stall|issue_active|inst_executed.sum " | cut -c1-140 > "$OUT/ncu_stall_names.txt"
    SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats"
    MORE="--metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum"
    W224='{"BM":128,"BN":224,"C_OUTER":1,"GEMM_1X1":1,"L1_CACHE":0,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":0,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":3,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2}'
    C7='{"BM":128,"BN":112,"C_OUTER":1,"GEMM_1X1":1,"L1_CACHE":0,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":6,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2}'
    for v in w224 pick; do
        c=$W224; [ $v = pick ] && c=$C7
        s=$SECONDS; timeout -k 5 120 "$NCU" --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 --cache-control none --clock-control none --print-details all $SECTIONS $MORE \
            python3 results/h200/20261201/placement.py --shape N=7,K=1,C=512,F=2048,B=32 --dtype bf16 --config "$c" --repeats 5 > "$OUT/ncu_ours_$v.txt" 2>&1
        say "ncu ours $v: rc=$? $((SECONDS - s)) s"
    done
    s=$SECONDS; timeout -k 5 120 "$NCU" --target-processes all --profile-from-start off --cache-control none --clock-control none --print-details all $SECTIONS $MORE \
        python3 results/h200/20261202b/cudnn_flushed.py 7 1 512 2048 32 1 bf16 > "$OUT/ncu_cudnn.txt" 2>&1
    say "ncu cudnn: rc=$? $((SECONDS - s)) s"
    for f in "$OUT"/ncu_ours_*.txt "$OUT"/ncu_cudnn.txt; do
        say "== $(basename $f): $(grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Executed Instructions |Issue Slots Busy|No Eligible|Warp Cycles Per Issued|lts__t_sectors|smsp__inst_executed.sum|Stall|stall" "$f" | sed 's/  */ /g' | head -30 | tr '\n' ';')"
    done
    pack ;;
7)  # Call 6: warm, cuDNN's kernel on bf16's 7x7 C = 512 F = 2048 reads 499k L2 sectors where
    # ours at 128 x 224 reads 760k and our pick 1,216k, and issues 644k instructions to our
    # 1,119k / 1,393k; all three at 1.76-1.80 GHz. Its clusters of four share an operand. Ours
    # in clusters of four lost at 128 x 224 (0.0195 ms) because 130 tiles in clusters of four
    # do not fit at once: an H200 holds 30 such clusters (120 blocks; session 65), and the grid
    # is also rounded up to whole clusters. cuDNN's 112 tiles are 28 clusters. In our
    # orientation 256 x 128 tiles make 7 x 16 = 112 too (two consumer warpgroups of two m64
    # rows), and no search of the stores ever measured a 256-pixel tile on these layers.
    # wide256.toml, exhaustively, on the four 16-bit 1x1 layers below cuDNN in both dtypes,
    # then both sides on them.
    # Predicted: on 7x7 C = 512 F = 2048, 256 x 128 in clusters of four sharing the input
    # (MULTICAST = 1) is the pick in both dtypes, 5-10% under the current pick (12.35 us in
    # bf16), at 1.0x cuDNN or more; on 14x14 C = 1024 F = 512 (100 tiles, 25 clusters) 2-5%
    # faster; on the other two (196 and 50 tiles, neither whole clusters of four along F)
    # no new pick.
    install || exit 1
    restore_db
    mark
    W16="--shape N=7,K=1,C=512,F=2048,B=32 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=28,K=1,C=512,F=256,B=32"
    for d in bf16 fp16; do
        s=$SECONDS; timeout -k 5 200 python3 -m autotune run --family tc_wgmma $W16 --layout NHWC --dtype $d --subspace $HERE/wide256.toml --exhaustive --no-baseline --time-limit 180 > "$OUT/sweep_$d.log" 2>&1
        say "sweep wide256 $d: rc=$? $((SECONDS - s)) s: $(grep 'new evaluations' "$OUT/sweep_$d.log")"
        grep "^| tc_wgmma" "$OUT/sweep_$d.log" | cut -c1-330 >> "$OUT/summary.txt"
    done
    for d in bf16 fp16; do both_sides $d 3 $W16; done
    delta; pack ;;
esac
