#!/usr/bin/env bash
# Data parallel equivalence on CPU, under mpirun:
#   [RANKS=R] tests/distributed/equivalence.sh NET.net [STEPS] [BATCH] [TOLERANCE] [FLAGS...]
# From the same initial weights, R (2) ranks x BATCH and 1 rank x R*BATCH take
# STEPS steps (same global batches: DistributedSampler deals rank r every
# R-th sample of the same shuffled order); the weights must agree within
# TOLERANCE (1e-4) of the update plus float32 rounding (tools/compare_weights.py), and the
# ranks must end with identical weights (the program checks that itself
# at the end of a multi-rank run and fails if not). On CPUs the two runs
# should in fact agree to the bit: the output says "worst 0.00e+00".
set -euo pipefail
net=$1 steps=${2:-20} batch=${3:-16} tol=${4:-1e-4}
shift $(($# < 4 ? $# : 4))  # what is left: flags for both runs (e.g. --no-sync-every 2)
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3} ranks=${RANKS:-2}
tools=$(cd "$(dirname "$0")/../../tools" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$ddpc" "$net" --target cpu -o "$d/prog"
"$d/prog" --max-steps 0 --seed 5 --export "$d/w0.safetensors" --quiet
common=(--init "$d/w0.safetensors" --max-steps "$steps" "$@")
"$d/prog" "${common[@]}" --quiet --batch-size $((ranks * batch)) --export "$d/one.safetensors"
OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np "$ranks" -x OMP_NUM_THREADS "$d/prog" "${common[@]}" --batch-size "$batch" \
    --export "$d/two.safetensors" > "$d/two.txt" 2>&1 || { cat "$d/two.txt"; exit 1; }
cat "$d/two.txt"
"$python" "$tools/compare_weights.py" "$d/w0.safetensors" "$d/two.safetensors" "$d/one.safetensors" --steps "$steps" --tol "$tol"
