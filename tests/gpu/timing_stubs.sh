#!/usr/bin/env bash
# timing_stubs.sh: tests/gpu/timing.sh sourced as run.sh sources it, but with
# run.sh's helpers replaced by stubs whose programs print made-up samples/s,
# so that tests/unit/test_gpu_kit.c can check its lines (each round's, the
# medians, the best PyTorch of each precision and the ratios) without a GPU:
#
#   bash tests/gpu/timing_stubs.sh ROUNDS [fail-compile=MODE] [no-torch|torch-timeout] [limit=SECONDS]
#
# The made-up rates, per net alike, so that every net's lines are the same,
# and each mode's its own:
#   ddpc fp32 120000, 300000, 95000 in rounds 1, 2, 3 (median 120000: not
#   the mean, the last round's or a median sorted as text; of two rounds
#   210000); tf32 180000; bf16 160000; timed algorithms 400000;
#   nondeterministic 200000; without the CUDA graph 110000;
#   PyTorch eager 50000; FP32 40000, 70000, 20000 by round (median 40000,
#   under FP32 with cudnn.benchmark's 45000; of two rounds 55000, over it);
#   compiled 60000, reduce-overhead 75000.
# A run fails, and timing.sh then prints FAILED, where its arguments or
# environment do not fit its mode: ddpc's --precision and --no-cuda-graph,
# DDP_CUDNN_BENCHMARK and DDP_ALLOW_NONDETERMINISTIC set for their own mode
# alone; PyTorch's --no-tf32, --cudnn-benchmark and --compile MODE.
# fail-compile=MODE: torch.compile in MODE (default, reduce-overhead) fails;
# no-torch: no PyTorch here (torch_probe fails); torch-timeout: its probe
# runs out of time (status 124, as run.sh's step says); limit=SECONDS: run.sh's
# GPU_RUN_SECONDS, each stubbed run taking 10 s of SECONDS. An ncu is found
# (a function of that name), and its runs print a CSV of three launches.
set -u
cd "$(dirname "$0")/../.." || exit 2
rounds=${1:?rounds}
shift
fail_compile='' probe_status=0 limit=100000
for option; do
    case $option in
    fail-compile=*) fail_compile=${option#fail-compile=} ;;
    no-torch) probe_status=1 ;;
    torch-timeout) probe_status=124 ;;
    limit=*) limit=${option#limit=} ;;
    *) echo "timing_stubs.sh: unknown option '$option'" >&2; exit 2 ;;
    esac
done
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
torch_probe() { echo "stub: no torch" > "$work/torch.probe"; return "$probe_status"; }
ddpc_rate() { # ddpc_rate MODE ROUND
    case $1 in
    fp32) echo $((($2 == 1) ? 120000 : ($2 == 2) ? 300000 : 95000)) ;;
    tf32) echo 180000 ;;
    bf16) echo 160000 ;;
    bench) echo 400000 ;;
    nondet) echo 200000 ;;
    nograph) echo 110000 ;;
    esac
}
torch_rate_of() { # torch_rate_of MODE ROUND
    case $1 in
    eager) echo 50000 ;;
    fp32) echo $((($2 == 1) ? 40000 : ($2 == 2) ? 70000 : 20000)) ;;
    fp32bench) echo 45000 ;;
    esac
}
has() { [[ " $args " == *" $1 "* ]]; } # has WORDS: the run's arguments hold them
ddpc_fits() { # ddpc_fits MODE: its arguments and environment are MODE's
    local want_bench='' want_nondet=''
    [ "$1" != bench ] || want_bench=1
    [ "$1" != nondet ] || want_nondet=1
    [ "${DDP_CUDNN_BENCHMARK:-}" = "$want_bench" ] && [ "${DDP_ALLOW_NONDETERMINISTIC:-}" = "$want_nondet" ] &&
        case $1 in
        tf32 | bf16) has "--precision $1" && ! has --no-cuda-graph ;;
        nograph) has --no-cuda-graph && ! has --precision ;;
        *) ! has --precision && ! has --no-cuda-graph ;;
        esac
}
torch_fits() { # torch_fits MODE
    case $1 in
    eager) ! has --no-tf32 && ! has --cudnn-benchmark && ! has --compile ;;
    fp32) has --no-tf32 && ! has --cudnn-benchmark && ! has --compile ;;
    fp32bench) has --no-tf32 && has --cudnn-benchmark && ! has --compile ;;
    compiled.*) has "--compile ${1#compiled.}" && ! has --no-tf32 && ! has --cudnn-benchmark ;;
    esac
}
# step FILE SECONDS CMD...: run.sh's step, its run made up from the file's name
step() {
    local file=$1 f=$work/$1 mode round args
    shift 2
    args="$*"
    if [ $((limit - SECONDS)) -le 5 ]; then echo "run.sh: no time left for this step" > "$f"; return 124; fi
    SECONDS=$((SECONDS + 10))
    mode=${file%.r*} mode=${mode##*.} round=${file##*.r}
    case $file in
    time.*)
        ddpc_fits "$mode" || { echo "stub: $mode run: '$args' DDP_CUDNN_BENCHMARK='${DDP_CUDNN_BENCHMARK:-}'" \
            "DDP_ALLOW_NONDETERMINISTIC='${DDP_ALLOW_NONDETERMINISTIC:-}'" > "$f"; return 1; }
        echo "epoch 2/2  step 314  loss 0.5  $(ddpc_rate "$mode" "$round") samples/s  0.1s" > "$f" ;;
    torch.*.compiled.*)
        mode=compiled.${file##*.compiled.}
        torch_fits "$mode" || { echo "stub: $mode run: '$args'" > "$f"; return 1; }
        if [ "$mode" = "compiled.$fail_compile" ]; then echo "stub: no $fail_compile here" > "$f"; return 1; fi
        case $mode in
        compiled.default) echo "torch: samples/s 60000.0 steps 500" > "$f" ;;
        compiled.reduce-overhead) echo "torch: samples/s 75000.0 steps 500" > "$f" ;;
        esac ;;
    torch.*)
        torch_fits "$mode" || { echo "stub: $mode run: '$args'" > "$f"; return 1; }
        echo "torch: samples/s $(torch_rate_of "$mode" "$round").0 steps 500" > "$f" ;;
    ncu.*) # as ncu --csv prints: quoted fields, a unit per row, thousands with commas
        printf '%s\n' '==PROF== the program ran' '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"' \
            '"0","conv1_forward(int, const float *)","gpu__time_duration.sum","usecond","10.5"' \
            '"1","sgemm_nn","gpu__time_duration.sum","nsecond","2,500"' \
            '"2","conv1_forward(int, const float *)","gpu__time_duration.sum","usecond","4.5"' > "$f" ;;
    *) echo "stub: no such run" > "$f"; return 1 ;;
    esac
}
gpu() { local file=$1 secs=$2 name=$3; shift 3; step "$file" "$secs" "${prog[$name]}" "$@"; }
ncu() { :; } # found by timing.sh's `command -v ncu`; step makes up its runs
# The clock made up too: unset, SECONDS is a plain variable that only step
# moves, so the time left does not depend on how fast this machine runs
# the stubs (a busy one took over a second for the first nine, and the
# rounds then ended one net early).
unset SECONDS
SECONDS=0
# shellcheck source=tests/gpu/timing.sh
. tests/gpu/timing.sh
echo "$passed passed, $failed failed, $skipped skipped"
