# One GPU call (from the worktree root on the GPU machine; OUT set): the A/B of REG_USAGE_LEVEL
# and MIN_BLOCKS = 3 on the ten layers (protocol 2, fresh database), then Nsight Compute on the
# two changed configurations and their baselines (OverFeat L4, AlexNet conv3).
D=results/h100/maxdnn_profile
A=$D/ab85
DB=$OUT/ab85.db
for name in best0 best1 best2 best3 best4 best5 best6 wide w16x8; do
    shapes=$(python3 -c "import json; print(' '.join('--shape ' + s for s in json.load(open('$A/shapes.json'))['$name']))")
    echo "== $name $shapes" >> $OUT/ab85.log
    timeout 120 python3 -m autotune run --family maxdnn $shapes --subspace $A/$name.toml \
        --exhaustive --no-baseline --storage $DB >> $OUT/ab85.log 2>&1 || echo "$name rc=$?"
done
python3 $A/compare85.py $DB > $OUT/ab85.txt; cat $OUT/ab85.txt
for p in prof5 prof10; do
    timeout 60 ncu -k regex:^maxdnn$ --set full --import-source no -o $OUT/$p \
        python3 $D/drive.py $A/$p.json 1 2>&1 | grep -v "^==" | tail -3
    ncu -i $OUT/$p.ncu-rep --page details --csv > $OUT/${p}_details.csv
    ncu -i $OUT/$p.ncu-rep --page source --csv --print-source sass | gzip > $OUT/${p}_sass.csv.gz
    rm -f $OUT/$p.ncu-rep
    python3 $D/summarize.py $A/$p.json $OUT/${p}_details.csv $OUT/${p}_sass.csv.gz
done
gzip $OUT/ab85.db
