#!/usr/bin/env bash
# How ddpc's own passes scale with the length of a net: time and peak memory
# of `ddpc --emit plan` (parse, check, plan) and `ddpc --emit cu --target cpu`
# (the same, and the program's source written) on generated chains of
# 10,000 to 1,000,000 relu layers, the longest lifetimes the memory planner
# can be given (every activation lives until its backward). Goal: 100,000
# layers planned in under 1 s. Then `-o --target cpu` (ddpc's part as above,
# then the host compiler builds the program, which dominates: minutes for a
# thousand layers) for the sizes in O_SIZES only (1000), each under a time
# limit (O_LIMIT, 900 s). Each run checks its own result (the bucket line, the
# number of relu launches written, the program built) and prints OK or
# FAILED; the benchmark never fails the build.
#   [SIZES="10000 ..."] [O_SIZES="1000 ..." or ""] [O_LIMIT=SECONDS] bash bench/plan_scale.sh [path/to/ddpc]
set -u
ddpc=${1:+$(realpath "$1")}
cd "$(dirname "$0")/.." || exit 0
ddpc=${ddpc:-build/ddpc}
sizes=${SIZES:-10000 30000 100000 1000000}
o_sizes=${O_SIZES-1000}
o_limit=${O_LIMIT:-900}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gnu_time=/usr/bin/time
[ -x "$gnu_time" ] || echo "plan_scale: /usr/bin/time is missing: times only, no peak memory"

# measure NAME COMMAND...: runs it with stdout to $dir/out; sets secs and mb
# (peak resident memory of the command or of its largest child, in MB).
measure() {
    local name=$1
    shift
    secs='?' mb='?'
    if [ -x "$gnu_time" ]; then
        "$gnu_time" -f "%e %M" -o "$dir/$name.time" "$@" > "$dir/out" 2> "$dir/$name.err"
        status=$?
        read -r secs kb < <(tail -1 "$dir/$name.time")
        mb=$(awk -v kb="$kb" 'BEGIN { printf "%.0f", kb / 1024 }')
    else
        local start end
        start=$(date +%s%N)
        "$@" > "$dir/out" 2> "$dir/$name.err"
        status=$?
        end=$(date +%s%N)
        secs=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.2f", ns / 1e9 }')
    fi
}

for n in $sizes; do
    net="$dir/relu_$n.net"
    { echo "input 64"; yes relu | head -n "$n"; echo "linear 10"; echo "loss cross_entropy"; } > "$net"

    measure plan "$ddpc" --emit plan "$net"
    # linear 64->10: 650 parameters, one bucket
    if [ "$status" -ne 0 ] || ! grep -q "1 bucket over 650 parameters" "$dir/out"; then
        echo "plan_scale: FAILED: --emit plan of $n layers (exit $status): $(head -c 300 "$dir/plan.err")"
        continue
    fi
    verdict=OK
    [ "$n" -eq 100000 ] && verdict=$(awk -v t="$secs" 'BEGIN { print (t < 1.0) ? "OK" : "FAILED" }')
    goal=""
    [ "$n" -eq 100000 ] && goal=" (goal < 1 s)"
    echo "plan_scale: $verdict: ddpc --emit plan, $n layers: $secs s, $mb MB peak$goal"

    measure cu "$ddpc" --target cpu --emit cu "$net"
    launches=$(grep -c 'DDP_LAUNCH(relu[0-9]*_forward' "$dir/out")
    bytes=$(wc -c < "$dir/out")
    rm -f "$dir/out"
    if [ "$status" -ne 0 ] || [ "$launches" -ne "$n" ]; then
        echo "plan_scale: FAILED: --emit cu of $n layers (exit $status, $launches relu launches): $(head -c 300 "$dir/cu.err")"
        continue
    fi
    echo "plan_scale: OK: ddpc --emit cu --target cpu, $n layers: $secs s, $mb MB peak, $((bytes >> 20)) MB of source"
done

for n in $o_sizes; do
    net="$dir/relu_$n.net"
    [ -f "$net" ] || { echo "input 64"; yes relu | head -n "$n"; echo "linear 10"; echo "loss cross_entropy"; } > "$net"
    measure o timeout "$o_limit" "$ddpc" --target cpu "$net" -o "$dir/prog_$n"
    if [ "$status" -eq 124 ]; then
        echo "plan_scale: FAILED: ddpc -o --target cpu, $n layers: not done in $o_limit s"
    elif [ "$status" -ne 0 ] || [ ! -x "$dir/prog_$n" ]; then
        echo "plan_scale: FAILED: ddpc -o --target cpu, $n layers (exit $status): $(grep -m1 error "$dir/o.err" | head -c 300)"
    else
        echo "plan_scale: OK: ddpc -o --target cpu, $n layers: $secs s, $mb MB peak (the host compiler's, mostly)"
    fi
    rm -f "$dir/prog_$n" "$dir/prog_$n.cu"
done
exit 0
