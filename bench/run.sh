#!/usr/bin/env bash
# Runs every benchmark. Each prints OK or FAILED with its figures; none fails the build.
cd "$(dirname "$0")/.." || exit 0
for b in bench/summary_10k.sh; do
    bash "$b" build/ddpc
done
exit 0
