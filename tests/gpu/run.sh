#!/usr/bin/env bash
# The GPU checks, one script, under 9 minutes on one H200:
#   1. every example builds for CUDA (sm_90 + PTX) and for the CPU;
#   2. one training step of each, GPU against CPU, from the same initial
#      weights and the same batch: within 1e-3 of the update in plain FP32
#      (cuDNN and cuBLAS sum in other orders than the CPU build), and within 3e-2
#      with DDP_ALLOW_TF32=1 (TF32 keeps 10 mantissa bits of each product);
#   3. mnist.net trains for one epoch: samples/s and test accuracy;
#   4. NCCL with one rank, through env:// (as torchrun sets it) and through
#      --nproc-per-node 1;
#   5. checkpoints on the GPU: stopped at step 30 and resumed, a run ends
#      with the very bytes of an uninterrupted one (cuDNN's algorithms are
#      chosen deterministically, so a restart computes alike);
#   6. where Python has torch with CUDA, the same net in PyTorch on the same
#      GPU, for samples/s.
# Run from anywhere: bash tests/gpu/run.sh. Needs the build (make) and the
# Fashion-MNIST files (or DATA=DIR in the MNIST layout). Prints OK or FAILED
# per check and a summary line; exit 0 only if every check passed.
set -u
cd "$(dirname "$0")/../.." || exit 1
export DDPC_HOME=$PWD
data=${DATA:-/usr/share/datasets/fashion-mnist}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
passed=0 failed=0
check() { # check NAME STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "OK      $1 ${3:-}"
    else failed=$((failed + 1)); echo "FAILED  $1 ${3:-}"; fi
}

nvidia-smi -L || { echo "FAILED: no GPU"; exit 1; }
make -s > "$out/make.log" 2>&1; check "make" $? "$(grep -c found "$out/make.log") toolchains found"
cc -std=c11 -D_GNU_SOURCE -O2 -Iruntime tests/gpu/compare.c -o "$out/compare" build/libddprt.a -lz -lm -fopenmp \
    $(mpicc --showme:link 2>/dev/null)
check "compare tool" $?

for net in examples/*.net; do
    name=$(basename "$net" .net)
    build/ddpc "$net" --target cuda -o "$out/$name.gpu" > "$out/$name.build" 2>&1 &&
        ! grep -q warning "$out/$name.build"
    check "$name builds for CUDA without warnings" $?
    build/ddpc "$net" --target cpu -o "$out/$name.cpu" > /dev/null 2>&1
    check "$name builds for CPU" $?
    step=(--data "$data" --init "$out/$name.w0" --max-steps 1 --no-shuffle --batch-size 64 --quiet)
    "$out/$name.cpu" --data "$data" --max-steps 0 --export "$out/$name.w0" --quiet &&
        "$out/$name.cpu" "${step[@]}" --export "$out/$name.cpu.w1" &&
        "$out/$name.gpu" "${step[@]}" --export "$out/$name.gpu.w1" &&
        DDP_ALLOW_TF32=1 "$out/$name.gpu" "${step[@]}" --export "$out/$name.tf32.w1"
    check "$name: one step on GPU and CPU" $?
    "$out/compare" "$out/$name.w0" "$out/$name.cpu.w1" "$out/$name.gpu.w1" 1e-3 > "$out/$name.fp32.txt"
    check "$name: GPU step = CPU step (FP32, 1e-3 of the update)" $? "$(tail -1 "$out/$name.fp32.txt")"
    "$out/compare" "$out/$name.w0" "$out/$name.cpu.w1" "$out/$name.tf32.w1" 3e-2 > "$out/$name.tf32.txt"
    check "$name: GPU step = CPU step (TF32, 3e-2 of the update)" $? "$(tail -1 "$out/$name.tf32.txt")"
done

"$out/mnist.gpu" --data "$data" --epochs 1 --log "$out/epoch.jsonl" > "$out/epoch.txt" 2>&1
status=$?
cat "$out/epoch.txt"
check "mnist.net: one epoch on the GPU" $status "$(grep -o 'test_acc [0-9.]*' "$out/epoch.txt" | tail -1), $(grep -o '[0-9.]* samples/s' "$out/epoch.txt" | tail -1)"

RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
    "$out/mnist.gpu" --data "$data" --max-steps 100 --init-method env:// --backend nccl --quiet
check "NCCL, world size 1, env://" $?
"$out/mnist.gpu" --data "$data" --max-steps 100 --nproc-per-node 1 --backend nccl --quiet
check "NCCL, world size 1, --nproc-per-node 1" $?

"$out/mnist.gpu" --data "$data" --max-steps 60 --export "$out/whole.st" --quiet &&
    "$out/mnist.gpu" --data "$data" --max-steps 30 --save "$out/ck" --quiet &&
    "$out/mnist.gpu" --data "$data" --max-steps 60 --save "$out/ck" --resume --export "$out/resumed.st" --quiet &&
    cmp "$out/whole.st" "$out/resumed.st"
check "checkpoint on the GPU: stopped at 30, resumed to 60 = 60 at once, byte for byte" $?

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    build/ddpc examples/mnist.net --emit torch > "$out/mnist.py"
    python3 bench/torch_train.py --module "$out/mnist.py" --device cuda --steps 500 --data "$data"
    check "PyTorch on the same GPU" $?
else
    echo "SKIPPED PyTorch on the same GPU: no python3 with torch and CUDA here"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
