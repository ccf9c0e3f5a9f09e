#!/usr/bin/env bash
# CIFAR's binary files, end to end (CPU):
#   tests/distributed/cifar_data.sh
# Writes small CIFAR-10 and CIFAR-100 sets in their binary form (random
# pixels, labels drawn per record) and trains a 3x32x32 net on them:
#  - CIFAR-10 through global_batch.sh: --global-batch 16 on 1 and 2 ranks,
#    the same bytes, for a small net and for examples/cifar10.net; the
#    start-up line and the log's start record name the samples and their
#    format;
#  - CIFAR-100 on a net of 100 classes (its fine labels), and with
#    --coarse-labels on a net of 20; the net of 20 without the flag is
#    refused (fine labels go to 99), with status 2;
#  - mnist.net on CIFAR data is refused with status 2, naming both shapes.
# One line per check; "DIFFERENT" or a non-zero status is a failure.
set -euo pipefail
here=$(dirname "$0")
. "$here/expect_refused.sh"  # expect_refused
. "$here/rgb_net.sh"  # rgb_net
ddpc=${DDPC:-build/ddpc}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
/usr/bin/python3 - "$d" << 'PY'
import os, random, sys
d = sys.argv[1]
rng = random.Random(7)
def write(path, n, hundred):
    with open(path, "wb") as f:
        for _ in range(n):
            labels = [rng.randrange(20), rng.randrange(100)] if hundred else [rng.randrange(10)]
            f.write(bytes(labels) + bytes(rng.randrange(256) for _ in range(3072)))
os.makedirs(d + "/c10/cifar-10-batches-bin")
os.makedirs(d + "/c100")
write(d + "/c10/cifar-10-batches-bin/data_batch_1.bin", 48, False)
write(d + "/c10/cifar-10-batches-bin/data_batch_2.bin", 32, False)
write(d + "/c10/cifar-10-batches-bin/test_batch.bin", 24, False)
write(d + "/c100/train.bin", 64, True)
write(d + "/c100/test.bin", 16, True)
PY
rgb_net 10 > "$d/c10.net"
rgb_net 20 > "$d/c20.net"
status=0
bash "$here/global_batch.sh" "$d/c10.net" 4 16 "1 2" --data "$d/c10" || status=1
# the example for CIFAR-10 (its data { } block: reflect-padded crops, flips, normalize)
bash "$here/global_batch.sh" "$here/../../examples/cifar10.net" 2 16 "1 2" --data "$d/c10" || status=1

# the first line and the log's start record say what was read
"$ddpc" "$d/c10.net" --target cpu -o "$d/prog10" > /dev/null
"$d/prog10" --data "$d/c10" --max-steps 2 --log "$d/c10.jsonl" > "$d/c10.out" 2>&1 || { cat "$d/c10.out"; exit 1; }
if grep -q "80 train / 24 test samples of 3x32x32 CIFAR-10," "$d/c10.out" &&
    head -1 "$d/c10.jsonl" | grep -q '"data": "3x32x32 CIFAR-10"'; then
    echo "CIFAR-10: the first line and the log's start record say 3x32x32 CIFAR-10"
else
    echo "CIFAR-10: the first line or the start record does not say 3x32x32 CIFAR-10: DIFFERENT"
    cat "$d/c10.out"
    head -1 "$d/c10.jsonl"
    status=1
fi


"$ddpc" "$d/c20.net" --target cpu -o "$d/prog20" > /dev/null
if "$d/prog20" --data "$d/c100" --coarse-labels --max-steps 3 --log "$d/c20.jsonl" > "$d/c20.out" 2>&1 &&
    head -1 "$d/c20.jsonl" | grep -q '"data": "3x32x32 CIFAR-100, coarse labels"'; then
    echo "CIFAR-100 --coarse-labels: trains a net of 20 classes"
else
    echo "CIFAR-100 --coarse-labels: did not train a net of 20 classes: DIFFERENT"
    cat "$d/c20.out"
    status=1
fi
rgb_net 100 > "$d/c100.net"
"$ddpc" "$d/c100.net" --target cpu -o "$d/prog100" > /dev/null
if "$d/prog100" --data "$d/c100" --max-steps 3 --log "$d/c100.jsonl" > "$d/c100.out" 2>&1 &&
    head -1 "$d/c100.jsonl" | grep -q '"data": "3x32x32 CIFAR-100, fine labels"'; then
    echo "CIFAR-100: trains a net of 100 classes on its fine labels"
else
    echo "CIFAR-100: did not train a net of 100 classes on its fine labels: DIFFERENT"
    cat "$d/c100.out"
    status=1
fi
expect_refused "CIFAR-100's fine labels on a net of 20 classes" "has label" \
    "$d/prog20" --data "$d/c100" --max-steps 1
expect_refused "--coarse-labels on CIFAR-10" "which has one label per image" \
    "$d/prog20" --data "$d/c10" --coarse-labels --max-steps 1
"$ddpc" examples/mnist.net --target cpu -o "$d/mnist" > /dev/null
expect_refused "mnist.net on CIFAR-10" \
    "the images are 3x32x32 (channels x rows x columns), but the net's input is 1x28x28" \
    "$d/mnist" --data "$d/c10" --max-steps 1
exit $status
