#!/usr/bin/env bash
# ddpc against PyTorch on one GPU: mnist.net at batch 64 and 512 and
# resnet.net at 64, 2 epochs of 10,000 samples with the data on the GPU.
# ddpc six ways: FP32; --precision tf32; --precision bf16; FP32 with cuDNN's
# algorithms timed; FP32 with nondeterministic algorithms allowed; FP32
# without the CUDA graph. PyTorch eager three ways (TF32 convolutions, plain
# FP32, FP32 with cudnn.benchmark) and torch.compile two (default and
# reduce-overhead), from the GPU node's own python. ROUNDS (default 3)
# interleaved rounds, each printed, then the medians and the ratios against
# the best PyTorch in each precision.
#
# The timings are tests/gpu/run.sh's (its part 6, tests/gpu/timing.sh), so
# that the checks and the figures come from one run on the same programs;
# this script builds the kit (make gpu-kit), runs run.sh and prints its
# TIMING lines, and where run.sh found a failure, FAILED with its log.
# Without a GPU it says so and exits 0.
cd "$(dirname "$0")/.." || exit 0
if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then
    echo "bench/gpu.sh: no GPU here (nvidia-smi lists none): nothing to time"
    exit 0
fi
out=$(mktemp -d /tmp/ddpc-bench-gpu.XXXXXX)
if ! make gpu-kit > "$out/kit.txt" 2>&1; then
    echo "bench/gpu.sh: FAILED: make gpu-kit ($out/kit.txt)"
    exit 0
fi
# run.sh's 330 s suit a lent node's budget; its timings come last
GPU_RUN_SECONDS=${GPU_RUN_SECONDS:-900} bash tests/gpu/run.sh --rounds "${ROUNDS:-3}" --out "$out" > "$out/run.txt" 2>&1
status=$?
grep '^TIMING' "$out/run.txt"
if [ "$status" = 0 ]; then
    echo "bench/gpu.sh: OK ($(tail -1 "$out/run.txt"))"
else
    echo "bench/gpu.sh: FAILED: tests/gpu/run.sh exited $status; $(tail -1 "$out/run.txt")"
fi
exit 0
