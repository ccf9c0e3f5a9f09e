#!/usr/bin/env bash
# Data parallel equivalence on CPU, under mpirun:
#   tests/distributed/equivalence.sh NET.net [STEPS] [BATCHES] [RANKS] [FLAGS...]
# From the same initial weights, for every per-rank batch B in BATCHES ("16
# 32 64") and rank count R in RANKS ("2 3"): R ranks x B (one OpenMP thread
# each) and 1 rank x R*B (every thread of the machine) take STEPS steps on
# the same global batches (DistributedSampler deals rank r every R-th sample
# of the same shuffled order). Their exported weights must be the same bytes
# (cmp), and the ranks must end with identical weights (the program checks
# that itself at the end of a multi-rank run). FLAGS go to every run (e.g.
# --no-sync-every 2). One line per pair: "identical" or "DIFFERENT", then
# tools/compare_weights.py's account of how far apart they are.
# RANKS_VECTOR=8 runs the ranks on 8-float vectors (DDP_CPU_VECTOR), the
# single rank on the widest the CPU has: a run moved between machines (with
# DDP_CPU_CONV=own, which every run gets: oneDNN's convs follow the CPU's
# instruction set, the runtime's own do not).
set -euo pipefail
net=$1 steps=${2:-20} batches=${3:-16} rank_counts=${4:-2}
shift $(($# < 4 ? $# : 4))  # what is left: flags for every run
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
tools=$(cd "$(dirname "$0")/../../tools" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$ddpc" "$net" --target cpu -o "$d/prog"
"$d/prog" --max-steps 0 --seed 5 --export "$d/w0.safetensors" --quiet
common=(--init "$d/w0.safetensors" --max-steps "$steps" "$@")
status=0
vector=${RANKS_VECTOR:+ on $RANKS_VECTOR-float vectors}
for batch in $batches; do
    for ranks in $rank_counts; do
        one="$d/one_$((ranks * batch)).safetensors" many="$d/many_${ranks}x$batch.safetensors"
        [ -e "$one" ] || "$d/prog" "${common[@]}" --quiet --batch-size $((ranks * batch)) --export "$one"
        OMP_NUM_THREADS=1 DDP_CPU_VECTOR=${RANKS_VECTOR:-} DDP_CPU_CONV=${DDP_CPU_CONV:-} \
            mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
            -x OMP_NUM_THREADS -x DDP_CPU_VECTOR -x DDP_CPU_CONV "$d/prog" \
            "${common[@]}" --batch-size "$batch" --export "$many" > "$d/many.txt" 2>&1 || { cat "$d/many.txt"; exit 1; }
        grep -q "weights identical on all $ranks ranks" "$d/many.txt" || { cat "$d/many.txt"; status=1; }
        if cmp -s "$one" "$many"; then
            echo "$(basename "$net") $ranks x $batch$vector against 1 x $((ranks * batch)), $steps steps: identical"
        else
            echo "$(basename "$net") $ranks x $batch$vector against 1 x $((ranks * batch)), $steps steps: DIFFERENT"
            "$python" "$tools/compare_weights.py" "$d/w0.safetensors" "$many" "$one" --steps "$steps" --tol 0 || true
            status=1
        fi
    done
done
exit $status
