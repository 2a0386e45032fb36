# Final GPU call: a second, wider re-tune, then the profile of the best config per layer over
# every database of this work (A/B, first and second tune). prev/ holds call2's ab.db.gz and
# tune.db.gz (copied there from its output; not committed: they are in /work/notes/maxdnn-results.db).
D=results/h100/maxdnn_profile
P=/tmp/prev && mkdir -p $P && cp $D/prev/*.db.gz $P/ && gunzip -f $P/*.db.gz
timeout 200 python3 -m autotune run --family maxdnn --shapes alexnet --shapes overfeat --subspace $D/tune2.toml --strategy local --budget 120 --time-limit 180 --no-baseline --storage $OUT/tune2.db > $OUT/tune2.log 2>&1; echo "tune2 rc=$?"; tail -12 $OUT/tune2.log
python3 $D/best_configs.py $OUT/after_configs.json $P/ab.db $P/tune.db $OUT/tune2.db
timeout 90 ncu -k regex:^maxdnn$ --set full --import-source no -o $OUT/after python3 $D/drive.py $OUT/after_configs.json 1 2>&1 | grep -v "^==" | tail -12
ncu -i $OUT/after.ncu-rep --page details --csv > $OUT/after_details.csv
ncu -i $OUT/after.ncu-rep --page source --csv --print-source sass | gzip > $OUT/after_sass.csv.gz
rm -f $OUT/after.ncu-rep
gzip $OUT/tune2.db
