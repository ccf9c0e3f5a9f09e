#!/usr/bin/env bash
# NumPy arrays, end to end (CPU), written by NumPy's own np.save:
#   tests/distributed/npy_data.sh
# A small data set of 28x28 images as uint8 N x H x W, and the same images as
# float32 N x H x W x 1 (pixel / 255, channels last):
#  - mnist.net through global_batch.sh on the uint8 arrays: --global-batch
#    16 on 1 and 2 ranks, the same bytes;
#  - the uint8 and the float32 arrays train to the same bytes (the float
#    path and the channels-last order are the uint8 path's), and the first
#    line names each;
#  - --channels-first on IDX data is refused with status 2.
# One line per check; "DIFFERENT" or a non-zero status is a failure.
set -euo pipefail
here=$(dirname "$0")
ddpc=${DDPC:-build/ddpc}
python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" - "$d" << 'PY'
import os, sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(11)
for kind in ("u8", "f32"):
    os.makedirs(f"{d}/{kind}")
for split, n in (("train", 64), ("test", 16)):
    x = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, size=n, dtype=np.int64)
    np.save(f"{d}/u8/x_{split}.npy", x)
    np.save(f"{d}/f32/x_{split}.npy", (x.astype(np.float32) / np.float32(255))[..., None])
    for kind in ("u8", "f32"):
        np.save(f"{d}/{kind}/y_{split}.npy", y)
PY
status=0
bash "$here/global_batch.sh" examples/mnist.net 3 16 "1 2" --data "$d/u8" || status=1

"$ddpc" examples/mnist.net --target cpu -o "$d/prog" > /dev/null
"$d/prog" --max-steps 0 --seed 2 --export "$d/w0.safetensors" --quiet
for kind in u8 f32; do
    "$d/prog" --data "$d/$kind" --init "$d/w0.safetensors" --max-steps 4 --batch-size 16 \
        --export "$d/w_$kind.safetensors" > "$d/$kind.out" 2>&1 || { cat "$d/$kind.out"; exit 1; }
done
if grep -q "64 train / 16 test samples of 1x28x28 NumPy uint8," "$d/u8.out" &&
    grep -q "64 train / 16 test samples of 1x28x28 NumPy float32," "$d/f32.out"; then
    echo "NumPy: the first lines say 1x28x28 NumPy uint8 and NumPy float32"
else
    echo "NumPy: the first lines do not name the arrays' shape and type: DIFFERENT"
    cat "$d/u8.out" "$d/f32.out"
    status=1
fi
if cmp -s "$d/w_u8.safetensors" "$d/w_f32.safetensors"; then
    echo "NumPy: uint8 N x H x W and float32 N x H x W x 1 (pixel / 255), 4 steps: identical"
else
    echo "NumPy: uint8 N x H x W and float32 N x H x W x 1 (pixel / 255), 4 steps: DIFFERENT"
    status=1
fi

rc=0
"$d/prog" --data "$d" --channels-first --max-steps 1 > "$d/refused.out" 2>&1 || rc=$?
if [ "$rc" = 2 ] && grep -q "holds no NumPy files" "$d/refused.out"; then
    echo "--channels-first where there are no NumPy files: refused with status 2"
else
    echo "--channels-first where there are no NumPy files: status $rc: DIFFERENT"
    cat "$d/refused.out"
    status=1
fi
exit $status
