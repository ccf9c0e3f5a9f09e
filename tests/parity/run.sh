#!/usr/bin/env bash
# Parity of a generated CPU program with PyTorch in float64, for one net:
#   tests/parity/run.sh NET.net [STEPS] [BATCH] [SEED]
# Both start from the program's seeded initial weights (--max-steps 0 --export),
# take the same STEPS optimizer steps on the first STEPS batches of the training
# set in order (--no-shuffle), and tools/compare_weights.py compares the
# weights with PyTorch's in float64 (the reference): within TOL of the update
# (1e-3 after one step, the gradient at work before training amplifies
# anything; 1e-4 after more), plus the float32 rounding of the weights, plus
# the envelope the reference computes itself: STEPS times how far the float64
# run moves when every starting weight changes by 2^-24 of itself (one
# float32 rounding; a second float64 run, --perturb), element by element
# (compare_weights.py says how); plus the kinks: for every ReLU or LeakyReLU
# input the float64 run puts within 2^-21 of its tensor's largest |x| (a
# few float32 roundings from the kink, so float32 may land on either side),
# and every max-pool window whose top two inputs are as close, how far
# taking the other branch (the runner-up) alone moves each weight, summed (a
# third float64 run per such input, torch_ref.py --kinks-envelope); plus twice
# how far PyTorch's own float32 run ends from float64 at that element (a
# fourth run, compare_weights.py --float32-reference says why). resnet.net's
# 5 steps meet eight; one of them, at step 3, is 2.6e-7 against a largest of
# 9.1, and a float32 run that rounds it below zero ends 3.9e-3 of the update
# away from float64, as the flipped float64 run does. The float32 term is
# what lets Adam's first step through: its update g / (|g| + eps) turns a
# float32 error in a gradient near eps into a large part of the update (on
# mlp.net, 5e-3 of the update for this program, 3e-3 for PyTorch's float32,
# at an element whose envelope allows 2.6e-3).
# Needs DDPC (the ddpc binary) and PYTHON (with torch) in the environment;
# DATA, when set, is the --data directory of IDX files both sides train on;
# PRECISION, when set (tf32, bf16), is the program's --precision, and the
# reference rounds its products' operands alike (torch_ref.py --precision),
# or as REFERENCE_PRECISION says where that is set (fp32: not at all);
# TOL, when set, replaces the tolerance of the update above.
set -euo pipefail
net=$1 steps=${2:-5} batch=${3:-16} seed=${4:-5}
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
data=() precision=() ref_precision=()
[ -n "${DATA:-}" ] && data=(--data "$DATA")
[ -n "${PRECISION:-}" ] && precision=(--precision "$PRECISION") ref_precision=(--precision "$PRECISION")
[ -n "${REFERENCE_PRECISION:-}" ] && ref_precision=(--precision "$REFERENCE_PRECISION")
tools=$(cd "$(dirname "$0")/../../tools" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$ddpc" "$net" --target cpu -o "$d/prog"
"$d/prog" --max-steps 0 --seed "$seed" --export "$d/w0.safetensors" --quiet "${data[@]}"
"$d/prog" --init "$d/w0.safetensors" --max-steps "$steps" --no-shuffle --batch-size "$batch" \
    --export "$d/ours.safetensors" --quiet "${data[@]}" "${precision[@]}"
"$ddpc" "$net" --emit torch > "$d/net.py"
reference() { # reference OUT [FLAGS...]
    local out=$1
    shift
    "$python" "$tools/torch_ref.py" --module "$d/net.py" --init "$d/w0.safetensors" --steps "$steps" \
        --no-shuffle --batch "$batch" --dtype float64 --out "$out" --quiet "${data[@]}" "${ref_precision[@]}" "$@"
}
reference "$d/ref.safetensors"
reference "$d/perturbed.safetensors" --perturb 5.9604644775390625e-08 # 2^-24
reference "$d/kinks.safetensors" --kinks-envelope 4.76837158203125e-07  # 2^-21
"$python" "$tools/torch_ref.py" --module "$d/net.py" --init "$d/w0.safetensors" --steps "$steps" --no-shuffle \
    --batch "$batch" --dtype float32 --out "$d/torch32.safetensors" --quiet "${data[@]}" "${ref_precision[@]}"
"$python" "$tools/compare_weights.py" "$d/w0.safetensors" "$d/ours.safetensors" "$d/ref.safetensors" \
    --steps "$steps" --tol "${TOL:-$([ "$steps" = 1 ] && echo 1e-3 || echo 1e-4)}" --envelope "$d/perturbed.safetensors" \
    --kinks "$d/kinks.safetensors" --float32-reference "$d/torch32.safetensors"
