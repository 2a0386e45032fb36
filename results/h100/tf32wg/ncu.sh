#!/bin/bash
# ncu on tc_wgmma: one launch (the second) of each 'SHAPE|CONFIG' argument, through
# profile_one.py: tensor pipes, issue, stalls, L2/DRAM, time. Run from the checkout root.
HERE=results/h100/tf32wg
ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' | grep -E "pipe_tensor" > /tmp/tensor_metrics.txt
T=""; for m in $(cat /tmp/tensor_metrics.txt); do T="$T,$m.avg.pct_of_peak_sustained_active"; done
M=""
for s in barrier long_scoreboard short_scoreboard math_pipe_throttle mio_throttle wait not_selected selected dispatch_stall lg_throttle no_instruction branch_resolving membar sleeping; do
  M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"; done
M="${M#,}$T,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg"
for a in "$@"; do shape=${a%%|*}; config=${a#*|}; echo "== $shape $config"
  ncu --metrics "$M" -k regex:^tc_wgmma$ -c 1 --launch-skip 1 python "$HERE/profile_one.py" "$shape" "$config" 2>&1 \
    | grep -v "^==PROF==" | grep -E "smsp|sm__|lts|dram|l1tex|gpu__|registers|ERR|rror"; done
