#!/usr/bin/env bash
# Parity of a generated CPU program with PyTorch, for one net:
#   tests/parity/run.sh NET.net [STEPS] [BATCH] [SEED]
# Both start from the program's seeded initial weights (--max-steps 0 --export),
# take the same STEPS optimizer steps on the first STEPS batches of the training
# set in order (--no-shuffle), and the weights are compared by
# tools/compare_weights.py against PyTorch in float64 (the reference), with
# PyTorch in float32 run as well to measure float32's own precision floor.
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
for dtype in float32 float64; do
    "$python" "$tools/torch_ref.py" --module "$d/net.py" --init "$d/w0.safetensors" --steps "$steps" \
        --no-shuffle --batch "$batch" --dtype "$dtype" --out "$d/torch_$dtype.safetensors" --quiet
done
"$python" "$tools/compare_weights.py" "$d/w0.safetensors" "$d/ours.safetensors" "$d/torch_float64.safetensors" \
    --steps "$steps" --float32-reference "$d/torch_float32.safetensors"
