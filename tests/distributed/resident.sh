#!/usr/bin/env bash
# The training set held on the device trains as batches copied from the host:
#   tests/distributed/resident.sh
# With DDP_AUGMENT_ON=device (the CPU build makes the net's input as a GPU
# build does, augment_device.h), DDP_DATA_RESIDENT=1 holds the training set
# in "device memory" and gathers each batch there from the epoch's order
# (resident.h); DDP_DATA_RESIDENT=0 has the loader gather it on the host.
# The exported weights must be the same bytes, and the resident run must say
# so at start-up:
#   mnist.net, 2 epochs of 600 samples at batch 64 (a short last batch, a
#   second epoch's order);
#   fashion_resnet.net, 6 steps: its data { } block's crops and flips are
#   drawn from each sample's index, which the gather must carry;
#   mnist.net stopped at step 5 (mid-epoch) and resumed to 12 from the
#   resident set, against 12 steps at once from the host's batches;
#   mlp.net on 2 ranks with --no-sync-every 2 (each rank its share of the
#   order), where mpirun is found (said when not).
# And refused with status 2 and the reason: DDP_DATA_RESIDENT=yes, and
# DDP_DATA_RESIDENT=1 where the input is made on the host.
# A failed comparison prints DIFFERENT; exits 1 if any failed.
set -euo pipefail
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" tests/fault/small_data.py "$d/data" 600 64
for net in mnist fashion_resnet mlp; do
    "$ddpc" "examples/$net.net" --target cpu -o "$d/$net" > /dev/null
done
status=0
same() { # same NAME PROGRAM ARGS...
    local name=$1 prog=$2 where
    shift 2
    for where in 1 0; do
        if ! DDP_AUGMENT_ON=device DDP_DATA_RESIDENT=$where "$d/$prog" --data "$d/data" \
            --export "$d/$where.safetensors" "$@" > "$d/out.$where" 2>&1; then
            cat "$d/out.$where"
            echo "$name (DDP_DATA_RESIDENT=$where): the run failed: DIFFERENT"
            status=1
            return
        fi
    done
    if ! grep -q "data: the training set held on the device" "$d/out.1"; then
        echo "$name: the resident run did not say so: DIFFERENT"
        status=1
    elif cmp -s "$d/1.safetensors" "$d/0.safetensors"; then
        echo "$name: the same weights from the resident set as from the host's batches"
    else
        echo "$name: DIFFERENT weights from the resident set and from the host's batches"
        status=1
    fi
}
same "mnist.net, 2 epochs, a short last batch" mnist --epochs 2 --batch-size 64
same "fashion_resnet.net, crops and flips, 6 steps" fashion_resnet --max-steps 6 --batch-size 32
resumed() { # the resident run stopped mid-epoch and resumed = the host's at once
    local name="mnist.net, stopped at 5 and resumed to 12 from the resident set" rc=0
    export DDP_AUGMENT_ON=device
    DDP_DATA_RESIDENT=1 "$d/mnist" --data "$d/data" --max-steps 5 --save "$d/ck" > "$d/out.stop" 2>&1 &&
        DDP_DATA_RESIDENT=1 "$d/mnist" --data "$d/data" --max-steps 12 --save "$d/ck" --resume \
            --export "$d/resumed.safetensors" > "$d/out.resume" 2>&1 &&
        DDP_DATA_RESIDENT=0 "$d/mnist" --data "$d/data" --max-steps 12 --export "$d/whole.safetensors" \
            > "$d/out.whole" 2>&1 || rc=$?
    unset DDP_AUGMENT_ON
    if [ "$rc" != 0 ]; then
        cat "$d/out.stop" "$d/out.resume" "$d/out.whole" 2> /dev/null
        echo "$name: a run failed: DIFFERENT"
        status=1
    elif cmp -s "$d/resumed.safetensors" "$d/whole.safetensors"; then
        echo "$name: the bytes of 12 steps at once from the host's batches"
    else
        echo "$name: DIFFERENT from 12 steps at once from the host's batches"
        status=1
    fi
}
resumed
refused() { # refused NAME EXPECTED-MESSAGE ENV...
    local name=$1 expected=$2 rc=0
    shift 2
    env "$@" "$d/mnist" --data "$d/data" --max-steps 1 > "$d/out.refused" 2>&1 || rc=$?
    if [ "$rc" = 2 ] && grep -qF "$expected" "$d/out.refused"; then
        echo "$name: refused, status 2"
    else
        cat "$d/out.refused"
        echo "$name: status $rc, not refused with '$expected': DIFFERENT"
        status=1
    fi
}
refused "DDP_DATA_RESIDENT=yes" "DDP_DATA_RESIDENT=yes: say 1" DDP_DATA_RESIDENT=yes
refused "DDP_DATA_RESIDENT=1, the input made on the host" "the net's input is made on the host" \
    DDP_DATA_RESIDENT=1 DDP_AUGMENT_ON=host
if command -v mpirun > /dev/null; then
    same "mlp.net, 2 ranks, --no-sync-every 2" mlp --epochs 2 --batch-size 32 --nproc-per-node 2 --no-sync-every 2
else
    echo "2 ranks: skipped (no mpirun)"
fi
exit $status
