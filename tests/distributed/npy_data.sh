#!/usr/bin/env bash
# NumPy arrays, end to end (CPU), written by NumPy's own np.save:
#   tests/distributed/npy_data.sh
# Small data sets of 3x32x32 images as uint8 N x C x H x W, and the same
# images as float32 N x H x W x C (pixel / 255, channels last):
#  - a 3x32x32 net through global_batch.sh on the uint8 arrays:
#    --global-batch 16 on 1 and 2 ranks, the same bytes; so too with 1000
#    classes, labels past 255 among them;
#  - the uint8 and the float32 arrays train to the same bytes (the float
#    path and the channels-last order give the uint8 path's samples), and
#    the first line names each; so do the float32 arrays made into the
#    input by the device's code (DDP_AUGMENT_ON=device);
#  - uint8 training and float32 test arrays, and --channels-first where
#    there are no NumPy files, are refused with status 2.
# One line per check; "DIFFERENT" or a non-zero status is a failure. Without
# NumPy the script says so and passes (the unit suite npy reads files it
# writes itself).
set -euo pipefail
here=$(dirname "$0")
. "$here/rgb_net.sh"  # rgb_net
ddpc=${DDPC:-build/ddpc}
python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
if ! "$python" -c 'import numpy' 2> /dev/null; then
    echo "NumPy: $python has no numpy: skipped"
    exit 0
fi
"$python" - "$d" << 'PY'
import os, sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(11)
for kind in ("u8", "f32", "wide"):
    os.makedirs(f"{d}/{kind}")
for split, n in (("train", 64), ("test", 16)):
    x = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, 10, size=(n, 1), dtype=np.int64)  # as Keras gives them
    np.save(f"{d}/u8/x_{split}.npy", x)
    np.save(f"{d}/f32/x_{split}.npy", (x.astype(np.float32) / np.float32(255)).transpose(0, 2, 3, 1).copy())
    for kind in ("u8", "f32"):
        np.save(f"{d}/{kind}/y_{split}.npy", y)
    # ImageNet's 1000 classes: labels past a byte's 255, the largest among them
    np.save(f"{d}/wide/x_{split}.npy", x)
    np.save(f"{d}/wide/y_{split}.npy", np.concatenate([[999, 256], rng.integers(0, 1000, size=n - 2)]).astype(np.int32))
PY
rgb_net 10 > "$d/rgb.net"
status=0
bash "$here/global_batch.sh" "$d/rgb.net" 3 16 "1 2" --data "$d/u8" || status=1
rgb_net 1000 > "$d/rgb1000.net"
bash "$here/global_batch.sh" "$d/rgb1000.net" 3 16 "1 2" --data "$d/wide" || status=1

"$ddpc" "$d/rgb.net" --target cpu -o "$d/prog" > /dev/null
"$d/prog" --data "$d/u8" --max-steps 0 --seed 2 --export "$d/w0.safetensors" --quiet
for kind in u8 f32; do
    "$d/prog" --data "$d/$kind" --init "$d/w0.safetensors" --max-steps 4 --batch-size 16 \
        --export "$d/w_$kind.safetensors" > "$d/$kind.out" 2>&1 || { cat "$d/$kind.out"; exit 1; }
done
if grep -q "64 train / 16 test samples of 3x32x32 NumPy uint8," "$d/u8.out" &&
    grep -q "64 train / 16 test samples of 3x32x32 NumPy float32," "$d/f32.out"; then
    echo "NumPy: the first lines say 3x32x32 NumPy uint8 and NumPy float32"
else
    echo "NumPy: the first lines do not name the arrays' shape and type: DIFFERENT"
    cat "$d/u8.out" "$d/f32.out"
    status=1
fi
if cmp -s "$d/w_u8.safetensors" "$d/w_f32.safetensors"; then
    echo "NumPy: uint8 N x C x H x W and float32 N x H x W x C (pixel / 255), 4 steps: identical"
else
    echo "NumPy: uint8 N x C x H x W and float32 N x H x W x C (pixel / 255), 4 steps: DIFFERENT"
    status=1
fi
# the float32 samples copied raw and made into the input by the device's code
DDP_AUGMENT_ON=device "$d/prog" --data "$d/f32" --init "$d/w0.safetensors" --max-steps 4 --batch-size 16 \
    --export "$d/w_f32_device.safetensors" --quiet
if cmp -s "$d/w_u8.safetensors" "$d/w_f32_device.safetensors"; then
    echo "NumPy: float32 with DDP_AUGMENT_ON=device, 4 steps: the uint8 run's bytes"
else
    echo "NumPy: float32 with DDP_AUGMENT_ON=device, 4 steps: DIFFERENT from the uint8 run"
    status=1
fi

# uint8 training images with float32 test images: refused, not scaled two ways
mkdir "$d/mixed"
cp "$d/u8/x_train.npy" "$d/u8/y_train.npy" "$d/f32/x_test.npy" "$d/f32/y_test.npy" "$d/mixed/"
rc=0
"$d/prog" --data "$d/mixed" --max-steps 1 > "$d/refused.out" 2>&1 || rc=$?
if [ "$rc" = 2 ] && grep -q "holds NumPy uint8 data, but .*x_test.npy holds NumPy float32: save both sets alike" \
    "$d/refused.out"; then
    echo "uint8 training and float32 test arrays: refused with status 2"
else
    echo "uint8 training and float32 test arrays: status $rc: DIFFERENT"
    cat "$d/refused.out"
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
