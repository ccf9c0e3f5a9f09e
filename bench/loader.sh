#!/usr/bin/env bash
# Whether the loader keeps up (CPU), format by format:
#   [ROUNDS=N] [STEPS=N] bash bench/loader.sh
# For each format --data reads (Fashion-MNIST's IDX, and CIFAR-10's binary
# files and NumPy uint8 and float32 arrays of 50,000 random 3x32x32 images
# that the script writes; image folders of 10,000 of them as PNG files, and
# as JPEG files of 40x40 that the block resizes to 36 and center-crops to
# 32, decoded as batches are made), the files' load time and the loader's samples/s
# alone (bench/loader_cpu.c: batches made and handed back as fast as they
# go, --workers 0, 1 and 2, through the data { } block of the example for
# the format), next to the training step's samples/s and the share of the
# steps' time spent waiting for batches (the log's data_wait_s, at the
# default --workers) of the example itself, examples/fashion_resnet.net and
# examples/cifar10.net (on the CIFAR files and on the PNG folder), for STEPS
# steps (60). Rounds are interleaved and each is printed. The figures count only
# where the work was right: each loader run checks that its last batch equals
# one made on this thread (loader_cpu's OK), and each training run that it
# exited 0 with a finite training and test loss, on Fashion-MNIST a mean
# training loss below ln 10, a uniform guess's (where training starts: it
# learned; 20 steps are enough, 10 are not), and on the random images and
# labels one below 2 ln 10 (nothing to learn there, but it did not diverge). The last line is one verdict, OK
# or FAILED with the runs that failed. Never fails the build.
set -u
cd "$(dirname "$0")/.." || exit 0
rounds=${ROUNDS:-2} steps=${STEPS:-60}
libs=$(sed -n 's/^#define DDPC_CPU_LIBS "\(.*\)"$/\1/p' build/config.h)
images=$(sed -n 's/^#define DDPC_IMAGE_LIBS "\(.*\)"$/\1/p' build/config.h)
cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iruntime bench/loader_cpu.c build/libddprt.a -o build/loader_cpu \
    ${images:+$(printf 'build/%s ' $images)} $libs \
    || { echo "loader: FAILED: build"; exit 0; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
/usr/bin/python3 - "$d" << 'PY' || { echo "loader: FAILED: writing the data"; exit 0; }
import os, sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(3)
for split, n in (("train", 50000), ("test", 1000)):
    x = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, 10, size=n, dtype=np.uint8)
    os.makedirs(f"{d}/u8", exist_ok=True)
    os.makedirs(f"{d}/f32", exist_ok=True)
    np.save(f"{d}/u8/x_{split}.npy", x)
    np.save(f"{d}/u8/y_{split}.npy", y)
    np.save(f"{d}/f32/x_{split}.npy", x.astype(np.float32) / np.float32(255))
    np.save(f"{d}/f32/y_{split}.npy", y)
    os.makedirs(f"{d}/cifar", exist_ok=True)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if split == "train" else ["test_batch.bin"]
    per = n // len(names)
    for k, name in enumerate(names):
        rows = np.concatenate([y[k * per:(k + 1) * per, None], x[k * per:(k + 1) * per].reshape(per, -1)], axis=1)
        rows.astype(np.uint8).tofile(f"{d}/cifar/{name}")
# the image folders: 10 classes of 1,000 PNGs of 32x32, and of JPEGs of 40x40
from PIL import Image
for kind, side in (("png", 32), ("jpg", 40)):
    for split, n in (("train", 10000), ("val", 100)):
        for k in range(10):
            os.makedirs(f"{d}/{kind}/{split}/{k}", exist_ok=True)
        pixels = rng.integers(0, 256, size=(n, side, side, 3), dtype=np.uint8)
        for i in range(n):
            Image.fromarray(pixels[i]).save(f"{d}/{kind}/{split}/{i % 10}/{i}.{kind}")
PY
fashion=/usr/share/datasets/fashion-mnist
# DIR, then the data { } block of its example: C H W MEAN STD PAD
formats=("$fashion 1 28 28 0.286 0.353 2" "$d/cifar 3 32 32 0.48 0.25 2" "$d/u8 3 32 32 0.48 0.25 2"
         "$d/f32 3 32 32 0.48 0.25 2" "$d/png 3 32 32 0.48 0.25 2" "$d/jpg 3 32 32 0.48 0.25 2 36")
failed="" loaders=0 trainings=0
for net in examples/fashion_resnet.net examples/cifar10.net; do
    build/ddpc "$net" --target cpu -o "$d/$(basename "$net" .net)" > /dev/null ||
        { echo "loader: FAILED: $net"; failed="$failed; ddpc $net"; }
done
for round in $(seq "$rounds"); do
    echo "round $round"
    for f in "${formats[@]}"; do
        set -- $f
        [ -e "$1" ] || { echo "  $1: missing, left out"; continue; }
        for w in 0 1 2; do
            echo -n "  "
            loaders=$((loaders + 1))
            build/loader_cpu "$1" "$w" 128 1 "${@:2}" ||
                { echo "loader: FAILED: $1 --workers $w"; failed="$failed; round $round loader_cpu $1 --workers $w"; }
        done
    done
    for run in "fashion_resnet $fashion 128" "cifar10 $d/cifar 64" "cifar10 $d/png 64"; do
        set -- $run
        [ -e "$2" ] || continue
        trainings=$((trainings + 1))
        rm -f "$d/$1.jsonl"
        "$d/$1" --data "$2" --max-steps "$steps" --global-batch "$3" --epochs 1 --log "$d/$1.jsonl" --quiet ||
            { rc=$?; echo "loader: FAILED: $1 on $(basename "$2") (exit $rc)"; failed="$failed; round $round $1 on $2 (exit $rc)"; continue; }
        # the most its mean training loss may be: ln 10 where it learns, 2 ln 10 on random labels
        [ "$2" = "$fashion" ] && most=2.302585 || most=4.60517
        /usr/bin/python3 - "$d/$1.jsonl" "$1 on $(basename "$2")" "$3" "$most" << 'PY' ||
import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"event": "epoch"' in l][-1]
trained = r["step"] * int(sys.argv[3]) / r["samples_per_s"]  # the steps' time, evaluation left out
ok = math.isfinite(r["loss"]) and math.isfinite(r["test_loss"]) and r["loss"] < float(sys.argv[4])
print(f"  {sys.argv[2]}: training {r['samples_per_s']:.0f} samples/s; data wait {r['data_wait_s']:.3f} s of "
      f"{trained:.1f} s of steps ({100 * r['data_wait_s'] / trained:.2f}%); mean training loss {r['loss']:.3f} "
      f"(at most {float(sys.argv[4]):.3f}), test loss {r['test_loss']:.3f}  {'OK' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
            failed="$failed; round $round $1 on $2 (its loss)"
    done
done
if [ -z "$failed" ]; then
    echo "loader: OK: all $loaders loader runs made the batches this thread makes; all $trainings training runs exited 0 with their loss in bounds"
else
    echo "loader: FAILED: ${failed#; }"
fi
exit 0
