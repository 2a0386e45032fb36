# Nsight Compute (--set full) on the best conv3d config and on AlexNet conv2's best implicit_gemm
# (before its offset table) and maxdnn configs; each kernel's first launch, details page as text.
#   usage: OUT=dir sh results/h200/profiles/profile.sh [GPU]   (from the checkout root)
OUT=${OUT:-/tmp/profiles}; mkdir -p "$OUT"
G=${1:-0}; NCU=${NCU:-/usr/local/cuda/bin/ncu}
P=results/h200/profiles
prof() { # name family shape subspace kernel-regex
  CUDA_VISIBLE_DEVICES=$G timeout 150 $NCU --target-processes all --kernel-name "regex:^$5\$" --launch-count 1 --set full \
    --export $OUT/$1 --force-overwrite python3 -m autotune run --family $2 --shape $3 --subspace $4 \
    --strategy brute_force --exhaustive --no-baseline --storage /tmp/prof_$1.db --cache-dir /tmp/prof_cache > $OUT/$1.run.log 2>&1
  $NCU --import $OUT/$1.ncu-rep --page details > $OUT/$1.details.txt 2>&1
}
prof c3 conv3d D=256,R=128,Cc=128,Kd=5,Kr=5,Kc=5 $P/conv3d.toml conv3d
prof ig implicit_gemm N=27,K=5,C=64,F=192,B=128 $P/conv2d.toml implicit_gemm
prof mx maxdnn N=27,K=5,C=64,F=192,B=128 $P/conv2d.toml maxdnn
ls -la $OUT
