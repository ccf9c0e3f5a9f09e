#!/usr/bin/env bash
# A step replayed from its graph trains as the step run call by call:
#   tests/distributed/step_graphs.sh
# The program replays each batch shape's step from a graph captured once (a
# CUDA graph on GPUs; on CPUs its twin, graph.h, which replays with what the
# capture saw), so a per-step value the kernels took from the host rather
# than from device memory (step_scalars.h) would be frozen at capture. Each
# run below exports its weights with and without --no-cuda-graph; the two
# must be the same bytes:
#   mnist.net (SGD with momentum: its first step's, from the step count), 2
#   epochs of 600 samples at batch 64;
#   mlp.net (dropout, AdamW, lr halved every 2 epochs), 3 epochs of 600
#   samples at batch 64, the last batch of each epoch 24 (its own graph);
#   tests/parity/adam_mse.net (Adam's bias corrections, cosine with warmup:
#   a new lr every step), 1 epoch;
#   mlp.net on 2 ranks with --no-sync-every 2 (accumulating and syncing
#   steps, each its graph), where mpirun is found (said when not).
# And under mpirun, rank 1 alone given --no-cuda-graph: every rank must run
# call by call (NCCL needs a collective captured on every rank or on none),
# which rank 0 says, and its log's start record ("step_graphs": false).
# A failed comparison prints DIFFERENT; exits 1 if any failed.
set -euo pipefail
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" tests/fault/small_data.py "$d/data" 600 64
"$ddpc" examples/mnist.net --target cpu -o "$d/mnist" > /dev/null
"$ddpc" examples/mlp.net --target cpu -o "$d/mlp" > /dev/null
"$ddpc" tests/parity/adam_mse.net --target cpu -o "$d/adam_mse" > /dev/null
status=0
same() { # same NAME PROGRAM ARGS...
    local name=$1 prog=$2
    shift 2
    local runs=("graphs:" "call by call:--no-cuda-graph")
    for run in "${runs[@]}"; do
        local tag=${run%%:*} flag=${run#*:}
        if ! "$d/$prog" --data "$d/data" --quiet --export "$d/$tag.safetensors" $flag "$@" > "$d/out.txt" 2>&1; then
            cat "$d/out.txt"
            echo "$name ($tag): the run failed: DIFFERENT"
            status=1
            return
        fi
    done
    if cmp -s "$d/graphs.safetensors" "$d/call by call.safetensors"; then
        echo "$name: the same weights with and without graphs"
    else
        echo "$name: DIFFERENT weights with and without graphs"
        status=1
    fi
}
same "mnist.net, 2 epochs" mnist --epochs 2 --batch-size 64
same "mlp.net, 3 epochs, a short last batch" mlp --epochs 3 --batch-size 64
same "adam_mse.net, 1 epoch" adam_mse --epochs 1
if command -v mpirun > /dev/null; then
    same "mlp.net, 2 ranks, --no-sync-every 2" mlp --epochs 2 --batch-size 32 --nproc-per-node 2 --no-sync-every 2
    args=(--data "$d/data" --epochs 1 --batch-size 32 --log "$d/log.jsonl")
    if OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS \
        -np 1 "$d/mlp" "${args[@]}" : -np 1 "$d/mlp" "${args[@]}" --no-cuda-graph > "$d/out.txt" 2>&1 &&
        grep -q "every rank runs its steps call by call, as rank 1 does" "$d/out.txt" &&
        head -1 "$d/log.jsonl" | grep -q '"step_graphs": false'; then
        echo "mlp.net, 2 ranks, --no-cuda-graph on rank 1 alone: every rank call by call"
    else
        cat "$d/out.txt"
        echo "mlp.net, 2 ranks, --no-cuda-graph on rank 1 alone: rank 0 did not say, or log, that every rank runs call by call: DIFFERENT"
        status=1
    fi
else
    echo "2 ranks: skipped (no mpirun)"
fi
exit $status
