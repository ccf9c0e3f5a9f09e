#!/usr/bin/env bash
# timing_stubs.sh: tests/gpu/timing.sh sourced as run.sh sources it, but with
# run.sh's helpers replaced by stubs whose programs print made-up samples/s,
# so that tests/unit/test_gpu_kit.c can check its lines (each round's, the
# medians, the best PyTorch of each precision and the ratios) without a GPU:
#
#   bash tests/gpu/timing_stubs.sh ROUNDS [fail-reduce-overhead]
#
# The made-up rates (per net alike, so every net's median line is the same):
#   ddpc fp32 100000, 300000, 200000 in rounds 1, 2, 3 (median 200000 of 3);
#   timed algorithms 400000; tf32 150000; every other ddpc mode 1000 x round;
#   PyTorch eager 50000, FP32 40000, 60000, 20000 by round, FP32 with
#   cudnn.benchmark 45000; compiled 30000, reduce-overhead 75000.
# A ddpc run whose environment does not match its mode (DDP_CUDNN_BENCHMARK
# set outside "bench", DDP_ALLOW_NONDETERMINISTIC outside "nondet", or
# either missing in its own) fails, and timing.sh then prints FAILED.
set -u
cd "$(dirname "$0")/../.." || exit 2
rounds=${1:?rounds} fail_mode=${2:-}
work=$(mktemp -d /tmp/ddpc-timing-stubs.XXXXXX) out=$work/out
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT
kit=$work/kit data=$work/data py=python3 own_library_path='' nvcc=''
declare -A prog=([mnist]=mnist_program [resnet]=resnet_program)
passed=0 failed=0 skipped=0
say() { echo "$*"; }
check() {
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); say "OK       $1"
    else failed=$((failed + 1)); say "FAILED   $1${3:+  ($3)}"; fi
}
skip() { skipped=$((skipped + 1)); say "SKIPPED  $1  ($2)"; }
why() { local f; for f; do [ -s "$work/$f" ] && { tail -1 "$work/$f"; return; }; done; }
rate_of() { grep '^epoch ' "$work/$1" 2> /dev/null | tail -1 | grep -o '[0-9.]* samples/s' | cut -d' ' -f1; }
torch_probe() { return 0; }
ddpc_rate() { # ddpc_rate MODE ROUND
    case $1 in
    fp32) echo $((($2 == 1) ? 100000 : ($2 == 2) ? 300000 : 200000)) ;;
    bench) echo 400000 ;;
    tf32) echo 150000 ;;
    *) echo $((1000 * $2)) ;;
    esac
}
torch_rate_of() { # torch_rate_of MODE ROUND
    case $1 in
    eager) echo 50000 ;;
    fp32) echo $((($2 == 1) ? 40000 : ($2 == 2) ? 60000 : 20000)) ;;
    fp32bench) echo 45000 ;;
    esac
}
# step FILE SECONDS CMD...: the stub of run.sh's step, by the file's name
step() {
    local file=$1 f=$work/$1 mode round
    shift 2
    case $file in
    time.*)
        mode=${file%.r*} mode=${mode##*.} round=${file##*.r}
        if [ "${DDP_CUDNN_BENCHMARK:-}" != "$([ "$mode" = bench ] && echo 1)" ] ||
            [ "${DDP_ALLOW_NONDETERMINISTIC:-}" != "$([ "$mode" = nondet ] && echo 1)" ]; then
            echo "stub: $mode run with DDP_CUDNN_BENCHMARK='${DDP_CUDNN_BENCHMARK:-}'" \
                "DDP_ALLOW_NONDETERMINISTIC='${DDP_ALLOW_NONDETERMINISTIC:-}'" > "$f"
            return 1
        fi
        echo "epoch 2/2  step 314  loss 0.5  $(ddpc_rate "$mode" "$round") samples/s  0.1s" > "$f" ;;
    torch.*.compiled.default) echo "torch: samples/s 30000.0 steps 500" > "$f" ;;
    torch.*.compiled.reduce-overhead)
        if [ "$fail_mode" = fail-reduce-overhead ]; then echo "stub: no CUDA graphs" > "$f"; return 1; fi
        echo "torch: samples/s 75000.0 steps 500" > "$f" ;;
    torch.*)
        mode=${file%.r*} mode=${mode##*.} round=${file##*.r}
        echo "torch: samples/s $(torch_rate_of "$mode" "$round").0 steps 500" > "$f" ;;
    ncu.*) echo "==ERROR== stub: no ncu here" > "$f"; return 1 ;; # its part skipped, where an ncu is found
    *) echo "stub: no such run" > "$f"; return 1 ;;
    esac
}
gpu() { local file=$1 secs=$2 name=$3; shift 3; step "$file" "$secs" "${prog[$name]}" "$@"; }
# shellcheck source=tests/gpu/timing.sh
. tests/gpu/timing.sh
echo "$passed passed, $failed failed, $skipped skipped"
