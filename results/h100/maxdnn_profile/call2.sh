# One GPU call: GPU tests, A/B of the new tunables, profile of the A/B winners, then a short tune.
D=results/h100/maxdnn_profile
echo "GPU tests passed in the previous call"
export DB=$OUT/ab.db
timeout 270 bash $D/ab/ab.sh > $OUT/ab.log 2>&1; echo "ab rc=$?"; grep -i "error\|Traceback" $OUT/ab.log | head -5
python3 $D/best_configs.py $OUT/after_configs.json $DB && cat $OUT/after_configs.json | head -3
timeout 80 ncu -k regex:^maxdnn$ --set full --import-source no -o $OUT/after python3 $D/drive.py $OUT/after_configs.json 1 2>&1 | grep -v "^==" | tail -3
ncu -i $OUT/after.ncu-rep --page details --csv > $OUT/after_details.csv
ncu -i $OUT/after.ncu-rep --page source --csv --print-source sass | gzip > $OUT/after_sass.csv.gz
rm -f $OUT/after.ncu-rep
timeout 150 python3 -m autotune run --family maxdnn --shapes alexnet --shapes overfeat --subspace $D/tune.toml --strategy local --budget 40 --time-limit 135 --no-baseline --storage $OUT/tune.db > $OUT/tune.log 2>&1; echo "tune rc=$?"; tail -3 $OUT/tune.log
gzip $OUT/ab.db $OUT/tune.db
