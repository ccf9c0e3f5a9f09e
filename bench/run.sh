#!/usr/bin/env bash
# Runs every benchmark. Each prints OK or FAILED with its figures; none fails the build.
cd "$(dirname "$0")/.." || exit 0
for b in bench/summary_10k.sh bench/plan_scale.sh bench/conv_cpu.sh bench/ddp_cpu.sh bench/cpu_nets.sh bench/loader.sh \
         bench/gpu.sh; do
    bash "$b"
done
exit 0
