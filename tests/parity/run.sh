#!/usr/bin/env bash
# Parity of a generated CPU program with PyTorch in float64, for one net:
#   tests/parity/run.sh NET.net [STEPS] [BATCH] [SEED]
# Both start from the program's seeded initial weights (--max-steps 0 --export),
# take the same STEPS optimizer steps on the first STEPS batches of the training
# set in order (--no-shuffle), and tools/compare_weights.py compares the
# weights with PyTorch's in float64 (the reference):
#  - one step: within 1e-3 of the update, plus the float32 rounding of the
#    weights (the gradient at work, before training amplifies anything);
#  - more: within 1e-4 of the update, plus the rounding, plus the envelope
#    computed by the reference itself: STEPS times how far the float64 run
#    moves when every starting weight changes by 2^-24 of itself (one
#    float32 rounding), measured by a second float64 run (--perturb).
# Needs DDPC (the ddpc binary) and PYTHON (with torch) in the environment.
set -euo pipefail
net=$1 steps=${2:-5} batch=${3:-16} seed=${4:-5}
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
tools=$(cd "$(dirname "$0")/../../tools" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$ddpc" "$net" --target cpu -o "$d/prog"
"$d/prog" --max-steps 0 --seed "$seed" --export "$d/w0.safetensors" --quiet
"$d/prog" --init "$d/w0.safetensors" --max-steps "$steps" --no-shuffle --batch-size "$batch" \
    --export "$d/ours.safetensors" --quiet
"$ddpc" "$net" --emit torch > "$d/net.py"
reference() { # reference OUT [FLAGS...]
    local out=$1
    shift
    "$python" "$tools/torch_ref.py" --module "$d/net.py" --init "$d/w0.safetensors" --steps "$steps" \
        --no-shuffle --batch "$batch" --dtype float64 --out "$out" --quiet "$@"
}
reference "$d/ref.safetensors"
if [ "$steps" = 1 ]; then
    "$python" "$tools/compare_weights.py" "$d/w0.safetensors" "$d/ours.safetensors" "$d/ref.safetensors" \
        --steps 1 --tol 1e-3
else
    reference "$d/perturbed.safetensors" --perturb 5.9604644775390625e-08 # 2^-24
    "$python" "$tools/compare_weights.py" "$d/w0.safetensors" "$d/ours.safetensors" "$d/ref.safetensors" \
        --steps "$steps" --tol 1e-4 --envelope "$d/perturbed.safetensors"
fi
