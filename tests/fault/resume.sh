#!/usr/bin/env bash
# Stopped and resumed = uninterrupted, bit for bit, for a real net:
#   tests/fault/resume.sh NET.net STEPS STOP RANKS
# Builds NET for the CPU, trains STEPS steps in one go, and again in two
# runs, the first stopping at STOP (--save) and the second continuing from
# its checkpoint (--resume), each with RANKS ranks (under mpirun when more
# than one); the two --export files must be byte for byte the same. On a
# small cut of Fashion-MNIST (tests/fault/small_data.py) so that an epoch is
# short and the runs cross an epoch boundary (a reshuffle) after STOP.
set -euo pipefail
net=$1 steps=$2 stop=$3 ranks=$4
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, mpirun_user; cleans up on exit
"$python" "$here/small_data.py" "$d/data" 1024 128
"$ddpc" "$net" --target cpu -o "$d/prog"
run() {
    if [ "$ranks" -gt 1 ]; then
        "${mpirun_user[@]}" -np "$ranks" "$d/prog" --data "$d/data" --batch-size 16 "$@"
    else
        "$d/prog" --data "$d/data" --batch-size 16 "$@"
    fi
}
run --max-steps "$steps" --export "$d/whole.safetensors" > "$d/whole.txt" 2>&1 || { cat "$d/whole.txt"; exit 1; }
run --max-steps "$stop" --save "$d/ck" > "$d/first.txt" 2>&1 || { cat "$d/first.txt"; exit 1; }
run --max-steps "$steps" --save "$d/ck" --resume --export "$d/resumed.safetensors" > "$d/second.txt" 2>&1 ||
    { cat "$d/second.txt"; exit 1; }
grep -h "resuming from\|steps per epoch\|^done" "$d/second.txt"
if cmp "$d/whole.safetensors" "$d/resumed.safetensors"; then
    echo "resume: identical ($net, $ranks rank(s), $stop + $((steps - stop)) steps)"
else
    "$python" "$(dirname "$here")/../tools/compare_weights.py" "$d/whole.safetensors" "$d/whole.safetensors" \
        "$d/resumed.safetensors" --steps "$steps" --tol 0 || true
    echo "resume: DIFFERENT ($net, $ranks rank(s))"
    exit 1
fi
