#!/usr/bin/env bash
# The CPU library convs of the examples (bench/conv_cpu.c), one thread:
# MNIST's two convs, resnet.net's 3x3s at 28x28 and 14x14, and wide.net's
# 64 -> 64. Each three ways: as planned, on the runtime's own kernels
# (DDP_CPU_CONV=own) and every pass oneDNN can do on oneDNN
# (DDP_CPU_CONV=onednn): the measurements behind ops_cpu.c's plan_onednn.
# Prints the time of each call, each run's check of its results against a
# direct conv (bench/conv_cpu.c), and then one verdict: OK when every run
# exited 0 and passed its check, else FAILED with the runs that did not.
# Never fails the build.
#   [REPS=N] bash bench/conv_cpu.sh
set -u
cd "$(dirname "$0")/.." || exit 0
libs=$(sed -n 's/^#define DDPC_CPU_LIBS "\(.*\)"$/\1/p' build/config.h)
cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iruntime bench/conv_cpu.c build/libddprt.a -o build/conv_cpu $libs \
    || { echo "conv_cpu: FAILED: build"; exit 0; }
runs=0 failed=""
for shape in 1,28,28,32,5,0 32,12,12,64,5,0 16,28,28,16,3,1 32,14,14,32,3,1 64,28,28,64,3,1; do
    for choice in planned own onednn; do
        runs=$((runs + 1))
        line=$(DDP_CPU_CONV=$([ "$choice" = planned ] || echo "$choice") OMP_NUM_THREADS=1 build/conv_cpu "$shape")
        rc=$?
        echo "$choice: $line"
        [ "$rc" = 0 ] || failed="$failed; $choice $shape (exit $rc)"
    done
done
if [ -z "$failed" ]; then
    echo "conv_cpu: OK: all $runs runs' forward, backward data and backward filter matched a direct conv"
else
    echo "conv_cpu: FAILED: ${failed#; }"
fi
exit 0
