#!/usr/bin/env bash
# The data { } block end to end (CPU), on small IDX files the script writes
# (40 training samples of 1x16x16, so a run of 20 steps crosses epochs):
#  - with a reflect-padded crop and both flips, --global-batch 16 on 1 rank
#    and on 2 ranks take the same 20 steps: identical weights (global_batch.sh);
#  - 7 steps of batch 16, 3 epochs, against the module `ddpc --emit torch`
#    writes, trained by PyTorch in float64 through its transform
#    (tests/parity/run.sh): the program's crops and flips follow the epoch
#    and the seed as the module's do;
#  - the first line says what the block does;
#  - --workers 0 (each batch made when the step needs it), 1 and 3 train to
#    the same bytes, and each epoch's log record holds data_wait_s;
#  - DDP_AUGMENT_ON=device (the input made of the raw samples by the
#    device's code, a GPU build's default) trains to the same bytes, with
#    --workers 0 and 2, and evaluates alike; a bad value is exit 2;
#  - --no-augment trains to other weights (no crop or flips) and says so;
#  - --eval-only of the same weights gives the same test loss as a program
#    whose block only normalizes: evaluation is not cropped or flipped;
#  - stopped at step 5 (mid-epoch) and resumed to 12, the weights of the
#    run that never stopped, the workers taking up the epoch where it was.
# One line per check; "DIFFERENT" or a non-zero status is a failure.
set -euo pipefail
here=$(dirname "$0")
ddpc=${DDPC:-build/ddpc}
python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/idx"
"$python" - "$d/idx" << 'PY'
import random, struct, sys
d = sys.argv[1]
rng = random.Random(7)
for split, n in (("train", 40), ("t10k", 12)):
    with open(f"{d}/{split}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 16, 16) + bytes(rng.randrange(256) for _ in range(n * 256)))
    with open(f"{d}/{split}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(rng.randrange(10) for _ in range(n)))
PY
cat > "$d/augment.net" << 'NET'
net augment
input 1x16x16
conv 1->6 k3 p1; relu; maxpool 2
conv 6->8 k3; relu
flatten
linear 10
loss cross_entropy
data {
  normalize mean=0.45 std=0.29
  random_crop 16 pad=3 reflect
  flip horizontal
  flip vertical p=0.2
}
train { batch 16; seed 3; optimizer sgd lr=0.05 momentum=0.9 }
NET
status=0
bash "$here/global_batch.sh" "$d/augment.net" 20 16 "1 2" --data "$d/idx" || status=1

if DATA="$d/idx" DDPC="$ddpc" PYTHON="$python" bash "$here/../parity/run.sh" "$d/augment.net" 7 16 5 > "$d/parity" 2>&1
then
    echo "augment.net, 7 steps over 3 epochs against PyTorch's float64 run through the module's transform: OK"
else
    echo "augment.net, 7 steps over 3 epochs against PyTorch's float64 run through the module's transform: DIFFERENT"
    cat "$d/parity"
    status=1
fi

"$ddpc" "$d/augment.net" --target cpu -o "$d/prog" > /dev/null
"$d/prog" --data "$d/idx" --max-steps 1 > "$d/first" 2>&1
want="data { }: random crop 16x16 of the sample padded by 3 (reflect), left-right flip p=0.5, upside-down flip p=0.2, then normalize 1 channel; the crop and flips in training only"
if grep -qF "$want" "$d/first"; then
    echo "the first lines say what data { } does"
else
    echo "the first lines do not say what data { } does: DIFFERENT"
    cat "$d/first"
    status=1
fi
for w in 0 1 3; do
    "$d/prog" --data "$d/idx" --max-steps 12 --workers "$w" --export "$d/w$w.safetensors" --log "$d/w$w.jsonl" \
        --quiet
done
if cmp -s "$d/w0.safetensors" "$d/w1.safetensors" && cmp -s "$d/w0.safetensors" "$d/w3.safetensors"; then
    echo "--workers 0, 1 and 3, 12 steps over 4 epochs: identical"
else
    echo "--workers 0, 1 and 3, 12 steps over 4 epochs: DIFFERENT"
    status=1
fi
# the input made of the raw samples by the device's code (augment_device.h:
# the host's threads here, as on a GPU build one thread per element)
for w in 0 2; do
    DDP_AUGMENT_ON=device "$d/prog" --data "$d/idx" --max-steps 12 --workers "$w" \
        --export "$d/device$w.safetensors" > "$d/device$w" 2>&1
done
if cmp -s "$d/w0.safetensors" "$d/device0.safetensors" && cmp -s "$d/w0.safetensors" "$d/device2.safetensors" &&
    grep -qF "the crop and flips in training only, on the device" "$d/device2" &&
    grep -qF "the crop and flips in training only, on the host" "$d/first"; then
    echo "DDP_AUGMENT_ON=device, --workers 0 and 2: the bytes of the host's input, and the first lines say where"
else
    echo "DDP_AUGMENT_ON=device: other bytes than the host's input, or not said: DIFFERENT"
    cat "$d/device2"
    status=1
fi
if DDP_AUGMENT_ON=gpu "$d/prog" --data "$d/idx" --max-steps 1 > "$d/bad_where" 2>&1; then rc=0; else rc=$?; fi
if [ "$rc" = 2 ] && grep -qF "DDP_AUGMENT_ON=gpu: say device" "$d/bad_where"; then
    echo "DDP_AUGMENT_ON=gpu: refused, exit 2"
else
    echo "DDP_AUGMENT_ON=gpu: exit $rc: DIFFERENT"
    cat "$d/bad_where"
    status=1
fi
epochs=$(grep -c '"event": "epoch"' "$d/w3.jsonl" || true)
waits=$(grep '"event": "epoch"' "$d/w3.jsonl" | grep -c '"data_wait_s": [0-9]' || true)
if [ "$epochs" -ge 4 ] && [ "$waits" = "$epochs" ]; then
    echo "each of the $epochs epochs' log records holds data_wait_s"
else
    echo "data_wait_s in $waits of $epochs epoch records: DIFFERENT"
    status=1
fi
"$d/prog" --data "$d/idx" --max-steps 12 --no-augment --export "$d/plain.safetensors" > "$d/plain" 2>&1
if ! cmp -s "$d/w0.safetensors" "$d/plain.safetensors" &&
    grep -qF "data { }: normalize 1 channel (--no-augment: no crop or flips)" "$d/plain"; then
    echo "--no-augment: other weights, and the first lines say so"
else
    echo "--no-augment: the same weights, or not said: DIFFERENT"
    cat "$d/plain"
    status=1
fi
grep -v -e random_crop -e flip "$d/augment.net" > "$d/normalized.net"
"$ddpc" "$d/normalized.net" --target cpu -o "$d/normalized" > /dev/null
"$d/prog" --data "$d/idx" --eval-only --init "$d/w0.safetensors" --quiet --log "$d/eval_a.jsonl"
"$d/normalized" --data "$d/idx" --eval-only --init "$d/w0.safetensors" --quiet --log "$d/eval_b.jsonl"
loss_a=$(grep -o '"test_loss": [^,]*' "$d/eval_a.jsonl") loss_b=$(grep -o '"test_loss": [^,]*' "$d/eval_b.jsonl")
DDP_AUGMENT_ON=device "$d/prog" --data "$d/idx" --eval-only --init "$d/w0.safetensors" --quiet \
    --log "$d/eval_device.jsonl"
loss_device=$(grep -o '"test_loss": [^,]*' "$d/eval_device.jsonl")
if [ -n "$loss_a" ] && [ "$loss_a" = "$loss_b" ] && [ "$loss_a" = "$loss_device" ]; then
    echo "--eval-only: $loss_a, as with a block that only normalizes, and with DDP_AUGMENT_ON=device"
else
    echo "--eval-only: $loss_a, but $loss_b with a block that only normalizes, $loss_device on the device: DIFFERENT"
    status=1
fi
"$d/prog" --data "$d/idx" --max-steps 5 --save "$d/ck" --save-every 5 --quiet
"$d/prog" --data "$d/idx" --max-steps 12 --save "$d/ck" --resume --export "$d/resumed.safetensors" --quiet
if cmp -s "$d/w1.safetensors" "$d/resumed.safetensors"; then
    echo "stopped at step 5 (mid-epoch), resumed to 12: the weights of the run that never stopped"
else
    echo "stopped at step 5 (mid-epoch), resumed to 12: DIFFERENT from the run that never stopped"
    status=1
fi
exit $status
