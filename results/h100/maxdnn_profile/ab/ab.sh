# A/B of the new maxdnn tunables (run from the worktree root on the GPU machine; DB=...)
set -e
python3 -m autotune run --family maxdnn --shape N=12,K=3,C=256,F=512,B=128 --shape N=12,K=3,C=512,F=1024,B=128 --subspace results/h100/maxdnn_profile/ab/g0.toml --exhaustive --no-baseline --storage $DB
python3 -m autotune run --family maxdnn --shape N=12,K=3,C=1024,F=1024,B=128 --shape N=20,K=5,C=96,F=256,B=128 --shape N=27,K=5,C=64,F=192,B=128 --shape N=55,K=11,C=3,F=64,B=128,stride=4 --subspace results/h100/maxdnn_profile/ab/g1.toml --exhaustive --no-baseline --storage $DB
python3 -m autotune run --family maxdnn --shape N=13,K=3,C=192,F=384,B=128 --subspace results/h100/maxdnn_profile/ab/g2.toml --exhaustive --no-baseline --storage $DB
python3 -m autotune run --family maxdnn --shape N=13,K=3,C=256,F=256,B=128 --subspace results/h100/maxdnn_profile/ab/g3.toml --exhaustive --no-baseline --storage $DB
python3 -m autotune run --family maxdnn --shape N=13,K=3,C=384,F=256,B=128 --subspace results/h100/maxdnn_profile/ab/g4.toml --exhaustive --no-baseline --storage $DB
python3 -m autotune run --family maxdnn --shape N=56,K=11,C=3,F=96,B=128,stride=4 --subspace results/h100/maxdnn_profile/ab/g5.toml --exhaustive --no-baseline --storage $DB
python3 -m autotune run --family maxdnn --shapes alexnet --shapes overfeat --subspace results/h100/maxdnn_profile/ab/big.toml --exhaustive --no-baseline --storage $DB
